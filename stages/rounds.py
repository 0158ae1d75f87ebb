"""One round of generation: the top k candidates compressed into the budget, the answer
generated from them within the deadline, and its support scored. Every mode of
``stages.execute`` is made of rounds; portfolio select mode runs one per member."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fathom.core.base import Hit
from fathom.feedback.confidence import attribute
from fathom.stages.records import Trace, elapsed_ms

if TYPE_CHECKING:
    from fathom.stages.parts import Parts

TokenSink = Callable[[str], None]


def compress(
    parts: Parts, question: str, hits: list[Hit], budget: int, lead: Sequence[str] = ()
) -> list[Hit]:
    """``hits`` compressed into ``budget`` by the configured compressor, ``lead``'s chunks first."""
    # only Fathom's own compressor takes a lead; the Engine passes one only within a climb
    extra = (lead,) if lead else ()
    return parts.compressor.fit(question, hits, budget, *extra)


def fit(
    parts: Parts,
    question: str,
    candidates: list[Hit],
    k: int,
    budget: int,
    trace: Trace,
    lead: Sequence[str] = (),
) -> list[Hit]:
    """The top ``k`` candidates compressed into ``budget`` (``lead``'s chunks first, in its
    order); a notice when none fits."""
    kept = compress(parts, question, candidates[:k], budget, lead) if k > 0 else []
    if k > 0 and candidates and not kept:
        trace.notice(
            f"no source fits the {budget}-token context budget (--budget-tokens, "
            "compress.budget_tokens): answered without sources",
            "no source fits",
        )
    return kept


def generate_round(
    parts: Parts,
    question: str,
    candidates: list[Hit],
    k: int,
    budget: int,
    trace: Trace,
    on_token: TokenSink | None = None,
    escalated: bool = False,
    deadline: bool = True,
    until: float | None = None,
    lead: Sequence[str] = (),
) -> tuple[list[Hit], Any, Any]:
    """Compress the top ``k``, generate, score: ``(sources, draft, confidence)``.
    ``lead``: the chunk ids a cascade's previous rung read, kept first in their order.
    ``deadline``: hold the generation to ``until`` (default: ``generator.deadline_ms`` counted
    on ``trace``); off for select-mode members without a time window, whose traces start at
    zero."""
    clock, generator = parts.clock, parts.generator
    until = (clock.until(trace) if until is None else until) if deadline else None
    t = time.perf_counter()
    kept = fit(parts, question, candidates, k, budget, trace, lead)
    # Sources whose reading would already pass the deadline are left out.
    kept = clock.readable(question, kept, until, trace)
    trace.add_ms("compress", elapsed_ms(t))
    trace.set_context([h.chunk.text for h in kept], parts.context_tokens(kept))
    t = time.perf_counter()
    if escalated and on_token is not None:
        on_token("\n")
    timing = clock.time_budget(trace, until) if deadline else {}
    draft = None
    if trace.query_type == "summarization" and not generator.language_model:
        # No model answers a summary request with a span: the answerer's own summary.
        draft = generator.summarize(kept, on_token=on_token, question=question)
    if draft is None:
        draft = generator.generate(question, kept, on_token=on_token, **timing)
    trace.add_ms("generate", elapsed_ms(t))
    clock.note_cut(draft, trace)
    trace.add_generation(draft)
    draft, conf = _score(parts, draft, kept, trace)
    source = generator.template_source
    if source and not source.startswith("the file's"):
        trace.note(f"{draft.model}: the GGUF has no chat template; prompted with {source}")
    trace.add_round(k, draft, conf, len(kept))
    return kept, draft, conf


def _score(parts: Parts, draft: Any, kept: list[Hit], trace: Trace) -> tuple[Any, Any]:
    """The draft's support by ``kept`` (its sentences' embedding tokens charged), and the draft
    with each sentence attributed to its best source when the model cited none."""
    t = time.perf_counter()
    conf = parts.scorer.score(draft, kept, parts.vectors(kept))
    if conf.sentences:
        trace.tokens["embedding"] += parts.count_embedding_tokens(
            [d["sentence"] for d in conf.sentences]
        )
    attributed = attribute(draft, conf)
    if attributed is not None:
        draft = attributed
        trace.note(
            f"{draft.model} cited no sources; Fathom attributed each answer sentence to "
            "its best-supporting source"
        )
    after = elapsed_ms(t)
    trace.add_ms("feedback", after)
    parts.clock.scored(after)
    return draft, conf
