"""How OCR text is marked in a document's sections (no OCR model needed)."""

from __future__ import annotations

from fathom.core.base import PageSpan, SectionSpan
from fathom.ingestion.clean import Assembled
from fathom.ingestion.scans import OCR_SECTION_LEVEL, mark_ocr_sections


def _assembled(n_pages: int, sections: tuple[SectionSpan, ...] = ()) -> Assembled:
    pages = tuple(PageSpan(i + 1, i * 100, i * 100 + 98) for i in range(n_pages))
    return Assembled("x" * (n_pages * 100), pages, sections, ())


def _marks(assembled: Assembled) -> list[tuple[str, int, int]]:
    return [(s.title, s.start, s.end) for s in assembled.sections if s.level == OCR_SECTION_LEVEL]


def test_consecutive_ocr_pages_are_one_stretch_so_a_paragraph_over_the_break_is_one_chunk():
    doc = _assembled(4, (SectionSpan("Results", 1, 0, 398),))
    marked = mark_ocr_sections(doc, (2, 3))
    # pages 2 and 3 (text 100–298): one mark, not one per page; page 1 and 4 are a text layer's
    assert _marks(marked) == [("Results (OCR)", 100, 298)]


def test_ocr_runs_break_at_a_text_page_and_at_the_document_s_own_sections():
    doc = _assembled(5, (SectionSpan("Intro", 1, 0, 250), SectionSpan("Method", 1, 250, 498)))
    marked = mark_ocr_sections(doc, (1, 2, 3, 5))
    assert _marks(marked) == [
        ("Intro (OCR)", 0, 250),  # pages 1–3, cut where "Method" starts
        ("Method (OCR)", 250, 298),
        ("Method (OCR)", 400, 498),  # page 5, after the text page 4
    ]
    assert mark_ocr_sections(doc, ()) is doc
