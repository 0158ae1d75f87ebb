"""Structure-aware chunking: whole paragraphs packed per section, sentences only when needed.

How a document becomes chunks:

1. Paragraphs are the runs of text between blank lines, cut again at every section start and end,
   so no paragraph (and no chunk) spans two sections. Text before the first heading is a section
   of its own (title '').
2. Tokens are counted with the embedder's tokenizer in one batched call: short paragraphs whole,
   long ones (see ``PRESPLIT_CHARS_PER_TOKEN``) sentence by sentence. Rare cases take one more
   batched call each: a short paragraph that still needs splitting, and the words of a run-on
   sentence. A chunk's ``n_tokens`` is the sum over its pieces, exact for tokenizers that never
   merge across whitespace (MiniLM's WordPiece); tokenizer.json-less fallbacks only estimate.
3. A paragraph over ``max_tokens`` is split into sentences (Punkt trained on the document; table
   rows stay whole; Chinese/Japanese sentence ends too); a sentence or row over ``max_tokens`` is
   split at spaces, a "word" still over it (text without spaces) at commas, semicolons and
   colons, then into windows of characters cut between words where possible. So every chunk
   stays within ``max_tokens``.
4. Within a section, units are packed greedily up to ``target_tokens``. A chunk with under
   ``min_tokens`` of new text keeps taking units up to ``max_tokens``; still under ``min_tokens``
   when it closes, it joins the previous chunk of its section if that stays within ``max_tokens``.
5. Headings and tiny opening paragraphs never stand alone: if the paragraph after them would not
   fit within ``max_tokens``, that paragraph is split so its first sentences join them. A
   heading is the first paragraph of a section that opens with one (``SectionSpan.headed``; the
   text of a page read by OCR is marked as a section of its own that opens with body text). A
   section holding nothing but its heading (a heading directly followed by a subheading) is
   carried into the first chunk of its subsection: the one way a chunk reaches past a section
   start (its ``section`` is then the outer one, the section at the chunk's start).
6. Consecutive chunks cut from one split paragraph share trailing sentences (up to
   ``overlap_tokens``); chunks never overlap anywhere else.

Chunks are spans: ``chunk.text == doc.text[char_start:char_end]``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from fathom.core.base import Chunk, Document, TokenCounter
from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    from fathom.chunking.sentences import SentenceSplitter

ALGORITHM_VERSION = 2  # bump when the same input would produce different chunks

# Paragraphs longer than this many characters per max_tokens are split into sentences before
# counting: most are over max_tokens anyway, and Punkt costs less than a second tokenizer pass.
# Shorter paragraphs are counted whole and split afterwards in the rare case they need it.
PRESPLIT_CHARS_PER_TOKEN = 4

_PARA_SEP = re.compile(r"\n[^\S\n]*\n")  # a blank line (possibly holding spaces)
_NON_SPACE = re.compile(r"\S")
_WORD = re.compile(r"\S+")
# Chinese/Japanese sentence ends with any closing quotes or brackets after them.
_CJK_SENTENCE_END = re.compile(r"[。！？｡]+[」』）〕】》〉”’\"')]*")
_CLAUSE_END = re.compile(r"[,;:，、；：]+")
_NEVER = re.compile(r"(?!)")
# Ideographs either side of a cut: WordPiece tokenises each CJK ideograph on its own.
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@dataclass(slots=True)
class _Group:
    """Paragraphs chunked together: one section's, after any heading-only sections before it."""

    paras: list[int]
    n_heads: int  # leading paragraphs that are headings


