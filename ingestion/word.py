"""DOCX loader (python-docx): paragraphs and tables in document order, heading styles as sections.

Named ``word`` rather than ``docx`` so it never shadows the python-docx package.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    Block,
    assemble,
    make_document,
    read_source,
    table_row,
)
from fathom.ingestion.metadata import (
    docx_title_block,
    guarded,
    merge,
    office_properties,
    with_text,
)
from fathom.ingestion.options import LoadOptions

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P, _TBL, _SDT, _TR, _TC = f"{_W}p", f"{_W}tbl", f"{_W}sdt", f"{_W}tr", f"{_W}tc"
# Word writes a text box twice, as mc:Choice (DrawingML) and mc:Fallback (VML): read one copy.
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_CHOICE, _FALLBACK, _ALTERNATE = f"{_MC}Choice", f"{_MC}Fallback", f"{_MC}AlternateContent"
_TXBX = f"{_W}txbxContent"
_RUN_TAGS = frozenset(f"{_W}{t}" for t in ("t", "tab", "br", "cr", "noBreakHyphen", "delText"))
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
# python-docx unpacks every part into memory: a zip bomb named .docx must be refused unopened.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_PARTS = 10_000
# A part this large that also shrank more than MAX_RATIO times is a bomb, not a document.
_BOMB_PART_BYTES = 16 * 1024 * 1024
_BOMB_RATIO = 100


def check_unpacked_size(
    name: str,
    data: bytes,
    limit: int = MAX_UNPACKED_BYTES,
    resave: str = "re-save it from Word or LibreOffice as .docx",
) -> None:
    """ParseError unless the archive's declared sizes are sane (checked before unpacking).

    zipfile stops each member at its declared size and checks its CRC, so a member cannot
    unpack to more than its header says: the declared sizes bound the memory used.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise ParseError(
            name,
            f"cannot be opened (not a valid zip archive: {exc})",
            resave,
        ) from None
    if len(infos) > MAX_PARTS:
        raise ParseError(
            name, f"has {len(infos)} parts (over {MAX_PARTS}): not a document", _BOMB_FIX
        )
    total = sum(i.file_size for i in infos)
    if total > limit:
        raise ParseError(
            name,
            f"unpacks to {_mib(total)} (over the {_mib(limit)} limit; a zip bomb?)",
            _BOMB_FIX,
        )
    for info in infos:
        if info.file_size > _BOMB_PART_BYTES and info.file_size > _BOMB_RATIO * max(
            info.compress_size, 1
        ):
            raise ParseError(
                name,
                f"part {info.filename} unpacks to {_mib(info.file_size)} from "
                f"{_mib(info.compress_size)} (a zip bomb?)",
                _BOMB_FIX,
            )


_BOMB_FIX = "check where the file came from; re-save it from Word or LibreOffice"


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 10 * 2**20 else f"{n / 2**20:.2f} MiB"


class ArchiveLoader:
    """What the zip-based formats (DOCX, PPTX, EPUB) share: the size limits, and reading a
    file's bytes only once they are a zip archive whose declared sizes are sane."""

    kind = ""  # the format in messages, with its article: "a DOCX", "an EPUB"
    resave = ""  # the fix for a broken archive
    not_zip_fix = ""  # the fix for a file that is no zip at all (default: ``resave``)

    def __init__(
        self, options: LoadOptions | None = None, *, max_unpacked_bytes: int = MAX_UNPACKED_BYTES
    ) -> None:
        self.options = options or LoadOptions()
        self.max_unpacked_bytes = max_unpacked_bytes

    def read_archive(self, path: str | Path) -> tuple[str, bytes]:
        """``(name, bytes)`` of ``path``; ParseError unless it is a zip whose parts are sane."""
        name = str(path)
        data = read_source(path, self.options.max_bytes)
        if not data.startswith(b"PK"):
            raise ParseError(
                name, f"not {self.kind} file (not a zip archive)", self.not_zip_fix or self.resave
            )
        check_unpacked_size(name, data, self.max_unpacked_bytes, resave=self.resave)
        return name, data


