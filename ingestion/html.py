"""HTML loader: the page's main content (trafilatura), headings as sections, tables as rows.

trafilatura drops navigation, headers, footers, comments and other boilerplate and returns the
main content as a small XML tree (``head``, ``p``, ``list``/``item``, ``table``/``row``/``cell``);
``html_blocks`` walks that tree, or plain HTML such as an EPUB chapter's, into ``Block``s.
The ``<title>`` is the document's title. trafilatura and lxml are imported when a file is read.
"""

from __future__ import annotations

import re
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
from fathom.ingestion.metadata import guarded, html_properties, with_text
from fathom.ingestion.options import LoadOptions

_HEADING = re.compile(r"^h([1-6])$")
# Tags whose content is never text of the document.
SKIP = frozenset(
    {"script", "style", "noscript", "template", "head", "nav", "svg", "math", "iframe", "object",
     "button", "select", "form", "aside", "footer", "header", "menu"}
)  # fmt: skip
# A book's chapter is all document: its <header> holds the chapter's heading and subtitle, its
# <aside> and <footer> notes and sidebars, not a site's navigation.
BOOK_SKIP = SKIP - {"header", "footer", "aside"}
_PARAGRAPH = frozenset(
    {"p", "item", "li", "dt", "dd", "quote", "blockquote", "figcaption", "caption", "address",
     "summary", "label"}
)  # fmt: skip
_CODE = frozenset({"pre", "code"})
_TABLE = frozenset({"table"})
_ROW = frozenset({"row", "tr"})
_CELL = frozenset({"cell", "td", "th"})
_BREAK = frozenset({"lb", "br"})
# Inline tags: their text joins the paragraph around them.
_INLINE = frozenset(
    {"a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "hi", "i", "ins",
     "kbd", "mark", "q", "ref", "rp", "rt", "ruby", "s", "samp", "small", "span", "strong", "sub",
     "sup", "time", "tt", "u", "var", "wbr", "img", "graphic", "lb", "br"}
)  # fmt: skip


class HtmlLoader:
    """Loads ``.html`` and ``.htm``: main content, ``<title>`` as title, headings as sections."""

    format = "html"

    def __init__(self, options: LoadOptions | None = None) -> None:
        self.options = options or LoadOptions()

    def load(self, path: str | Path) -> Document:
        name = str(path)
        data = read_source(path, self.options.max_bytes)
        root = parse_html(name, data)
        title = page_title(root)
        blocks = main_content(data)
        if not blocks:  # too short for trafilatura's main-content rules: the visible body
            blocks = html_blocks(root)
        assembled = assemble(blocks)
        if not assembled.text.strip():
            raise ParseError(
                name,
                "no readable text (the page is empty, or only script, styles and navigation)",
                "save the page after it has loaded (File › Save as, complete page), or print it "
                "to PDF",
            )
        meta = guarded(html_properties, root, data)
        return make_document(
            path, data, self.format, assembled, meta_title=title, meta=with_text(meta, assembled)
        )


def parse_html(name: str, data: bytes) -> Any:
    """The page as an lxml HTML tree; ParseError when it cannot be parsed at all."""
    import lxml.etree
    import lxml.html

    try:
        return lxml.html.document_fromstring(data)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ParseError(name, f"cannot be parsed as HTML ({exc})", "check the file") from None


def page_title(root: Any) -> str:
    """The text of ``<title>`` ('' when there is none)."""
    node = root.find(".//title")
    return " ".join((node.text_content() if node is not None else "").split())


def main_content(data: bytes) -> list[Block]:
    """The page's main content (trafilatura) as blocks; [] when trafilatura finds none."""
    import trafilatura

    extracted = trafilatura.bare_extraction(
        data,
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        favor_recall=True,
        with_metadata=False,
    )
    body = getattr(extracted, "body", None)
    return [] if body is None else html_blocks(body)


def html_blocks(root: Any, level_offset: int = 0, skip: frozenset[str] = SKIP) -> list[Block]:
    """Blocks of an HTML or trafilatura XML element in document order: headings (``hN`` or
    ``head rend="hN"``, levels shifted by ``level_offset``), paragraphs, list items, code and
    tables as rows of cells; elements tagged as in ``skip`` are left out (a web page's
    boilerplate by default, ``BOOK_SKIP`` for a book's chapter)."""
    blocks: list[Block] = []
    _walk(root, blocks, level_offset, skip)
    return blocks


def _tag(el: Any) -> str:
    tag = el.tag
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()  # XHTML namespaces (EPUB)


def _walk(el: Any, blocks: list[Block], offset: int, skip: frozenset[str]) -> None:
    tag = _tag(el)
    level = _heading_level(el, tag)
    if not tag or (tag in skip and not level):
        return
    if level:
        text = _text(el, skip=skip)
        if text:
            blocks.append(Block(text, "heading", level=min(6, level + offset)))
        return
    if tag in _TABLE:
        rows = [r for r in (_row(tr) for tr in _rows(el)) if r]
        if rows:
            blocks.append(Block("\n".join(rows), "table"))
        return
    if tag in _CODE:
        text = el.text_content() if hasattr(el, "text_content") else "".join(el.itertext())
        if text.strip():
            blocks.append(Block(text, "code"))
        return
    if tag in _PARAGRAPH or not _has_block_children(el):
        text = _text(el, skip=skip)
        if text:
            prefix = "- " if tag in ("item", "li") else ""
            blocks.append(Block(prefix + text))
        return
    # A container: text directly inside it (between its blocks) is a paragraph of its own.
    loose = [el.text or ""]
    for child in el:
        if _tag(child) in _INLINE:
            loose.append(_text(child, keep_tail=True, skip=skip))
            continue
        _flush(loose, blocks)
        _walk(child, blocks, offset, skip)
        loose = [child.tail or ""]
    _flush(loose, blocks)


def _flush(parts: list[str], blocks: list[Block]) -> None:
    text = " ".join(" ".join(parts).split())
    if text:
        blocks.append(Block(text))
    parts.clear()


def _heading_level(el: Any, tag: str) -> int:
    m = _HEADING.match(tag)
    if m:
        return int(m.group(1))
    if tag == "head" and el.get("rend"):  # trafilatura's heading, rend="h2" (not <head>)
        m = _HEADING.match(el.get("rend", ""))
        return int(m.group(1)) if m else 2
    return 0


def _has_block_children(el: Any) -> bool:
    return any(_tag(c) not in _INLINE and _tag(c) for c in el)


def _text(el: Any, keep_tail: bool = False, skip: frozenset[str] = SKIP) -> str:
    """An element's visible text on one line (``<br>`` as a space), leaving out the elements
    tagged as in ``skip`` (scripts among them)."""
    parts: list[str] = []

    def visit(node: Any) -> None:
        if node.text:
            parts.append(node.text)
        for child in node:
            tag = _tag(child)
            if tag in _BREAK:
                parts.append(" ")
            if tag and tag not in skip:
                visit(child)
            if child.tail:
                parts.append(child.tail)

    visit(el)
    if keep_tail and el.tail:
        parts.append(el.tail)
    return " ".join("".join(parts).split())


def _rows(table: Any) -> list[Any]:
    """The table's rows, including those inside thead/tbody/tfoot (not nested tables')."""
    out = []
    for child in table:
        tag = _tag(child)
        if tag in _ROW:
            out.append(child)
        elif tag in ("thead", "tbody", "tfoot"):
            out.extend(c for c in child if _tag(c) in _ROW)
    return out


def _row(tr: Any) -> str:
    return table_row(_text(cell) for cell in tr if _tag(cell) in _CELL)
