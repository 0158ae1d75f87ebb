"""DocxLoader on generated DOCX files: headings, paragraphs and tables in order, errors."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.base import PageSpan
from fathom.core.errors import ParseError
from fathom.ingestion import LoadOptions, load_document
from fathom.ingestion.word import DocxLoader


def test_headings_paragraphs_and_table_in_order(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "fixture.docx")
    doc = DocxLoader().load(path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (doc.format, doc.sha256, doc.doc_id) == ("docx", sha, sha[:16])
    assert doc.title == docgen.DOCX_TITLE
    assert doc.pages == (PageSpan(1, 0, len(doc.text)),)  # page breaks do not matter
    assert [(s.title, s.level) for s in doc.sections] == docgen.DOCX_HEADINGS

    rows = [
        "Name | Default | Unit",
        "chunk size | 180 | tokens",
        "overlap | 32 | tokens",
        "retrieval depth | 10",
    ]
    sequence = [
        "Overview",
        docgen.DOCX_PARAGRAPHS[0],
        "Scope",
        docgen.DOCX_PARAGRAPHS[1],
        "Settings",
        docgen.DOCX_PARAGRAPHS[2],
        *rows,
        "Notes",
        docgen.DOCX_PARAGRAPHS[3],
    ]
    positions = [doc.text.index(part) for part in sequence]
    assert positions == sorted(positions)
    assert "\n".join(rows) in doc.text  # one table row per line
    assert "10 | 10" not in doc.text  # the merged cell appears once
    assert "\n\n\n" not in doc.text


def test_sections_cover_until_next_heading_of_same_or_higher_level(tmp_path: Path) -> None:
    doc = DocxLoader().load(docgen.make_docx(tmp_path / "f.docx"))
    sec = {s.title: s for s in doc.sections}
    assert sec["Overview"].start == 0
    assert sec["Overview"].end == sec["Settings"].start
    assert sec["Scope"].end == sec["Settings"].start
    assert sec["Settings"].end == len(doc.text)
    assert doc.text[sec["Notes"].start :].startswith("Notes\n\n")
    assert doc.section_at(doc.text.index("chunk size | 180")) == "Settings"


def test_title_falls_back_to_first_heading(tmp_path: Path) -> None:
    doc = DocxLoader().load(docgen.make_docx(tmp_path / "f.docx", title=""))
    assert doc.title == "Overview"


def test_vertical_merge_and_nested_table(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_paragraph("Tables with merges follow.")
    table = d.add_table(rows=3, cols=3)
    for r in range(3):
        for c in range(3):
            table.cell(r, c).text = f"r{r}c{c}"
    table.cell(0, 0).merge(table.cell(1, 0))  # vertical merge
    table.cell(2, 1).merge(table.cell(2, 2))  # horizontal merge
    inner = table.cell(0, 2).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "in1", "in2"
    path = tmp_path / "merged.docx"
    d.save(path)
    text = DocxLoader().load(path).text
    lines = text.split("\n\n")[1].split("\n")
    assert lines[0].startswith("r0c0 r1c0 | r0c1 | r0c2")  # python-docx merges the cell texts
    assert "in1, in2" in lines[0]  # the nested table inside its cell
    assert lines[1] == "| r1c1 | r1c2"  # continuation of the vertical merge: empty, not repeated
    assert lines[2] == "r2c0 | r2c1 r2c2"  # horizontal merge: one cell


def test_load_document_dispatches_docx(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "UPPER.DOCX")
    assert load_document(path).format == "docx"


def assert_parse_error(path: Path, *fragments: str) -> None:
    with pytest.raises(ParseError) as info:
        DocxLoader().load(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    for fragment in fragments:
        assert fragment in message, message


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "plain.docx"
    path.write_text("this is plain text pretending to be a docx\n")
    assert_parse_error(path, "not a DOCX")


def test_corrupt_zip(tmp_path: Path) -> None:
    good = docgen.make_docx(tmp_path / "good.docx").read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(good[: len(good) // 2])
    assert_parse_error(path, "cannot be opened")


def test_zip_without_document(tmp_path: Path) -> None:
    path = tmp_path / "other.docx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "not a word document")
    assert_parse_error(path, "cannot be opened")


def test_empty_document(tmp_path: Path) -> None:
    assert_parse_error(docgen.make_empty_docx(tmp_path / "blank.docx"), "no text")


def test_empty_file(tmp_path: Path) -> None:
    assert_parse_error(docgen.make_empty_file(tmp_path / "zero.docx"), "empty file")


def test_size_cap(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "f.docx")
    with pytest.raises(ParseError, match="limit"):
        DocxLoader(LoadOptions(max_bytes=100)).load(path)


_TEXT_BOX_XML = (
    '<w:p xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    ' xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
    ' xmlns:v="urn:schemas-microsoft-com:vml"'
    ' xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"'
    ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
    "<w:r><w:t>Anchor text.</w:t></w:r>"
    "<w:r><mc:AlternateContent>"
    '<mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic><a:graphicData><wps:wsp>'
    "<wps:txbx><w:txbxContent><w:p><w:r><w:t>{box}</w:t></w:r></w:p></w:txbxContent></wps:txbx>"
    "</wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
    "<mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent><w:p><w:r><w:t>{box}</w:t></w:r>"
    "</w:p></w:txbxContent></v:textbox></v:shape></w:pict></mc:Fallback>"
    "</mc:AlternateContent></w:r>"
    "<w:r><w:t> More anchor text.</w:t></w:r></w:p>"
)


def test_text_box_read_once_as_its_own_paragraph(tmp_path: Path) -> None:
    import docx
    from docx.oxml import parse_xml

    d = docx.Document()
    d.add_paragraph("Opening paragraph.")
    body = d.element.body
    body.insert(len(body) - 1, parse_xml(_TEXT_BOX_XML.format(box="Sidebar: the kiwi fact.")))
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "cell"
    cell_p = table.cell(0, 1)._tc
    cell_p.remove(cell_p.find(f"{{{cell_p.nsmap['w']}}}p"))
    cell_p.append(parse_xml(_TEXT_BOX_XML.format(box="boxed")))
    d.add_paragraph("Closing remarks.")
    path = tmp_path / "boxes.docx"
    d.save(path)
    text = DocxLoader().load(path).text
    assert text.count("Sidebar: the kiwi fact.") == 1  # mc:Fallback copy skipped
    assert text.count("boxed") == 1
    paragraphs = text.split("\n\n")
    assert paragraphs[:3] == [
        "Opening paragraph.",
        "Anchor text. More anchor text.",
        "Sidebar: the kiwi fact.",
    ]
    assert "cell | Anchor text. More anchor text. boxed" in paragraphs