class SemanticChunker:
    """Packs whole paragraphs per section up to ``target_tokens``; see the module docstring."""

    name = "semantic"

    def __init__(
        self,
        counter: TokenCounter,
        target_tokens: int = 180,
        min_tokens: int = 48,
        max_tokens: int = 250,
        overlap_tokens: int = 32,
    ) -> None:
        checks = {
            "target_tokens": target_tokens >= 1,
            "min_tokens": 0 <= min_tokens <= target_tokens,
            "max_tokens": max_tokens >= target_tokens,
            "overlap_tokens": 0 <= overlap_tokens < target_tokens,
        }
        values = {
            "target_tokens": target_tokens,
            "min_tokens": min_tokens,
            "max_tokens": max_tokens,
            "overlap_tokens": overlap_tokens,
        }
        for key, ok in checks.items():
            if not ok:
                raise ConfigError(
                    f"chunker.{key} = {values[key]!r}: need 0 <= min_tokens <= target_tokens "
                    "<= max_tokens, target_tokens >= 1 and 0 <= overlap_tokens < target_tokens"
                )
        self.counter = counter
        self.target_tokens = target_tokens
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    def params(self) -> dict[str, Any]:
        """Everything that determines the chunks (recorded in the index manifest)."""
        return {
            "name": self.name,
            "version": ALGORITHM_VERSION,
            "target_tokens": self.target_tokens,
            "min_tokens": self.min_tokens,
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
            "counter": getattr(self.counter, "id", type(self.counter).__name__),
            "sentences": "punkt-self-trained+abbreviations",
        }

    def split(self, doc: Document) -> list[Chunk]:
        """The document's chunks in text order."""
        text = doc.text
        starts, ends, region_of, region_starts = _paragraphs(text, doc)
        if not starts:
            return []
        titles = _region_titles(doc, region_starts)
        groups = _groups(doc, region_of, region_starts)
        counts, units = self._measure(text, starts, ends, groups)

        page_starts, page_numbers = _page_table(doc)
        chunks: list[Chunk] = []
        for g in groups:
            u_start: list[int] = []
            u_end: list[int] = []
            u_tok: list[int] = []
            u_para: list[int] = []  # paragraph index for split pieces, -1 for whole paragraphs
            for p in g.paras:
                if p in units:
                    for a, b, n in units[p]:
                        u_start.append(a)
                        u_end.append(b)
                        u_tok.append(n)
                        u_para.append(p)
                else:
                    u_start.append(starts[p])
                    u_end.append(ends[p])
                    u_tok.append(counts[p])
                    u_para.append(-1)
            n_heads = sum(len(units[p]) if p in units else 1 for p in g.paras[: g.n_heads])
            prefix = [0, *accumulate(u_tok)]
            for i, j in self._pack(prefix, u_para, n_heads):
                a, b = u_start[i], u_end[j - 1]
                chunks.append(
                    Chunk(
                        chunk_id=Chunk.make_id(doc.doc_id, a, b),
                        doc_id=doc.doc_id,
                        text=text[a:b],
                        char_start=a,
                        char_end=b,
                        page_start=_page(page_starts, page_numbers, a),
                        page_end=_page(page_starts, page_numbers, b - 1),
                        section=titles[bisect_right(region_starts, a) - 1],
                        n_tokens=prefix[j] - prefix[i],
                        ordinal=len(chunks),
                        title=doc.title,
                        source_id=doc.source_id,
                    )
                )
        return chunks

    def _measure(
        self, text: str, starts: list[int], ends: list[int], groups: list[_Group]
    ) -> tuple[list[int], dict[int, list[tuple[int, int, int]]]]:
        """Token count of every paragraph, and ``paragraph -> [(start, end, tokens)]`` units for
        the paragraphs that must be split (sentences or table rows; words of a unit over budget).

        Long paragraphs are split into sentences before counting (see ``PRESPLIT_CHARS_PER_TOKEN``),
        so one batched count usually does it all.
        """
        hi = self.max_tokens
        n_paras = len(starts)
        presplit = [
            p for p in range(n_paras) if ends[p] - starts[p] > hi * PRESPLIT_CHARS_PER_TOKEN
        ]
        spans: dict[int, list[tuple[int, int]]] = {}
        if presplit:
            splitter = _sentence_splitter(text)
            spans = {p: splitter.spans(text, starts[p], ends[p]) for p in presplit}
        flat: list[tuple[int, int]] = []
        bounds = [0]  # paragraph p's pieces are flat[bounds[p]:bounds[p + 1]]
        for p in range(n_paras):
            flat.extend(spans.get(p, ((starts[p], ends[p]),)))
            bounds.append(len(flat))
        flat_counts = self.counter.count([text[a:b] for a, b in flat])
        counts = [sum(flat_counts[bounds[p] : bounds[p + 1]]) for p in range(n_paras)]

        # Split paragraphs over max_tokens; and the paragraph that would leave a group's opening
        # headings or tiny paragraphs as a chunk of their own (replaying the packer's rule up to
        # its first cut). The budget is for the first unit, which must fit after what precedes it.
        budget = {p: hi for p in range(n_paras) if counts[p] > hi}
        for g in groups:
            lead = 0
            for i, p in enumerate(g.paras):
                grown = lead + counts[p]
                if grown <= self.target_tokens:
                    lead = grown
                    continue
                small = lead < self.min_tokens or i <= g.n_heads
                if small and grown <= hi:
                    lead = grown
                    continue
                if small and 0 < lead < hi:
                    budget[p] = hi - lead
                break
        units = {
            p: [(a, b, flat_counts[bounds[p] + k]) for k, (a, b) in enumerate(spans[p])]
            for p in budget
            if p in spans
        }
        late = [p for p in budget if p not in spans]  # many tokens in few characters: rare
        if late:
            splitter = _sentence_splitter(text)
            late_spans = {p: splitter.spans(text, starts[p], ends[p]) for p in late}
            late_counts = iter(
                self.counter.count([text[a:b] for p in late for a, b in late_spans[p]])
            )
            units.update({p: [(a, b, next(late_counts)) for a, b in late_spans[p]] for p in late})

        self._split_over_budget(text, units, budget)
        return counts, units

    def _split_over_budget(
        self,
        text: str,
        units: dict[int, list[tuple[int, int, int]]],
        budget: dict[int, int],
    ) -> None:
        """Split units over budget in place, each step only for what is still over it: at CJK
        sentence ends, at spaces (a run-on sentence, a huge table row), at clause punctuation,
        and last into windows of characters (text without spaces), so every unit fits.

        The first unit of a paragraph must fit its budget at the sentence and word steps (so it
        can follow the headings before it); the finer steps only enforce ``max_tokens``.
        """
        hi = self.max_tokens
        for step, split in enumerate((_cjk_sentences, _words, _clauses, None)):
            over = [
                (p, k)
                for p, pieces in units.items()
                for k, (a, b, n) in enumerate(pieces)
                if n > (budget[p] if k == 0 and step < 2 else hi) and b - a > 1
            ]
            while over:
                if split is None:
                    spans = {(p, k): _windows(text, *units[p][k], hi) for p, k in over}
                else:
                    spans = {(p, k): split(text, *units[p][k][:2]) for p, k in over}
                spans = {key: ws for key, ws in spans.items() if len(ws) > 1}
                counts = iter(
                    self.counter.count([text[a:b] for ws in spans.values() for a, b in ws])
                )
                sized = {key: [(a, b, next(counts)) for a, b in ws] for key, ws in spans.items()}
                # Replace back to front so the indices k of earlier units stay valid.
                for (p, k), pieces in sorted(sized.items(), reverse=True):
                    units[p][k : k + 1] = pieces
                if split is not None:
                    break
                # Windows are sized from an estimate: split again whatever is still over.
                over = [
                    (p, k)
                    for p, pieces in units.items()
                    for k, (a, b, n) in enumerate(pieces)
                    if n > hi and b - a > 1
                ]

    def _pack(self, prefix: list[int], para: list[int], n_heads: int) -> list[tuple[int, int]]:
        """Greedy packing of units into ``[i, j)`` unit ranges; ``prefix`` holds token sums."""
        target, lo, hi, overlap = (
            self.target_tokens,
            self.min_tokens,
            self.max_tokens,
            self.overlap_tokens,
        )
        out: list[tuple[int, int]] = []

        def close(i: int, fresh: int, j: int) -> None:
            # A chunk with little new content joins the previous one if that stays within max.
            if out and prefix[j] - prefix[fresh] < lo and prefix[j] - prefix[out[-1][0]] <= hi:
                out[-1] = (out[-1][0], j)
            else:
                out.append((i, j))

        # The open chunk is units[i:k]; units[i:fresh] are overlap carried from the previous one.
        i = fresh = 0
        for k in range(1, len(para)):
            grown = prefix[k + 1] - prefix[i]
            new = prefix[k] - prefix[fresh]
            if grown <= target or (grown <= hi and (new < lo or k <= n_heads)):
                continue
            close(i, fresh, k)
            s = k
            if overlap and para[k] >= 0 and para[k - 1] == para[k]:
                # Carry trailing sentences of the same paragraph into the next chunk: never all
                # of the paragraph in the previous chunk, nor anything of the chunk before it.
                first = out[-1][0]  # the previous chunk's first unit of this paragraph
                while para[first] != para[k]:
                    first += 1
                floor = max(first + 1, out[-2][1] if len(out) > 1 else 0)
                while (
                    s - 1 >= floor
                    and para[s - 1] == para[k]
                    and prefix[k] - prefix[s - 1] <= overlap
                    and prefix[k + 1] - prefix[s - 1] <= hi
                ):
                    s -= 1
            i, fresh = s, k
        close(i, fresh, len(para))
        return out


