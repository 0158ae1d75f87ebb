"""Visual grounding: a cited chunk's page rendered with the chunk highlighted — checked by
sampling the PNG's pixels against where PyMuPDF drew each word — on a generated PDF, and on an
image and a scan read by OCR at ingest, whose words the collection keeps so that rendering runs
no OCR (and runs it again for a changed file or a collection without them); the words replaced
and removed with their document; the matching rule; a passage of a text format in its context;
and the failures (the file gone or changed, OCR missing)."""

from __future__ import annotations

import dataclasses
import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.core.errors import FathomError
from fathom.index.collection import Collection
from fathom.index.grounding import PASSAGE_MARKS, SENTENCE_MARKS, save_shown, show_chunk
from fathom.index.ingest import ingest_paths
from fathom.index.ocr_words import FOLDER, read_words, words_path
from fathom.ingestion import ocr, page_image
from fathom.ingestion.page_image import DPI, Word, match_words, render_page

needs_ocr = pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")

TIDE = (
    "Tide gauges record the height of the sea every six minutes along the northern coast. "
    "Each gauge sends its readings by radio to the harbour office in Kestrel Point, where a "
    "clerk plots them on a long paper chart. Old charts are kept in the basement archive for "
    "fifty years."
)
TIDE_SENTENCE = (
    "Each gauge sends its readings by radio to the harbour office in Kestrel Point, where a "
    "clerk plots them on a long paper chart."
)
LAMPS = (
    "Lighthouse lamps burned whale oil until paraffin replaced it in the late century. A "
    "keeper trimmed the wick at dusk and wound the clockwork that turned the great lens, "
    "then logged the weather in a leather book beside the stair."
)
PAGES = [[("h1", "Tide Gauges"), ("p", TIDE), ("h1", "Lighthouse Lamps"), ("p", LAMPS)]]


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FATHOM_EMBEDDER__NAME", "hashing:64")  # no model to load


def _collection(folder: Path, name: str = "g") -> Collection:
    cfg = load_config()
    ingest_paths(cfg, [folder], name)
    return Collection.open(cfg, name)


class _OcrReads:
    """Every page OCR reads from now on, counted; while ``allowed`` is False a read fails the
    test (rendering must use the words kept at ingest)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, allowed: bool = False) -> None:
        self.count, self.allowed = 0, allowed
        real = ocr.OcrEngine.read

        def read(engine: ocr.OcrEngine, image: object) -> ocr.OcrPage:
            self.count += 1
            assert self.allowed, "OCR read a page while it was being shown"
            return real(engine, image)

        monkeypatch.setattr(ocr.OcrEngine, "read", read)


def _entry(coll: Collection, name: str):
    [entry] = [d for d in coll.manifest.documents if Path(d.path).name == name]
    return entry


def _kept_text(coll: Collection, name: str) -> dict[int, str]:
    """The words the collection keeps for document ``name``, as text per page."""
    kept = read_words(coll.data_dir, _entry(coll, name))
    return {n: " ".join(w.text for w in words) for n, words in kept.items()}


def _chunk_with(coll: Collection, text: str):
    found = [c for c in coll.store.all() if text in c.text]
    assert len(found) == 1, [c.text for c in coll.store.all()]
    return found[0]


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def _ratios(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Green and blue over red, and whether red is bright enough to tell: a colour multiplied
    into grey ink or white paper keeps its ratios, so they name it at any shade."""
    red = np.maximum(rgb[..., 0], 1)
    return rgb[..., 1] / red, rgb[..., 2] / red, rgb[..., 0] > 100


def _highlighted(rgb: np.ndarray) -> np.ndarray:
    """Pixels painted yellow or orange (ink and paper are grey: blue as high as red)."""
    _, blue, bright = _ratios(rgb)
    return bright & (blue < 0.7)


