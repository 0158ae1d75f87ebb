"""One question, end to end, in plain steps: ``prepare`` (embed, classify, probe) → ``plan``
(decide the depth, rerank, budget, mode) → ``execute`` (generate, with the feedback loop) →
``report`` (the ``Answer`` with its sources, citations, confidence and the ``Trace`` of what
each stage did and cost).

Each step is its own module (``stages.prepare``, ``stages.plan``, ``stages.execute``) over the
``stages.parts.Parts`` an ``Engine`` keeps loaded across questions (``fathom chat``); ``ask``
builds one for a single question. The probe is shared: the depth policy reads its scores and
the later stages reuse its hits, so a small k never costs a second search.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fathom.core.base import DepthPolicy, Generator
from fathom.feedback.judges import is_abstention
from fathom.index.targets import resolve_target
from fathom.stages.execute import execute
from fathom.stages.followup import LOOKBACK, Turn, rewrite
from fathom.stages.history import History, record_ask
from fathom.stages.parts import Parts
from fathom.stages.plan import plan, start_trace
from fathom.stages.prepare import prepare, prepare_for
from fathom.stages.records import Answer, Context, Prepared, Trace, elapsed_ms, price
from fathom.stages.rounds import fit

if TYPE_CHECKING:
    from fathom.core.config import Config

Progress = Callable[..., None]
TokenSink = Callable[[str], None]


class Engine:
    """A collection with its models loaded (``parts``), answering questions one after
    another."""

    def __init__(self, cfg: Config, collection: str, generator: Generator | None = None) -> None:
        self.parts = Parts(cfg, collection, generator)

    # What callers read of the parts.
    @property
    def cfg(self) -> Config:
        return self.parts.cfg

    @property
    def collection(self) -> Any:
        return self.parts.collection

    @property
    def retriever(self) -> Any:
        return self.parts.retriever

    @property
    def embedder(self) -> Any:
        return self.parts.embedder

    @property
    def generator(self) -> Generator:
        return self.parts.generator

    def vectors(self, hits: list[Any]) -> Any:
        """The stored embeddings of ``hits`` (``Parts.vectors``)."""
        return self.parts.vectors(hits)

    # -- one question ------------------------------------------------------------------------

    def prepare(
        self, question: str, *, retrieve: bool = True, depth: int = 0, docs: Sequence[str] = ()
    ) -> Prepared:
        """The question-only stages, shared by every depth (``stages.prepare``), within the
        documents the patterns ``docs`` select."""
        return prepare(self.parts, question, retrieve=retrieve, depth=depth, docs=docs)

    def ask(
        self,
        question: str,
        *,
        k: int | None = None,
        policy: DepthPolicy | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
        on_token: TokenSink | None = None,
        on_event: Progress | None = None,
        docs: Sequence[str] = (),
        turns: Sequence[Turn] | None = None,
    ) -> Answer:
        """Answer ``question``; ``k`` fixes the depth, else ``policy``, else the configured
        policy, else the strategy. ``docs``: patterns of the documents to read
        (``index.doc_filter``; default all). ``turns``: the conversation so far (``chat``,
        ``ask --session``; None: not in one): a follow-up is made standalone first
        (``stages.followup``), and the answer's ``followup`` says how; ``on_event`` hears it
        as ``("followup", followup=…)`` as soon as it is known, before retrieval."""
        follow = None
        if turns is not None:
            t = time.perf_counter()
            follow = rewrite(question, turns, self.generator)
            question, rewrite_ms = follow.question, elapsed_ms(t)
            if on_event is not None:  # so a caller can say it before the answer streams
                on_event("followup", followup=follow.to_dict())
        prepared, policy = prepare_for(self.parts, question, k, policy, docs)
        answer = self.answer(
            prepared,
            k=k,
            policy=policy,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_token=on_token,
            on_event=on_event,
        )
        if follow is None:
            return answer
        answer.trace.stages_ms = {"rewrite": rewrite_ms, **answer.trace.stages_ms}
        return dataclasses.replace(answer, followup=follow.to_dict())

    def answer(
        self,
        prepared: Prepared,
        *,
        k: int | None = None,
        policy: DepthPolicy | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
        feedback: bool | None = None,
        on_token: TokenSink | None = None,
        on_event: Progress | None = None,
    ) -> Answer:
        """Plan the answer to a prepared question, carry the plan out and report it.
        ``feedback`` (default from the config) lets the loop deepen a low-confidence answer.

        The trace charges the shared stages of ``prepared`` too, except the probe and hop when
        the decision is a fixed k = 0 (a no-retrieval run never needs them).
        """
        parts = self.parts
        emit = on_event or (lambda *a, **kw: None)
        parts.clock.begin(parts.generator)
        trace = start_trace(parts, prepared, no_retrieval=k == 0)
        the_plan = plan(
            parts,
            prepared,
            trace,
            k=k,
            policy=policy,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_decision=lambda d: emit("decision", decision=d, query_type=prepared.query_type),
        )
        used, draft, conf = execute(
            parts, prepared, the_plan, trace, feedback=feedback, on_token=on_token, emit=emit
        )
        return report(parts, prepared, trace, used, draft, conf)

    def context(
        self,
        question: str,
        *,
        k: int | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
        docs: Sequence[str] = (),
    ) -> Context:
        """What ``ask`` would hand the generator for ``question``, without generating: the
        depth the configured policy (or ``k``) decides, the candidates reranked and compressed
        into the decided context budget, and their token count in the generator's tokenizer.
        The feedback loop, which deepens only after reading an answer, does not run.
        ``docs``: patterns of the documents to read (default all)."""
        parts = self.parts
        prepared, policy = prepare_for(parts, question, k, None, docs)
        trace = start_trace(parts, prepared, no_retrieval=k == 0)
        the_plan = plan(
            parts,
            prepared,
            trace,
            k=k,
            policy=policy,
            rerank=rerank,
            budget_tokens=budget_tokens,
            generating=False,
        )
        k_top = the_plan.decision.k
        if the_plan.mode == "map-reduce":
            trace.note(
                "a whole-document question: ask summarises every section (map-reduce); this "
                f"context is the top {k_top} chunks"
            )
        if the_plan.climb is not None:
            trace.note(
                "a cascade deepens only after reading its answers; this context is its first "
                f"rung, k = {k_top}"
            )
        t = time.perf_counter()
        candidates = list(the_plan.candidates)
        kept = fit(parts, prepared.question, candidates, k_top, the_plan.budget, trace)
        trace.add_ms("compress", elapsed_ms(t))
        trace.set_context([h.chunk.text for h in kept], parts.context_tokens(kept))
        sources = tuple(parts.citation(i, h) for i, h in enumerate(kept, start=1))
        return Context(question=prepared.question, sources=sources, trace=trace, used=tuple(kept))

    def reopen(self) -> bool:
        """Move to the collection's newest committed generation, models kept
        (``Parts.reopen``); whether it moved."""
        return self.parts.reopen()

    def close(self) -> None:
        """Close the collection and the generator this engine made (not one it was given)."""
        self.parts.close()


def report(
    parts: Parts, prepared: Prepared, trace: Trace, used: list[Any], draft: Any, conf: Any
) -> Answer:
    """The answer as ``ask`` returns it: the text, the sources it read and those it cited,
    its confidence, and the trace with the cost priced."""
    trace.cost = price(parts.cfg, trace.model, trace.tokens["prompt"], trace.tokens["completion"])
    sources = tuple(parts.citation(i, h) for i, h in enumerate(used, start=1))
    cited = tuple(sources[n - 1] for n in draft.citations if 1 <= n <= len(sources))
    related = tuple(sources[n - 1] for n in draft.related if 1 <= n <= len(sources))
    return Answer(
        question=prepared.question,
        text=draft.text,
        citations=cited,
        sources=sources,
        # "answerer": the answerer's own stated probability (the extractive scorer's)
        confidence={**conf.to_dict(), "answerer": draft.confidence},
        trace=trace,
        used=tuple(used),
        span=draft.span,
        short=draft.short,
        abstained=bool(draft.abstained or is_abstention(draft.text)),
        related=related,
    )


def ask(
    cfg: Config,
    target: str,
    question: str,
    *,
    k: int | None = None,
    rerank: bool | None = None,
    budget_tokens: int | None = None,
    rebuild: bool = False,
    progress: Progress | None = None,
    on_token: TokenSink | None = None,
    on_event: Progress | None = None,
    collection: str | None = None,
    docs: Sequence[str] = (),
    session: str | None = None,
) -> Answer:
    """Resolve ``target`` (ingesting it on first use), answer ``question``, record it.

    ``collection`` is ``target``'s collection when the caller resolved it already; ``docs``,
    patterns of the documents to read (default all); ``session``, a conversation recorded in
    the history, whose last turns complete a follow-up (``ask --session``).
    """
    t0 = time.perf_counter()
    name = collection or resolve_target(cfg, target, progress=progress, rebuild=rebuild)
    turns = None
    if session is not None:
        turns = History(cfg.home_path() / "history.db").turns(session, LOOKBACK)
    resolve_ms = elapsed_ms(t0)
    engine = Engine(cfg, name)
    try:
        answer = engine.ask(
            question,
            k=k,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_token=on_token,
            on_event=on_event,
            docs=docs,
            turns=turns,
        )
    finally:
        engine.close()
    answer.trace.stages_ms = {"open": resolve_ms, **answer.trace.stages_ms}
    record_ask(cfg, target, answer, session=session)
    return answer
