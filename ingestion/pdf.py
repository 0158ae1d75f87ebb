"""PDF loader: PyMuPDF text in reading order, pages, headings, tables; pdfplumber as a fallback.

PyMuPDF (``pymupdf``/``fitz``) and pdfplumber are imported inside the functions that use them,
so importing this module (and ``python cli.py --help``) stays instant.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    DEFAULT_MAX_BYTES,
    Block,
    assemble,
    make_document,
    normalise_line,
    read_source,
    sensible_title,
    table_row,
)

# Headers/footers: a normalised line at the top or bottom of >= this share of pages is removed.
HEADER_FOOTER_SHARE = 0.5
HEADER_FOOTER_MIN_PAGES = 3
_EDGE_Y_TOLERANCE = 12.0  # points: a running header sits at the same height on every page
_MIN_RULE = 8.0  # points: shorter strokes are not table rules
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
class _Line:
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
class _Table:
    bbox: tuple[float, float, float, float]
    rows: list[str]


@dataclass(slots=True)
class _Page:
    number: int
    width: float
    height: float = 0.0
    lines: list[_Line] = field(default_factory=list)
    tables: list[_Table] = field(default_factory=list)
    fallback_text: str | None = None  # text from pdfplumber when PyMuPDF failed or found none
    maybe_text: bool = True  # False when the page uses no fonts at all (nothing to fall back to)


@dataclass(slots=True)
class _Item:
    """A positioned unit on a page for reading-order sorting: a text block or a table."""

    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[_Line] = field(default_factory=list)
    table: _Table | None = None

    @property
    def chars(self) -> int:
        if self.table is not None:
            return sum(len(r) for r in self.table.rows)
        return sum(len(ln.text) for ln in self.lines)


def import_pymupdf() -> Any:
    """Import PyMuPDF without the layout analyser that PyMuPDF >= 2 loads on import.

    ``pymupdf.layout`` loads an ONNX model at import (about a second) and we never use it;
    blocking it only for the duration of the first import keeps it importable later.
    """
    if "pymupdf" in sys.modules:
        return sys.modules["pymupdf"]
    blocked = "pymupdf.layout" not in sys.modules
    if blocked:
        sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import pymupdf
    except ImportError:  # PyMuPDF < 1.24.3 only has the ``fitz`` name
        import fitz as pymupdf
    finally:
        if blocked:
            del sys.modules["pymupdf.layout"]
    return pymupdf


class PdfLoader:
    """Loads ``.pdf`` with PyMuPDF: text in reading order, 1-based pages, sections, tables."""

    format = "pdf"

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        password: str | None = None,
        tables: bool = True,
    ) -> None:
        self.max_bytes = max_bytes
        self.password = password
        self.tables = tables

    def load(self, path: str | Path) -> Document:
        """Read the PDF into a Document; ParseError for corrupt, encrypted or text-less files."""
        name = str(path)
        data = read_source(path, self.max_bytes)
        if b"%PDF-" not in data[:1024]:
            raise ParseError(name, "not a PDF (no %PDF header)", "check the file type")
        try:
            pymupdf = import_pymupdf()
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ParseError(
                name, f"PyMuPDF is not installed ({exc})", "pip install pymupdf"
            ) from None
        try:
            doc = pymupdf.open(stream=data, filetype="pdf")
        except Exception:  # PyMuPDF raises many kinds on a damaged file: all mean the same
            raise ParseError(
                name,
                "cannot be opened (corrupt or truncated PDF)",
                "re-download or re-export the file",
            ) from None
        with doc:
            if doc.needs_pass:
                if not self.password:
                    raise ParseError(
                        name,
                        "encrypted (needs a password)",
                        "pass its password or decrypt it first",
                    )
                if not doc.authenticate(self.password):
                    raise ParseError(
                        name, "encrypted and the password is wrong", "check the password"
                    )
            try:
                n_pages = doc.page_count
            except Exception:  # a damaged page tree: reported below as zero pages
                n_pages = 0
            if n_pages == 0:
                raise ParseError(
                    name,
                    "has zero pages (corrupt or truncated PDF?)",
                    "re-download or re-export the file",
                )
            warnings: list[str] = []
            if getattr(doc, "is_repaired", False):
                warnings.append(
                    "the PDF was damaged and has been repaired; some text may be missing"
                )
            pages = [self._read_page(pymupdf, doc, i, warnings) for i in range(n_pages)]
            _fallback_pages(data, pages, warnings)
            try:
                toc = doc.get_toc(simple=True)
            except Exception as exc:  # a damaged outline: sections come from the headings
                warnings.append(
                    f"its table of contents could not be read ({type(exc).__name__}); "
                    "sections come from the headings"
                )
                toc = []
            meta_title = (doc.metadata or {}).get("title", "")

        _mark_headers_footers(pages)
        extra_sections: list[tuple[str, int, int]] = []
        if toc:
            extra_sections = _mark_toc_headings(pages, toc)
        else:
            _mark_size_headings(pages)
        _attach_section_numbers(pages)
        blocks = [b for page in pages for b in _page_blocks(page)]
        meta_title = sensible_title(meta_title) or sensible_title(_display_title(pages))
        assembled = assemble(blocks, n_pages=n_pages, extra_sections=extra_sections)
        if not assembled.text.strip():
            raise ParseError(
                name, "no extractable text (scanned?)", "run OCR on it or convert it first"
            )
        empty = [p.number for p in assembled.pages if p.start == p.end]
        if empty:
            warnings.append(
                f"no text on page(s) {_ranges(empty)} (blank, image-only, or only a header)"
            )
        return make_document(
            path, data, self.format, assembled, meta_title=meta_title, warnings=warnings
        )

    def _read_page(self, pymupdf: Any, doc: Any, index: int, warnings: list[str]) -> _Page:
        """Lines (with font size and position) and tables of one page; empty on failure."""
        try:
            page = doc.load_page(index)
            result = _Page(index + 1, float(page.rect.width), float(page.rect.height))
            flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
            result.tables = _find_tables(page, flags, warnings) if self.tables else []
            content = page.get_text("dict", flags=flags)
            result.lines, unmapped = _page_lines(content, result.tables)
            if not result.lines and not result.tables:
                result.maybe_text = bool(page.get_fonts(full=True))
        except Exception as exc:  # one bad page must not lose the document: pdfplumber tries it
            warnings.append(f"page {index + 1}: PyMuPDF failed ({type(exc).__name__}: {exc})")
            return _Page(index + 1, 0.0, fallback_text="")
        if unmapped:
            warnings.append(
                f"page {index + 1}: dropped {unmapped} glyphs without a Unicode mapping"
            )
        return result


def _find_tables(page: Any, flags: int, warnings: list[str]) -> list[_Table]:
    """Ruled tables on the page (PyMuPDF ``find_tables``), as rows of `` | ``-joined cells.
    A page whose drawings or tables cannot be read keeps its text without table structure,
    and the document's warnings (its manifest entry) say so."""
    # find_tables is slow (it builds a Python dict per glyph): only look where ruling lines
    # could form a grid, and only inside that area.
    clip = _grid_area(page, warnings)
    if clip is None:
        return []
    try:
        try:
            # PyMuPDF >= 2 would first run its (slow) layout model; plain ruling-line
            # detection is what we want and is what older releases do.
            found = page.find_tables(clip=clip, use_layout=False)
        except TypeError:  # a release without use_layout
            found = page.find_tables(clip=clip)
    except Exception as exc:  # PyMuPDF raises its own and C-level errors on damaged pages
        warnings.append(_unreadable(page, "tables", exc))
        return []
    candidates = [
        t for t in getattr(found, "tables", found) if t.row_count >= 2 and t.col_count >= 2
    ]
    if not candidates:
        return []  # framed boxes or rules, not tables: their text stays in the text flow
    # Cell text from the page's words (the same text engine as the body; Table.extract()
    # re-sorts glyphs and can lose spaces).
    words = page.get_text("words", flags=flags)
    tables: list[_Table] = []
    for tab in candidates:
        grid = [
            [_cell_words(words, bbox) if bbox else None for bbox in row.cells] for row in tab.rows
        ]
        rows = _grid_rows(grid)
        if len(rows) >= 2 and any(" | " in r for r in rows):
            tables.append(_Table(tuple(tab.bbox), rows))
    return tables


