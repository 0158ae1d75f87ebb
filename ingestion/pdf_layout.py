"""PDF page layout: running headers and footers, headings (from the outline, numbering and font
size), reading order across columns, and the paragraphs and tables each page becomes.

The records here (``Line``, ``Table``, ``Page``, ``Item``) are what ``ingestion.pdf`` reads
off PyMuPDF; nothing in this module touches a PDF library.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fathom.ingestion.clean import (
    Block,
    normalise_line,
)

HEADER_FOOTER_SHARE = 0.5
HEADER_FOOTER_MIN_PAGES = 3
_EDGE_Y_TOLERANCE = 12.0  # points: a running header sits at the same height on every page
MIN_RULE = 8.0  # points: shorter strokes are not table rules
_EDGE_LINES = 3  # how many lines at the top and at the bottom of a page are candidates
# Font-size headings: clearly larger than the body text, and short.
_HEADING_MIN_RATIO = 1.12
_HEADING_MIN_DELTA = 0.9
_HEADING_MAX_CHARS = 150
_HEADING_MAX_WORDS = 18
_HEADING_MAX_LINES = 3
_TERMINAL = re.compile(r"[.!?:;)\]\"'”’]\s*$")
_LEADING_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)+|[IVXLC]+|[A-Z])[.)]?\s+")
_NON_ALNUM = re.compile(r"[\W_]+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•▪◦●‣–■□➢✓]|\d{1,3}[.)]|[a-zA-Z][.)]|\(\w{1,3}\))\s*$")
_SECTION_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)*|[IVXLC]+)\.?\s*$")


@dataclass(slots=True)
class Line:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    block: int
    base: float  # baseline y: lines of one visual row share it (tops differ by font)
    horizontal: bool = True
    heading: int = 0  # heading level, 0 = body
    title: str = ""  # section title to use instead of the text (from the PDF outline)
    drop: bool = False  # running header/footer


@dataclass(slots=True)
class Table:
    bbox: tuple[float, float, float, float]
    rows: list[str]


@dataclass(slots=True)
class Page:
    number: int
    width: float
    height: float = 0.0
    lines: list[Line] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    fallback_text: str | None = None  # text from pdfplumber when PyMuPDF failed or found none
    maybe_text: bool = True  # False when the page uses no fonts at all (nothing to fall back to)


@dataclass(slots=True)
class _Item:
    """A positioned unit on a page for reading-order sorting: a text block or a table."""

    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[Line] = field(default_factory=list)
    table: Table | None = None

    @property
    def chars(self) -> int:
        if self.table is not None:
            return sum(len(r) for r in self.table.rows)
        return sum(len(ln.text) for ln in self.lines)


# ---------------------------------------------------------------------------------------------
# Running headers and footers
# ---------------------------------------------------------------------------------------------


def mark_headers_footers(pages: list[Page]) -> None:
    """Mark lines repeated (digits ignored) at the same place at the top or bottom of >= half
    of the pages."""
    with_text = [p for p in pages if p.lines]
    if len(pages) < HEADER_FOOTER_MIN_PAGES or len(with_text) < HEADER_FOOTER_MIN_PAGES:
        return
    seen: dict[str, list[tuple[int, Line]]] = defaultdict(list)  # key -> (page, line)
    for page in with_text:
        ordered = sorted((ln for ln in page.lines if ln.horizontal), key=lambda ln: (ln.y0, ln.x0))
        edge = {id(ln): ln for ln in _edge_rows(ordered) + _edge_rows(ordered[::-1])}
        for line in edge.values():
            key = normalise_line(line.text)
            if key:
                seen[key].append((page.number, line))
    threshold = max(2, math.ceil(HEADER_FOOTER_SHARE * len(pages)))
    floor = _heading_floor(pages)
    for occurrences in seen.values():
        if len({number for number, _ in occurrences}) < threshold:
            continue
        # Same text at the same height: a title that repeats the header text elsewhere stays.
        ys = sorted(ln.y0 for _, ln in occurrences)
        median = ys[len(ys) // 2]
        near = [(n, ln) for n, ln in occurrences if abs(ln.y0 - median) <= _EDGE_Y_TOLERANCE]
        if len({n for n, _ in near}) < threshold or _numbered_headings(near, floor):
            continue
        for _, line in near:
            line.drop = True


def _numbered_headings(near: list[tuple[int, Line]], floor: float) -> bool:
    """True for headings such as "Chapter 1", "Chapter 2" opening each page: set larger than the
    body text and differing from page to page (digits ignored, they repeat, but they are not
    running headers, which are set in body size or smaller)."""
    return all(ln.size >= floor for _, ln in near) and len({ln.text.strip() for _, ln in near}) > 1


def _edge_rows(ordered: list[Line]) -> list[Line]:
    """Lines in the first ``_EDGE_LINES`` visual rows (lines sharing a baseline form one row)."""
    out: list[Line] = []
    rows = 0
    last_y: float | None = None
    for line in ordered:
        if last_y is None or abs(line.y0 - last_y) > 2.0:
            rows += 1
            if rows > _EDGE_LINES:
                break
            last_y = line.y0
        out.append(line)
    return out


# ---------------------------------------------------------------------------------------------
# Headings
# ---------------------------------------------------------------------------------------------


def _title_key(text: str) -> str:
    return _NON_ALNUM.sub("", _LEADING_NUMBER.sub("", text).lower())


def mark_toc_headings(pages: list[Page], toc: list[list[Any]]) -> list[tuple[str, int, int]]:
    """Mark the lines that match outline entries; entries not found start at their page."""
    missing: list[tuple[str, int, int]] = []
    by_page: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for entry in toc:
        level, title, page_no = int(entry[0]), str(entry[1]).strip(), int(entry[2])
        if not title or not (1 <= page_no <= len(pages)):
            continue
        by_page[page_no].append((level, title))
    for page_no, entries in by_page.items():
        page = pages[page_no - 1]
        lines = [ln for ln in page.lines if not ln.drop]
        cursor = 0
        for level, raw_title in entries:
            title = " ".join(raw_title.split())
            key = _title_key(title)
            found = _find_title(lines, cursor, key)
            if found is None and cursor:
                found = _find_title(lines, 0, key)
            if found is None:
                missing.append((title, level, page_no))
                continue
            first, last = found
            for ln in lines[first : last + 1]:
                ln.heading = level
            lines[first].title = title
            cursor = last + 1
    return missing


def _find_title(lines: list[Line], start: int, key: str) -> tuple[int, int] | None:
    """Indices (first, last) of consecutive lines of one block whose text is the title."""
    if not key:
        return None
    for i in range(start, len(lines)):
        acc = _title_key(lines[i].text)
        if lines[i].heading or not acc or not key.startswith(acc):
            continue
        j = i
        while (
            acc != key and j + 1 < len(lines) and lines[j + 1].block == lines[i].block and j - i < 4
        ):
            j += 1
            acc += _NON_ALNUM.sub("", lines[j].text.lower())
            if not key.startswith(acc):
                break
        if acc == key:
            return i, j
    return None


def attach_section_numbers(pages: list[Page]) -> None:
    """Join a number-only line ("3.1") to the heading beside it on the same baseline.

    LaTeX and Word often set the number apart, and PyMuPDF then reports it as its own line or
    block; without this the number would be a one-word paragraph before the heading.
    """
    for page in pages:
        heads = [ln for ln in page.lines if ln.heading and not ln.drop]
        if not heads:
            continue
        for ln in page.lines:
            if ln.heading or ln.drop or not _SECTION_NUMBER.match(ln.text):
                continue
            for head in heads:
                if (
                    abs(head.base - ln.base) <= 2.0
                    and ln.x1 <= head.x0 + 1.0
                    and head.x0 - ln.x1 < 60.0
                ):
                    ln.heading, ln.block = head.heading, head.block
                    break


def _heading_floor(pages: list[Page]) -> float:
    """The smallest font size that counts as "clearly larger" than the body's dominant size."""
    sizes: Counter[float] = Counter()
    for page in pages:
        for ln in page.lines:
            if ln.horizontal and not ln.drop:
                sizes[ln.size] += len(ln.text)
    if not sizes:
        return math.inf
    body = sizes.most_common(1)[0][0]
    return max(body * _HEADING_MIN_RATIO, body + _HEADING_MIN_DELTA)


