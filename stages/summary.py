"""Whole-collection summaries (map-reduce): one source per section (map), then one answer.

A question about the whole document ("What is this document about?", "What are the key
findings?") is not answered by any retrieval depth. With a language model every section (up
to ``MAX_SECTIONS``, the largest ones, in document order; never references, acknowledgements,
an appendix or prompts: ``findings.section_kind``) becomes one source the model summarises in
two sentences, and the final answer is generated from those sources.

Without a language model the sentences are picked first (``findings.pick``: central, relevant
to what the question asks about, from summary, findings and conclusions sections before the
rest, never a reference, caption, prompt line or code) over every chunk, and only those
sentences become the sources — one per chunk they come from, in document order — so nothing
else is compressed or embedded. The extractive answerer quotes them, each cited; an overview
question ("What is this document about?") names the document's title (``Chunk.title``) first.

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
from fathom.stages.generate.findings import (
    ROLES,
    Pick,
    asks_overview,
    document_title,
    pick,
    section_kinds,
)
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
        if not gen.language_model:
            return self._extract(question, chunks, trace, on_token)
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
        timing = self.clock.time_budget(trace, until)
        draft = gen.generate(question, kept, on_token=on_token, **timing)
        self.clock.note_cut(draft, trace)
        trace.add_ms("generate", elapsed_ms(t))
        trace.add_generation(draft)
        return draft, kept

    def _extract(
        self,
        question: str,
        chunks: Callable[[], list[tuple[int, Chunk]]],
        trace: Trace,
        on_token: Callable[[str], Any] | None,
    ) -> tuple[Draft, list[Hit]]:
        """Without a language model: the sentences ``findings.pick`` takes over every chunk
        become the sources (one per chunk, in document order), and the answerer quotes them;
        an overview question starts with the document's title."""
        t = time.perf_counter()
        pairs = chunks()
        trace.add_ms("map", elapsed_ms(t))
        t = time.perf_counter()
        hits = [Hit(chunk=c, score=1.0, row=row) for row, c in pairs]
        overview = asks_overview(question)
        picks = pick(question, hits, overview=overview, kinds=section_kinds([c for _, c in pairs]))
        kept = quoted_sources(hits, picks)
        trace.add_ms("compress", elapsed_ms(t))
        trace.set_context([h.chunk.text for h in kept], self.context_tokens(kept))
        t = time.perf_counter()
        title = document_title([h.chunk for h in kept]) if overview else ""
        lead = f"{title}: " if title else ""
        if lead and on_token is not None:
            on_token(lead)
        draft = self.generator.summarize(kept, on_token=on_token)
        if draft is None:  # a generator without a model of its own summary
            draft = self.generator.generate(question, kept, on_token=on_token)
        elif lead and kept:
            draft = replace(draft, text=lead + draft.text)
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
    """The ``(vector row, chunk)`` pairs grouped by (document, section), in store order, less
    the sections a summary never reads (references, acknowledgements, appendices, prompts:
    ``findings.section_kinds``) unless nothing else is left; beyond ``MAX_SECTIONS``, the
    largest (most text), still in document order."""
    kinds = section_kinds([c for _, c in chunks])
    read = [pair for pair, kind in zip(chunks, kinds, strict=True) if ROLES[kind] != "excluded"]
    by_section: dict[tuple[str, str], list[tuple[int, Chunk]]] = {}
    for row, c in read or chunks:
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


def quoted_sources(hits: list[Hit], picks: list[Pick]) -> list[Hit]:
    """One source per hit that ``picks`` quote, in their order, its text cut to the picked
    sentences (a paragraph each, sentence spans kept); same chunk id, pages and section, so the
    citations still map back to the document."""
    by_source: dict[int, list[Pick]] = {}
    for p in picks:
        by_source.setdefault(p.n, []).append(p)
    out = []
    for n, mine in by_source.items():
        hit = hits[n - 1]
        parts = [p.text for p in mine]
        spans, at = [], 0
        for text in parts:
            spans.append((at, at + len(text)))
            at += len(text) + 2
        chunk = replace(hit.chunk, text="\n\n".join(parts), sentences=tuple(spans))
        out.append(replace(hit, chunk=chunk))
    return out