def _paragraphs(text: str, doc: Document) -> tuple[list[int], list[int], list[int], list[int]]:
    """Paragraph spans (trimmed, cut at section boundaries), each one's region index, and the
    region starts (regions are the stretches between consecutive section boundaries)."""
    n = len(text)
    cuts = sorted(
        {x for s in doc.sections for x in (s.start, s.end) if 0 < x < n and s.end > s.start}
    )
    region_starts = [0, *cuts]
    seps = [0]
    for m in _PARA_SEP.finditer(text):
        seps += (m.start(), m.end())
    seps.append(n)
    starts: list[int] = []
    ends: list[int] = []
    region_of: list[int] = []
    for a, b in zip(seps[::2], seps[1::2], strict=True):
        m = _NON_SPACE.search(text, a, b)
        if m is None:
            continue
        a = m.start()
        b = a + len(text[a:b].rstrip())
        r = bisect_right(region_starts, a) - 1
        for cut in cuts[bisect_right(cuts, a) : bisect_left(cuts, b)]:
            m = _NON_SPACE.search(text, a, cut)
            if m is not None:
                starts.append(m.start())
                ends.append(a + len(text[a:cut].rstrip()))
                region_of.append(r)
            a, r = cut, r + 1
        m = _NON_SPACE.search(text, a, b)
        if m is not None:
            starts.append(m.start())
            ends.append(b)
            region_of.append(bisect_right(region_starts, m.start()) - 1)
    return starts, ends, region_of, region_starts