def display_title(pages: list[Page]) -> str:
    """The largest-type short text in the top half of the first page with text ('' if none)."""
    floor = _heading_floor(pages)
    first = next((p for p in pages if p.lines), None)
    if first is None:
        return ""
    half = first.height / 2 if first.height else math.inf
    top = [ln for ln in first.lines if ln.horizontal and not ln.drop and ln.y1 < half]
    if not top:
        return ""
    biggest = max(ln.size for ln in top)
    if biggest < floor:
        return ""
    rows = _rows([ln for ln in top if ln.size >= biggest - 0.5])
    if len(rows) > _HEADING_MAX_LINES:
        return ""
    title = " ".join(" ".join(ln.text.strip() for ln in r) for r in rows)
    return title if len(title) <= _HEADING_MAX_CHARS else ""


def mark_size_headings(pages: list[Page]) -> None:
    """Short lines in a clearly larger font than the body become headings, level by size rank."""
    floor = _heading_floor(pages)
    if floor == math.inf:
        return
    candidates: list[Line] = []
    for page in pages:
        per_block: dict[int, list[Line]] = defaultdict(list)
        for ln in page.lines:
            if ln.horizontal and not ln.drop and ln.size >= floor:
                per_block[ln.block].append(ln)
        for block_lines in per_block.values():
            if len(block_lines) > _HEADING_MAX_LINES:
                continue  # a large-print paragraph, not a heading
            text = " ".join(ln.text.strip() for ln in block_lines)
            if (
                len(text) <= _HEADING_MAX_CHARS
                and len(text.split()) <= _HEADING_MAX_WORDS
                and re.search(r"[^\W\d_]{2}", text)
            ):
                candidates.extend(block_lines)
    ranks = sorted({round(ln.size * 2) / 2 for ln in candidates}, reverse=True)
    level_of = {size: min(i + 1, 6) for i, size in enumerate(ranks)}
    for ln in candidates:
        ln.heading = level_of[round(ln.size * 2) / 2]


