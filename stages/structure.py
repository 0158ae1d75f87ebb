"""Counting a document's own parts: "How many figures are in this paper?", "How many tables
are included in the document?", "How many appendices does the report have?", "How many pages
(slides) does it have?", optionally within the pages the question names ("from page 3 to
page 10").

Retrieval cannot answer these: no passage says how many figures a paper has. They are counted
over every chunk of the question's document (the only one in scope, or the best-ranked
passage's): figures and tables by their captions ("Figure 3:", "Fig. 3.", "Table II"), each
number once; charts by chart, figure or exhibit captions; chapters and appendices by the
headings that name them ("Chapter 4", "Appendix B"); pages and slides from the collection's
record of the document. The answer says what it counted, cites the passages that hold the
captions or headings, and is a count question's short answer.

Only a question that asks for the count of the part and nothing narrower is answered here
("How many figures of trains …?", "How many tables include F1?" are not): a word the
question adds beyond the part, the document and the pages is a condition this cannot check.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fathom.core.base import Hit
from fathom.stages.metadata import document_of, stated_draft

if TYPE_CHECKING:
    from fathom.core.base import Chunk, Draft
    from fathom.stages.parts import Parts
    from fathom.stages.records import Prepared

_PART = re.compile(
    r"\bhow\s+many\s+(?:(?:total|distinct|different|separate)\s+)?(?P<part>figures?|tables?|"
    r"charts?|chapters?|appendix|appendices|appendixes|pages?|slides?)\b",
    re.IGNORECASE,
)
# words a plain count question may hold besides its part: the document, where, how it is put
_FILLER = frozenset(
    """are were is was does do did there in into of the this that its it total entire whole
    overall all included include includes contain contains contained provided shown presented
    available listed appear appears appeared have has had document doc paper report article
    study deck presentation slides slide guide guidebook manual handbook brochure file pdf
    from to and page pages through between within altogether number count exist exists used
    given""".split()
)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty"
)
_CAPTION = {
    "figure": re.compile(r"(?m)^\s*(?:figure|fig\.)\s*(\d+|[ivxlc]+)\b", re.IGNORECASE),
    "table": re.compile(r"(?m)^\s*table\s*(\d+|[ivxlc]+)\b", re.IGNORECASE),
    "chart": re.compile(
        r"(?m)^\s*(?:chart|figure|fig\.|exhibit)\s*(\d+|[ivxlc]+)\b", re.IGNORECASE
    ),
    "chapter": re.compile(rf"(?m)^\s*chapter\s+(\d+|[ivxlc]+|{_NUMBER_WORDS})\b", re.IGNORECASE),
    "appendix": re.compile(r"(?m)^\s*appendix\s+([a-z]|\d+|[ivxlc]+)\b", re.IGNORECASE),
}
_CITED = 6  # the passages an answer cites, at most (the first holding each counted part)


@dataclass(frozen=True, slots=True)
class Counted:
    """A part counted: its label as written ("Figure 3"), the chunk that holds it and its
    page."""

    label: str
    chunk: Chunk
    page: int


def asked_part(question: str) -> str:
    """The part a plain count question asks for ("figure", "table", "chart", "chapter",
    "appendix", "page"; a slide is a page), or "" when it asks anything narrower."""
    m = _PART.search(question)
    if not m:
        return ""
    rest = question[: m.start()] + " " + question[m.end() :]
    words = re.findall(r"[a-z]+", re.sub(r"\d+", " ", rest.lower()))
    if any(w not in _FILLER for w in words):
        return ""
    part = m.group("part").lower()
    if part.startswith("append"):
        return "appendix"
    return "page" if part.startswith(("page", "slide")) else part.rstrip("s")


def structure_answer(parts: Parts, prepared: Prepared) -> tuple[list[Hit], Draft] | None:
    """``(sources, draft)`` counting the part a plain count question asks for over its
    document, or None when the question is not one. When the document captions or heads none
    of that part, the answer says so and does not count: a figure without a caption is only in
    a page's picture (the best-ranked passages are listed as related)."""
    kind = prepared.kind
    if kind is None or kind.name != "count":
        return None
    part = asked_part(prepared.question)
    if not part:
        return None
    t0 = time.perf_counter()
    doc_id = document_of(parts, prepared)
    entry = next((d for d in parts.collection.manifest.documents if d.doc_id == doc_id), None)
    if entry is None or entry.rows[1] <= entry.rows[0]:
        return None
    chunks = parts.collection.chunks(range(*entry.rows))
    if part == "page":
        return _pages(parts, entry.pages, chunks, t0)
    named = [p for p in kind.pages if p > 0]
    pages = (min(named), max(named)) if named else ()  # "from page 3 to page 10": 3–10
    found = _count(part, chunks, pages)
    if not found:
        return _uncounted(parts, prepared, part, pages, t0)
    used = list(dict.fromkeys(c.chunk.chunk_id for c in found))[:_CITED]
    by_id = {c.chunk.chunk_id: c.chunk for c in found}
    hits = [Hit(by_id[i], score=1.0) for i in used]
    text = _said(part, found, pages, used)
    draft = stated_draft(
        parts, text, "document structure", t0, citations=tuple(range(1, len(hits) + 1)),
        short=str(len(found)),
    )  # fmt: skip
    return hits, draft


