"""PdfLoader on generated PDFs: pages, hyphenation, headers, sections, tables, errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion import LoadOptions, load_document
from fathom.ingestion.pdf import PdfLoader


@pytest.fixture
def sample(tmp_path: Path) -> Document:
    return PdfLoader().load(docgen.make_sample_pdf(tmp_path / "sample.pdf"))


def page_text(doc: Document, number: int) -> str:
    span = next(p for p in doc.pages if p.number == number)
    return doc.text[span.start : span.end]


def test_known_text_on_known_pages(sample: Document) -> None:
    assert [p.number for p in sample.pages] == [1, 2, 3]
    assert "Alpha page one text" in page_text(sample, 1)
    assert "Bravo page two text" in page_text(sample, 2)
    assert "Charlie page three text" in page_text(sample, 3)
    assert sample.page_at(sample.text.index("Bravo page two")) == 2
    assert sample.page_at(sample.text.index("Most misses come")) == 3
    # spans are ordered, non-overlapping and cover the text
    ends = [0] + [p.end for p in sample.pages]
    assert all(p.start >= prev for p, prev in zip(sample.pages, ends, strict=False))
    assert sample.pages[-1].end == len(sample.text)


def test_document_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    doc = PdfLoader().load(path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (doc.sha256, doc.doc_id, doc.format) == (sha, sha[:16], "pdf")
    assert doc.title == "Fathom Test Document"  # from the metadata
    assert doc.warnings == ()
    assert PdfLoader().load(path).doc_id == doc.doc_id  # stable
    monkeypatch.chdir(tmp_path)
    assert load_document("sample.pdf").path == "sample.pdf"  # as given, not resolved


def test_title_falls_back_to_first_heading(tmp_path: Path) -> None:
    path = docgen.make_pdf(tmp_path / "untitled.pdf", docgen.SAMPLE_PAGES, title="")
    assert PdfLoader().load(path).title == "Introduction"


def test_hyphenation_repaired(sample: Document) -> None:
    assert "Dense retrieval finds passages" in sample.text
    assert "retrie-" not in sample.text


def test_running_header_and_footer_removed(sample: Document) -> None:
    assert docgen.HEADER_TEXT not in sample.text
    assert "Page 1 of 3" not in sample.text and "of 3" not in sample.text


def test_numbered_headings_opening_each_page_are_not_running_headers(tmp_path: Path) -> None:
    animals = ["heron", "ibis", "stork", "crane"]
    pages = [
        [("h1", f"Chapter {n}"), ("p", f"Chapter {n} covers the {animal} and its habits.")]
        for n, animal in enumerate(animals, 1)
    ]
    doc = PdfLoader().load(docgen.make_pdf(tmp_path / "chapters.pdf", pages))
    assert [(s.title, s.level) for s in doc.sections] == [(f"Chapter {n}", 1) for n in range(1, 5)]
    for n in range(1, 5):
        assert page_text(doc, n).startswith(f"Chapter {n}\n\n")
    # the running header and the "Page N of M" footer (body size or smaller) still go
    assert docgen.HEADER_TEXT not in doc.text
    assert "Page 1 of 4" not in doc.text and "of 4" not in doc.text


def test_paragraphs_separated_by_one_blank_line(sample: Document) -> None:
    assert "\n\n\n" not in sample.text
    assert (
        "Alpha page one text: the quick brown fox jumps over the lazy dog near the river bank."
        in sample.text.split("\n\n")
    )


EXPECTED_SECTIONS = [
    ("Introduction", 1),
    ("Motivation", 2),
    ("Method", 1),
    ("Results", 1),
    ("Error analysis", 2),
]


@pytest.mark.parametrize(
    ("toc", "plain"),
    [(False, False), (True, False), (True, True)],
    ids=["font-size", "toc", "toc-only"],
)
def test_sections(tmp_path: Path, toc: bool, plain: bool) -> None:
    doc = PdfLoader().load(
        docgen.make_sample_pdf(tmp_path / "s.pdf", toc=toc, plain_headings=plain)
    )
    assert [(s.title, s.level) for s in doc.sections] == EXPECTED_SECTIONS
    by_title = {s.title: s for s in doc.sections}
    for sec in doc.sections:  # the heading is its own paragraph at the section start
        assert doc.text[sec.start :].startswith(sec.title + "\n\n")
    assert by_title["Introduction"].end == by_title["Method"].start
    assert by_title["Motivation"].end == by_title["Method"].start
    assert by_title["Results"].end == len(doc.text)
    assert doc.section_at(doc.text.index("Readers need answers")) == "Motivation"
    assert doc.section_at(doc.text.index("Bravo page two")) == "Method"


def test_outline_entry_not_on_its_page_starts_at_the_page(tmp_path: Path) -> None:
    from fathom.ingestion.pdf import import_pymupdf

    path = docgen.make_sample_pdf(tmp_path / "s.pdf", toc=True)
    pdf = import_pymupdf().open(path)
    pdf.set_toc([*pdf.get_toc(), [1, "Appendix Not In The Text", 3]])
    pdf.save(tmp_path / "extra.pdf")
    doc = PdfLoader().load(tmp_path / "extra.pdf")
    extra = next(s for s in doc.sections if s.title == "Appendix Not In The Text")
    assert extra.start == doc.pages[2].start and extra.end == len(doc.text)
    assert "Appendix Not In The Text" not in doc.text  # nothing invented in the text


def test_no_sections_without_outline_or_larger_headings(tmp_path: Path) -> None:
    doc = PdfLoader().load(docgen.make_sample_pdf(tmp_path / "s.pdf", plain_headings=True))
    assert doc.sections == ()
    assert "Bravo page two text" in page_text(doc, 2)


def test_table_rows_once(sample: Document) -> None:
    rows = [
        "Setting | Default | Meaning",
        "chunk size | 180 | tokens per chunk",
        "overlap | 32 | tokens shared",
    ]
    for row in rows:
        assert sample.text.count(row) == 1, row
        assert sample.page_at(sample.text.index(row)) == 2
    assert sample.text.count("tokens per chunk") == 1  # table text not also in the text flow
    # the table sits between the paragraphs around it
    text = sample.text
    assert text.index("Bravo page two") < text.index(rows[0]) < text.index("After the table")


def test_tables_can_be_disabled(tmp_path: Path) -> None:
    doc = PdfLoader(tables=False).load(docgen.make_sample_pdf(tmp_path / "s.pdf"))
    assert "chunk size | 180" not in doc.text
    assert "tokens per chunk" in doc.text


def test_two_columns_read_column_by_column(tmp_path: Path) -> None:
    doc = PdfLoader().load(docgen.make_two_column_pdf(tmp_path / "cols.pdf"))
    order = [doc.text.index(s) for s in ("Left one", "Left two", "Right one", "Right two")]
    assert order == sorted(order)


def test_user_guide(tmp_path: Path) -> None:
    doc = PdfLoader().load(docgen.make_user_guide_pdf(tmp_path / "guide.pdf"))
    assert doc.title == "Fathom User Guide"
    assert len(doc.pages) == 5
    assert doc.text.startswith(
        "Fathom User Guide\n\n"
    )  # the page-1 title is not taken for a header
    top = [s.title for s in doc.sections if s.level == 1]
    assert top == [
        "Fathom User Guide",
        "Ingesting documents",
        "Asking questions",
        "Configuration",
        "Troubleshooting",
    ]
    for title, page in [
        ("Installation", 1),
        ("Supported formats", 2),
        ("Exit codes", 3),
        ("Encrypted PDF", 5),
    ]:
        sec = next(s for s in doc.sections if s.title == title)
        assert doc.page_at(sec.start) == page
    assert doc.page_at(doc.text.index("retrieval.k | 10 | chunks retrieved per question")) == 4
    assert "Fathom User Guide\n\nFathom is a local-first" in doc.text


def test_fallback_to_pdfplumber_when_pymupdf_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fathom.ingestion.pdf as pdf_module

    real = pdf_module._page_lines
    calls = {"n": 0}

    def flaky(content, tables):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated PyMuPDF failure")
        return real(content, tables)

    monkeypatch.setattr(pdf_module, "_page_lines", flaky)
    doc = PdfLoader().load(docgen.make_sample_pdf(tmp_path / "s.pdf"))
    assert "Bravo page two text" in page_text(doc, 2)
    assert any("page 2" in w and "PyMuPDF failed" in w for w in doc.warnings)
    assert any("page 2" in w and "pdfplumber" in w for w in doc.warnings)


# ---------------------------------------------------------------------------------------------
# Bad inputs: every one is a ParseError naming the path
# ---------------------------------------------------------------------------------------------


def assert_parse_error(path: Path, *fragments: str, loader: PdfLoader | None = None) -> ParseError:
    with pytest.raises(ParseError) as info:
        (loader or PdfLoader()).load(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def test_empty_file(tmp_path: Path) -> None:
    assert_parse_error(docgen.make_empty_file(tmp_path / "empty.pdf"), "empty file")


def test_not_a_pdf(tmp_path: Path) -> None:
    path = tmp_path / "fake.pdf"
    path.write_text("just some words, not a PDF at all\n")
    assert_parse_error(path, "not a PDF")


def test_truncated(tmp_path: Path) -> None:
    assert_parse_error(docgen.make_truncated_pdf(tmp_path / "cut.pdf"), "corrupt or truncated")


def test_zero_pages(tmp_path: Path) -> None:
    assert_parse_error(docgen.make_zero_page_pdf(tmp_path / "zero.pdf"), "zero pages")


def test_encrypted(tmp_path: Path) -> None:
    path = docgen.make_encrypted_pdf(tmp_path / "locked.pdf", password="s3cret")
    err = assert_parse_error(path, "encrypted", "password")
    assert err.fix
    assert_parse_error(path, "password is wrong", loader=PdfLoader(LoadOptions(password="nope")))
    doc = PdfLoader(LoadOptions(password="s3cret")).load(path)
    assert "behind a password" in doc.text
    assert load_document(path, LoadOptions(password="s3cret")).text == doc.text


def test_image_only(tmp_path: Path) -> None:
    err = assert_parse_error(
        docgen.make_image_only_pdf(tmp_path / "scan.pdf"), "no extractable text (scanned?)"
    )
    assert "OCR" in err.fix


def test_size_cap(tmp_path: Path) -> None:
    path = docgen.make_sample_pdf(tmp_path / "s.pdf")
    assert_parse_error(path, "limit", loader=PdfLoader(LoadOptions(max_bytes=1000)))


def test_missing_and_directory(tmp_path: Path) -> None:
    assert_parse_error(tmp_path / "nope.pdf", "no such file")
    folder = tmp_path / "folder.pdf"
    folder.mkdir()
    assert_parse_error(folder, "directory")


def test_what_pymupdf_cannot_read_is_recorded_not_swallowed(tmp_path: Path, monkeypatch) -> None:
    """A damaged outline or page drawing loses nothing else: the text loads, and the document's
    warnings (its manifest entry) name what could not be read."""
    import pymupdf

    def broken(*args, **kwargs):
        raise RuntimeError("damaged object")

    monkeypatch.setattr(pymupdf.Document, "get_toc", broken)
    monkeypatch.setattr(pymupdf.Page, "get_drawings", broken)
    monkeypatch.setattr(pymupdf.Page, "get_cdrawings", broken, raising=False)
    doc = PdfLoader().load(docgen.make_sample_pdf(tmp_path / "sample.pdf"))
    assert "Alpha page one text" in page_text(doc, 1)
    assert any("table of contents could not be read (RuntimeError)" in w for w in doc.warnings)
    drawn = [w for w in doc.warnings if "drawings could not be read" in w]
    assert [w.split(":")[0] for w in drawn] == ["page 1", "page 2", "page 3"]