def _unreadable(page: Any, what: str, exc: Exception) -> str:
    return (
        f"page {page.number + 1}: its {what} could not be read ({type(exc).__name__}: "
        f"{str(exc)[:200]}); its text is kept without table structure"
    )


def _grid_area(page: Any, warnings: list[str]) -> tuple[float, float, float, float] | None:
    """The box around the page's vertical rules and the horizontal rules they cross, or None
    when no ruled grid of at least 2 x 2 cells is possible or the drawing is a figure."""
    try:
        paths = page.get_cdrawings() if hasattr(page, "get_cdrawings") else page.get_drawings()
    except Exception as exc:  # PyMuPDF raises its own and C-level errors on damaged pages
        warnings.append(_unreadable(page, "drawings", exc))
        return None
    page_rect = page.rect
    big_w, big_h = 0.9 * page_rect.width, 0.9 * page_rect.height
    hs: list[tuple[float, float, float]] = []  # (x0, x1, y)
    vs: list[tuple[float, float, float]] = []  # (y0, y1, x)
    curves = 0
    for path in paths:
        for item in path.get("items", ()):
            if item[0] == "c":
                curves += 1
            elif item[0] == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                if abs(ay - by) <= 1 and abs(ax - bx) >= _MIN_RULE:
                    hs.append((min(ax, bx), max(ax, bx), ay))
                elif abs(ax - bx) <= 1 and abs(ay - by) >= _MIN_RULE:
                    vs.append((min(ay, by), max(ay, by), ax))
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                w, h = abs(x1 - x0), abs(y1 - y0)
                x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
                if h <= 2 and w >= _MIN_RULE:
                    hs.append((x0, x1, y0))
                elif w <= 2 and h >= _MIN_RULE:
                    vs.append((y0, y1, x0))
                elif w >= _MIN_RULE and h >= _MIN_RULE and (w < big_w or h < big_h):
                    # a box (cell or frame); a page-sized rectangle is a background, not a rule
                    hs += [(x0, x1, y0), (x0, x1, y1)]
                    vs += [(y0, y1, x0), (y0, y1, x1)]
    # A 2 x 2 grid needs 3 distinct rows of rules and 3 columns; many Bezier curves mean a
    # chart or diagram, where "tables" found by the ruling lines are boxes of a figure.
    if len({round(v[2]) for v in vs}) < 3 or len({round(h[2]) for h in hs}) < 3 or curves > 16:
        return None
    top, bottom = min(v[0] for v in vs) - 3, max(v[1] for v in vs) + 3
    crossing = [h for h in hs if top <= h[2] <= bottom]
    if len(crossing) < 2:
        return None
    x0 = max(min(min(v[2] for v in vs), min(h[0] for h in crossing)) - 3, page_rect.x0)
    x1 = min(max(max(v[2] for v in vs), max(h[1] for h in crossing)) + 3, page_rect.x1)
    top, bottom = max(top, page_rect.y0), min(bottom, page_rect.y1)
    if x1 - x0 < _MIN_RULE or bottom - top < _MIN_RULE:
        return None
    return (x0, top, x1, bottom)