def _strong(rgb: np.ndarray) -> np.ndarray:
    """Pixels painted the sentence's orange (the passage's yellow keeps green near red)."""
    green, blue, bright = _ratios(rgb)
    return bright & (green < 0.8) & (blue < 0.35)


def _band(rgb: np.ndarray, box, scale: float) -> np.ndarray:
    """The middle of a text box (points × ``scale`` = pixels): its full width, the central
    40 % of its height, where no neighbouring line's box reaches."""
    x0, y0, x1, y1 = (v * scale for v in box)
    h = y1 - y0
    return rgb[int(y0 + 0.3 * h) : int(y1 - 0.3 * h) + 1, int(x0) : int(x1) + 1]


def _lines(pdf_page) -> list[tuple[str, tuple[float, float, float, float]]]:
    """Each text line PyMuPDF finds on the page: its text and box (points)."""
    lines: dict[tuple[int, int], list] = {}
    for x0, y0, x1, y1, word, block, line, _ in pdf_page.get_text("words"):
        entry = lines.setdefault((block, line), [[], [x0, y0, x1, y1]])
        entry[0].append(word)
        b = entry[1]
        entry[1] = [min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)]
    return [(" ".join(ws), tuple(box)) for ws, box in lines.values()]


def _split(lines, passage: str):
    """The lines of ``passage`` and the others."""
    flat = " ".join(passage.split())
    cited = [(t, b) for t, b in lines if t in flat]
    return cited, [(t, b) for t, b in lines if t not in flat]


