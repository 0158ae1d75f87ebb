"""Words on a page with their boxes: what ``page_image`` finds a passage among, and what OCR
read on a scanned page or an image, which ingest keeps (``index/ocr_words.py``) so that showing
the page later needs no OCR.

OCR gives lines, not words: each line's box is split among its words by character position.
Boxes of OCR words are kept as fractions of the page's width and height, so they fit the page
drawn at any size (OCR reads a PDF page at ``ingest.ocr_dpi``, ``--show`` draws it at 120 dpi).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.ingestion.ocr import OcrLine

DECIMALS = 4  # a box edge to a ten-thousandth of the page: under a quarter pixel at 2,400


@dataclass(frozen=True, slots=True)
class Word:
    """A word on a page: its text, its box (image pixels, or fractions of the page for OCR
    words as kept), and the line it is on."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    line: int


def ocr_words(lines: Iterable[OcrLine], width: float, height: float) -> list[Word]:
    """The words of the ``lines`` OCR read in an image ``width`` × ``height`` pixels, boxes as
    fractions of the image: each line's box split among its words by character position."""
    words: list[Word] = []
    for number, line in enumerate(lines):
        text = line.text
        per_char = (line.x1 - line.x0) / max(1, len(text))
        at = 0
        for token in text.split(" "):
            if token:
                x0 = line.x0 + at * per_char
                x1 = x0 + len(token) * per_char
                words.append(
                    Word(token, x0 / width, line.y0 / height, x1 / width, line.y1 / height, number)
                )
            at += len(token) + 1
    return words


def scaled(words: Sequence[Word], sx: float, sy: float) -> list[Word]:
    """``words`` with their boxes multiplied by ``sx`` across and ``sy`` down."""
    return [Word(w.text, w.x0 * sx, w.y0 * sy, w.x1 * sx, w.y1 * sy, w.line) for w in words]


def words_json(words: Iterable[Word]) -> list[list[Any]]:
    """``words`` as JSON rows ``[text, x0, y0, x1, y1, line]``, boxes rounded to ``DECIMALS``."""
    return [
        [w.text, *(round(v, DECIMALS) for v in (w.x0, w.y0, w.x1, w.y1)), w.line] for w in words
    ]


def words_from_json(rows: Iterable[Sequence[Any]]) -> list[Word]:
    """The words of ``words_json``'s rows; ValueError (or TypeError) when a row is not one."""
    out = []
    for text, x0, y0, x1, y1, line in rows:
        if not isinstance(text, str):
            raise ValueError(f"a word's text is {type(text).__name__}, not str")
        out.append(Word(text, float(x0), float(y0), float(x1), float(y1), int(line)))
    return out
