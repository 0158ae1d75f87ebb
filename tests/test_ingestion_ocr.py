"""OCR: generated scans (an image-only PDF, a mixed PDF, PNG, JPEG, a multi-page TIFF) read back
with their text, pages and sections, and the words of each page OCR read (``on_words``, in this
process and from a child process); the OCR settings; hostile images; the layout helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fathom.bench.support import docgen
from fathom.core.errors import ParseError
from fathom.ingestion import ImageLoader, LoadOptions, OcrSettings, PdfLoader, load_document, ocr
from fathom.ingestion.ocr import OcrLine, OcrPage, layout_page
from fathom.ingestion.page_words import Word, ocr_words, words_from_json, words_json
from fathom.ingestion.scans import OCR_SECTION_LEVEL

pytestmark = pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")


def words(text: str) -> list[str]:
    return text.lower().replace(".", " ").split()


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory):
    path = docgen.make_scanned_pdf(tmp_path_factory.mktemp("scan") / "scan.pdf")
    return path, PdfLoader().load(path)


@pytest.mark.slow
def test_scanned_pdf_text_pages_and_sections(scanned) -> None:
    _, doc = scanned
    assert doc.ocr_pages == (1, 2)
    assert [p.number for p in doc.pages] == [1, 2]
    for number, items in enumerate(docgen.SCAN_PAGES, 1):
        page = next(p for p in doc.pages if p.number == number)
        text = doc.text[page.start : page.end]
        for kind, written in items:
            assert " ".join(words(written)) in " ".join(words(text)), (kind, written, text)
    # headings set larger than the body become sections, as for a text PDF
    titles = [s.title for s in doc.sections if s.level < OCR_SECTION_LEVEL]
    assert titles == ["Harbour Pilots", "Tide Tables"]
    # the OCR text is marked: its innermost section says so
    tide = doc.text.index("spring tide")
    assert doc.section_at(tide) == "Tide Tables (OCR)"
    assert any("read by OCR" in w for w in doc.warnings)


@pytest.mark.slow
def test_mixed_pdf_keeps_its_text_page(tmp_path: Path) -> None:
    heard: dict[int, list[Word]] = {}
    options = LoadOptions(on_words=heard.__setitem__)
    doc = PdfLoader(options).load(docgen.make_mixed_pdf(tmp_path / "mixed.pdf"))
    assert doc.ocr_pages == (2,)
    assert list(heard) == [2]  # the words of the page OCR read, not of the text page
    assert "Kestrel Point" in " ".join(w.text for w in heard[2])
    assert all(0 <= w.x0 < w.x1 <= 1 and 0 <= w.y0 < w.y1 <= 1 for w in heard[2])  # fractions
    first, second = doc.pages
    assert docgen.MIXED_TEXT_PAGE[1][1] in doc.text[first.start : first.end]  # exact: text layer
    assert "kestrel point" in doc.text[second.start : second.end].lower()
    assert doc.section_at(first.start + 5) == "Lighthouse Keepers"
    assert doc.section_at(doc.text.index("Kestrel")).endswith("(OCR)")


@pytest.mark.slow
def test_ocr_never_and_always(tmp_path: Path, scanned) -> None:
    path, _ = scanned
    with pytest.raises(ParseError) as info:
        PdfLoader(LoadOptions(ocr=OcrSettings(mode="never"))).load(path)
    assert "ingest.ocr is never" in str(info.value) and str(info.value).startswith(str(path))
    text_pdf = docgen.make_pdf(tmp_path / "t.pdf", [docgen.MIXED_TEXT_PAGE], header=None)
    doc = PdfLoader(LoadOptions(ocr=OcrSettings(mode="always"))).load(text_pdf)
    assert doc.ocr_pages == (1,) and "clockwork" in doc.text


@pytest.mark.slow
def test_confidence_floor_makes_pages_unreadable(scanned) -> None:
    path, _ = scanned
    with pytest.raises(ParseError) as info:
        PdfLoader(LoadOptions(ocr=OcrSettings(min_confidence=1.0))).load(path)
    assert "OCR found none it could trust" in str(info.value)


def without_rapidocr(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "rapidocr" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_scanned_pdf_without_ocr_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_rapidocr(monkeypatch)
    path = docgen.make_image_only_pdf(tmp_path / "scan.pdf")
    with pytest.raises(ParseError) as info:
        PdfLoader().load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "OCR is unavailable: rapidocr is not installed" in message
    assert "pip install 'fathom[ocr]'" in message
    png = docgen.make_text_png(tmp_path / "a.png")
    with pytest.raises(ParseError, match=r"fathom\[ocr\]"):
        ImageLoader().load(png)


def test_png_and_jpeg(tmp_path: Path) -> None:
    for path in (
        docgen.make_text_png(tmp_path / "note.png"),
        docgen.make_text_jpeg(tmp_path / "note.jpg"),
    ):
        doc = load_document(path)
        assert doc.format == "image" and doc.ocr_pages == (1,)
        assert [p.number for p in doc.pages] == [1]
        for line in docgen.IMAGE_LINES:
            assert " ".join(words(line)) in " ".join(words(doc.text)), doc.text


def test_multipage_tiff_frames_are_pages(tmp_path: Path) -> None:
    heard: dict[int, list[Word]] = {}
    path = docgen.make_multipage_tiff(tmp_path / "minutes.tiff")
    doc = load_document(path, LoadOptions(on_words=heard.__setitem__))
    assert doc.ocr_pages == (1, 2)
    assert [" ".join(w.text for w in heard[n]).lower() for n in (1, 2)] == [
        " ".join(lines).lower() for lines in docgen.TIFF_PAGES
    ]
    for page, lines in zip(doc.pages, docgen.TIFF_PAGES, strict=True):
        assert " ".join(words(lines[0])) in " ".join(words(doc.text[page.start : page.end]))


def assert_one_line_error(path: Path, *fragments: str) -> None:
    with pytest.raises(ParseError) as info:
        load_document(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_noise_image_is_unreadable(tmp_path: Path) -> None:
    assert_one_line_error(docgen.make_noise_png(tmp_path / "noise.png"), "no readable text")


def test_zero_byte_png(tmp_path: Path) -> None:
    assert_one_line_error(docgen.make_empty_file(tmp_path / "empty.png"), "empty file")


def test_decompression_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    path = docgen.make_bomb_png(tmp_path / "bomb.png")
    assert path.stat().st_size < 10_000
    assert_one_line_error(path, "decompression bomb")


def test_bomb_under_pillows_limit_but_over_ours(tmp_path: Path) -> None:
    assert_one_line_error(docgen.make_bomb_png(tmp_path / "big.png", 9000, 9000), "megapixel limit")


def test_truncated_tiff(tmp_path: Path) -> None:
    assert_one_line_error(docgen.make_truncated_tiff(tmp_path / "cut.tiff"), "truncated or corrupt")


def test_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "fake.png"
    path.write_bytes(b"this is text, not a PNG" * 10)
    assert_one_line_error(path, "not an image")


# ---------------------------------------------------------------------------------------------
# the helpers, on synthetic input
# ---------------------------------------------------------------------------------------------


def test_spaces_rebuilt_from_ink_gaps() -> None:
    # "wordsrun" with a wide gap between its 5th and 6th characters (between 's' and 'r')
    chars = list("wordsrun")
    centres = np.array([5, 15, 25, 35, 45, 75, 85, 95], dtype=float)
    assert "".join(ocr._insert_spaces(chars, centres, [60.0])) == "words run"
    # never next to punctuation, never doubled
    assert "".join(ocr._insert_spaces(list("a,b"), np.array([5.0, 15, 45]), [30.0])) == "a,b"
    assert "".join(ocr._insert_spaces(list("a b"), np.array([5.0, 15, 45]), [30.0])) == "a b"
    assert "".join(ocr._insert_spaces(list("10"), np.array([5.0, 45]), [30.0])) == "10"
    # a gap the recogniser's own space fills is not used again, however late its neighbours'
    # positions come ("small launch" must not become "smal l launch")
    chars, centres = list("ll la"), np.array([10.0, 30, 42, 50, 60])
    assert "".join(ocr._insert_spaces(chars, centres, [25.0])) == "ll la"


def test_word_gaps_found_in_a_line_image() -> None:
    line = np.full((40, 200), 255, np.uint8)
    for x0, x1 in ((10, 20), (24, 34), (38, 48), (100, 110), (114, 124)):  # 3 + 2 glyphs
        line[10:30, x0:x1] = 0
    gaps = ocr._word_gaps(line)
    assert len(gaps) == 1 and 48 < gaps[0] < 100


def test_word_gaps_in_a_line_with_nothing_below_the_baseline() -> None:
    """A line in capitals ("REACT: SYNERGIZING") shows ink only down to its baseline, so its
    ink is shorter than the text height its gaps are measured against: a gap that is a word
    gap in a line with descenders is only a wide pair of capitals ("C T") in it."""
    line = np.full((40, 240), 255, np.uint8)
    glyphs = [(10, 20), (22, 32), (34, 44), (51, 61), (63, 73), (120, 130), (132, 142)]
    for x0, x1 in glyphs:  # ink 20 px high: letter gaps 2 px, a 7 px gap, a 47 px gap
        line[10:30, x0:x1] = 0
    with_descenders = ocr._word_gaps(line, descends=True)
    capitals = ocr._word_gaps(line, descends=False)
    assert len(with_descenders) == 2 and 44 < with_descenders[0] < 51
    assert len(capitals) == 1 and 73 < capitals[0] < 120


def test_layout_page_blocks_columns_and_sizes() -> None:
    def ln(text: str, x0: float, y0: float, x1: float, h: float = 20) -> OcrLine:
        return OcrLine(text, x0, y0, x1, y0 + h, 0.99)

    page = OcrPage(
        [
            ln("Left column first line", 0, 0, 90),
            ln("left column second line", 0, 22, 90),
            ln("Right column first line", 110, 0, 200),
            ln("A big heading", 0, 100, 90, h=34),
        ],
        confidence=0.99,
    )
    laid = layout_page(1, page, 200, 300, 0.5)
    blocks = {ln.text: ln.block for ln in laid.lines}
    assert blocks["Left column first line"] == blocks["left column second line"]
    assert blocks["Right column first line"] != blocks["Left column first line"]
    sizes = {ln.text: ln.size for ln in laid.lines}
    assert sizes["A big heading"] > sizes["Left column first line"]
    assert laid.width == 100 and laid.lines[0].x1 == 45  # points: pixels x scale


@pytest.mark.slow
def test_off_the_main_thread_ocr_runs_in_the_child_process(scanned) -> None:
    """Where SIGALRM cannot limit a parse, the file is read in a child process that is killed
    at the limit; OCR runs there with the same settings, and its pages come back."""
    import threading

    path, _ = scanned
    box: dict[str, object] = {}
    heard: dict[int, list[Word]] = {}

    def work() -> None:
        options = LoadOptions(timeout_s=300, ocr=OcrSettings(dpi=150), on_words=heard.__setitem__)
        try:
            box["doc"] = load_document(path, options)
        except ParseError as exc:
            box["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    doc = box.get("doc")
    assert doc is not None, box.get("error")
    assert doc.ocr_pages == (1, 2) and doc.section_at(doc.text.index("spring")).endswith("(OCR)")
    # the words of its pages come back with the document
    assert sorted(heard) == [1, 2] and "spring" in [w.text for w in heard[2]]


def test_ocr_words_split_each_line_by_character_position() -> None:
    lines = [
        OcrLine("Tide gauges", 100, 50, 220, 70, 0.9),
        OcrLine("record", 100, 80, 160, 100, 0.9),
    ]
    words = ocr_words(lines, 400, 200)  # fractions of a 400 × 200 pixel image
    assert [(w.text, w.line) for w in words] == [("Tide", 0), ("gauges", 0), ("record", 1)]
    tide, gauges, record = words
    per_char = 120 / 11 / 400  # the line's width over its 11 characters
    assert tide.x0 == 0.25 and tide.x1 == pytest.approx(0.25 + 4 * per_char)
    assert gauges.x0 == pytest.approx(0.25 + 5 * per_char) and gauges.x1 == pytest.approx(0.55)
    assert (tide.y0, tide.y1, record.y0, record.y1) == (0.25, 0.35, 0.4, 0.5)
    rows = words_json(words)
    assert rows[1] == ["gauges", 0.3864, 0.25, 0.55, 0.35, 0]  # four decimals
    again = words_from_json(rows)
    assert [w.text for w in again] == ["Tide", "gauges", "record"]
    assert max(abs(a.x1 - b.x1) for a, b in zip(again, words, strict=True)) < 1e-4
    with pytest.raises(ValueError):
        words_from_json([[7, 0, 0, 1, 1, 0]])
