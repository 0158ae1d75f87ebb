"""PPTX loader (python-pptx): one slide is one page, its title its section, text frames in
reading order (top to bottom, then left to right, group shapes opened), tables as rows, a
SmartArt diagram's nodes from its data part, speaker notes kept and marked.

Named ``slides`` rather than ``pptx`` so it never shadows the python-pptx package.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    Block,
    assemble,
    make_document,
    table_row,
)
from fathom.ingestion.metadata import guarded, office_properties, with_text
from fathom.ingestion.word import ArchiveLoader

NOTES_MARK = "Speaker notes:"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_DIAGRAM = _DGM  # a graphic frame holding a SmartArt diagram names its namespace as its uri
_RESAVE = "re-save it from PowerPoint or LibreOffice Impress as .pptx"


class PptxLoader(ArchiveLoader):
    """Loads ``.pptx``: a page per slide, the slide title as its section, notes marked."""

    format = "pptx"
    kind = "a PPTX"
    resave = _RESAVE

    def load(self, path: str | Path) -> Document:
        name, data = self.read_archive(path)
        prs = _open(name, data)
        blocks: list[Block] = []
        n_slides = 0
        try:
            for number, slide in enumerate(prs.slides, 1):
                n_slides = number
                blocks.extend(_slide_blocks(slide, number))
            meta_title = prs.core_properties.title or ""
        except (KeyError, ValueError, AttributeError, TypeError) as exc:
            # a slide, layout or notes part named in the package but missing or malformed
            raise ParseError(
                name, f"a slide cannot be read ({type(exc).__name__}: {exc})", _RESAVE
            ) from None
        assembled = assemble(blocks, n_pages=max(1, n_slides))
        if not assembled.text.strip():
            raise ParseError(name, "no text on any slide", "the slides hold only pictures?")
        meta = guarded(office_properties, prs.core_properties, data)
        return make_document(
            path,
            data,
            self.format,
            assembled,
            meta_title=meta_title,
            meta=with_text(meta, assembled),
        )


def _open(name: str, data: bytes) -> Any:
    try:
        import pptx
    except ImportError as exc:  # pragma: no cover - python-pptx comes with the base install
        raise ParseError(
            name, f"python-pptx is not installed ({exc})", "pip install python-pptx"
        ) from None
    try:
        return pptx.Presentation(io.BytesIO(data))
    except KeyError as exc:  # a part named in the relationships is not in the archive
        raise ParseError(
            name,
            f"cannot be opened (a part is missing: {exc.args[0] if exc.args else exc})",
            _RESAVE,
        ) from None
    except Exception as exc:  # python-pptx raises zipfile, lxml and its own errors
        raise ParseError(
            name, f"cannot be opened (corrupt or not a PPTX file: {type(exc).__name__})", _RESAVE
        ) from None


def _slide_blocks(slide: Any, number: int) -> Iterator[Block]:
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    yield Block(title or f"Slide {number}", "heading", page=number, level=1)
    title_id = title_shape.shape_id if title_shape is not None else None
    shapes = [s for s in _shapes(slide.shapes) if s.shape_id != title_id]
    shapes.sort(key=lambda s: (_pos(s.top), _pos(s.left)))
    for shape in shapes:
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = [table_row(c.text for c in row.cells) for row in shape.table.rows]
            rows = [r for r in rows if r]
            if rows:
                yield Block("\n".join(rows), "table", page=number)
        elif _DIAGRAM in _graphic_uri(shape):
            for text in _smartart_texts(slide, shape):
                yield Block(text, page=number)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            for para in shape.text_frame.paragraphs:
                text = para.text.replace("\v", " ")  # a line break inside the paragraph
                if text.strip():
                    yield Block(text, page=number)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = " ".join(frame.text.split()) if frame is not None else ""
        if notes:
            yield Block(f"{NOTES_MARK} {notes}", page=number)


def _shapes(shapes: Any) -> Iterator[Any]:
    """Every shape, group shapes opened (their members in the group's place)."""
    from pptx.shapes.group import GroupShape

    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _graphic_uri(shape: Any) -> str:
    """The kind of a graphic frame's content (a table, a chart, a SmartArt diagram …); ''
    for any other shape."""
    data = shape._element.find(f"{{{_A}}}graphic/{{{_A}}}graphicData")
    return data.get("uri", "") if data is not None else ""


def _smartart_texts(slide: Any, shape: Any) -> list[str]:
    """A SmartArt diagram's text, one string per node in the diagram's data order: its data
    part (``dgm:relIds r:dm``) holds the nodes; connectors and presentation points carry no
    text of the author's. [] when the part is missing or unreadable."""
    from lxml import etree

    rel_ids = shape._element.find(f".//{{{_DGM}}}relIds")
    rid = rel_ids.get(f"{{{_R}}}dm") if rel_ids is not None else None
    try:
        root = etree.fromstring(slide.part.related_part(rid).blob) if rid else None
    except (KeyError, ValueError, etree.XMLSyntaxError):
        return []
    if root is None:
        return []
    texts = []
    for pt in root.iter(f"{{{_DGM}}}pt"):
        if pt.get("type", "node") not in ("node", "asst"):
            continue
        paras = [
            "".join(t.text or "" for t in p.iter(f"{{{_A}}}t"))
            for p in pt.iterfind(f"{{{_DGM}}}t/{{{_A}}}p")
        ]
        text = " ".join(" ".join(paras).split())
        if text:
            texts.append(text)
    return texts


def _pos(value: Any) -> int:
    return int(value) if value is not None else 0