def _region_titles(doc: Document, region_starts: list[int]) -> list[str]:
    """The innermost section title of each region, by ``Document.section_at``'s rule (the deepest
    level wins, the later section on ties)."""
    n = len(doc.text)
    titles = [""] * len(region_starts)
    levels = [0] * len(region_starts)
    for sec in doc.sections:
        a, b = max(sec.start, 0), min(sec.end, n)
        if b <= a:
            continue
        # Every section start and end is a region boundary, so a section covers whole regions.
        for r in range(bisect_right(region_starts, a) - 1, bisect_left(region_starts, b)):
            if sec.level >= levels[r]:
                titles[r], levels[r] = sec.title, sec.level
    return titles


def _groups(doc: Document, region_of: list[int], region_starts: list[int]) -> list[_Group]:
    """Paragraphs grouped by region, headings flagged, and a region holding only headings carried
    into the next region when that lies inside the heading's section."""
    n = len(doc.text)
    # region start -> furthest end of a section starting there with its heading (a section
    # marked without one, as the text of a page read by OCR, opens with body text)
    section_end_at: dict[int, int] = {}
    for sec in doc.sections:
        if not sec.headed:
            continue
        a, b = max(sec.start, 0), min(sec.end, n)
        if b > a:
            section_end_at[a] = max(section_end_at.get(a, 0), b)
    by_region: dict[int, list[int]] = {}
    for p, r in enumerate(region_of):
        by_region.setdefault(r, []).append(p)

    groups: list[_Group] = []
    pending: _Group | None = None  # heading-only regions waiting for their subsection's text
    pending_limit = 0
    for r, paras in by_region.items():
        rs = region_starts[r]
        region_end = region_starts[r + 1] if r + 1 < len(region_starts) else n
        # A heading is the first paragraph of a region that begins where a section begins.
        heads = 1 if rs in section_end_at else 0
        if pending is not None and rs >= pending_limit:
            groups.append(pending)
            pending = None
        if pending is None:
            group = _Group(list(paras), heads)
        else:
            group = pending
            group.paras += paras
            group.n_heads += heads
        if group.n_heads == len(group.paras) and section_end_at.get(rs, 0) > region_end:
            limit = section_end_at[rs]
            pending_limit = limit if pending is None else min(pending_limit, limit)
            pending = group
            continue
        groups.append(group)
        pending = None
    if pending is not None:
        groups.append(pending)
    return groups


