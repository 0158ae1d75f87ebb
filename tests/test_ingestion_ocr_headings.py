"""Numbered headings in the body's size on pages read by OCR: a generated scan whose headings are
bold capitals or title case at the body's height gets its sections (still marked as OCR text);
numbered list items, sentences starting with a number, table rows, code, lists of contents and
lines continuing a paragraph stay body text."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.chunking import SemanticChunker
from fathom.chunking.tokens import WordCounter
from fathom.ingestion import PdfLoader, ocr
from fathom.ingestion.pdf_layout import (
    Line,
    Page,
    page_blocks,
)
from fathom.ingestion.scan_layout import mark_numbered_headings, opening_title
from fathom.ingestion.scans import OCR_SECTION_LEVEL

BODY = 10.0  # points: the body's font size in the hand-built pages
STEP = 14.0  # points between the baselines of a paragraph's lines


def line(text: str, x0: float, base: float, block: int = 0, x1: float | None = None) -> Line:
    """A body-size line of ``text`` on baseline ``base`` (about 5 points per character)."""
    end = x0 + 5.0 * len(text) if x1 is None else x1
    return Line(text, x0, base - 10.0, end, base + 3.0, BODY, block, base)


def headings(lines: list[Line], width: float = 612.0) -> list[tuple[str, int]]:
    page = Page(1, width, 792.0, lines)
    mark_numbered_headings([page])
    return [(b.text.replace("\n", " "), b.level) for b in page_blocks(page) if b.kind == "heading"]


PROSE = "The harbour master keeps the register of every vessel that enters the port."


def test_opening_title() -> None:
    def title(lines: list[Line]) -> str:
        return opening_title([Page(1, 612.0, 792.0, lines)])

    # two rows in capitals in a block of their own, the authors below
    assert (
        title(
            [
                line("REACT: SYNERGIZING REASONING AND", 100, 100, 0),
                line("ACTING IN LANGUAGE MODELS", 100, 114, 0),
                line("Shunyu Yao, Jeffrey Zhao", 100, 150, 1),
            ]
        )
        == "REACT: SYNERGIZING REASONING AND ACTING IN LANGUAGE MODELS"
    )
    # in capitals, set close above the text it opens (one block)
    assert title([line("HARBOUR PILOTS", 100, 100, 0), line(PROSE, 100, 114, 0, x1=500)]) == (
        "HARBOUR PILOTS"
    )
    # a short block in title case
    assert title([line("Annual Report", 100, 100, 0), line(PROSE, 100, 140, 1, x1=500)]) == (
        "Annual Report"
    )
    # not a title: a numbered section heading, a sentence, a paragraph of four rows
    assert title([line("1 INTRODUCTION", 100, 100, 0), line(PROSE, 100, 140, 1)]) == ""
    assert title([line(PROSE, 100, 100, 0, x1=500)]) == ""
    assert title([line(f"Row {i} Of Text", 100, 100 + STEP * i, 0) for i in range(4)]) == ""


def test_numbered_headings_and_their_levels() -> None:
    lines = [
        line("1 INTRODUCTION", 100, 100, 0),
        line(PROSE, 100, 130, 1, x1=500),
        line("3.1 Hull Inspection", 100, 170, 2),
        line(PROSE, 100, 200, 3, x1=500),
        line("B.2.1 REACT TRAJECTORY", 100, 240, 4),
        line(PROSE, 100, 270, 5, x1=500),
    ]
    assert headings(lines) == [
        ("1 INTRODUCTION", 1),
        ("3.1 Hull Inspection", 2),
        ("B.2.1 REACT TRAJECTORY", 3),
    ]


def test_a_number_set_apart_joins_its_title() -> None:
    # OCR reads a widely spaced "4" as a box of its own, often grouped with the text below
    lines = [
        line("DECISION MAKING TASKS", 123, 100, 0),
        line("4", 107, 99.5, 1, x1=114),
        line(PROSE, 100, 124, 1, x1=500),
        line("A", 107, 160, 2, x1=114),
        line("PROMPTS", 123, 160, 3),
    ]
    assert headings(lines) == [("4 DECISION MAKING TASKS", 1), ("A PROMPTS", 1)]


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(  # a numbered list, each item alone on its line, in title case
            [line(PROSE, 100, 100, 0, x1=500)]
            + [
                line(f"{n}. {item}", 100, 130 + STEP * n, 1)
                for n, item in enumerate(("Anchor Chain", "Fuel Gauge", "Bilge Pump"), 1)
            ],
            id="list-run",
        ),
        pytest.param(  # list items in sentence case, and one ending its sentence
            [
                line("1. check the anchor chain before leaving", 100, 100, 0),
                line("2. Log The Fuel Level In The Book.", 100, 140, 1),
            ],
            id="list-sentences",
        ),
        pytest.param(  # a sentence that starts with a number
            [line("12 pilots boarded the ships at dawn", 100, 100, 0)],
            id="sentence",
        ),
        pytest.param(  # a table row: other cells share the row
            [
                line("2 HotpotQA", 100, 100, 0),
                line("27.4", 300, 100, 1),
                line("31.2", 400, 100, 2),
            ],
            id="table-row",
        ),
        pytest.param(  # an entry of a list of contents: its page number shares the row
            [
                line(PROSE, 100, 100, 0, x1=500),
                line("1 INTRODUCTION", 100, 140, 1),
                line("3", 495, 140, 2, x1=500),
                line(PROSE, 100, 180, 3, x1=500),
            ],
            id="contents-row",
        ),
        pytest.param(  # a list of contents: section numbers and titles, without text
            [line("CONTENTS", 100, 80, 0)]
            + [
                line(entry, 100 if "." not in entry else 112, base, n + 1)
                for n, (entry, base) in enumerate(
                    [
                        ("1 INTRODUCTION", 110),
                        ("1.1 Scope", 124),
                        ("2 RELATED WORK", 150),
                        ("2.1 Retrieval", 164),
                        ("3 METHODS", 190),
                        ("3.1 Data", 204),
                    ]
                )
            ],
            id="contents-page",
        ),
        pytest.param(  # a row of a record layout in a code block
            [
                line("LiteralList:", 118, 100, 0),
                line("4", 119, 114, 1, x1=127),
                line("CARD32 N_LITERALS", 137, 114, 2),
                line("12*N_LITERALS", 117, 128, 3),
            ],
            id="code",
        ),
        pytest.param(  # the next line of a paragraph that runs on into it
            [
                line("The crew repaired the hull and then counted", 100, 100, 0, x1=500),
                line("3 Cargo Holds On The Lower Deck", 100, 100 + STEP, 0),
            ],
            id="continuation",
        ),
        pytest.param(  # page numbers, equation numbers, references, figure labels
            [
                line("12", 300, 100, 0),
                line("(3)", 480, 140, 1),
                line("[4] Yao S. et al. ReAct: Synergizing Reasoning", 100, 180, 2),
                line("Figure 2: Comparison Of Four Methods", 100, 220, 3),
                line("0 Example", 100, 260, 4),
            ],
            id="numbers-not-sections",
        ),
    ],
)
def test_not_headings(lines: list[Line]) -> None:
    assert headings(lines) == []


def test_other_column_may_share_the_row() -> None:
    lines = [
        line("2 RELATED WORK", 60, 100, 0),
        line("and the pilots of the other column read on", 320, 100, 1, x1=560),
    ]
    assert headings(lines) == [("2 RELATED WORK", 1)]


# ---------------------------------------------------------------------------------------------
# A generated scan: headings in bold at the body's size, read by OCR
# ---------------------------------------------------------------------------------------------

NUMBERED_PAGES: list[list[docgen.Item]] = [
    [
        ("h1", "1 HARBOUR PILOTS"),
        ("p", "Harbour pilots guide large vessels through narrow channels into port."),
        ("h2", "1.1 Boarding The Ship"),
        ("p", "A pilot boards the ship from a small launch near the breakwater."),
        ("p", "The launch carries:\n1. Rope Ladders\n2. Signal Flags\n3. Spare Radios"),
        ("p", "2 pilots boarded the tanker at dawn and stayed on the bridge all day."),
    ],
    [
        ("h1", "2 TIDE TABLES"),
        ("p", "The spring tide at Kestrel Point rises four metres above the chart datum."),
        ("p", "Neap tides come twice a month when the moon is at a quarter."),
    ],
]


def make_plain_scan(path: Path, pages: list[list[docgen.Item]]) -> Path:
    """An image-only PDF of ``pages`` with every heading in bold at the body's size."""
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    text_pdf = docgen.make_pdf(
        path.with_suffix(".text.pdf"), pages, header=None, footer=None, plain_headings=True
    )
    doc = pymupdf.open()
    with pymupdf.open(text_pdf) as src:
        for page in src:
            pix = page.get_pixmap(dpi=docgen.SCAN_DPI, colorspace=pymupdf.csGRAY)
            new = doc.new_page(width=page.rect.width, height=page.rect.height)
            new.insert_image(new.rect, pixmap=pix)
    doc.save(path, deflate=True, no_new_id=True)
    doc.close()
    return path


