"""A page of a source file as a PNG with a passage highlighted: the page of a PDF (its text
layer, or a scanned page's OCR words) or a frame of an image file.

Where the passage is: its words are matched to the page's words (``match_words``), whose boxes
come from PyMuPDF's text layer, or, on a page read by OCR, from the words OCR read on it at
ingest (``words``: kept by the collection, boxes as fractions of the page), else from the lines
OCR finds on it now, re-read by the same engine at the resolution ingest used (so the same
text), each line's box split among its words by character position. The matching rule:

1. words are compared by their letters and digits only, case-folded and NFKC-normalised, so
   whitespace, punctuation, ligatures and a word split by a hyphen at a line's end (joined
   here as ingest joins it) make no difference;
2. a page word is *covered* when one of the word trigrams it belongs to (a run of three words
   on the page) is a trigram of the passage (a passage of fewer words: its whole run);
3. covered words in a row make a stretch (one uncovered word inside it allowed: a word OCR
   misread); the longest stretch is highlighted, and every other of at least ``MIN_STRETCH``
   words (a shorter one is a phrase the passage happens to share with another part of the
   page); each line from its first to its last highlighted word.

The passage is painted over in light yellow and ``sentence`` (the answer's span sentence, when
there is one), found the same way inside it, in a stronger orange, both multiplied into the
page so the text stays black. PyMuPDF, numpy, Pillow and OCR load inside the functions.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fathom.core.errors import FathomError, ParseError
from fathom.ingestion.ocr import OCR_INSTALL, OcrSettings, engine, ocr_problem
from fathom.ingestion.page_words import Word, ocr_words, scaled
from fathom.ingestion.scans import FEW_CHARS, render_dpi

DPI = 120  # display resolution of a PDF page: an A4 page is 992 × 1404 pixels
MAX_SIDE = 2400  # an image file is shown with its longer side at most this (pixels)
PASSAGE_RGB = (255, 238, 140)  # light yellow, multiplied into the page
SENTENCE_RGB = (255, 178, 70)  # orange, multiplied over the passage's yellow
GRAM = 3  # words per matched run (rule 2)
MIN_STRETCH = 6  # covered words a stretch besides the longest needs to be highlighted (rule 3)
PAD = 1.0  # pixels around each highlighted line
PNG_LEVEL = 3  # zlib level: on pages of text 40 % faster than the default 6, and no larger
_HYPHENS = ("-", "\xad", "\u2010", "\u2011")
_OCR_CACHE: dict[tuple[Any, ...], list[Word]] = {}  # words read again, boxes in page fractions
_OCR_CACHE_SIZE = 16

Located = Literal["text layer", "OCR", "not found"]
Rect = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class PageImage:
    """Page ``number`` as a PNG, the boxes painted (pixels, one per line: the passage's, then
    the sentence's) and how the passage was found (``not found``: the page unmarked)."""

    number: int
    png: bytes = field(repr=False)
    width: int
    height: int
    boxes: tuple[Rect, ...]
    strong: tuple[Rect, ...]
    located: Located
    note: str = ""


def render_page(
    path: str | Path,
    fmt: str,
    number: int,
    passage: str,
    sentence: str | None = None,
    *,
    ocr: OcrSettings | None = None,
    read_by_ocr: bool = False,
    password: str | None = None,
    words: Sequence[Word] | None = None,
) -> PageImage:
    """Page ``number`` (1-based) of the PDF or image file at ``path`` (``fmt``: ``pdf`` or
    ``image``) with ``passage`` highlighted. ``read_by_ocr``: the passage's text came from OCR
    (its section says so), so it is looked for among the page's OCR words, as an image's
    always is: ``words``, those OCR read on the page at ingest (boxes as fractions of the
    page), when given; else OCR reads the page again — on a PDF, a page that ingest read by
    OCR: one with less than ``FEW_CHARS`` of text layer, or any with ``ingest.ocr = always``."""
    settings = ocr or OcrSettings()
    if fmt == "image":
        rgb, found, note = _image_page(path, number, settings, words)
        how: Located = "OCR"
    elif fmt == "pdf":
        rgb, found, how, note = _pdf_page(path, number, settings, read_by_ocr, password, words)
    else:
        raise FathomError(f"{path}: a {fmt} document has no pages to render")
    boxes, strong = highlight_boxes(found, passage, sentence)
    if not boxes:
        how = "not found"
        note = note or f"the passage was not found on page {number}: the page is shown unmarked"
    _paint(rgb, boxes, PASSAGE_RGB)
    _paint(rgb, strong, SENTENCE_RGB)
    h, w = rgb.shape[:2]
    return PageImage(number, _png(rgb), w, h, tuple(boxes), tuple(strong), how, note)


# ---------------------------------------------------------------------------------------------
# Where the passage is
# ---------------------------------------------------------------------------------------------


def _norm(word: str) -> str:
    """A word as it is compared: letters and digits only, NFKC, case-folded."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", word).casefold() if ch.isalnum())


def _page_tokens(words: Sequence[Word]) -> list[tuple[str, list[int]]]:
    """The page's words as compared, each with the words it stands for: a word that ends a
    line with a hyphen is joined to the next line's first word (as ingest joins them)."""
    tokens: list[tuple[str, list[int]]] = []
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and w.text.endswith(_HYPHENS) and nxt.line != w.line:
            tokens.append((_norm(w.text) + _norm(nxt.text), [i, i + 1]))
            i += 2
            continue
        tokens.append((_norm(w.text), [i]))
        i += 1
    return [(t, idx) for t, idx in tokens if t]


def match_words(words: Sequence[Word], text: str) -> list[int]:
    """Indices of the ``words`` of a page that ``text`` covers, by the rule in the module's
    docstring (empty when it is not on the page)."""
    wanted = [n for n in (_norm(w) for w in text.split()) if n]
    tokens = _page_tokens(words)
    if not wanted or not tokens:
        return []
    n = min(GRAM, len(wanted))
    grams = {tuple(wanted[i : i + n]) for i in range(len(wanted) - n + 1)}
    keys = [t for t, _ in tokens]
    covered = [False] * len(tokens)
    for i in range(len(tokens) - n + 1):
        if tuple(keys[i : i + n]) in grams:
            for j in range(i, i + n):
                covered[j] = True
    stretches = _stretches(covered)
    if not stretches:
        return []
    longest = max(stretches, key=lambda s: s[2])
    kept = [s for s in stretches if s is longest or s[2] >= MIN_STRETCH]
    return [idx for a, b, _ in kept for i in range(a, b + 1) if covered[i] for idx in tokens[i][1]]


def _stretches(covered: Sequence[bool]) -> list[tuple[int, int, int]]:
    """``(first, last, covered words)`` of each run of covered tokens, one uncovered token
    inside a run allowed (a word OCR misread, a stray mark)."""
    out: list[tuple[int, int, int]] = []
    start, count, gap = -1, 0, 0
    for i, hit in enumerate(covered):
        if hit:
            if start < 0:
                start = i
            count, gap = count + 1, 0
        elif start >= 0:
            gap += 1
            if gap > 1:
                out.append((start, i - gap, count))
                start, count, gap = -1, 0, 0
    if start >= 0:
        out.append((start, len(covered) - 1 - gap, count))
    return out


def _line_boxes(words: Sequence[Word], chosen: Iterable[int]) -> dict[int, Rect]:
    """One box per line over the ``chosen`` words, from the first to the last of them."""
    lines: dict[int, Rect] = {}
    for i in chosen:
        w = words[i]
        b = lines.get(w.line)
        lines[w.line] = (
            (w.x0, w.y0, w.x1, w.y1)
            if b is None
            else (min(b[0], w.x0), min(b[1], w.y0), max(b[2], w.x1), max(b[3], w.y1))
        )
    return lines


def _clipped(boxes: dict[int, Rect], lines: dict[int, Rect]) -> list[Rect]:
    """``boxes`` padded, each cut where it would reach into another line of the page: a word's
    box spans its font's whole height, more than the line spacing of tight text, so the
    boxes of two lines overlap, and each keeps its side of the overlap's middle."""
    out = []
    for key, (x0, y0, x1, y1) in boxes.items():
        top, bottom = y0 - PAD, y1 + PAD
        for other, (a0, b0, a1, b1) in lines.items():
            if other == key or min(x1, a1) <= max(x0, a0):
                continue  # the same line, or side by side (another column)
            if b0 >= y0 and b0 < bottom:  # the other line is below
                bottom = min(bottom, (y1 + b0) / 2)
            elif b1 <= y1 and b1 > top:  # above
                top = max(top, (b1 + y0) / 2)
        out.append((x0 - PAD, top, x1 + PAD, bottom))
    return out


def highlight_boxes(
    words: Sequence[Word], passage: str, sentence: str | None = None
) -> tuple[list[Rect], list[Rect]]:
    """The boxes to paint: the passage's lines, and the lines of ``sentence`` inside it."""
    chosen = match_words(words, passage)
    strong: list[int] = []
    if chosen and sentence:
        inside = set(chosen)
        strong = [i for i in match_words(words, sentence) if i in inside]
    lines = _line_boxes(words, range(len(words)))
    return _clipped(_line_boxes(words, chosen), lines), _clipped(_line_boxes(words, strong), lines)


# ---------------------------------------------------------------------------------------------
# Pages and their words
# ---------------------------------------------------------------------------------------------


def _pdf_page(
    path: str | Path,
    number: int,
    settings: OcrSettings,
    read_by_ocr: bool,
    password: str | None,
    stored: Sequence[Word] | None,
) -> tuple[Any, list[Word], Located, str]:
    """The page as ``(h, w, 3)`` uint8 RGB at ``DPI``, its words in those pixels (``stored``,
    the OCR words kept at ingest, when the passage came from OCR), where they came from, and a
    note when OCR was needed but is not installed."""
    import numpy as np
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    name = str(path)
    try:
        doc = pymupdf.open(name)
    except Exception as exc:  # PyMuPDF raises its own and C-level errors on damaged files
        raise ParseError(name, f"cannot be opened ({type(exc).__name__})", "re-ingest it") from None
    with doc:
        if doc.needs_pass and not doc.authenticate(password or ""):
            raise ParseError(name, "encrypted (needs a password)", "pass its --password")
        if not 1 <= number <= doc.page_count:
            raise ParseError(name, f"has no page {number} (it has {doc.page_count})", "re-ingest")
        page = doc.load_page(number - 1)
        zoom = DPI / 72.0
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        rgb = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)
        rgb = rgb[:, : pix.width * 3].reshape(pix.height, pix.width, 3).copy()
        if read_by_ocr and stored is not None:
            return rgb, scaled(stored, pix.width, pix.height), "OCR", ""
        words = _text_layer_words(page, zoom)
        few = sum(len(w.text) for w in words) < FEW_CHARS
        if not (read_by_ocr and (few or settings.mode == "always")):
            return rgb, words, "text layer", ""
        problem = ocr_problem()
        if problem is not None:
            return rgb, words, "text layer", _no_ocr(number, problem)
        key = (name, _stamp(name), number, settings.dpi)
        if key not in _OCR_CACHE:
            _remember(key, _ocr_pdf_words(pymupdf, page, settings))
        return rgb, scaled(_OCR_CACHE[key], pix.width, pix.height), "OCR", ""


