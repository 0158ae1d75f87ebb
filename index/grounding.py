"""Visual grounding: a chunk of a collection shown where it stands in its source.

A chunk of a PDF or an image file is shown as its page (each page it spans, up to
``MAX_PAGES``) with the chunk highlighted (``ingestion/page_image.py``: the page rendered from
the original file, the chunk's words found on it by the text layer or, on a page read by OCR,
among the words OCR read there at ingest, which the collection keeps (``index/ocr_words.py``);
OCR reads the page again only when none were kept or the file changed since). A chunk of a
DOCX, PPTX, HTML, EPUB, text or Markdown file, or of a ``docs.jsonl`` record, is shown as its
passage in its surrounding text: up to ``CONTEXT_CHARS`` of the text before and after it, read
from the neighbouring chunks of the collection (the source file is not read again), marked in
plain text as ``⟦passage⟧`` with ``⟪the answer's sentence⟫`` inside it.

``show_chunk`` builds the records (``Shown``) without writing anything; ``save_shown`` writes
each one's PNG or marked text: to a folder (by default ``FATHOM_HOME/shown``) as
``COLLECTION-CHUNK_ID-pPAGE.png`` or ``COLLECTION-CHUNK_ID.txt``, or to one file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fathom.core.base import Chunk
from fathom.core.errors import FathomError
from fathom.index.ocr_words import read_words
from fathom.ingestion.ocr import OcrSettings
from fathom.ingestion.page_image import PageImage, render_page

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.index.collection import Collection
    from fathom.index.manifest import DocEntry

PAGE_FORMATS = ("pdf", "image")  # shown as page images; every other format as text
MAX_PAGES = 4  # pages shown of a chunk that spans more
CONTEXT_CHARS = 300  # text shown before and after a passage
PASSAGE_MARKS = ("⟦", "⟧")
SENTENCE_MARKS = ("⟪", "⟫")
SHOWN_DIR = "shown"  # under FATHOM_HOME: where `--show` writes without a folder
_OCR_MARK = re.compile(r"(?:^| )(?:\(OCR\)|OCR text)$")  # mark_ocr_sections' section titles
_SHA_CACHE: dict[tuple[str, int, int], str] = {}

Kind = Literal["page", "text", "none"]  # none: it could not be shown (``note`` says why)


@dataclass(frozen=True, slots=True)
class Shown:
    """One chunk shown: a page of it (``kind`` page: ``image``) or its passage in context
    (``kind`` text: ``before``, ``passage``, ``after``, and ``strong``, the answer's sentence
    as ``[start, end)`` in ``passage``). ``file`` is where it was written (empty until
    ``save_shown``); ``n`` its source number in an answer (0 outside one); ``note`` what the
    reader should know (the passage not found on the page, OCR missing, the file changed)."""

    collection: str
    chunk_id: str
    doc_id: str
    title: str
    path: str
    pages: str
    section: str
    kind: Kind
    n: int = 0
    image: PageImage | None = field(default=None, repr=False)
    before: str = ""
    passage: str = ""
    after: str = ""
    strong: tuple[int, int] | None = None
    file: str = ""
    note: str = ""

    def marked(self) -> str:
        """A text passage in plain text: ``before ⟦passage with ⟪sentence⟫⟧ after``."""
        text = self.passage
        if self.strong is not None:
            a, b = self.strong
            text = f"{text[:a]}{SENTENCE_MARKS[0]}{text[a:b]}{SENTENCE_MARKS[1]}{text[b:]}"
        return f"{self.before}{PASSAGE_MARKS[0]}{text}{PASSAGE_MARKS[1]}{self.after}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n} if self.n else {}
        out |= {
            "collection": self.collection,
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "title": self.title,
            "path": self.path,
            "pages": self.pages,
            "section": self.section,
            "kind": self.kind,
            "file": self.file,
            "note": self.note,
        }
        if self.image is not None:
            im = self.image
            out |= {
                "page": im.number,
                "located": im.located,
                "width": im.width,
                "height": im.height,
                "boxes": [[round(v, 1) for v in box] for box in im.boxes],
                "strong_boxes": [[round(v, 1) for v in box] for box in im.strong],
            }
        if self.kind == "text":
            out |= {
                "before": self.before,
                "passage": self.passage,
                "after": self.after,
                "strong": list(self.strong) if self.strong else None,
                "marked": self.marked(),
            }
        return out


def ocr_settings(cfg: Config) -> OcrSettings:
    """The OCR settings ingest reads pages with (``ingest.ocr*``): a page read again with them
    gives the text its chunks hold."""
    ing = cfg.ingest
    return OcrSettings(ing.ocr, ing.ocr_min_confidence, ing.ocr_dpi)


def shown_dir(cfg: Config) -> Path:
    """Where ``--show`` writes when it is given no folder: ``FATHOM_HOME/shown``."""
    return cfg.home_path() / SHOWN_DIR


def find_chunk(coll: Collection, chunk_id: str) -> tuple[Chunk, int, DocEntry]:
    """The chunk ``chunk_id`` of ``coll``, its row and its document's manifest entry."""
    row = coll.store.find(chunk_id.strip().lower())
    if row is None:
        raise FathomError(
            f"no chunk {chunk_id!r} in collection {coll.name!r} — take a chunk id from "
            "`fathom search --json`, `fathom ask --json` or the MCP tools"
        )
    chunk = coll.store.get(row)
    for entry in coll.manifest.documents:
        if entry.status == "ok" and entry.rows[0] <= row < entry.rows[1]:
            return chunk, row, entry
    raise FathomError(f"collection {coll.name!r}: no document holds row {row} — re-ingest it")


