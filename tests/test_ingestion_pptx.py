"""PptxLoader: a slide is a page, its title its section, tables as rows, notes kept and marked;
broken files refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.errors import ParseError
from fathom.ingestion import load_document
from fathom.ingestion.slides import NOTES_MARK


def test_slides_are_pages_with_titles_tables_and_notes(tmp_path: Path) -> None:
    doc = load_document(docgen.make_pptx(tmp_path / "deck.pptx"))
    assert doc.format == "pptx" and doc.title == "Harvest Review"
    assert [p.number for p in doc.pages] == [1, 2]
    assert [(s.title, s.level) for s in doc.sections] == [
        ("Quarterly Harvest", 1),
        ("Storage Plan", 1),
    ]
    (title1, body1, notes1), (title2, body2, _) = docgen.PPTX_SLIDES
    one, two = (doc.text[p.start : p.end] for p in doc.pages)
    assert one.startswith(title1) and body1[0] in one
    assert f"{NOTES_MARK} {notes1}" in one
    assert two.startswith(title2) and body2[0] in two
    assert "Orchard | Tonnes\nNorth | 340\nSouth | 215" in two
    assert doc.page_at(doc.text.index("North | 340")) == 2
    assert doc.section_at(doc.text.index("North | 340")) == "Storage Plan"


def _not_a_zip(path: Path) -> Path:
    path.write_bytes(b"not a zip, just bytes")
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (_not_a_zip, "not a zip"),
        (lambda p: docgen.make_pptx_without(p, "ppt/slides/slide1.xml"), "cannot be read"),
        (lambda p: docgen.make_pptx_without(p, "ppt/presentation.xml"), "cannot be opened"),
    ],
)
def test_broken_pptx_is_one_line(tmp_path: Path, make, fragment: str) -> None:
    path = make(tmp_path / "broken.pptx")
    with pytest.raises(ParseError) as info:
        load_document(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and fragment in message