def _sentence_splitter(text: str) -> SentenceSplitter:
    from fathom.chunking.sentences import SentenceSplitter  # NLTK loads on first use, not on import

    return SentenceSplitter.trained_on(text)


def _words(text: str, a: int, b: int) -> list[tuple[int, int]]:
    return [m.span() for m in _WORD.finditer(text, a, b)]


def _cjk_sentences(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Spans of ``text[a:b]`` cut after Chinese/Japanese sentence ends (Punkt knows none)."""
    return _cut_after(text, a, b, _CJK_SENTENCE_END)


def _clauses(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Spans of ``text[a:b]`` cut after commas, semicolons and colons (Latin and CJK)."""
    return _cut_after(text, a, b, _CLAUSE_END)


def _cut_after(text: str, a: int, b: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Spans of ``text[a:b]`` cut after each match of ``pattern``, trimmed of whitespace."""
    spans: list[tuple[int, int]] = []
    prev = a
    for cut in [*(m.end() for m in pattern.finditer(text, a, b)), b]:
        m = _NON_SPACE.search(text, prev, cut)
        if m is not None:
            spans.append((m.start(), m.start() + len(text[m.start() : cut].rstrip())))
        prev = cut
    return spans


def _windows(text: str, a: int, b: int, n: int, limit: int) -> list[tuple[int, int]]:
    """``text[a:b]`` (``n`` tokens, over ``limit``) cut into windows of about ``limit`` tokens,
    estimated from its characters per token; a cut moves back (up to half a window) to a place
    where it does not split a word: next to punctuation or between ideographs."""
    size = max(1, min(b - a - 1, (b - a) * limit * 9 // (10 * n)))
    spans: list[tuple[int, int]] = []
    pos = a
    while b - pos > size:
        target = pos + size
        cut = next(
            (i for i in range(target, pos + size // 2, -1) if _cuttable(text, i)),
            target,
        )
        spans.extend(_cut_after(text, pos, cut, _NEVER))
        pos = cut
    spans.extend(_cut_after(text, pos, b, _NEVER))
    return spans


def _cuttable(text: str, i: int) -> bool:
    """True when a cut between ``text[i - 1]`` and ``text[i]`` leaves every word whole (for
    WordPiece, which splits punctuation and each CJK ideograph off as tokens of their own)."""
    left, right = text[i - 1], text[i]
    return not (left.isalnum() and right.isalnum()) or bool(_IDEOGRAPH.search(left + right))


def _page_table(doc: Document) -> tuple[list[int], list[int]]:
    pages = sorted(doc.pages, key=lambda p: p.start)
    return [p.start for p in pages], [p.number for p in pages]


def _page(page_starts: list[int], page_numbers: list[int], offset: int) -> int:
    """``Document.page_at`` by bisection: the last page starting at or before ``offset``."""
    i = bisect_right(page_starts, offset)
    return page_numbers[i - 1] if i else 1