# ---------------------------------------------------------------------------------------------
# Reading order and blocks
# ---------------------------------------------------------------------------------------------


def _page_items(page: Page) -> list[_Item]:
    """Text blocks and tables of a page in reading order (column by column on 2-column pages)."""
    by_block: dict[int, list[Line]] = defaultdict(list)
    rotated: list[Line] = []
    for ln in page.lines:
        if ln.drop:
            continue
        if ln.horizontal:
            by_block[ln.block].append(ln)
        else:
            rotated.append(ln)
    items: list[_Item] = []
    for block_lines in by_block.values():
        items.append(
            _Item(
                min(ln.x0 for ln in block_lines),
                min(ln.y0 for ln in block_lines),
                max(ln.x1 for ln in block_lines),
                max(ln.y1 for ln in block_lines),
                block_lines,
            )
        )
    items.extend(_Item(*t.bbox, table=t) for t in page.tables)
    ordered = _reading_order(items, page.width)
    if rotated:  # margin stamps and rotated labels: kept, but after the page's text
        ordered.append(_Item(0, 0, 0, 0, rotated))
    return ordered


_GUTTER = 4.0  # points either side of the page's middle that a column's text may reach into


def _two_columns(spans: list[tuple[float, float, int]], mid: float) -> bool:
    """Whether text spans ``(x0, x1, characters)`` are set in two columns about ``mid``: a
    fifth of the characters or more on each side of it."""
    total = sum(n for _, _, n in spans) or 1
    left = sum(n for _, x1, n in spans if x1 <= mid + _GUTTER)
    right = sum(n for x0, _, n in spans if x0 >= mid - _GUTTER)
    return left >= 0.2 * total and right >= 0.2 * total


def _reading_order(items: list[_Item], width: float) -> list[_Item]:
    if not items:
        return []
    mid = width / 2 if width else (min(i.x0 for i in items) + max(i.x1 for i in items)) / 2
    by_y = sorted(items, key=lambda i: (round(i.y0 / 3), i.x0))
    if not _two_columns([(i.x0, i.x1, i.chars) for i in items], mid):
        return by_y  # one column
    # Two columns: blocks that cross the gutter split the page into bands; in each band the
    # left column is read before the right one.
    out: list[_Item] = []
    band: list[_Item] = []

    def flush() -> None:
        band.sort(key=lambda i: (i.x0 >= mid - _GUTTER, i.y0, i.x0))
        out.extend(band)
        band.clear()

    for item in by_y:
        if item.x0 < mid - _GUTTER and item.x1 > mid + _GUTTER:
            flush()
            out.append(item)
        else:
            band.append(item)
    flush()
    return out


