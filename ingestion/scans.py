"""Scanned pages in a PDF: which pages to read by OCR, reading them into the ``Page`` records
the PDF layout works on, and marking the text they give as OCR text."""

from __future__ import annotations

import itertools
import math
from typing import Any

from fathom.core.base import SectionSpan
from fathom.core.errors import ParseError
from fathom.ingestion.ocr import (
    OCR_INSTALL,
    OcrMode,
    OcrSettings,
    engine,
    layout_page,
    ocr_problem,
)
from fathom.ingestion.page_words import ocr_words
from fathom.ingestion.pdf_layout import Page, ranges

FEW_CHARS = 40  # a page with fewer characters of text under a page-sized image is a scan
IMAGE_COVER = 0.5  # share of the page an image must cover for that
MAX_RENDER_PIXELS = 40_000_000  # a page rendered for OCR is kept under this (lower resolution)


def page_chars(page: Page) -> int:
    if page.fallback_text is not None:
        return len(page.fallback_text.strip())
    return sum(len(ln.text.strip()) for ln in page.lines) + sum(
        len(r) for t in page.tables for r in t.rows
    )


def _image_cover(pdf_page: Any) -> float:
    """The share of the page that its images cover (overlaps counted twice, capped at 1)."""
    area = abs(pdf_page.rect.width * pdf_page.rect.height) or 1.0
    covered = 0.0
    try:
        infos = pdf_page.get_image_info()
    except Exception:  # a damaged image list: treat the page as having no images
        return 0.0
    for info in infos:
        x0, y0, x1, y1 = info.get("bbox", (0, 0, 0, 0))
        clip = pdf_page.rect & (x0, y0, x1, y1)
        if not clip.is_empty:
            covered += abs(clip.width * clip.height)
    return min(1.0, covered / area)


def ocr_candidates(pymupdf_doc: Any, pages: list[Page], mode: OcrMode) -> list[int]:
    """Indices of the pages to read by OCR: every page for ``always``; for ``auto`` the pages
    with no text, or with a few characters over an image covering most of the page."""
    if mode == "never":
        return []
    if mode == "always":
        return list(range(len(pages)))
    out = []
    for i, page in enumerate(pages):
        chars = page_chars(page)
        if chars >= FEW_CHARS:
            continue
        try:
            cover = _image_cover(pymupdf_doc.load_page(i))
        except Exception:  # a page PyMuPDF cannot load is not rendered either
            continue
        if cover >= (0.05 if chars == 0 else IMAGE_COVER):
            out.append(i)
    return out


def ocr_document_pages(
    name: str,
    pymupdf: Any,
    doc: Any,
    pages: list[Page],
    settings: OcrSettings,
    warnings: list[str],
    on_page: Any = None,
    on_words: Any = None,
) -> tuple[int, ...]:
    """Read by OCR the pages of ``doc`` that need it, replacing their ``Page`` contents; the
    numbers of the pages read (``on_words(number, words)`` hears each one's words). A page OCR
    cannot read with ``settings.min_confidence`` stays empty, and ``warnings`` says so; without
    OCR installed, a document with no text at all is a ParseError naming the install, a mixed
    one a warning."""
    todo = ocr_candidates(doc, pages, settings.mode)
    if not todo:
        return ()
    problem = ocr_problem()
    if problem is not None:
        _without_ocr(name, pages, todo, problem, warnings)
        return ()
    import numpy as np

    eng = engine(settings.threads)
    if on_page is not None:
        on_page(0, len(todo))  # how many pages OCR will read (the time limit grows by them)
    done: list[int] = []
    unreadable: list[str] = []
    for count, i in enumerate(todo):
        pdf_page = doc.load_page(i)
        dpi = render_dpi(pdf_page.rect, settings.dpi)
        try:
            pix = pdf_page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
        except Exception as exc:  # PyMuPDF raises its own and C-level errors on damaged pages
            unreadable.append(f"page {i + 1}: cannot be rendered for OCR ({type(exc).__name__})")
            continue
        gray = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)
        result = eng.read(gray[:, : pix.width])
        if on_page is not None:
            on_page(count + 1, len(todo))
        if not result.lines or result.confidence < settings.min_confidence:
            unreadable.append(_unreadable(i + 1, result, settings))
            if settings.mode == "always" and page_chars(pages[i]):
                continue  # keep the text layer it has
            pages[i].lines, pages[i].tables, pages[i].fallback_text = [], [], None
            continue
        laid = layout_page(i + 1, result, pix.width, pix.height, 72.0 / dpi)
        pages[i].lines, pages[i].tables, pages[i].fallback_text = laid.lines, [], None
        done.append(i + 1)
        if on_words is not None:
            on_words(i + 1, ocr_words(result.lines, pix.width, pix.height))
    warnings.extend(unreadable)
    if done:
        warnings.append(f"page(s) {ranges(done)} read by OCR")
    return tuple(done)