def _cell_words(words: list[tuple[Any, ...]], bbox: tuple[float, float, float, float]) -> str:
    x0, y0, x1, y1 = bbox
    inside = [w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1]
    inside.sort(key=lambda w: (w[5], w[6], w[7]))  # block, line, word number: reading order
    return " ".join(w[4] for w in inside)


def _grid_rows(grid: list[list[str | None]]) -> list[str]:
    """Rows as text: merged cells (None) dropped, columns empty in every row dropped."""
    width = max((len(r) for r in grid), default=0)
    keep = [any(r[i] for r in grid if i < len(r)) for i in range(width)]
    rows: list[str] = []
    for r in grid:
        cells = [c for i, c in enumerate(r) if keep[i] and c is not None]
        filled = [c for c in cells if c]
        row = table_row(filled if len(filled) == 1 else cells)
        if row:
            rows.append(row)
    return rows


def _page_lines(content: dict[str, Any], tables: list[_Table]) -> tuple[list[_Line], int]:
    """Text lines of a page outside tables, and the number of unmappable glyphs dropped."""
    lines: list[_Line] = []
    unmapped = 0
    for bno, block in enumerate(content.get("blocks", ())):
        if block.get("type", 0) != 0:
            continue
        for line in block.get("lines", ()):
            spans = line.get("spans", ())
            text = "".join(s.get("text", "") for s in spans)
            if "\ufffd" in text:  # glyphs without a Unicode mapping (often figure fonts)
                bad = text.count("\ufffd")
                unmapped += bad
                if bad > 0.3 * len(text.strip()):
                    continue
                text = text.replace("\ufffd", "")
            if not text.strip():
                continue
            x0, y0, x1, y1 = line["bbox"]
            if tables and _inside_any(x0, y0, x1, y1, tables):
                continue
            # the size of the line is the size of most of its characters
            sizes: Counter[float] = Counter()
            for s in spans:
                if s.get("text", "").strip():
                    sizes[round(float(s.get("size", 0.0)), 1)] += len(s["text"].strip())
            size = sizes.most_common(1)[0][0] if sizes else 0.0
            base = float(spans[0].get("origin", (x0, y1))[1]) if spans else y1
            dx, dy = line.get("dir", (1.0, 0.0))
            horizontal = abs(dy) < 0.2 and dx > 0
            lines.append(_Line(text, x0, y0, x1, y1, size, bno, base, horizontal=horizontal))
    return lines, unmapped


