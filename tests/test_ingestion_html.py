"""HtmlLoader: main content without navigation and boilerplate, headings as sections, tables as
rows, the <title> as title; a page that is only script is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.errors import ParseError
from fathom.ingestion import load_document


def test_main_content_headings_and_table(tmp_path: Path) -> None:
    doc = load_document(docgen.make_html(tmp_path / "moths.html"))
    assert doc.format == "html" and doc.title == docgen.HTML_TITLE
    assert [(s.title, s.level) for s in doc.sections] == [
        ("Field Guide to Moths", 1),
        ("Identification", 2),
        ("Wingspans", 3),
        ("Habitat", 2),
    ]
    assert "Species | Wingspan\nAtlas moth | 27 cm\nLuna moth | 11 cm" in doc.text
    assert doc.section_at(doc.text.index("Atlas moth | 27")) == "Wingspans"
    assert doc.section_at(doc.text.index("Antarctica")) == "Habitat"
    assert "- Antennae of males are often feathery." in doc.text
    for boilerplate in ("Shop our nets", "Subscribe", "banner", "analytics-snippet"):
        assert boilerplate not in doc.text


def test_htm_suffix_and_short_page(tmp_path: Path) -> None:
    html = "<html><head><title>Note</title></head><body><p>Buy rope and tar.</p></body></html>"
    doc = load_document(docgen.make_html(tmp_path / "note.htm", html))
    assert doc.title == "Note" and "Buy rope and tar." in doc.text


def test_mostly_script_is_refused(tmp_path: Path) -> None:
    path = docgen.make_script_html(tmp_path / "app.html")
    with pytest.raises(ParseError) as info:
        load_document(path)
    message = str(info.value)
    assert message.startswith(f"{path}: no readable text") and "\n" not in message
