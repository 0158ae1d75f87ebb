"""The words OCR read on the scanned pages and images of a collection's documents, kept at
ingest so that showing a cited page (``index/grounding.py``) needs no OCR.

One file per document with pages read by OCR, in the generation folder:
``gen-*/ocr-words/<doc_id>.json.gz``, gzip'd JSON ``{"format": 1, "doc_id", "sha256",
"pages": {"<page>": [[text, x0, y0, x1, y1, line], …]}}``, a word's box as fractions of its
page's width and height (``ingestion/page_words.py``). They are written with the generation
and committed with it by the manifest, so they come and go with their document: a document
parsed again gets its words anew, one removed is not carried into the next generation, and a
kept one's file is hard-linked from the previous generation (copied where a link fails).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fathom.index.manifest import fsync_dir
from fathom.ingestion.page_words import Word, words_from_json, words_json

if TYPE_CHECKING:
    from fathom.index.manifest import DocEntry

FORMAT = 1
FOLDER = "ocr-words"
_DOC_ID = re.compile(r"[0-9a-f]{1,64}")  # a file document's id: hex of its sha256

PageWords = dict[int, list[Word]]  # page number → its words


def words_path(data_dir: Path, doc_id: str) -> Path | None:
    """Where generation folder ``data_dir`` keeps document ``doc_id``'s words (None for an id
    that is no file document's: a record of a ``docs.jsonl`` has no pages)."""
    if not _DOC_ID.fullmatch(doc_id):
        return None
    return data_dir / FOLDER / f"{doc_id}.json.gz"


@dataclass
class WordsUpdate:
    """What the next generation keeps of OCR words: ``new``, ``(doc_id, sha256, pages)`` of
    each document parsed in this run whose pages OCR read (``sha256``: the file the words were
    read from), and ``kept``, the ids of the documents kept from the previous generation, in
    ``old_dir``, whose words it holds."""

    new: list[tuple[str, str, PageWords]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    old_dir: Path | None = None

    def write(self, data_dir: Path) -> int:
        """Write them into generation folder ``data_dir``, fsynced; how many documents have
        words there."""
        folder = data_dir / FOLDER
        written = 0
        for doc_id, sha256, pages in self.new:
            target = words_path(data_dir, doc_id)
            if target is None or not pages:
                continue
            folder.mkdir(exist_ok=True)
            _write_file(target, doc_id, sha256, pages)
            written += 1
        old_folder = self.old_dir / FOLDER if self.old_dir is not None else None
        # The old generation's files, listed once (not a look-up per kept document).
        present = (
            {p.name for p in old_folder.iterdir()} if old_folder and old_folder.is_dir() else set()
        )
        for doc_id in self.kept:
            if f"{doc_id}.json.gz" not in present:
                continue
            source = words_path(self.old_dir, doc_id) if self.old_dir is not None else None
            target = words_path(data_dir, doc_id)
            if source is None or target is None:
                continue
            folder.mkdir(exist_ok=True)
            try:
                os.link(source, target)  # the file never changes: share it
            except OSError:
                shutil.copyfile(source, target)
            written += 1
        if written:
            fsync_dir(folder)
        return written


def _write_file(path: Path, doc_id: str, sha256: str, pages: PageWords) -> None:
    data = {
        "format": FORMAT,
        "doc_id": doc_id,
        "sha256": sha256,
        "pages": {str(n): words_json(words) for n, words in sorted(pages.items())},
    }
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as fh:
        fh.write(gzip.compress(raw, mtime=0))
        fh.flush()
        os.fsync(fh.fileno())


def read_words(data_dir: Path, entry: DocEntry) -> PageWords:
    """The words OCR read at ingest on ``entry``'s pages (page number → words), from
    generation folder ``data_dir``; empty when none were kept (a document without pages read by
    OCR, a collection built before words were kept) or the file is not of this version of the
    document or cannot be read — then the page is read by OCR again."""
    path = words_path(data_dir, entry.doc_id)
    if path is None:
        return {}
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError):  # none kept (FileNotFoundError), or damaged
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    if not entry.sha256 or data.get("sha256") != entry.sha256:
        return {}
    try:
        return {int(n): words_from_json(rows) for n, rows in data["pages"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}
