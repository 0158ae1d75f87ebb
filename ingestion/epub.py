"""EPUB loader (ebooklib): chapters in spine order, each a section titled from the table of
contents (else its first heading), its XHTML read through the HTML loader's block walker.

An EPUB with a DRM-encrypted content document is refused (META-INF/encryption.xml lists it);
font obfuscation, which only scrambles embedded fonts, is not DRM and is ignored.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import Block, assemble, make_document
from fathom.ingestion.html import BOOK_SKIP, html_blocks
from fathom.ingestion.metadata import epub_properties, guarded, with_text
from fathom.ingestion.word import ArchiveLoader

_RESAVE = "re-export it as EPUB (e.g. with Calibre), or convert it to PDF"
# Font obfuscation algorithms (IDPF, Adobe): embedded fonts scrambled, the text is readable.
_FONT_OBFUSCATION = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"


class EpubLoader(ArchiveLoader):
    """Loads ``.epub``: chapters in reading (spine) order as sections; one page."""

    format = "epub"
    kind = "an EPUB"
    resave = _RESAVE

    def load(self, path: str | Path) -> Document:
        name, data = self.read_archive(path)
        _refuse_drm(name, data)
        book = _open(name, data)
        blocks: list[Block] = []
        titles = _toc_titles(book)
        try:
            for idref, _linear in book.spine:
                item = book.get_item_with_id(idref)
                if item is None:
                    raise KeyError(f"spine item {idref!r} is not in the manifest")
                blocks.extend(_chapter_blocks(item, titles))
            meta = book.get_metadata("DC", "title")
        except (KeyError, ValueError, AttributeError, TypeError) as exc:
            raise ParseError(
                name, f"a chapter cannot be read ({type(exc).__name__}: {exc})", _RESAVE
            ) from None
        assembled = assemble(blocks)
        if not assembled.text.strip():
            raise ParseError(name, "no text in any chapter", "the book holds only pictures?")
        title = meta[0][0] if meta else ""
        meta = guarded(epub_properties, book)
        return make_document(
            path, data, self.format, assembled, meta_title=title, meta=with_text(meta, assembled)
        )


def _refuse_drm(name: str, data: bytes) -> None:
    """ParseError when META-INF/encryption.xml encrypts anything but fonts (DRM)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if "META-INF/encryption.xml" not in archive.namelist():
            return
        raw = archive.read("META-INF/encryption.xml")
    try:
        root = ElementTree.fromstring(raw)
    except ElementTree.ParseError:
        raise ParseError(
            name, "has an unreadable META-INF/encryption.xml (DRM?)", _DRM_FIX
        ) from None
    for data_el in root.iter(f"{_ENC}EncryptedData"):
        method = data_el.find(f"{_ENC}EncryptionMethod")
        algorithm = method.get("Algorithm", "") if method is not None else ""
        ref = data_el.find(f"{_ENC}CipherData/{_ENC}CipherReference")
        uri = ref.get("URI", "?") if ref is not None else "?"
        if algorithm not in _FONT_OBFUSCATION:
            raise ParseError(name, f"is DRM-protected ({uri} is encrypted)", _DRM_FIX)


_DRM_FIX = "only DRM-free books can be read: use a DRM-free copy"


def _open(name: str, data: bytes) -> Any:
    try:
        from ebooklib import epub
    except ImportError as exc:  # pragma: no cover - ebooklib comes with the base install
        raise ParseError(
            name, f"ebooklib is not installed ({exc})", "pip install ebooklib"
        ) from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ebooklib's notes on its own defaults
        warnings.simplefilter("ignore", FutureWarning)
        try:
            return epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
        except KeyError as exc:  # container.xml, the package document or a part is missing
            raise ParseError(
                name,
                f"cannot be opened (a part is missing: {exc.args[0] if exc.args else exc})",
                _RESAVE,
            ) from None
        except Exception as exc:  # ebooklib raises zipfile, lxml and its own errors
            raise ParseError(
                name, f"cannot be opened (corrupt or not an EPUB: {type(exc).__name__})", _RESAVE
            ) from None


def _toc_titles(book: Any) -> dict[str, str]:
    """Content file name → its first title in the table of contents."""
    titles: dict[str, str] = {}

    def visit(entries: Any) -> None:
        for entry in entries:
            if isinstance(entry, tuple | list) and len(entry) == 2:
                section, children = entry
                visit([section])
                visit(children)
                continue
            href = getattr(entry, "href", "") or ""
            title = " ".join((getattr(entry, "title", "") or "").split())
            if href and title:
                titles.setdefault(href.split("#", 1)[0], title)

    visit(book.toc or [])
    return titles


def _chapter_blocks(item: Any, titles: dict[str, str]) -> list[Block]:
    """A chapter's blocks under a level-1 heading; [] for a chapter without text (a cover)."""
    import lxml.etree
    import lxml.html

    content = item.get_content()
    if not content or not content.strip():
        return []
    try:
        root = lxml.html.document_fromstring(content)
    except (lxml.etree.ParserError, ValueError):
        return []
    body = root.find(".//body")
    blocks = html_blocks(body if body is not None else root, level_offset=1, skip=BOOK_SKIP)
    if not any(b.kind != "heading" for b in blocks):
        return []
    file_name = item.get_name()
    title = titles.get(file_name) or titles.get(Path(file_name).name, "")
    first = blocks[0]
    if first.kind == "heading" and (not title or first.text.strip() == title):
        title = title or first.text.strip()
        blocks = blocks[1:]  # the chapter's own heading is its section's title
    return [Block(title or Path(file_name).stem, "heading", level=1), *blocks]
