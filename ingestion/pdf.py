"""PDF loader: PyMuPDF text in reading order, pages, headings, tables; pdfplumber as a fallback.

PyMuPDF (``pymupdf``/``fitz``) and pdfplumber are imported inside the functions that use them,
so importing this module (and ``python cli.py --help``) stays instant.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    assemble,
    make_document,
    read_source,
    sensible_title,
    table_row,
)
from fathom.ingestion.metadata import guarded, merge, pdf_properties, title_block, with_text
from fathom.ingestion.options import LoadOptions
from fathom.ingestion.pdf_layout import (
    MIN_RULE,
    Line,
    Page,
    Table,
    attach_section_numbers,
    display_title,
    mark_headers_footers,
    mark_size_headings,
    mark_toc_headings,
    page_blocks,
    ranges,
)
from fathom.ingestion.scan_layout import mark_numbered_headings, opening_title
from fathom.ingestion.scans import mark_ocr_sections, ocr_document_pages


# Headers/footers: a normalised line at the top or bottom of >= this share of pages is removed.
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

    def __init__(self, options: LoadOptions | None = None, *, tables: bool = True) -> None:
        self.options = options or LoadOptions()
        self.tables = tables

    def load(self, path: str | Path) -> Document:
        """Read the PDF into a Document; ParseError for corrupt, encrypted or text-less files."""
        name = str(path)
        data = read_source(path, self.options.max_bytes)
        if b"%PDF-" not in data[:1024]:
            raise ParseError(name, "not a PDF (no %PDF header)", "check the file type")
        pymupdf, doc = _open_pdf(name, data)
        with doc:
            self._unlock(name, doc)
            n_pages = _page_count(name, doc)
            warnings: list[str] = []
            if getattr(doc, "is_repaired", False):
                warnings.append(
                    "the PDF was damaged and has been repaired; some text may be missing"
                )
            pages = [self._read_page(pymupdf, doc, i, warnings) for i in range(n_pages)]
            _fallback_pages(data, pages, warnings)
            ocr_pages = ocr_document_pages(
                name,
                pymupdf,
                doc,
                pages,
                self.options.ocr,
                warnings,
                self.options.on_page,
                self.options.on_words,
            )
            toc = _read_toc(doc, warnings)
            meta_title = (doc.metadata or {}).get("title", "")
            properties = guarded(pdf_properties, doc)

        extra_sections = mark_layout(pages, toc, ocr_pages)
        meta = merge([properties, guarded(title_block, pages)])
        blocks = [b for page in pages for b in page_blocks(page)]
        meta_title = sensible_title(meta_title) or layout_title(pages, ocr_pages)
        assembled = assemble(blocks, n_pages=n_pages, extra_sections=extra_sections)
        if not assembled.text.strip():
            raise _no_text(name, self.options.ocr.mode)
        assembled = mark_ocr_sections(assembled, ocr_pages)
        empty = [p.number for p in assembled.pages if p.start == p.end]
        if empty:
            warnings.append(
                f"no text on page(s) {ranges(empty)} (blank, image-only, or only a header)"
            )
        return make_document(
            path,
            data,
            self.format,
            assembled,
            meta_title=meta_title,
            warnings=warnings,
            ocr_pages=ocr_pages,
            meta=with_text(meta, assembled),
        )

    def _unlock(self, name: str, doc: Any) -> None:
        """Open an encrypted ``doc`` with the password; ParseError without the right one."""
        if not doc.needs_pass:
            return
        if not self.options.password:
            raise ParseError(
                name,
                "encrypted (needs a password)",
                "pass its password or decrypt it first",
            )
        if not doc.authenticate(self.options.password):
            raise ParseError(name, "encrypted and the password is wrong", "check the password")

    def _read_page(self, pymupdf: Any, doc: Any, index: int, warnings: list[str]) -> Page:
        """Lines (with font size and position) and tables of one page; empty on failure."""
        try:
            page = doc.load_page(index)
            result = Page(index + 1, float(page.rect.width), float(page.rect.height))
            flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
            result.tables = _find_tables(page, flags, warnings) if self.tables else []
            content = page.get_text("dict", flags=flags)
            result.lines, unmapped = _page_lines(content, result.tables)
            if not result.lines and not result.tables:
                result.maybe_text = bool(page.get_fonts(full=True))
        except Exception as exc:  # one bad page must not lose the document: pdfplumber tries it
            warnings.append(f"page {index + 1}: PyMuPDF failed ({type(exc).__name__}: {exc})")
            return Page(index + 1, 0.0, fallback_text="")
        if unmapped:
            warnings.append(
                f"page {index + 1}: dropped {unmapped} glyphs without a Unicode mapping"
            )
        return result


def _open_pdf(name: str, data: bytes) -> tuple[Any, Any]:
    """PyMuPDF and the document it opens from ``data``; ParseError when either fails."""
    try:
        pymupdf = import_pymupdf()
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParseError(name, f"PyMuPDF is not installed ({exc})", "pip install pymupdf") from None
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception:  # PyMuPDF raises many kinds on a damaged file: all mean the same
        raise ParseError(
            name,
            "cannot be opened (corrupt or truncated PDF)",
            "re-download or re-export the file",
        ) from None
    return pymupdf, doc


def _page_count(name: str, doc: Any) -> int:
    """The number of pages; ParseError when there are none."""
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
    return n_pages


def _read_toc(doc: Any, warnings: list[str]) -> list[list[Any]]:
    """The outline as ``[level, title, page]`` entries; empty when it cannot be read."""
    try:
        return doc.get_toc(simple=True)
    except Exception as exc:  # a damaged outline: sections come from the headings
        warnings.append(
            f"its table of contents could not be read ({type(exc).__name__}); "
            "sections come from the headings"
        )
        return []


def mark_layout(
    pages: list[Page], toc: list[list[Any]], ocr_pages: tuple[int, ...]
) -> list[tuple[str, int, int]]:
    """Mark the running headers and footers, the headings (from the outline when there is one,
    else by font size, and on the pages read by OCR also by section number) and their section
    numbers; return the outline entries no line matched (each starts at its page). The image
    loader lays out its OCR pages with this too."""
    mark_headers_footers(pages)
    extra_sections: list[tuple[str, int, int]] = []
    if toc:
        extra_sections = mark_toc_headings(pages, toc)
    else:
        mark_size_headings(pages)
        # A scan's text boxes show no font weight: a heading in bold at the body's size is
        # found by its number. Pages with a text layer keep to the outline and font sizes.
        scanned = set(ocr_pages)
        mark_numbered_headings([p for p in pages if p.number in scanned])
    attach_section_numbers(pages)
    return extra_sections


def layout_title(pages: list[Page], ocr_pages: tuple[int, ...]) -> str:
    """The title the layout shows: the largest short type at the top of the first page, or,
    when OCR read that page (its boxes do not tell a title in capitals by size), its opening
    block when that reads as a title; '' for neither."""
    title = sensible_title(display_title(pages))
    first = next((p.number for p in pages if p.lines), None)
    if not title and first is not None and first in ocr_pages:
        title = sensible_title(opening_title(pages))
    return title


def _find_tables(page: Any, flags: int, warnings: list[str]) -> list[Table]:
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
    tables: list[Table] = []
    for tab in candidates:
        grid = [
            [_cell_words(words, bbox) if bbox else None for bbox in row.cells] for row in tab.rows
        ]
        rows = _grid_rows(grid)
        if len(rows) >= 2 and any(" | " in r for r in rows):
            tables.append(Table(tuple(tab.bbox), rows))
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
                if abs(ay - by) <= 1 and abs(ax - bx) >= MIN_RULE:
                    hs.append((min(ax, bx), max(ax, bx), ay))
                elif abs(ax - bx) <= 1 and abs(ay - by) >= MIN_RULE:
                    vs.append((min(ay, by), max(ay, by), ax))
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                w, h = abs(x1 - x0), abs(y1 - y0)
                x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
                if h <= 2 and w >= MIN_RULE:
                    hs.append((x0, x1, y0))
                elif w <= 2 and h >= MIN_RULE:
                    vs.append((y0, y1, x0))
                elif w >= MIN_RULE and h >= MIN_RULE and (w < big_w or h < big_h):
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
    if x1 - x0 < MIN_RULE or bottom - top < MIN_RULE:
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


def _page_lines(content: dict[str, Any], tables: list[Table]) -> tuple[list[Line], int]:
    """Text lines of a page outside tables, and the number of unmappable glyphs dropped."""
    lines: list[Line] = []
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
            lines.append(Line(text, x0, y0, x1, y1, size, bno, base, horizontal=horizontal))
    return lines, unmapped


def _inside_any(x0: float, y0: float, x1: float, y1: float, tables: list[Table]) -> bool:
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return any(t.bbox[0] <= cx <= t.bbox[2] and t.bbox[1] <= cy <= t.bbox[3] for t in tables)


def _fallback_pages(data: bytes, pages: list[Page], warnings: list[str]) -> None:
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


def _no_text(name: str, ocr_mode: str) -> ParseError:
    """The error for a PDF with no text: none in its text layer, and none OCR could trust
    (or OCR off)."""
    if ocr_mode == "never":
        return ParseError(
            name,
            "no extractable text (scanned?) and ingest.ocr is never",
            'set ingest.ocr = "auto" to read it by OCR, or convert it first',
        )
    return ParseError(
        name,
        "no extractable text (scanned?), and OCR found none it could trust",
        "OCR needs a clearer scan (or a lower ingest.ocr_min_confidence); or convert it",
    )
