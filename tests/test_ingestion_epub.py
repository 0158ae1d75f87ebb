"""EpubLoader: chapters in spine order as sections, their HTML through the HTML walker; broken
and DRM-encrypted books refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.errors import ParseError
from fathom.ingestion import load_document


def test_chapters_in_spine_order_as_sections(tmp_path: Path) -> None:
    doc = load_document(docgen.make_epub(tmp_path / "almanac.epub"))
    assert doc.format == "epub" and doc.title == docgen.EPUB_TITLE
    top = [s.title for s in doc.sections if s.level == 1]
    assert top == [title for title, _ in docgen.EPUB_CHAPTERS]
    assert doc.text.index("lit the lamp") < doc.text.index("flashes its own pattern")
    assert doc.section_at(doc.text.index("chamois")) == "Duties"  # a heading inside a chapter
    assert doc.section_at(doc.text.index("flashes")) == "Signals"
    assert "Kestrel Point | two flashes every ten seconds" in doc.text
    assert doc.text.count("Keepers") == 2  # the chapter's heading once, not repeated


def _not_a_zip(path: Path) -> Path:
    path.write_bytes(b"plain bytes, not an archive")
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (_not_a_zip, "not a zip"),
        (lambda p: docgen.make_epub_without(p, "META-INF/container.xml"), "a part is missing"),
        (lambda p: docgen.make_epub_without(p, "EPUB/content.opf"), "cannot be opened"),
        (docgen.make_drm_epub, "DRM-protected"),
    ],
)
def test_broken_epub_is_one_line(tmp_path: Path, make, fragment: str) -> None:
    path = make(tmp_path / "broken.epub")
    with pytest.raises(ParseError) as info:
        load_document(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and fragment in message


def test_a_chapter_heading_inside_header_is_kept() -> None:
    """EPUB 3 chapters often open with <header><h1>…</h1><p>subtitle</p></header>: in a book
    that is the chapter's heading, not a site's banner (a web page's <header> is skipped)."""
    from fathom.ingestion.html import BOOK_SKIP, html_blocks
    from lxml import html

    root = html.fromstring(
        "<body><section><header><h1>The Tide Mills</h1><p>A history</p></header>"
        "<p>Mills turned with the tide.</p></section></body>"
    )
    book = html_blocks(root, skip=BOOK_SKIP)
    assert [(b.text, b.kind) for b in book[:2]] == [
        ("The Tide Mills", "heading"),
        ("A history", "para"),
    ]
    web = html_blocks(root)
    assert [b.text for b in web] == ["Mills turned with the tide."]