def _text_layer_words(page: Any, zoom: float) -> list[Word]:
    """The page's words in PyMuPDF's order, in pixels at ``zoom``; a line is a (block, line)."""
    out = []
    lines: dict[tuple[int, int], int] = {}
    for x0, y0, x1, y1, text, block, line, _ in page.get_text("words", sort=False):
        key = lines.setdefault((block, line), len(lines))
        out.append(Word(text, x0 * zoom, y0 * zoom, x1 * zoom, y1 * zoom, key))
    return out


def _ocr_pdf_words(pymupdf: Any, page: Any, settings: OcrSettings) -> list[Word]:
    """The words OCR reads on a PDF page rendered as ingest renders it for OCR (fractions of
    the page)."""
    import numpy as np

    dpi = render_dpi(page.rect, settings.dpi)
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
    gray = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)
    return _read_words(gray[:, : pix.width], settings)


def _read_words(gray: Any, settings: OcrSettings) -> list[Word]:
    """The words of the lines OCR reads in ``gray`` (fractions of the image), as ingest keeps
    them (``page_words.ocr_words``)."""
    h, w = gray.shape
    return ocr_words(engine(settings.threads).read(gray).lines, w, h)


def _image_page(
    path: str | Path, number: int, settings: OcrSettings, stored: Sequence[Word] | None
) -> tuple[Any, list[Word], str]:
    """Frame ``number`` of an image file as RGB (its longer side at most ``MAX_SIDE``), its
    words in those pixels (``stored``, those kept at ingest, else read by OCR now), and a note
    when they had to be read and OCR is not installed."""
    import numpy as np
    from fathom.ingestion.image import open_image, read_frame, seek_frame

    name = str(path)
    data = Path(path).read_bytes()
    image, frames = open_image(name, data)
    if not 1 <= number <= frames:
        raise ParseError(name, f"has no page {number} (it has {frames})", "re-ingest it")
    if stored is None:
        gray, _ = read_frame(name, image, number - 1)
        h, w = gray.shape
    else:  # the words are known: the frame is decoded only in colour, to be shown
        w, h = seek_frame(name, image, number - 1)
    scale = min(1.0, MAX_SIDE / max(h, w))
    shown = image.convert("RGB")
    if scale < 1.0:
        from PIL import Image

        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        shown = shown.resize(size, Image.Resampling.BILINEAR)
    rgb = np.array(shown, dtype=np.uint8)
    height, width = rgb.shape[:2]
    if stored is not None:
        return rgb, scaled(stored, width, height), ""
    problem = ocr_problem()
    if problem is not None:
        return rgb, [], _no_ocr(number, problem)
    key = (name, _stamp(name), number, 0)
    if key not in _OCR_CACHE:
        _remember(key, _read_words(gray, settings))
    return rgb, scaled(_OCR_CACHE[key], width, height), ""


