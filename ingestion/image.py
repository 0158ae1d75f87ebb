"""Image loader: PNG, JPEG and TIFF read by OCR, one page per image (a multi-page TIFF's frames
are its pages), laid out like a scanned PDF page.

Pillow decodes; its decompression-bomb limit is an error here, never a warning, and a frame is
decoded only after its size has been checked, so a huge image is refused before it takes memory.
"""

from __future__ import annotations

import contextlib
import io
import warnings as warnings_module
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    assemble,
    make_document,
    read_source,
)
from fathom.ingestion.metadata import guarded, title_block, with_text
from fathom.ingestion.ocr import OCR_INSTALL, engine, layout_page, ocr_problem
from fathom.ingestion.options import LoadOptions
from fathom.ingestion.page_words import ocr_words
from fathom.ingestion.pdf import layout_title, mark_layout
from fathom.ingestion.pdf_layout import (
    Page,
    page_blocks,
    ranges,
)
from fathom.ingestion.scans import mark_ocr_sections

MAX_PIXELS = 64_000_000  # per frame: about a 300 dpi A1 poster; larger is refused unread
MAX_FRAMES = 2_000
_DEFAULT_DPI = 200.0  # when the file does not say (only relative sizes matter to the layout)
_FORMATS = {"PNG", "JPEG", "MPO", "TIFF"}
_SCALE_DOWN = "scale it down before ingesting"
_PILLOW_ERRORS = (OSError, ValueError, SyntaxError, EOFError, TypeError, KeyError, IndexError)


class ImageLoader:
    """Loads ``.png``, ``.jpg``/``.jpeg`` and ``.tif``/``.tiff`` through OCR."""

    format = "image"

    def __init__(self, options: LoadOptions | None = None) -> None:
        self.options = options or LoadOptions()

    def load(self, path: str | Path) -> Document:
        """Read every frame by OCR; ParseError for an unreadable, huge or text-less image."""
        name = str(path)
        data = read_source(path, self.options.max_bytes)
        if self.options.ocr.mode == "never":
            raise ParseError(
                name,
                "an image is read only by OCR, and ingest.ocr is never",
                'set ingest.ocr = "auto" to read it',
            )
        problem = ocr_problem()
        if problem is not None:
            raise ParseError(
                name, f"an image needs OCR, which is unavailable: {problem}", OCR_INSTALL
            )
        image, n = open_image(name, data)
        eng = engine(self.options.ocr.threads)
        pages = []
        unreadable: list[int] = []
        warnings: list[str] = []
        if self.options.on_page is not None:
            self.options.on_page(0, n)  # how many pages OCR will read
        for number in range(1, n + 1):
            gray, dpi = read_frame(name, image, number - 1)
            result = eng.read(gray)
            if self.options.on_page is not None:
                self.options.on_page(number, n)
            if not result.lines or result.confidence < self.options.ocr.min_confidence:
                unreadable.append(number)
                pages.append(Page(number, 0.0))
                if result.lines:
                    warnings.append(
                        f"page {number}: unreadable by OCR (confidence {result.confidence:.2f}, "
                        f"under {self.options.ocr.min_confidence:g})"
                    )
                continue
            h, w = gray.shape
            pages.append(layout_page(number, result, w, h, 72.0 / dpi))
            if self.options.on_words is not None:
                self.options.on_words(number, ocr_words(result.lines, w, h))
        if len(unreadable) == len(pages):
            raise ParseError(
                name,
                "no readable text: OCR found none it could trust (a photo, a blank or noisy scan?)",
                "OCR needs a clearer scan (or a lower ingest.ocr_min_confidence)",
            )
        if unreadable:
            warnings.append(f"no text on page(s) {ranges(unreadable)}")
        read = tuple(p.number for p in pages if p.lines)
        mark_layout(pages, [], read)
        blocks = [b for page in pages for b in page_blocks(page)]
        assembled = mark_ocr_sections(assemble(blocks, n_pages=len(pages)), read)
        title, meta = layout_title(pages, read), guarded(title_block, pages)
        return make_document(
            path, data, self.format, assembled, meta_title=title, warnings=warnings, ocr_pages=read,
            meta=with_text(meta, assembled),
        )  # fmt: skip


