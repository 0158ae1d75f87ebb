"""``LoadOptions``: the one record every loader is built with. Each loader reads the fields it
needs (the size limit; a PDF's password; how OCR reads pages without text and who hears its
progress, and who keeps the words it read); ``load_document`` also holds the file to the time
limit and the text size."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fathom.ingestion.clean import DEFAULT_MAX_BYTES
from fathom.ingestion.ocr import OcrSettings
from fathom.ingestion.page_words import Word


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How to load one file (``ingest.*`` in the configuration, and ``--password``)."""

    max_bytes: int = DEFAULT_MAX_BYTES  # a bigger file is refused before it is parsed
    password: str | None = None  # opens an encrypted PDF
    ocr: OcrSettings = field(default_factory=OcrSettings)  # pages without a text layer
    # ``on_page(done, total)``: after each page OCR reads (``done == 0``: ``total`` will be read)
    on_page: Callable[[int, int], None] | None = field(default=None, compare=False)
    # ``on_words(page, words)``: each page OCR read and whose text was kept, with its words
    # (boxes as fractions of the page), so that showing it later needs no OCR
    on_words: Callable[[int, list[Word]], None] | None = field(default=None, compare=False)
    timeout_s: float | None = None  # the time limit on the whole file (ingest.file_timeout_s)
    max_text_chars: int | None = None  # a document with more text is refused (ingest.max_text_mb)