def test_the_cited_pdf_page_highlights_the_cited_words_and_no_other_line(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = docgen.make_pdf(folder / "tides.pdf", PAGES, header=None)
    coll = _collection(folder)
    chunk = _chunk_with(coll, "Tide gauges record")
    [shown] = show_chunk(coll, chunk.chunk_id, sentence=TIDE_SENTENCE)
    image = shown.image
    assert image is not None and image.number == 1 and image.located == "text layer"
    assert shown.kind == "page" and shown.pages == "1" and shown.note == ""
    rgb = _pixels(image.png)
    scale = DPI / 72.0
    assert rgb.shape[:2] == (image.height, image.width)
    assert abs(image.height - 842 * scale) <= 1 and abs(image.width - 595 * scale) <= 1

    with docgen._pymupdf().open(pdf) as doc:
        page = doc[0]
        cited, others = _split(_lines(page), chunk.text)
        sentence_rects = page.search_for("harbour office in Kestrel")
        first_rects = page.search_for("Tide gauges record the height")
    assert len(cited) >= 4 and len(others) >= 4  # the heading, 3+ lines; the rest of the page
    assert any("Lighthouse" in t for t, _ in others) and any("Page 1" in t for t, _ in others)
    for text, box in cited:  # every cited line is painted behind its words
        assert _highlighted(_band(rgb, box, scale)).mean() > 0.5, text
    for text, box in others:  # and not one pixel of any other line
        assert not _highlighted(_band(rgb, box, scale)).any(), text
    # The answer's sentence in orange, the rest of the passage in yellow only.
    for rect in sentence_rects:
        assert _strong(_band(rgb, rect, scale)).mean() > 0.5
    for rect in first_rects:
        band = _band(rgb, rect, scale)
        assert _highlighted(band).mean() > 0.5 and not _strong(band).any()
    assert sentence_rects and first_rects and len(image.strong) >= 1

    [saved] = save_shown([shown], tmp_path / "shown")
    assert saved.file == str(tmp_path / "shown" / f"g-{chunk.chunk_id}-p1.png")
    assert Path(saved.file).read_bytes() == image.png
    coll.close()


@needs_ocr
@pytest.mark.slow
def test_an_image_read_by_ocr_highlights_the_cited_lines_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pymupdf = docgen._pymupdf()
    doc = pymupdf.open()
    page = doc.new_page(width=900, height=420)
    drawn = [
        (30, "1 Harbour Pilots", 30, "hebo"),
        (75, "Pilots guide large vessels through narrow channels.", 24, "helv"),
        (110, "A pilot boards the ship from a small launch.", 24, "helv"),
        (175, "2 Tide Tables", 30, "hebo"),
        (220, "The spring tide at Kestrel Point rises four metres.", 24, "helv"),
        (255, "Neap tides come twice a month at the quarter moon.", 24, "helv"),
    ]
    for y, text, size, font in drawn:
        page.insert_text((30, y + size), text, fontsize=size, fontname=font)
    page.get_pixmap(dpi=72, colorspace=pymupdf.csGRAY).save(folder / "harbour.png")
    lines = _lines(page)  # at 72 dpi a point is a pixel of the image
    doc.close()

    coll = _collection(folder)
    assert "spring tide at Kestrel Point" in _kept_text(coll, "harbour.png")[1]
    reads = _OcrReads(monkeypatch)  # the words OCR read at ingest are shown: no OCR now
    chunk = _chunk_with(coll, "spring tide")
    assert chunk.section == "2 Tide Tables (OCR)"  # two sections: two chunks on one image
    neap = "Neap tides come twice a month at the quarter moon."
    [shown] = show_chunk(coll, chunk.chunk_id, sentence=neap)
    assert shown.image is not None and shown.image.located == "OCR" and shown.note == ""
    rgb = _pixels(shown.image.png)
    assert rgb.shape[:2] == (420, 900)
    cited, others = _split(lines, chunk.text)
    assert [t for t, _ in cited] == [d[1] for d in drawn[3:]]
    for text, box in cited:
        assert _highlighted(_band(rgb, box, 1.0)).mean() > 0.5, text
    for text, box in others:
        assert not _highlighted(_band(rgb, box, 1.0)).any(), text
    assert _strong(_band(rgb, cited[2][1], 1.0)).mean() > 0.5  # the sentence's line
    assert not _strong(_band(rgb, cited[1][1], 1.0)).any()
    assert reads.count == 0

    # A collection that kept no words (built before they were kept): OCR reads the image
    # again, and the same lines are painted.
    shutil.rmtree(coll.data_dir / FOLDER)
    reads.allowed = True
    [again] = show_chunk(coll, chunk.chunk_id, sentence=neap)
    assert reads.count == 1 and again.image is not None and again.image.located == "OCR"
    assert len(again.image.boxes) == len(shown.image.boxes)
    for a, b in zip(again.image.boxes, shown.image.boxes, strict=True):
        assert max(abs(u - v) for u, v in zip(a, b, strict=True)) < 1.5
    coll.close()


@needs_ocr
@pytest.mark.slow
def test_a_scanned_pdf_page_is_located_by_the_words_ocr_read_at_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    docgen.make_scanned_pdf(folder / "scan.pdf")
    coll = _collection(folder)
    kept = _kept_text(coll, "scan.pdf")
    assert sorted(kept) == [1, 2]  # both pages were read by OCR
    assert "Harbour pilots guide large vessels" in kept[1] and "spring tide" in kept[2]
    reads = _OcrReads(monkeypatch)
    chunk = _chunk_with(coll, "spring tide")
    [shown] = show_chunk(coll, chunk.chunk_id)
    assert shown.image is not None and shown.image.number == 2 and reads.count == 0
    assert shown.image.located == "OCR" and len(shown.image.boxes) == 3  # heading, 2 lines
    rgb = _pixels(shown.image.png)
    # the scan is a picture of this text PDF: its lines are where the scan shows them
    with docgen._pymupdf().open(
        docgen.make_pdf(tmp_path / "text.pdf", docgen.SCAN_PAGES, header=None, footer=None)
    ) as doc:
        lines = _lines(doc[1])
    scale = DPI / 72.0
    assert len(lines) == 3 and all(t in " ".join(chunk.text.split()) for t, _ in lines)
    for text, box in lines:
        assert _highlighted(_band(rgb, box, scale)).mean() > 0.5, text
    top = min(b[1] for _, b in lines) * scale - 12
    bottom = max(b[3] for _, b in lines) * scale + 12
    assert not _highlighted(rgb[: int(top)]).any() and not _highlighted(rgb[int(bottom) :]).any()
    coll.close()


@needs_ocr
@pytest.mark.slow
def test_a_scan_changed_since_ingest_is_read_again_by_ocr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    scan = docgen.make_scanned_pdf(folder / "scan.pdf")
    coll = _collection(folder)
    chunk = _chunk_with(coll, "spring tide")
    # The file now holds the two pages the other way round: the words kept for page 2 are not
    # the words on its page 2 any more.
    docgen.make_scanned_pdf(scan, [docgen.SCAN_PAGES[1], docgen.SCAN_PAGES[0]])
    reads = _OcrReads(monkeypatch, allowed=True)
    [shown] = show_chunk(coll, chunk.chunk_id)
    assert reads.count == 1  # read again, not drawn from the words of another version
    assert "changed since it was ingested" in shown.note
    assert shown.image is not None and shown.image.located == "not found"
    assert not _highlighted(_pixels(shown.image.png)).any()
    assert "spring tide" in _kept_text(coll, "scan.pdf")[2]  # kept, but not of this file
    coll.close()


@needs_ocr
@pytest.mark.slow
def test_the_kept_words_are_replaced_and_removed_with_their_document(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    scan = docgen.make_scanned_pdf(folder / "scan.pdf")
    png = docgen.make_text_png(folder / "note.png")
    docgen.make_pdf(folder / "tides.pdf", PAGES, header=None)  # a text layer: no OCR words
    cfg = load_config()
    ingest_paths(cfg, [folder], "g")
    coll = Collection.open(cfg, "g")
    first = {name: _entry(coll, name) for name in ("scan.pdf", "note.png", "tides.pdf")}
    kept = _kept_text(coll, "scan.pdf")
    assert "Invoice 4471 from Marlow Timber" in _kept_text(coll, "note.png")[1]
    assert _kept_text(coll, "tides.pdf") == {}
    assert not words_path(coll.data_dir, first["tides.pdf"].doc_id).exists()
    coll.close()

    png.unlink()  # removed: its words go with it; the scan, unchanged, keeps its own
    assert ingest_paths(cfg, [folder], "g").committed
    coll = Collection.open(cfg, "g")
    assert coll.manifest.generation == 2 and _kept_text(coll, "scan.pdf") == kept
    assert not words_path(coll.data_dir, first["note.png"].doc_id).exists()
    assert sorted(p.name for p in (coll.data_dir / FOLDER).iterdir()) == [
        f"{first['scan.pdf'].doc_id}.json.gz"
    ]
    # another version's words are not this document's: its checksum is in the file
    other = dataclasses.replace(first["scan.pdf"], sha256="0" * 64)
    assert read_words(coll.data_dir, other) == {}
    coll.close()

    docgen.make_scanned_pdf(scan, [docgen.SCAN_PAGES[1]])  # changed: its words anew
    assert ingest_paths(cfg, [folder], "g").committed
    coll = Collection.open(cfg, "g")
    changed = _entry(coll, "scan.pdf")
    assert changed.doc_id != first["scan.pdf"].doc_id
    assert sorted(p.name for p in (coll.data_dir / FOLDER).iterdir()) == [
        f"{changed.doc_id}.json.gz"
    ]
    [page] = _kept_text(coll, "scan.pdf").values()
    assert "spring tide" in page and "Harbour" not in page

    # a damaged file is no words: the page would be read again
    words_path(coll.data_dir, changed.doc_id).write_bytes(b"\x1f\x8b not gzip")
    assert read_words(coll.data_dir, changed) == {}
    coll.close()


def test_without_ocr_a_scan_is_shown_unmarked_with_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = docgen.make_scanned_pdf(tmp_path / "scan.pdf")
    monkeypatch.setattr(page_image, "ocr_problem", lambda: "rapidocr is not installed")
    passage = "Harbour pilots guide large vessels"
    image = render_page(scan, "pdf", 1, passage, read_by_ocr=True)
    assert image.located == "not found" and image.boxes == ()
    assert "rapidocr is not installed" in image.note and "pip install 'fathom[ocr]'" in image.note
    assert not _highlighted(_pixels(image.png)).any()
    # A chunk whose text did not come from OCR is looked for in the text layer alone.
    image = render_page(scan, "pdf", 1, passage)
    assert image.located == "not found" and "not found on page 1" in image.note


def _words(*lines: str) -> list[Word]:
    out = []
    for n, line in enumerate(lines):
        for i, text in enumerate(line.split()):
            out.append(Word(text, i * 10.0, n * 20.0, i * 10.0 + 8, n * 20.0 + 12, n))
    return out


def test_the_matching_rule() -> None:
    words = _words(
        "the ferry leaves at nine",
        "a well-known har-",
        "bour pilot boards the ferry",
        "the ferry leaves at nine again",
    )
    texts = [w.text for w in words]
    # A word split at a line's end is one word of the passage; case and punctuation differ.
    got = match_words(words, "A well-known Harbour pilot, boards")
    assert [texts[i] for i in got] == ["a", "well-known", "har-", "bour", "pilot", "boards"]
    # A phrase of the passage repeated elsewhere on the page (line 0) is not highlighted.
    got = match_words(words, "harbour pilot boards the ferry leaves at nine again")
    assert [texts[i] for i in got] == texts[texts.index("har-") :]
    assert match_words(words, "nothing of this is on the page") == []
    assert match_words(words, "") == []


def test_a_text_passage_is_shown_in_its_context_marked(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    docgen.make_docx(folder / "fixture.docx")
    coll = _collection(folder)
    chunk = _chunk_with(coll, "three settings")
    sentence = "The table below lists three settings and their defaults."
    [shown] = show_chunk(coll, chunk.chunk_id, sentence=sentence)
    assert shown.kind == "text" and shown.image is None and shown.passage == chunk.text
    assert "scope covers paragraphs" in shown.before and "page break" in shown.after
    a, b = shown.strong
    assert shown.passage[a:b] == sentence
    marked = shown.marked()
    assert marked.count(PASSAGE_MARKS[0]) == 1 and marked.count(SENTENCE_MARKS[1]) == 1
    assert f"{PASSAGE_MARKS[0]}Settings" in marked and f"{SENTENCE_MARKS[0]}{sentence}" in marked
    assert shown.to_dict()["marked"] == marked
    [saved] = save_shown([shown], tmp_path / "out")
    assert saved.file.endswith(f"g-{chunk.chunk_id}.txt")
    assert Path(saved.file).read_text(encoding="utf-8") == marked + "\n"
    coll.close()


def test_a_file_gone_or_changed_and_an_unknown_chunk(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = docgen.make_pdf(folder / "tides.pdf", PAGES, header=None)
    coll = _collection(folder)
    chunk = _chunk_with(coll, "Tide gauges record")
    with pytest.raises(FathomError, match="no chunk 'feedfacefeedface' in collection 'g'"):
        show_chunk(coll, "feedfacefeedface")
    docgen.make_pdf(pdf, [[("h1", "Tide Gauges"), ("p", TIDE)]], header=None, title="Other")
    [shown] = show_chunk(coll, chunk.chunk_id)  # another file at that path: said so
    assert "changed since it was ingested" in shown.note
    assert shown.image is not None and shown.image.located == "text layer"
    pdf.unlink()
    with pytest.raises(FathomError, match="the file is gone"):
        show_chunk(coll, chunk.chunk_id)
    coll.close()