class DocxLoader(ArchiveLoader):
    """Loads ``.docx`` with python-docx; one page (Word pagination is not in the file)."""

    format = "docx"
    kind = "a DOCX"
    resave = "re-save it from Word or LibreOffice as .docx"
    not_zip_fix = "check the file type or re-save it as .docx"

    def load(self, path: str | Path) -> Document:
        """Read the file into a Document: body paragraphs and tables, heading styles as sections."""
        name, data = self.read_archive(path)
        try:
            import docx  # python-docx, imported here so the CLI starts fast
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ParseError(
                name, f"python-docx is not installed ({exc})", "pip install python-docx"
            ) from None
        try:
            document = docx.Document(io.BytesIO(data))
        except KeyError as exc:  # a part named in the relationships is not in the archive
            raise ParseError(
                name,
                f"cannot be opened (a part is missing: {exc.args[0] if exc.args else exc})",
                "re-save it from Word or LibreOffice as .docx",
            ) from None
        except Exception as exc:  # python-docx raises zipfile, lxml and its own errors
            raise ParseError(
                name,
                f"cannot be opened (corrupt or not a DOCX file: {type(exc).__name__})",
                "re-save it from Word or LibreOffice as .docx",
            ) from None

        levels = _heading_levels(document)
        blocks = list(_body_blocks(document.element.body, levels))
        assembled = assemble(blocks)
        if not assembled.text.strip():
            raise ParseError(name, "no text", "the document is empty (or holds only images)")
        warnings: list[str] = []
        try:
            meta_title = document.core_properties.title
        except Exception as exc:  # a malformed core.xml should not lose the whole document
            meta_title = ""
            warnings.append(
                f"its document properties could not be read ({type(exc).__name__}); the title "
                "comes from the text"
            )
        meta = merge(
            [
                guarded(office_properties, document.core_properties, data),
                guarded(docx_title_block, document),
            ]
        )
        return make_document(
            path,
            data,
            self.format,
            assembled,
            meta_title=meta_title,
            warnings=warnings,
            meta=with_text(meta, assembled),
        )


def _heading_levels(document: Any) -> dict[str, int]:
    """style_id -> heading level for "Title", "Heading 1".."Heading 9" and styles based on them."""
    by_id: dict[str, Any] = {}
    for style in document.styles.element.iterchildren(f"{_W}style"):
        style_id = style.get(f"{_W}styleId")
        if style_id:
            by_id[style_id] = style

    def own_level(style: Any) -> int:
        name_el = style.find(f"{_W}name")
        name = (name_el.get(f"{_W}val") if name_el is not None else "") or ""
        match = _HEADING_STYLE.match(name.strip())
        if match:
            return int(match.group(1))
        if name.strip().lower() == "title":
            return 1
        return 0

    levels: dict[str, int] = {}
    for style_id, style in by_id.items():
        seen: set[str] = set()
        current, level = style, 0
        while current is not None and not level:  # follow basedOn to catch custom heading styles
            level = own_level(current)
            based = current.find(f"{_W}basedOn")
            parent = based.get(f"{_W}val") if based is not None else None
            if not parent or parent in seen:
                break
            seen.add(parent)
            current = by_id.get(parent)
        if level:
            levels[style_id] = level
    return levels


def _paragraph_text(p: Any, boxes: list[Any] | None = None) -> str:
    """Visible text of a ``w:p``: runs, tabs and breaks, including hyperlinks and fields.

    Text boxes anchored in the paragraph are not part of its text: their ``w:txbxContent``
    elements are appended to ``boxes`` (when given) so the caller can emit them on their own.
    """
    parts: list[str] = []
    for el in _run_elements(p, boxes):
        tag = el.tag
        if tag == f"{_W}t":
            parts.append(el.text or "")
        elif tag == f"{_W}tab":
            parts.append("\t")
        elif tag in (f"{_W}br", f"{_W}cr"):
            # A page break is not a line break in the text; a line break is.
            parts.append(" " if el.get(f"{_W}type") == "page" else "\n")
        elif tag == f"{_W}noBreakHyphen":
            parts.append("-")
        # w:delText is deleted (tracked-change) text: skipped
    return "".join(parts)