def _without_ocr(
    name: str, pages: list[Page], todo: list[int], problem: str, warnings: list[str]
) -> None:
    """OCR is not installed: a ParseError naming the install when the document has no text at
    all, else a warning that the scanned pages were not read."""
    if all(page_chars(p) == 0 for p in pages):
        raise ParseError(
            name, f"no text layer (scanned?), and OCR is unavailable: {problem}", OCR_INSTALL
        )
    warnings.append(
        f"page(s) {ranges([i + 1 for i in todo])} look scanned and were not read: OCR is "
        f"unavailable ({problem}) — {OCR_INSTALL}"
    )


def render_dpi(rect: Any, dpi: int) -> int:
    """``dpi``, lowered for a page so large that rendering it would pass MAX_RENDER_PIXELS."""
    pixels = rect.width * rect.height * (dpi / 72) ** 2
    if pixels > MAX_RENDER_PIXELS:
        dpi = max(36, int(dpi * math.sqrt(MAX_RENDER_PIXELS / pixels)))
    return dpi


def _unreadable(number: int, result: Any, settings: OcrSettings) -> str:
    """Why page ``number`` read by OCR is left empty."""
    if not result.lines:
        return f"page {number}: OCR found no text"
    return (
        f"page {number}: unreadable by OCR (confidence {result.confidence:.2f}, under "
        f"{settings.min_confidence:g})"
    )


def mark_ocr_sections(assembled: Any, ocr_pages: tuple[int, ...]) -> Any:
    """``assembled`` with the text OCR read marked as its own innermost sections, titled
    "<section> (OCR)" (or "OCR text" outside any section), so a chunk, and every source an
    answer cites, says when its text came from OCR. Each OCR page is marked on its own, so a
    chunk of OCR text stays on its page and cites the page of the scan it is on (a heading at
    the foot of a page still goes with the text it heads, as the chunker keeps them)."""
    if not ocr_pages:
        return assembled
    from dataclasses import replace

    wanted = set(ocr_pages)
    runs = [(p.start, p.end) for p in assembled.pages if p.number in wanted and p.end > p.start]
    bounds = sorted({x for s in assembled.sections for x in (s.start, s.end)})
    marks: list[SectionSpan] = []
    for start, end in runs:
        cuts = [start, *(b for b in bounds if start < b < end), end]
        for a, b in itertools.pairwise(cuts):
            outer = _innermost(assembled.sections, a)
            title = f"{outer} (OCR)" if outer else "OCR text"
            marks.append(SectionSpan(title, OCR_SECTION_LEVEL, a, b, headed=False))
    sections = tuple(sorted((*assembled.sections, *marks), key=lambda s: (s.start, s.level)))
    return replace(assembled, sections=sections)


OCR_SECTION_LEVEL = 7  # deeper than any heading (1-6): the innermost section wins


def _innermost(sections: Any, offset: int) -> str:
    title, level = "", 0
    for sec in sections:
        if sec.start <= offset < sec.end and sec.level >= level:
            title, level = sec.title, sec.level
    return title
