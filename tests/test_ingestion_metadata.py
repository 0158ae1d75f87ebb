"""Document metadata read at ingest: the title block of a first page, file properties (junk
ones dropped), each format's reader, and the collection keeping it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support.docgen import make_html, make_pptx
from fathom.core.base import DocMeta
from fathom.ingestion import load_document
from fathom.ingestion.child import document_from_json, document_json
from fathom.ingestion.meta_values import (
    find_date,
    find_version,
    good_person,
    good_title,
    merge,
    property_date,
    split_people,
)
from fathom.ingestion.pdf import import_pymupdf
from fathom.ingestion.title_block import person_names

TITLE = "Notes on the Analytical Engine"
AUTHORS = ("Ada Lovelace", "Charles Babbage", "Grace Hopper")
JUNK_PROPERTIES = {
    "title": "Microsoft Word - draft.docx",
    "author": "user",
    "creator": "PScript5.dll Version 5.2.2",
    "producer": "Acrobat Distiller 9.0.0 (Windows)",
}


def _page_text(page: Any, x: float, y: float, text: str, size: float, bold: bool = False) -> None:
    page.insert_text((x, y), text, fontsize=size, fontname="hebo" if bold else "helv")


def make_paper_pdf(path: Path, properties: dict[str, str] | None = None) -> Path:
    """A paper whose first page has a title block: a big title, authors with footnote marks
    (set as raised superscripts), an affiliation, a date and a version; then body text."""
    pymupdf = import_pymupdf()
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    _page_text(page, 72, 100, "Notes on the Analytical", 22, bold=True)
    _page_text(page, 72, 128, "Engine", 22, bold=True)
    x = 72.0
    for name, mark, sep in (
        ("Ada Lovelace", "1", ", "),
        ("Charles Babbage", "*,2", " and "),
        ("Grace Hopper", "§", ""),
    ):
        _page_text(page, x, 165, name, 11)
        x += pymupdf.get_text_length(name, fontname="helv", fontsize=11)
        _page_text(page, x, 160, mark, 7)  # a superscript: raised, smaller
        x += pymupdf.get_text_length(mark, fontname="helv", fontsize=7)
        _page_text(page, x, 165, sep, 11)
        x += pymupdf.get_text_length(sep, fontname="helv", fontsize=11)
    _page_text(page, 72, 185, "1 Analytical Engine Laboratory, University of London", 9)
    _page_text(page, 72, 198, "2 Difference Engine Society", 9)
    _page_text(page, 72, 216, "March 2012", 10)
    _page_text(page, 72, 230, "Version 1.2", 10)
    _page_text(page, 72, 270, "Abstract", 12, bold=True)
    body = (
        "The engine weaves algebraic patterns just as the Jacquard loom weaves flowers and "
        "leaves, and its operations may act upon other things besides number."
    )
    y = 290.0
    for _ in range(12):
        _page_text(page, 72, y, body[:90], 10)
        _page_text(page, 72, y + 13, body[90:], 10)
        y += 30
    doc.set_metadata(properties or {})
    doc.save(path)
    doc.close()
    return path


def make_plain_pdf(path: Path, properties: dict[str, str]) -> Path:
    """Body text only (no title block), with the given document properties."""
    pymupdf = import_pymupdf()
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for i in range(20):
        _page_text(page, 72, 80 + 14 * i, f"Tide gauge {i} recorded a mean level of {i}.5 m.", 10)
    doc.set_metadata(properties)
    doc.save(path)
    doc.close()
    return path


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("March 2012", ("March 2012", "2012-03")),
        ("Published 12 March 2012 in London", ("12 March 2012", "2012-03-12")),
        ("October 1, 2012", ("October 1, 2012", "2012-10-01")),
        ("Sept. 2020 edition", ("Sept. 2020", "2020-09")),
        ("2019-04-15", ("2019-04-15", "2019-04-15")),
        ("Fall 2018", ("Fall 2018", "2018")),
        ("Chapter 13 Standing Trustees", None),
    ],
)
def test_find_date(text: str, expected: tuple[str, str] | None) -> None:
    assert find_date(text) == expected


def test_a_year_alone_is_a_date_only_when_asked() -> None:
    assert find_date("2012") is None
    assert find_date("© 2012", year_alone=True) == ("2012", "2012")


def test_property_dates() -> None:
    assert property_date("D:20120315093000-05'00'") == ("2012-03-15", "2012-03-15")
    assert property_date(dt.datetime(2019, 4, 15, 8, 0)) == ("2019-04-15", "2019-04-15")
    assert property_date("2021-05-03T10:00:00Z") == ("2021-05-03", "2021-05-03")
    assert property_date("2021/05/03") == ("2021/05/03", "2021-05-03")
    assert property_date("") is None


def test_versions() -> None:
    assert find_version("Version 1.2") == "Version 1.2"
    assert find_version("Draft v2.0.1, for comment") == "v2.0.1"
    assert find_version("Revision B") == "Revision B"
    assert find_version("a revision of the guidelines") == ""


def test_person_names_strip_footnote_marks_and_affiliation_numbers() -> None:
    line = "Ada Lovelace1, Charles Babbage*,2 and Grace Hopper†"
    assert person_names(line) == AUTHORS
    assert person_names("Ludwig van Beethoven and Nan Du") == ("Ludwig van Beethoven", "Nan Du")
    assert person_names("Towards Better Engine Models") == ()
    assert person_names("Department of Computer Science, Princeton University") == ()


def test_junk_properties_are_dropped() -> None:
    for junk in ("Microsoft Word - draft.docx", "untitled", "PowerPoint Presentation", "Slide 1"):
        assert good_title(junk) == ""
    assert good_title(TITLE) == TITLE
    for junk in ("user", "admin", "Administrator", "jsmith", "Acrobat Distiller 9.0", "a@b.org"):
        assert good_person(junk) == ""
    assert split_people("Lovelace, Ada") == ("Lovelace, Ada",)
    assert split_people("Ada Lovelace; Charles Babbage") == AUTHORS[:2]
    assert split_people("Ada Lovelace, Charles Babbage and Grace Hopper") == AUTHORS


def test_merge_takes_each_field_from_the_preferred_source() -> None:
    props = DocMeta(title="From properties", date="2020-01-01", iso_date="2020-01-01",
                    origin=(("title", "properties", 0), ("date", "properties", 0)))  # fmt: skip
    block = DocMeta(title="From the page", date="May 2019", iso_date="2019-05",
                    origin=(("title", "title block", 1), ("date", "title block", 1)))  # fmt: skip
    merged = merge([props, block])
    assert merged.title == "From properties" and merged.source_of("title") == ("properties", 0)
    assert (merged.date, merged.iso_date) == ("May 2019", "2019-05")
    assert merged.source_of("date") == ("title block", 1)


def test_docmeta_round_trips_and_reads_empty() -> None:
    meta = DocMeta(TITLE, AUTHORS, "University of London", "March 2012", "2012-03", "1.2",
                   (("title", "title block", 1),))  # fmt: skip
    assert DocMeta.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta
    assert DocMeta.from_dict({}) == DocMeta() == DocMeta.from_dict(None)
    assert DocMeta().is_empty() and not meta.is_empty()


# ---------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------


def test_pdf_title_block_wins_over_junk_properties(tmp_path: Path) -> None:
    doc = load_document(make_paper_pdf(tmp_path / "paper.pdf", JUNK_PROPERTIES))
    meta = doc.meta
    assert meta.title == TITLE
    assert meta.authors == AUTHORS
    assert meta.organisation == "University of London"
    assert (meta.date, meta.iso_date) == ("March 2012", "2012-03")
    assert meta.version == "Version 1.2"
    for name in ("title", "authors", "organisation", "date", "version"):
        assert meta.source_of(name) == ("title block", 1), name


def test_pdf_good_properties_are_used(tmp_path: Path) -> None:
    properties = {
        "title": "Annual Survey of Tide Gauges",
        "author": "Ada Lovelace; Charles Babbage",
        "creationDate": "D:20190415120000Z",
        "producer": "Acrobat Distiller 9.0.0 (Windows)",
    }
    meta = load_document(make_plain_pdf(tmp_path / "tides.pdf", properties)).meta
    assert meta.title == "Annual Survey of Tide Gauges"
    assert meta.authors == AUTHORS[:2]
    assert meta.iso_date == "2019-04-15"
    assert meta.source_of("title") == ("properties", 0)
    assert meta.source_of("date") == ("properties", 0)


def test_pdf_with_only_junk_properties_and_no_title_block_has_no_metadata(
    tmp_path: Path,
) -> None:
    meta = load_document(make_plain_pdf(tmp_path / "junk.pdf", JUNK_PROPERTIES)).meta
    assert meta.title == "" and meta.authors == ()


def test_pdf_xmp_creators_are_the_authors(tmp_path: Path) -> None:
    path = make_plain_pdf(tmp_path / "xmp.pdf", {"title": "Tide Gauges"})
    pymupdf = import_pymupdf()
    doc = pymupdf.open(path)
    doc.set_xml_metadata(
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
        'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><rdf:Description rdf:about="">'
        "<dc:creator><rdf:Seq><rdf:li>Ada Lovelace</rdf:li><rdf:li>Grace Hopper</rdf:li>"
        "</rdf:Seq></dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>"
    )
    doc.saveIncr()
    doc.close()
    assert load_document(path).meta.authors == ("Ada Lovelace", "Grace Hopper")


def test_metadata_failure_never_fails_the_load(tmp_path: Path, monkeypatch) -> None:
    import fathom.ingestion.pdf as pdf

    def broken(*_: Any) -> DocMeta:
        raise RuntimeError("a damaged info dictionary")

    monkeypatch.setattr(pdf, "pdf_properties", broken)
    monkeypatch.setattr(pdf, "title_block", broken)
    doc = load_document(make_paper_pdf(tmp_path / "paper.pdf", JUNK_PROPERTIES))
    assert "Jacquard loom" in doc.text
    assert doc.meta.authors == () and doc.meta.organisation == ""


def test_docx_core_properties_and_cover(tmp_path: Path) -> None:
    import docx
    from docx.shared import Pt

    document = docx.Document()
    document.add_paragraph("Ministry of Engines")
    cover = document.add_paragraph().add_run("Handbook for Engine Keepers")
    cover.font.size = Pt(30)
    document.add_paragraph("October 1, 2012")
    for i in range(8):
        document.add_paragraph(f"Keepers oil the engine's gears every morning, rule {i}.")
    props = document.core_properties
    props.title = "Microsoft Word - keepers.docx"
    props.author = "Ada Lovelace"
    props.created = dt.datetime(2013, 5, 2, 9, 0)
    path = tmp_path / "keepers.docx"
    document.save(path)

    meta = load_document(path).meta
    assert meta.title == "Handbook for Engine Keepers"  # the junk property title is dropped
    assert meta.source_of("title") == ("title block", 1)
    assert meta.authors == ("Ada Lovelace",) and meta.source_of("authors") == ("properties", 0)
    assert meta.organisation == "Ministry of Engines"
    assert (meta.date, meta.iso_date) == ("October 1, 2012", "2012-10-01")


def test_docx_template_defaults_are_not_metadata(tmp_path: Path) -> None:
    import docx

    document = docx.Document()  # python-docx's template: author "python-docx", 2013-12-23
    document.add_paragraph("Plain words with nothing to say about themselves.")
    path = tmp_path / "plain.docx"
    document.save(path)
    meta = load_document(path).meta
    assert meta.authors == () and meta.iso_date == ""


def test_pptx_core_properties(tmp_path: Path) -> None:
    from pptx import Presentation

    path = make_pptx(tmp_path / "deck.pptx")
    prs = Presentation(path)
    prs.core_properties.author = "Grace Hopper"
    prs.core_properties.created = dt.datetime(2021, 9, 30)
    prs.core_properties.version = "3.1"
    prs.save(path)
    meta = load_document(path).meta
    assert meta.title == "Harvest Review"
    assert meta.authors == ("Grace Hopper",)
    assert meta.iso_date == "2021-09-30"
    assert meta.version == "3.1"


def test_a_title_slide_gives_title_authors_and_date(tmp_path: Path) -> None:
    # no core properties at all: the title slide's title, author line and date line
    from pptx import Presentation

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[0])
    slide.shapes.title.text = "Quarterly Safety Review"
    slide.placeholders[1].text = "Prepared by Mara Lindqvist and Tomas Okafor\nMarch 2024"
    body = prs.slides.add_slide(prs.slide_layouts[1])
    body.shapes.title.text = "By Region"
    body.placeholders[1].text = "Incidents fell by 12 percent in the north."
    path = tmp_path / "review.pptx"
    prs.save(str(path))
    meta = load_document(path).meta
    assert meta.title == "Quarterly Safety Review"
    assert meta.authors == ("Mara Lindqvist", "Tomas Okafor")
    assert meta.iso_date == "2024-03" and meta.source_of("authors") == ("text", 1)


def test_a_byline_names_people_only() -> None:
    from fathom.ingestion.meta_values import byline

    assert byline("Authors: Ada Lovelace, Grace Hopper") == ("Ada Lovelace", "Grace Hopper")
    assert byline("By Jane Q. Public") == ("Jane Q. Public",)
    assert byline("By G. A. LEBOUR , M.A., F.G.S.,") == ("G. A. LEBOUR",)
    assert byline("BY Laura Silver, Kat Devlin and Christine Huang") == (
        "Laura Silver",
        "Kat Devlin",
        "Christine Huang",
    )
    assert byline("By Region") == () and byline("By contrast, the plan failed.") == ()
    assert byline("By 2030 every plant will be audited") == ()


HTML_WITH_META = """<!DOCTYPE html><html><head><meta charset="utf-8">
<title>Moths | Example Naturalists Society</title>
<meta name="citation_title" content="Field Guide to Moths">
<meta name="citation_author" content="Lovelace, Ada">
<meta name="citation_author" content="Hopper, Grace">
<meta name="citation_publication_date" content="2021/05/03">
<meta property="article:published_time" content="2021-05-04T08:00:00Z">
<meta property="og:site_name" content="Example Naturalists Society">
<meta name="generator" content="WordPress 6.2">
</head><body><article><h1>Field Guide to Moths</h1>
<p>Moths are mostly nocturnal insects closely related to butterflies; about 160,000 species are
known, and the Atlas moth has a wingspan of up to 27 centimetres.</p></article></body></html>
"""


def test_html_meta_tags(tmp_path: Path) -> None:
    meta = load_document(make_html(tmp_path / "moths.html", HTML_WITH_META)).meta
    assert meta.title == "Field Guide to Moths"
    assert meta.authors == ("Lovelace, Ada", "Hopper, Grace")
    assert (meta.date, meta.iso_date) == ("2021/05/03", "2021-05-03")  # citation_*, not og
    assert meta.organisation == "Example Naturalists Society"
    assert meta.source_of("authors") == ("properties", 0)


def test_epub_package_metadata(tmp_path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("fathom-meta-epub")
    book.set_title("The Lighthouse Almanac")
    book.set_language("en")
    book.add_author("Ada Lovelace")
    book.add_author("Grace Hopper")
    book.add_metadata("DC", "date", "2015-06-01")
    book.add_metadata("DC", "publisher", "Kestrel Point Press")
    chapter = epub.EpubHtml(title="Keepers", file_name="chap_1.xhtml", lang="en")
    chapter.content = (
        "<html><body><h1>Keepers</h1><p>Keepers lit the lamp at sunset.</p></body></html>"
    )
    book.add_item(chapter)
    book.toc = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    path = tmp_path / "almanac.epub"
    epub.write_epub(str(path), book)

    meta = load_document(path).meta
    assert meta.title == "The Lighthouse Almanac"
    assert meta.authors == ("Ada Lovelace", "Grace Hopper")
    assert meta.iso_date == "2015-06-01"
    assert meta.organisation == "Kestrel Point Press"


def test_metadata_survives_the_child_process_round_trip(tmp_path: Path) -> None:
    doc = load_document(make_paper_pdf(tmp_path / "paper.pdf"))
    again = document_from_json(json.loads(json.dumps(document_json(doc))))
    assert again.meta == doc.meta and again.meta.authors == AUTHORS


# ---------------------------------------------------------------------------------------------
# The collection keeps it
# ---------------------------------------------------------------------------------------------


def _ingest(folder: Path, name: str = "meta") -> dict[str, Any]:
    res = CliRunner().invoke(
        cli.main, ["ingest", str(folder), "-c", name, "--embedder", "hashing:64", "--json"]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _show(name: str = "meta") -> dict[str, Any]:
    res = CliRunner().invoke(cli.main, ["collections", "show", name, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_ingest_keeps_metadata_and_collections_show_lists_it(tmp_path: Path, cfg) -> None:
    from fathom.index.collection import Collection

    folder = tmp_path / "docs"
    folder.mkdir()
    make_paper_pdf(folder / "paper.pdf", JUNK_PROPERTIES)
    make_html(folder / "moths.html", HTML_WITH_META)
    assert _ingest(folder)["counts"]["ok"] == 2

    by_name = {Path(d["path"]).name: d for d in _show()["documents"]}
    paper = by_name["paper.pdf"]["meta"]
    assert paper["title"] == TITLE and paper["authors"] == list(AUTHORS)
    assert paper["iso_date"] == "2012-03" and paper["version"] == "Version 1.2"
    assert ["title", "title block", 1] in paper["origin"]
    assert by_name["moths.html"]["meta"]["organisation"] == "Example Naturalists Society"

    coll = Collection.open(cfg, "meta")
    try:
        metas = coll.metadata()
        ids = {Path(d.path).name: d.doc_id for d in coll.manifest.documents}
    finally:
        coll.close()
    assert metas[ids["paper.pdf"]].authors == AUTHORS
    assert metas[ids["moths.html"]].title == "Field Guide to Moths"

    res = CliRunner().invoke(cli.main, ["collections", "show", "meta"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "Grace Hopper" in res.stdout and "University of London" in res.stdout

    # Unchanged on a re-ingest: kept, not parsed again, and still there.
    again = _ingest(folder)
    assert again["counts"]["unchanged"] == 2
    assert {Path(d["path"]).name: d["meta"] for d in _show()["documents"]}["paper.pdf"] == paper


def test_a_manifest_written_without_metadata_still_loads(tmp_path: Path, cfg) -> None:
    from fathom.index.collection import Collection, collections_root
    from fathom.index.manifest import DocEntry

    assert DocEntry.from_dict({"path": "a.pdf", "status": "ok"}).meta == {}
    folder = tmp_path / "docs"
    folder.mkdir()
    make_paper_pdf(folder / "paper.pdf")
    _ingest(folder, "old")
    manifest_path = collections_root(cfg) / "old" / "manifest.json"
    data = json.loads(manifest_path.read_text(encoding="utf-8"))
    # A manifest of format 1, which held every document's entry itself.
    entries = manifest_path.parent / f"gen-{data['generation']:06d}" / "documents.jsonl"
    data["format_version"] = 1
    data["documents"] = [json.loads(line) for line in entries.read_text().splitlines()]
    entries.unlink()
    for doc in data["documents"]:
        del doc["meta"]
    manifest_path.write_text(json.dumps(data), encoding="utf-8")

    coll = Collection.open(cfg, "old")
    try:
        assert list(coll.metadata().values()) == [DocMeta()]
    finally:
        coll.close()
    assert _show("old")["documents"][0]["meta"] == {}
    res = CliRunner().invoke(cli.main, ["collections", "show", "old"])
    assert res.exit_code == 0, res.output