@contextlib.contextmanager
def _pillow_rules() -> Iterator[None]:
    """Pillow's notes on damaged metadata (EXIF) are not the user's business here, but it only
    warns between its pixel limit and twice it: here every bomb is an error."""
    from PIL import Image

    with warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", UserWarning)
        warnings_module.simplefilter("error", Image.DecompressionBombWarning)
        yield


def open_image(name: str, data: bytes) -> tuple[Any, int]:
    """The image, not yet decoded, and its number of frames; ParseError when it is not one."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as exc:  # pragma: no cover - Pillow comes with the base install
        raise ParseError(name, f"Pillow is not installed ({exc})", "pip install pillow") from None
    with _pillow_rules():
        try:
            image = Image.open(io.BytesIO(data))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ParseError(
                name, f"is too large to decode ({exc}; a decompression bomb?)", _SCALE_DOWN
            ) from None
        except UnidentifiedImageError:
            raise ParseError(
                name,
                "not an image Pillow can read (corrupt, or not PNG/JPEG/TIFF)",
                "re-save or re-export it",
            ) from None
        except _PILLOW_ERRORS as exc:  # a damaged header: Pillow raises all of these
            raise ParseError(
                name,
                f"cannot be read as an image ({type(exc).__name__}: {exc}; truncated or corrupt?)",
                "re-save or re-scan it",
            ) from None
        if image.format not in _FORMATS:
            raise ParseError(
                name, f"is a {image.format} image, not PNG, JPEG or TIFF", "convert it"
            )
        try:
            n = getattr(image, "n_frames", 1)
        except _PILLOW_ERRORS as exc:
            raise ParseError(
                name, f"its frames cannot be counted ({exc}; truncated or corrupt?)", "re-save it"
            ) from None
    if n > MAX_FRAMES:
        raise ParseError(name, f"has {n} frames (over {MAX_FRAMES})", "split the file")
    return image, n


def seek_frame(name: str, image: Any, index: int) -> tuple[int, int]:
    """Make frame ``index`` the image's current one, not yet decoded; its ``(width, height)``.
    ParseError when it is over ``MAX_PIXELS`` (refused before it takes memory) or damaged."""
    with _pillow_rules():
        try:
            image.seek(index)
            w, h = image.size
        except _PILLOW_ERRORS as exc:
            raise _undecodable(name, index, exc) from None
    if w * h > MAX_PIXELS:
        raise ParseError(
            name,
            f"frame {index + 1} is {w:,} × {h:,} pixels, over the "
            f"{MAX_PIXELS / 1e6:.0f} megapixel limit (a decompression bomb?)",
            _SCALE_DOWN,
        )
    return w, h


def read_frame(name: str, image: Any, index: int) -> tuple[Any, float]:
    """Frame ``index`` as ``(h, w)`` uint8 grey with its resolution (dots per inch), decoded
    only when OCR reads it: a many-page scan never holds every page in memory at once."""
    import numpy as np

    seek_frame(name, image, index)
    with _pillow_rules():
        try:
            gray = np.asarray(image.convert("L"))
        except _PILLOW_ERRORS as exc:
            raise _undecodable(name, index, exc) from None
    return gray, _dpi(image)


def _undecodable(name: str, index: int, exc: BaseException) -> ParseError:
    return ParseError(
        name,
        f"frame {index + 1} cannot be decoded ({exc}; truncated or corrupt?)",
        "re-save or re-scan it",
    )


def _dpi(image: Any) -> float:
    dpi = image.info.get("dpi")
    try:
        value = float(dpi[0]) if dpi else 0.0
    except (TypeError, ValueError, IndexError):
        value = 0.0
    return value if 50 <= value <= 2400 else _DEFAULT_DPI
