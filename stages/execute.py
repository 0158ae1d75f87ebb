"""The third step of an answer: carry out a ``stages.plan.Plan``.

The plan's mode says how: ``map-reduce`` summarises every section of the collection, or of
the documents ``--doc`` selected (``stages.summary``); a metadata question whose document
states the field is answered from its metadata (``stages.metadata``); every other mode answers
at the decided depth in rounds (``stages.rounds``) under a feedback loop — the config's rules
(deeper while the answer's support is low), or for a plan with a ``climb`` the cascade's
ladder (deeper while the answer's own confidence is low). In ``select`` mode a round is each
portfolio member answering and the generator picking (``stages.select``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Hit
from fathom.feedback.loop import FeedbackLoop, LoopResult, answer_confidence, support_score
from fathom.stages.rounds import TokenSink, compress, generate_round

if TYPE_CHECKING:
    from fathom.stages.parts import Parts
    from fathom.stages.plan import Plan
    from fathom.stages.records import Prepared, Trace

Progress = Callable[..., None]


def execute(
    parts: Parts,
    prepared: Prepared,
    plan: Plan,
    trace: Trace,
    *,
    feedback: bool | None = None,
    on_token: TokenSink | None = None,
    emit: Progress | None = None,
) -> tuple[list[Hit], Any, Any]:
    """``(sources, draft, confidence)`` of the answer ``plan`` describes. ``feedback``
    (default from the config) lets the feedback loop deepen a low-confidence answer."""
    emit = emit or (lambda *a, **kw: None)
    if plan.mode == "map-reduce":
        return _map_reduce(parts, prepared, plan, trace, on_token)
    stated = _from_metadata(parts, prepared, plan, trace, on_token)
    if stated is not None:
        return stated
    return _with_feedback(parts, prepared, plan, trace, feedback, on_token, emit)


def _from_metadata(
    parts: Parts, prepared: Prepared, plan: Plan, trace: Trace, on_token: TokenSink | None
) -> tuple[list[Hit], Any, Any] | None:
    """A metadata question answered from the document's own metadata (``stages.metadata``),
    citing the page it was read from; a question about pages past the end of the document
    answered as not answered; a count of the document's figures, tables, chapters, appendices
    or pages counted over the whole document (``stages.structure``); None when the question
    is none of these (or the document does not state the field, or holds no such part)."""
    from fathom.stages.metadata import metadata_answer, missing_pages_answer
    from fathom.stages.structure import structure_answer

    found = (
        metadata_answer(parts, prepared)
        or missing_pages_answer(parts, prepared)
        or structure_answer(parts, prepared)
    )
    if found is None:
        _note_unread_metadata(parts, prepared, trace)
        return None
    used, draft = found
    if on_token is not None:
        on_token(draft.text)
    trace.set_context([h.chunk.text for h in used], parts.context_tokens(used))
    trace.add_ms("generate", draft.ms)
    if draft.model == "document structure":
        trace.note("a count of the document's own parts: counted over all of its passages")
    elif draft.abstained:
        trace.note("the question asks about pages past the end of the document")
    else:
        trace.note("a metadata question: answered from the document's metadata, read at ingest")
    conf = parts.scorer.score(draft, used, parts.vectors(used))
    trace.add_round(plan.decision.k, draft, conf, len(used))
    return used, draft, conf


def _note_unread_metadata(parts: Parts, prepared: Prepared, trace: Trace) -> None:
    """A metadata question over a collection with documents indexed before Fathom read
    metadata: say how to read it (their manifest entries hold no metadata at all)."""
    kind = prepared.kind
    if kind is None or kind.name != "metadata":
        return
    docs = prepared.docs
    scope = {d.doc_id for d in docs.documents} if docs is not None else None
    unread = [
        d
        for d in parts.collection.manifest.documents
        if d.status == "ok" and not d.meta and (scope is None or d.doc_id in scope)
    ]
    if unread:
        trace.note(
            f"{len(unread)} document(s) were indexed before Fathom read titles, authors and "
            "dates: `fathom ingest --rebuild` reads them, so such questions are answered from "
            "the document's metadata"
        )


def _map_reduce(
    parts: Parts, prepared: Prepared, plan: Plan, trace: Trace, on_token: TokenSink | None
) -> tuple[list[Hit], Any, Any]:
    """A summary of every section of the collection (of the documents ``--doc`` selected),
    scored against what it read."""
    from fathom.stages.summary import CollectionSummary

    summary = CollectionSummary(
        parts.generator, parts.compressor, parts.clock, parts.budget, parts.context_tokens
    )
    coll, within = parts.collection, prepared.docs

    def chunks() -> list[tuple[int, Any]]:  # (vector row, chunk) in store order
        if within is None:
            return coll.live()
        rows = within.rows.tolist()
        return list(zip(rows, coll.chunks(rows), strict=True))

    draft, used = summary.run(prepared.question, chunks, plan.budget, trace, on_token)
    conf = parts.scorer.score(draft, used)
    trace.add_round(plan.decision.k, draft, conf, len(used))
    return used, draft, conf


def _with_feedback(
    parts: Parts,
    prepared: Prepared,
    plan: Plan,
    trace: Trace,
    feedback: bool | None,
    on_token: TokenSink | None,
    emit: Progress,
) -> tuple[list[Hit], Any, Any]:
    """The answer at the decided depth, deepened by the feedback loop's rules, or, with a
    ``climb`` (the plan's ``router.cascade.Cascade``), up its ladder while the answer's own
    confidence is low."""
    question, strategy = prepared.question, prepared.strategy
    candidates, budget, decision = list(plan.candidates), plan.budget, plan.decision
    select = plan.mode == "select"
    attempt, deepest = _attempts(parts, prepared, plan, trace, on_token)
    read: list[str] = []  # the chunk ids the last round read

    def attempt_read(kk: int, escalated: bool) -> Any:
        used, draft, conf = attempt(kk, escalated)
        read[:] = [h.chunk.chunk_id for h in used]
        return used, draft, conf

    same_sources = _same_sources(parts, question, candidates, budget, plan.climb is not None, read)
    if plan.climb is not None:
        loop = FeedbackLoop.climbing(plan.climb.ladder, plan.climb.threshold)
        score = answer_confidence
    else:
        loop = FeedbackLoop.from_config(parts.cfg.feedback, enabled=feedback)
        score = support_score
    result = loop.run(
        decision.k,
        attempt_read,
        deepest=deepest,
        k_min=strategy.k_min,
        k_max=strategy.k_max,
        round_fits=lambda kk, new_k: parts.clock.round_fits(trace, kk, new_k),
        same_sources=None if select else same_sources,
        on_escalate=lambda score, new_k: emit("escalate", confidence=score, k=new_k),
        charge=lambda ms: trace.add_ms("feedback", ms),
        score=score,
    )
    _say_why_it_stopped(result, budget, trace)
    if result.k != decision.k:
        reason = loop.reason(decision.reason, result.k)
        trace.decision = replace(decision, k=result.k, reason=reason)
    return result.used, result.draft, result.conf


def _same_sources(
    parts: Parts,
    question: str,
    candidates: list[Hit],
    budget: int,
    climbing: bool,
    read: list[str],
) -> Callable[[int, int], bool]:
    """The loop's ``same_sources(a, b)``: whether a round at depth ``b`` would give the generator
    the sources the round at ``a`` gave it (``read``: the chunk ids the last round read)."""
    kept_at: dict[int, list[str]] = {}

    def sources_at(kk: int) -> list[str]:  # what compression keeps at depth kk
        if kk not in kept_at:
            kept = compress(parts, question, candidates[:kk], budget)
            kept_at[kk] = [h.chunk.chunk_id for h in kept]
        return kept_at[kk]

    def same(a: int, b: int) -> bool:
        if not climbing:
            return sources_at(a) == sources_at(b)
        # a rung reads the last rung's sources first (``lead``): the round at ``b`` repeats
        # the prompt exactly when what it would keep is what was just read
        kept = compress(parts, question, candidates[:b], budget, read)
        return [h.chunk.chunk_id for h in kept] == read

    return same


def _attempts(
    parts: Parts, prepared: Prepared, plan: Plan, trace: Trace, on_token: TokenSink | None
) -> tuple[Callable[[int, bool], Any], int]:
    """``(attempt, deepest)``: one round at depth ``kk`` (``escalated``: not the first), and
    the deepest depth there is to climb to."""
    question, candidates, budget = prepared.question, list(plan.candidates), plan.budget
    if plan.mode != "select":
        # A cascade's rung reads the previous rung's sources first, in their order, so a
        # backend keeping the shared prompt prefix reads only the new ones.
        lead: list[str] = []

        def attempt(kk: int, escalated: bool) -> Any:
            kept, draft, conf = generate_round(
                parts,
                question,
                candidates,
                kk,
                budget,
                trace,
                on_token,
                escalated=escalated,
                lead=lead,
            )
            if plan.climb is not None:
                lead[:] = [h.chunk.chunk_id for h in kept]
            return kept, draft, conf

        return attempt, len(candidates)

    from fathom.stages.rerank import rerank_head
    from fathom.stages.select import PortfolioSelect

    # Deeper means each member answers from more of its own results.
    pf = prepared.portfolio
    assert pf is not None
    deepest = max(len(pf.hits[name]) for name in pf.members)
    answered: dict[tuple[str, int], Any] = {}  # (member, depth) → its answer
    head = (
        rerank_head(parts.cfg.rerank, parts.reranker())
        if plan.reranked
        else parts.cfg.rerank.candidates
    )
    selection = PortfolioSelect(parts, rerank_candidates=head)

    def select_attempt(kk: int, escalated: bool) -> Any:
        if escalated and on_token is not None:
            on_token("\n")
        return selection.answer(prepared, kk, budget, trace, on_token, plan.reranked, answered)

    return select_attempt, deepest


def _say_why_it_stopped(result: LoopResult, budget: int, trace: Trace) -> None:
    """The report's notice when the loop stopped before its confidence was reached."""
    if result.stopped == "same sources":
        # Deeper retrieval changes nothing the generator reads (the context budget is full
        # of better sources): regenerating would repeat the same prompt.
        trace.notice(
            f"feedback stopped at k = {result.k}: k = {result.stopped_at} gives the "
            f"generator the same sources (the {budget}-token context budget is full), so "
            "regenerating would repeat the same prompt",
            "feedback stopped",
        )
    elif result.stopped == "deadline":
        trace.notice(
            f"feedback stopped at k = {result.k} (confidence {result.conf.score:.2f}): a "
            f"round at k = {result.stopped_at} would end past the answer deadline",
            "feedback stopped",
        )