def _no_ocr(number: int, problem: str) -> str:
    return (
        f"page {number} was read by OCR, which is unavailable here ({problem}): the page is "
        f"shown unmarked — {OCR_INSTALL}"
    )


def _stamp(name: str) -> tuple[int, int]:
    """What tells a file's versions apart for the OCR cache: its size and modification time."""
    import os

    st = os.stat(name)
    return st.st_size, st.st_mtime_ns


def _remember(key: tuple[Any, ...], words: list[Word]) -> None:
    """Keep the OCR words read again on a page: two sources cited on it read it once."""
    if len(_OCR_CACHE) >= _OCR_CACHE_SIZE:
        _OCR_CACHE.pop(next(iter(_OCR_CACHE)))
    _OCR_CACHE[key] = words


# ---------------------------------------------------------------------------------------------
# Painting
# ---------------------------------------------------------------------------------------------


def _paint(rgb: Any, boxes: Sequence[Rect], color: tuple[int, int, int]) -> None:
    """Multiply ``color`` into ``rgb`` ``(h, w, 3)`` uint8 inside each box, in place."""
    import numpy as np

    h, w = rgb.shape[:2]
    factor = np.asarray(color, dtype=np.uint16)
    for x0, y0, x1, y1 in boxes:
        a, b = max(0, int(y0)), min(h, int(np.ceil(y1)))
        c, d = max(0, int(x0)), min(w, int(np.ceil(x1)))
        if a < b and c < d:
            region = rgb[a:b, c:d]
            region[:] = (region.astype(np.uint16) * factor // 255).astype(np.uint8)


def _png(rgb: Any) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG", compress_level=PNG_LEVEL)
    return buf.getvalue()