def page_blocks(page: Page) -> list[Block]:
    """The page's Blocks: paragraphs (split at vertical gaps and headings), headings, tables."""
    if page.fallback_text is not None:
        return [Block(p, page=page.number) for p in _fallback_paragraphs(page.fallback_text)]
    blocks: list[Block] = []
    for item in _page_items(page):
        if item.table is not None:
            blocks.append(Block("\n".join(item.table.rows), "table", page=page.number))
        else:
            _item_blocks(item.lines, page.number, blocks)
    return blocks


def _item_blocks(lines: list[Line], number: int, blocks: list[Block]) -> None:
    """Split one text block's lines into heading, paragraph and table Blocks (appended).

    Lines sharing a baseline form a visual row; a block where most rows hold several separate
    lines is a borderless table (e.g. LaTeX booktabs) and is kept as ``a | b | c`` rows.
    """
    rows = _rows(lines)
    # Rows of several cells (a bullet and its item do not count); continuation rows of one cell
    # mean prose in a box (e.g. "Question: ..." prompts), which reads better as a paragraph.
    multi = sum(1 for r in rows if len(r) >= 2 and not _LIST_MARKER.match(r[0].text))
    if multi >= 2 and multi >= 0.75 * len(rows) and not any(ln.heading for ln in lines):
        text = "\n".join(" | ".join(ln.text.strip() for ln in r) for r in rows)
        blocks.append(Block(text, "table", page=number))
        return
    group: list[Line] = []
    for row in rows:
        ln = row[0]
        if group and (
            ln.heading != group[-1].heading or (not ln.heading and _gap_breaks(group[-1], ln))
        ):
            _emit(group, number, blocks)
            group = []
        if len(row) > 1:  # pieces of one visual line: keep them on one line
            ln = Line(
                " ".join(x.text.strip() for x in row),
                row[0].x0,
                min(x.y0 for x in row),
                row[-1].x1,
                max(x.y1 for x in row),
                ln.size,
                ln.block,
                ln.base,
                heading=max(x.heading for x in row),
                title=next((x.title for x in row if x.title), ""),
            )
        group.append(ln)
    if group:
        _emit(group, number, blocks)


def _row_tolerance(line: Line) -> float:
    """How far apart two baselines may be on one visual row: about a third of the font size."""
    return max(1.5, 0.35 * line.size)


def _rows(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped into visual rows by baseline (tolerance ~ a third of the font size),
    top to bottom, each row left to right."""
    rows: list[list[Line]] = []
    for ln in sorted(lines, key=lambda x: x.base):
        if rows and abs(ln.base - rows[-1][0].base) <= _row_tolerance(ln):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    for row in rows:
        row.sort(key=lambda x: x.x0)
    return rows


def _emit(group: list[Line], number: int, blocks: list[Block]) -> None:
    level = group[0].heading
    if level:
        title = next((ln.title for ln in group if ln.title), "")
        text = "\n".join(ln.text for ln in group)
        blocks.append(Block(text, "heading", page=number, level=level, title=title))
    else:
        _append_para(blocks, "\n".join(ln.text for ln in group), number)


def _gap_breaks(prev: Line, line: Line) -> bool:
    """A vertical gap of more than ~0.8 line heights between two lines starts a new paragraph."""
    height = max(prev.y1 - prev.y0, 1.0)
    return line.y0 - prev.y1 > 0.8 * height


def _append_para(blocks: list[Block], text: str, page: int) -> None:
    """Add a paragraph, continuing the previous one when it was cut mid-sentence (column break)."""
    if blocks:
        last = blocks[-1]
        stripped = text.lstrip()
        if (
            last.kind == "para"
            and last.page == page
            and stripped[:1].islower()
            and not _TERMINAL.search(last.text)
        ):
            last.text = f"{last.text}\n{text}"
            return
    blocks.append(Block(text, page=page))


def _fallback_paragraphs(text: str) -> Iterable[str]:
    """Paragraphs from plain extracted lines: break after a short line ending a sentence."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    width = max((len(ln) for ln in lines), default=0)
    para: list[str] = []
    for ln in lines:
        if not ln.strip():
            if para:
                yield "\n".join(para)
                para = []
            continue
        para.append(ln)
        if _TERMINAL.search(ln) and len(ln) < 0.7 * width:
            yield "\n".join(para)
            para = []
    if para:
        yield "\n".join(para)


def ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
