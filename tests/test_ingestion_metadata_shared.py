"""The metadata Fathom reads of the shared sample PDFs and DOCX files matches what each file
states (the table in docs/metadata.md): its title, authors and date."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.ingestion import load_document

pytestmark = [pytest.mark.data]

REACT_AUTHORS = (
    "Shunyu Yao",
    "Jeffrey Zhao",
    "Dian Yu",
    "Nan Du",
    "Izhak Shafran",
    "Karthik Narasimhan",
    "Yuan Cao",
)
# file -> (title, authors, ISO date), as each file states them ('' and (): it states none).
EXPECTED: dict[str, tuple[str, tuple[str, ...], str]] = {
    "pdfs/covidqa_annotation_handbook.pdf": ("Handbook: DeepAnnotation", (), ""),
    "pdfs/haystack_sample_pdf_1.pdf": ("A sample PDF file", (), "2020-06-02"),
    "pdfs/haystack_sample_pdf_2.pdf": ("First Page", (), "2020-06-05"),
    "pdfs/haystack_sample_pdf_3.pdf": ("", (), ""),
    "pdfs/react_arxiv2210.03629v2.pdf": (
        "REACT: SYNERGIZING REASONING AND ACTING IN LANGUAGE MODELS",
        REACT_AUTHORS,
        "2022-11-27",
    ),
    "docx/haystack_sample_docx_2_page_breaks.docx": ("", ("Jonathan Strutz",), "2024-08-14"),
    "docx/haystack_sample_docx_3.docx": ("", (), ""),
    "docx/unstructured_docx_tables.docx": ("", (), "2023-11-06"),
    "docx/usdoj_chapter13_trustee_handbook_2012.docx": (
        "Handbook for Chapter 13 Standing Trustees",
        (),
        "2012-10-01",
    ),
}


def test_every_shared_pdf_and_docx_is_in_the_table(data_dir: Path) -> None:
    files = {
        str(p.relative_to(data_dir))
        for folder in ("pdfs", "docx")
        for p in (data_dir / folder).iterdir()
        if p.suffix in (".pdf", ".docx")
    }
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_file_metadata(data_dir: Path, name: str) -> None:
    title, authors, iso_date = EXPECTED[name]
    meta = load_document(data_dir / name).meta
    assert (meta.title, meta.authors, meta.iso_date) == (title, authors, iso_date)