def _run_elements(el: Any, boxes: list[Any] | None) -> Iterator[Any]:
    """Text-bearing descendants of ``el`` in document order, reading one copy of alternate content
    (the first ``mc:Choice``, else the ``mc:Fallback``) and not descending into text boxes."""
    for child in el.iterchildren():
        tag = child.tag
        if tag in _RUN_TAGS:
            yield child
        elif tag == _TXBX:
            if boxes is not None:
                boxes.append(child)
        elif tag == _ALTERNATE:
            chosen = child.find(_CHOICE)
            if chosen is None:
                chosen = child.find(_FALLBACK)
            if chosen is not None:
                yield from _run_elements(chosen, boxes)
        elif isinstance(tag, str):  # not a comment or processing instruction
            yield from _run_elements(child, boxes)


def _paragraph_level(p: Any, levels: dict[str, int]) -> int:
    ppr = p.find(f"{_W}pPr")
    if ppr is None:
        return 0
    style = ppr.find(f"{_W}pStyle")
    if style is not None:
        level = levels.get(style.get(f"{_W}val") or "", 0)
        if level:
            return level
    outline = ppr.find(f"{_W}outlineLvl")
    if outline is not None:  # direct outline level on the paragraph (0-based; 9 = body text)
        try:
            value = int(outline.get(f"{_W}val") or 9)
        except ValueError:
            value = 9
        if value < 9:
            return value + 1
    return 0


def _body_blocks(body: Any, levels: dict[str, int]) -> Iterator[Block]:
    """Blocks of the body in document order (``w:p`` and ``w:tbl``, looking inside ``w:sdt``)."""
    for el in body.iterchildren(_P, _TBL, _SDT):
        if el.tag == _P:
            boxes: list[Any] = []
            text = _paragraph_text(el, boxes)
            if text.strip():
                level = _paragraph_level(el, levels)
                if level and len(text) <= 300:
                    yield Block(text, "heading", level=level)
                else:
                    yield Block(text)
            for box in boxes:  # a text box is its own paragraph(s), after its anchor's text
                for block in _body_blocks(box, levels):
                    # a heading style inside a sidebar must not open a section of the body
                    yield Block(block.text, "para") if block.kind == "heading" else block
        elif el.tag == _TBL:
            rows = _table_rows(el)
            if rows:
                yield Block("\n".join(rows), "table")
        else:
            content = el.find(f"{_W}sdtContent")
            if content is not None:
                yield from _body_blocks(content, levels)


def _cell_text(tc: Any) -> str:
    """A cell's paragraphs joined by spaces; a nested table's rows joined by ' / '."""
    parts: list[str] = []
    for el in tc.iterchildren(_P, _TBL, _SDT):
        if el.tag == _P:
            boxes: list[Any] = []
            parts.append(_paragraph_text(el, boxes))
            parts.extend(_cell_text(box) for box in boxes)  # a text box in a cell: same line
        elif el.tag == _TBL:
            parts.append(" / ".join(r.replace(" | ", ", ") for r in _table_rows(el)))
        else:
            content = el.find(f"{_W}sdtContent")
            if content is not None:
                parts.append(_cell_text(content))
    return " ".join(" ".join(parts).split())


def _table_rows(tbl: Any) -> list[str]:
    """Rows as 'a | b | c'. Reads the XML grid directly: a horizontally merged cell appears once,
    a vertically merged cell only in its first row (python-docx would repeat both)."""
    rows: list[str] = []
    for tr in tbl.iterchildren(_TR):
        cells: list[str] = []
        for tc in _row_cells(tr):
            tcpr = tc.find(f"{_W}tcPr")
            vmerge = tcpr.find(f"{_W}vMerge") if tcpr is not None else None
            if vmerge is not None and vmerge.get(f"{_W}val") in (None, "continue"):
                cells.append("")  # continuation of a vertical merge: text shown in the first row
                continue
            cells.append(_cell_text(tc))
        row = table_row(cells)
        if row:
            rows.append(row)
    return rows


def _row_cells(tr: Any) -> Iterator[Any]:
    """The ``w:tc`` children of a row, looking inside content controls (``w:sdt``)."""
    for el in tr.iterchildren(_TC, _SDT):
        if el.tag == _TC:
            yield el
        else:
            content = el.find(f"{_W}sdtContent")
            if content is not None:
                yield from _row_cells(content)