def show_chunk(
    coll: Collection,
    chunk_id: str,
    *,
    sentence: str | None = None,
    ocr: OcrSettings | None = None,
    password: str | None = None,
    n: int = 0,
) -> list[Shown]:
    """Chunk ``chunk_id`` of ``coll`` shown: one record per page of a PDF or image chunk, one
    for any other; ``sentence`` (the answer's span sentence) is marked more strongly."""
    chunk, row, entry = find_chunk(coll, chunk_id)
    base = Shown(
        collection=coll.name,
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        title=chunk.title or entry.title,
        path=entry.path,
        pages=chunk.pages,
        section=chunk.section,
        kind="page" if entry.format in PAGE_FORMATS else "text",
        n=n,
    )
    if base.kind == "text":
        return [_text_passage(coll, base, chunk, row, entry, sentence)]
    source = _source_file(entry)
    changed = _changed_note(source, entry)
    read_by_ocr = bool(_OCR_MARK.search(chunk.section))  # every chunk of an image's is
    # the words OCR read at ingest, unless the file is another now (then OCR reads it again)
    kept = read_words(coll.data_dir, entry) if read_by_ocr and not changed else {}
    last = min(chunk.page_end, chunk.page_start + MAX_PAGES - 1)
    out = []
    for number in range(chunk.page_start, last + 1):
        image = render_page(
            source,
            entry.format,
            number,
            chunk.text,
            sentence,
            ocr=ocr,
            read_by_ocr=read_by_ocr,
            password=password,
            words=kept.get(number),
        )
        note = "; ".join(x for x in (changed, image.note) if x)
        out.append(dataclasses.replace(base, image=image, note=note))
    return out


def save_shown(
    shown: list[Shown], directory: Path | None = None, out: Path | None = None
) -> list[Shown]:
    """Write each record's PNG (a page) or marked text (a passage) into ``directory``, or to
    ``out`` (a second page of a chunk beside it, as ``NAME-pPAGE.png``); the records with their
    ``file``."""
    saved = []
    for i, item in enumerate(shown):
        if out is not None:
            target = out if i == 0 else out.with_name(f"{out.stem}-p{_page(item)}{out.suffix}")
        else:
            assert directory is not None
            name = f"{item.collection}-{item.chunk_id}"
            target = directory / (f"{name}-p{_page(item)}.png" if item.image else f"{name}.txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.image is not None:
            target.write_bytes(item.image.png)
        else:
            target.write_text(item.marked() + "\n", encoding="utf-8")
        saved.append(dataclasses.replace(item, file=str(target)))
    return saved


def _page(item: Shown) -> int:
    return item.image.number if item.image is not None else 0


def _source_file(entry: DocEntry) -> Path:
    """The document's file, which must still be there."""
    path = Path(entry.path)
    if not path.is_file():
        raise FathomError(
            f"{entry.path}: the file is gone, so its page cannot be shown — put it back or "
            "re-ingest the collection"
        )
    return path


def _changed_note(path: Path, entry: DocEntry) -> str:
    """A note when the file is not the one ingested (its sha256 differs): the page shown may
    not be the page cited. Hashed once per version of the file in this process."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _SHA_CACHE[key] = h.hexdigest()
    if not entry.sha256 or _SHA_CACHE[key] == entry.sha256:
        return ""
    return f"{entry.path} changed since it was ingested: the page may differ — re-ingest it"


def _text_passage(
    coll: Collection, base: Shown, chunk: Chunk, row: int, entry: DocEntry, sentence: str | None
) -> Shown:
    """The chunk in the text around it: the ends of its neighbours in the same document (an
    overlap they share with it left out)."""
    first, end = entry.rows
    before = after = ""
    if row > first:
        prev = coll.store.get(row - 1)
        text = prev.text[: max(0, chunk.char_start - prev.char_start)]
        gap = "\n\n" if prev.char_end < chunk.char_start else ""
        before = _tail(text, CONTEXT_CHARS) + gap if text.strip() else ""
    if row + 1 < end:
        nxt = coll.store.get(row + 1)
        text = nxt.text[max(0, chunk.char_end - nxt.char_start) :]
        gap = "\n\n" if chunk.char_end < nxt.char_start else ""
        after = gap + _head(text, CONTEXT_CHARS) if text.strip() else ""
    strong = _find(chunk.text, sentence) if sentence else None
    return dataclasses.replace(base, before=before, passage=chunk.text, after=after, strong=strong)


def _find(text: str, sentence: str) -> tuple[int, int] | None:
    """Where ``sentence`` is in ``text``, whatever whitespace separates its words."""
    words = sentence.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return (m.start(), m.end()) if m else None


def _tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, from a word's start, after "…"."""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    space = cut.find(" ")
    return "…" + (cut[space + 1 :] if 0 <= space < limit // 2 else cut)


def _head(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, to a word's end, then "…"."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + "…"
