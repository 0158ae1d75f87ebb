"""Whole-collection summaries (map-reduce): one source per section (map), then one answer.

A question about the whole document ("What is this document about?") is not answered by any
retrieval depth. Instead every section (up to ``MAX_SECTIONS``, the largest ones, in document
order) becomes one source: a language model summarises it in two sentences; without one, the
section's own text stands (the extractive answerer quotes its lead sentences). The final answer
is generated from those sources.

Under a deadline the sections and the final answer share the time left in equal windows: a
section whose sources cannot be read within its window is not summarised, and a summary the
deadline cut to fewer than ``MIN_SUMMARY_WORDS`` words gives way to its section's own text; the
report counts both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Chunk, Draft, Hit
from fathom.core.citations import strip_citations
from fathom.stages.records import elapsed_ms

if TYPE_CHECKING:
    from fathom.core.base import Compressor, Generator
    from fathom.stages.deadline import AnswerClock
    from fathom.stages.records import Trace

MAX_SECTIONS = 12
MIN_SUMMARY_WORDS = 8
INSTRUCTION = "Summarize the main points of these sources in two sentences."


@dataclass
class CollectionSummary:
    generator: Generator
    compressor: Compressor
    clock: AnswerClock
    budget_for: Callable[[str, int], int]  # (question, wanted tokens) → the context budget
    context_tokens: Callable[[list[Hit]], int]  # tokens of the sources as the prompt writes them

    def run(
        self,
        question: str,
        chunks: Callable[[], list[tuple[int, Chunk]]],
        budget: int,
        trace: Trace,
        on_token: Callable[[str], Any] | None,
    ) -> tuple[Draft, list[Hit]]:
        """The answer to ``question`` over ``chunks()`` (``(vector row, chunk)``, in store
        order) and the sources it was generated from."""
        gen = self.generator
        held = gen.language_model and gen.supports_deadline
        until = self.clock.until(trace) if held else None
        t = time.perf_counter()
        section_hits = self._map(sections(chunks()), budget, until, trace)
        trace.add_ms("map", elapsed_ms(t))
        t = time.perf_counter()
        fitted = self.compressor.fit(question, section_hits, budget)
        kept = self.clock.readable(question, fitted, until, trace)
        trace.add_ms("compress", elapsed_ms(t))
        trace.set_context([h.chunk.text for h in kept], self.context_tokens(kept))
        t = time.perf_counter()
        draft = gen.summarize(kept, on_token=on_token)  # no model: lead sentences per section
        if draft is None:
            timing = self.clock.time_budget(trace, until)
            draft = gen.generate(question, kept, on_token=on_token, **timing)
            self.clock.note_cut(draft, trace)
        trace.add_ms("generate", elapsed_ms(t))
        trace.add_generation(draft)
        return draft, kept

    def _map(
        self, groups: list[list[tuple[int, Chunk]]], budget: int, until: float | None, trace: Trace
    ) -> list[Hit]:
        """One source per section: its summary by the model, else its best-fitting text."""
        gen = self.generator
        llm = gen.language_model
        per_section = max(64, budget // max(1, len(groups)))
        # A model reads up to three times its share per section (it keeps two sentences of
        # it), but never more than the section prompt's own room in the context window.
        section_budget = (
            min(per_section * 3, self.budget_for(INSTRUCTION, 10**9)) if llm else per_section
        )
        out: list[Hit] = []
        windows = self.clock.windows(until, len(groups), len(groups) + 1)
        skipped = cut = 0
        for group, window in zip(groups, windows, strict=True):
            hits = [Hit(chunk=c, score=1.0, row=row) for row, c in group]
            head = group[0][1]
            kept = self.compressor.fit(
                f"main points of {head.section or head.title}", hits, section_budget
            )
            if not kept:
                continue
            if window is not None:
                kept = self.clock.fit_in_time(INSTRUCTION, kept, window, trace)
                if not kept or self.clock.now() >= window:
                    skipped += 1
                    continue
            if not llm:
                out.append(Hit(chunk=merged(kept), score=1.0))  # the section's kept text
                continue
            draft = gen.generate(INSTRUCTION, kept, **self.clock.time_budget(trace, window))
            trace.add_generation(draft)
            text = strip_citations(draft.text).strip()
            if draft.finish_reason == "deadline":
                cut += 1
                if len(text.split()) < MIN_SUMMARY_WORDS:
                    text = ""  # a fragment says less than the section's own text
            first, last = kept[0].chunk, kept[-1].chunk
            chunk = replace(
                first, text=text or first.text, page_end=max(first.page_end, last.page_end)
            )
            out.append(Hit(chunk=chunk, score=1.0))
        self._say_what_the_deadline_did(skipped, cut, len(groups), trace)
        return out

    def _say_what_the_deadline_did(self, skipped: int, cut: int, n: int, trace: Trace) -> None:
        deadline = self.clock.deadline_ms
        if skipped:
            trace.notice(
                f"{skipped} of {n} sections not summarised: reading them would pass "
                f"the {deadline:g} ms deadline (generator.deadline_ms)",
                f"{skipped} of {n} sections",
            )
        if cut:
            trace.notice(
                f"{cut} of {n} section summaries cut at the {deadline:g} ms deadline "
                f"(generator.deadline_ms); those under {MIN_SUMMARY_WORDS} words were replaced "
                "by their section's own text",
                f"{cut} of {n} section summaries",
            )


def sections(chunks: list[tuple[int, Chunk]]) -> list[list[tuple[int, Chunk]]]:
    """The ``(vector row, chunk)`` pairs grouped by (document, section), in store order;
    beyond ``MAX_SECTIONS``, the largest (most text), still in document order."""
    by_section: dict[tuple[str, str], list[tuple[int, Chunk]]] = {}
    for row, c in chunks:
        by_section.setdefault((c.doc_id, c.section), []).append((row, c))
    groups = list(by_section.values())
    if len(groups) > MAX_SECTIONS:
        keep = sorted(range(len(groups)), key=lambda i: -sum(c.n_tokens for _, c in groups[i]))
        groups = [groups[i] for i in sorted(keep[:MAX_SECTIONS])]
    return groups


def merged(hits: list[Hit]) -> Chunk:
    """One chunk holding the texts of ``hits`` in order (paragraph breaks between them), with
    their pages and sentence spans; the first's identity."""
    first = hits[0].chunk
    if len(hits) == 1:
        return first
    parts: list[str] = []
    spans: list[tuple[int, int]] | None = []
    at = 0
    for h in hits:
        c = h.chunk
        if spans is not None and c.sentences is not None:
            spans += [(a + at, b + at) for a, b in c.sentences]
        else:
            spans = None
        parts.append(c.text)
        at += len(c.text) + 2
    return replace(
        first,
        text="\n\n".join(parts),
        page_start=min(h.chunk.page_start for h in hits),
        page_end=max(h.chunk.page_end for h in hits),
        sentences=tuple(spans) if spans is not None else None,
    )