def _inside_any(x0: float, y0: float, x1: float, y1: float, tables: list[_Table]) -> bool:
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return any(t.bbox[0] <= cx <= t.bbox[2] and t.bbox[1] <= cy <= t.bbox[3] for t in tables)


def _fallback_pages(data: bytes, pages: list[_Page], warnings: list[str]) -> None:
    """pdfplumber for the pages where PyMuPDF raised or found no text."""
    todo = [p for p in pages if not p.lines and not p.tables and p.maybe_text]
    if not todo:
        return
    try:
        import pdfplumber
    except ImportError:
        return
    # pdfminer logs every damaged object to stderr; the damage reaches the user as one warning.
    quiet_pdfminer()
    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except Exception as exc:  # pdfminer raises many kinds on damaged files
        pages_left = ", ".join(str(p.number) for p in todo[:10])
        warnings.append(
            f"page(s) {pages_left}: no text from PyMuPDF, and pdfplumber could not open the file "
            f"to try ({type(exc).__name__})"
        )
        return
    try:
        for page in todo:
            try:
                text = pdf.pages[page.number - 1].extract_text() or ""
            except Exception as exc:
                warnings.append(
                    f"page {page.number}: pdfplumber fallback failed ({type(exc).__name__})"
                )
                continue
            if text.strip():
                page.fallback_text = text
                warnings.append(f"page {page.number}: text from the pdfplumber fallback")
    finally:
        # Not ``with pdf``: pdfplumber's close() walks every page again and raises on a
        # damaged page tree (found by fuzzing), which would lose the text already read.
        with contextlib.suppress(Exception):
            pdf.close()


def quiet_pdfminer() -> None:
    """Raise pdfminer's log level to ERROR unless the user configured it."""
    logger = logging.getLogger("pdfminer")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


# ---------------------------------------------------------------------------------------------
# Running headers and footers
# ---------------------------------------------------------------------------------------------


def _mark_headers_footers(pages: list[_Page]) -> None:
    """Mark lines repeated (digits ignored) at the same place at the top or bottom of >= half
    of the pages."""
    with_text = [p for p in pages if p.lines]
    if len(pages) < HEADER_FOOTER_MIN_PAGES or len(with_text) < HEADER_FOOTER_MIN_PAGES:
        return
    seen: dict[str, list[tuple[int, _Line]]] = defaultdict(list)  # key -> (page, line)
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