@pytest.mark.slow
@pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")
def test_scan_with_body_size_numbered_headings_gets_its_sections(tmp_path: Path) -> None:
    doc = PdfLoader().load(make_plain_scan(tmp_path / "scan.pdf", NUMBERED_PAGES))
    assert doc.ocr_pages == (1, 2)
    outline = [(s.title, s.level) for s in doc.sections if s.level < OCR_SECTION_LEVEL]
    assert outline == [
        ("1 HARBOUR PILOTS", 1),
        ("1.1 Boarding The Ship", 2),
        ("2 TIDE TABLES", 1),
    ]
    # the OCR text is still marked, inside its section
    assert doc.section_at(doc.text.index("breakwater")) == "1.1 Boarding The Ship (OCR)"
    assert doc.section_at(doc.text.index("spring tide")) == "2 TIDE TABLES (OCR)"
    # the list items and the sentence starting with a number stay in the text, not headings
    for body in ("Signal Flags", "pilots boarded the tanker"):
        assert doc.section_at(doc.text.index(body)) == "1.1 Boarding The Ship (OCR)"
    chunks = SemanticChunker(WordCounter()).split(doc)
    by_section = {c.section for c in chunks}
    assert {"1.1 Boarding The Ship (OCR)", "2 TIDE TABLES (OCR)"} <= by_section
    tide = next(c for c in chunks if "spring tide" in c.text)
    assert tide.section == "2 TIDE TABLES (OCR)" and tide.page_start == 2


@pytest.mark.slow
@pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")
def test_a_scan_is_titled_by_its_opening_block(tmp_path: Path) -> None:
    """A scan's title in capitals at the body's size measures no larger than its text, so the
    type size cannot tell it: the first page's opening block is the title when it reads as one
    (a numbered section heading does not)."""
    titled = [[("h1", "HARBOUR PILOTS OF KESTREL POINT"), *NUMBERED_PAGES[0][1:]]]
    doc = PdfLoader().load(make_plain_scan(tmp_path / "titled.pdf", titled))
    assert doc.ocr_pages == (1,)
    assert doc.title == "HARBOUR PILOTS OF KESTREL POINT"