def _uncounted(
    parts: Parts, prepared: Prepared, part: str, pages: tuple[int, ...], t0: float
) -> tuple[list[Hit], Draft]:
    """That the document's text captions or heads no ``part`` (within ``pages``), so it cannot
    be counted from the text, with the best-ranked passages as related."""
    label = {"figure": '"Figure N"', "table": '"Table N"', "chart": '"Chart N" or "Figure N"',
             "chapter": '"Chapter N"', "appendix": '"Appendix A"'}[part]  # fmt: skip
    how = "heading" if part in ("chapter", "appendix") else "caption"
    where = f" on pages {pages[0]}–{pages[-1]}" if pages else ""
    text = (
        f"I don't know — the document does not say: its text has no {label} {how}{where}, so "
        f"its {'appendices' if part == 'appendix' else part + 's'} cannot be counted from it "
        "(an uncaptioned one is only in a page's picture)."
    )
    used = list(prepared.probe.hits[:3])
    related = tuple(range(1, len(used) + 1))
    draft = stated_draft(parts, text, "document structure", t0, abstained=True, related=related)
    return used, draft


def _count(part: str, chunks: list[Chunk], pages: tuple[int, ...]) -> list[Counted]:
    """Each distinct ``part`` captioned or headed in ``chunks`` (within the page range
    ``pages``, first and last, when the question names some), first occurrence kept, in
    document order."""
    rule = _CAPTION[part]
    seen: dict[str, Counted] = {}
    for chunk in chunks:
        texts = [chunk.text] + ([chunk.section] if part in ("chapter", "appendix") else [])
        for i, text in enumerate(texts):
            for m in rule.finditer(text or ""):
                key = m.group(1).lower()
                page = _page_of(chunk, m.start() if i == 0 else 0)
                if key in seen or (pages and not pages[0] <= page <= pages[-1]):
                    continue
                seen[key] = Counted(m.group(0).strip(), chunk, page)
    return list(seen.values())


def _page_of(chunk: Chunk, offset: int) -> int:
    """The page of character ``offset`` of ``chunk``: its page, or for a chunk that runs
    across pages the page that share of its text falls on (the collection keeps each chunk's
    first and last page, not where the page breaks fall)."""
    if chunk.page_end <= chunk.page_start or not chunk.text:
        return chunk.page_start
    span = chunk.page_end - chunk.page_start + 1
    return chunk.page_start + min(span - 1, int(offset / len(chunk.text) * span))


def _said(part: str, found: list[Counted], pages: tuple[int, ...], used: list[str]) -> str:
    """ "6 figures — counted by their captions: Figure 1 (p. 2) [1], …"."""
    noun = {"appendix": "appendices"}.get(part, f"{part}s") if len(found) != 1 else part
    how = "headings" if part in ("chapter", "appendix") else "captions"
    where = f" on pages {pages[0]}–{pages[-1]}" if pages and pages[0] != pages[-1] else ""
    where = f" on page {pages[0]}" if pages and pages[0] == pages[-1] else where
    cite = {cid: n for n, cid in enumerate(used, start=1)}
    items = []
    for c in found:
        n = cite.get(c.chunk.chunk_id)
        items.append(f"{c.label} (p. {c.page})" + (f" [{n}]" if n else ""))
    return f"{len(found)} {noun}{where} — counted by their {how}: " + ", ".join(items) + "."


def _pages(
    parts: Parts, pages: int, chunks: list[Chunk], t0: float
) -> tuple[list[Hit], Draft] | None:
    """How many pages (slides) the document has, from the collection's record of it."""
    if pages <= 0 or not chunks:
        return None
    last = max(chunks, key=lambda c: c.page_end)
    text = f"{pages} page{'s' if pages != 1 else ''} — as the document was read at ingest [1]."
    draft = stated_draft(parts, text, "document structure", t0, citations=(1,), short=str(pages))
    return [Hit(last, score=1.0)], draft