def _numbered_headings(near: list[tuple[int, _Line]], floor: float) -> bool:
    """True for headings such as "Chapter 1", "Chapter 2" opening each page: set larger than the
    body text and differing from page to page (digits ignored, they repeat, but they are not
    running headers, which are set in body size or smaller)."""
    return all(ln.size >= floor for _, ln in near) and len({ln.text.strip() for _, ln in near}) > 1


def _edge_rows(ordered: list[_Line]) -> list[_Line]:
    """Lines in the first ``_EDGE_LINES`` visual rows (lines sharing a baseline form one row)."""
    out: list[_Line] = []
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


def _mark_toc_headings(pages: list[_Page], toc: list[list[Any]]) -> list[tuple[str, int, int]]:
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


def _find_title(lines: list[_Line], start: int, key: str) -> tuple[int, int] | None:
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


def _attach_section_numbers(pages: list[_Page]) -> None:
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


def _heading_floor(pages: list[_Page]) -> float:
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


def _display_title(pages: list[_Page]) -> str:
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


def _mark_size_headings(pages: list[_Page]) -> None:
    """Short lines in a clearly larger font than the body become headings, level by size rank."""
    floor = _heading_floor(pages)
    if floor == math.inf:
        return
    candidates: list[_Line] = []
    for page in pages:
        per_block: dict[int, list[_Line]] = defaultdict(list)
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


def _page_items(page: _Page) -> list[_Item]:
    """Text blocks and tables of a page in reading order (column by column on 2-column pages)."""
    by_block: dict[int, list[_Line]] = defaultdict(list)
    rotated: list[_Line] = []
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


def _reading_order(items: list[_Item], width: float) -> list[_Item]:
    if not items:
        return []
    mid = width / 2 if width else (min(i.x0 for i in items) + max(i.x1 for i in items)) / 2
    gutter = 4.0
    total = sum(i.chars for i in items) or 1
    left = sum(i.chars for i in items if i.x1 <= mid + gutter)
    right = sum(i.chars for i in items if i.x0 >= mid - gutter)
    by_y = sorted(items, key=lambda i: (round(i.y0 / 3), i.x0))
    if left < 0.2 * total or right < 0.2 * total:
        return by_y  # one column
    # Two columns: blocks that cross the gutter split the page into bands; in each band the
    # left column is read before the right one.
    out: list[_Item] = []
    band: list[_Item] = []

    def flush() -> None:
        band.sort(key=lambda i: (i.x0 >= mid - gutter, i.y0, i.x0))
        out.extend(band)
        band.clear()

    for item in by_y:
        if item.x0 < mid - gutter and item.x1 > mid + gutter:
            flush()
            out.append(item)
        else:
            band.append(item)
    flush()
    return out


def _page_blocks(page: _Page) -> list[Block]:
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


def _item_blocks(lines: list[_Line], number: int, blocks: list[Block]) -> None:
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
    group: list[_Line] = []
    for row in rows:
        ln = row[0]
        if group and (
            ln.heading != group[-1].heading or (not ln.heading and _gap_breaks(group[-1], ln))
        ):
            _emit(group, number, blocks)
            group = []
        if len(row) > 1:  # pieces of one visual line: keep them on one line
            ln = _Line(
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


def _rows(lines: list[_Line]) -> list[list[_Line]]:
    """Lines grouped into visual rows by baseline (tolerance ~ a third of the font size),
    top to bottom, each row left to right."""
    rows: list[list[_Line]] = []
    for ln in sorted(lines, key=lambda x: x.base):
        if rows and abs(ln.base - rows[-1][0].base) <= max(1.5, 0.35 * ln.size):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    for row in rows:
        row.sort(key=lambda x: x.x0)
    return rows


def _emit(group: list[_Line], number: int, blocks: list[Block]) -> None:
    level = group[0].heading
    if level:
        title = next((ln.title for ln in group if ln.title), "")
        text = "\n".join(ln.text for ln in group)
        blocks.append(Block(text, "heading", page=number, level=level, title=title))
    else:
        _append_para(blocks, "\n".join(ln.text for ln in group), number)


def _gap_breaks(prev: _Line, line: _Line) -> bool:
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


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
