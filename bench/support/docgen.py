"""Fixture generators: PDFs (PyMuPDF), DOCX (python-docx), text files in awkward encodings, and
scans, images, HTML, PPTX and EPUB files.

Every ``make_*`` function writes one file and returns its ``Path``; tests call them with pytest's
``tmp_path``. The text they write is in module constants (or in the arguments) so tests can
assert on it. Main entry points:

- ``make_pdf(path, pages, ...)``: pages of ``(kind, text)`` items, kind one of ``"h1" "h2" "h3"``
  (headings in larger bold type), ``"p"`` (paragraph; a ``\\n`` inside forces a line break),
  ``"table"`` (rows separated by ``\\n``, cells by ``|``; drawn with ruled lines) and
  ``"colbreak"`` (continue in the next column when ``columns=2``). Each page gets a running
  header and a "Page N of M" footer; ``toc=True`` also writes the outline.
- ``make_docx(path)``: headings (levels 1, 2), paragraphs and a table with a merged cell
  (``DOCX_*`` constants).
- ``make_user_guide_pdf(path)``: the bundled 5-page Fathom user guide (``USER_GUIDE_PAGES``).
- broken inputs: ``make_encrypted_pdf``, ``make_image_only_pdf``, ``make_truncated_pdf``,
  ``make_zero_page_pdf``, ``make_text`` and the ``make_*_text`` helpers.
- hostile inputs: ``mutate`` (seeded truncation / byte flips), ``make_many_page_pdf``,
  ``make_zip_bomb_docx``, ``make_docx_without`` (a missing part), ``write_large_text``.
- OCR and the other formats: ``make_scanned_pdf`` (``SCAN_PAGES`` rendered to an image-only
  PDF), ``make_mixed_pdf``, ``make_text_png`` / ``make_text_jpeg`` (``IMAGE_LINES``),
  ``make_multipage_tiff`` (``TIFF_PAGES``), ``make_html`` (``HTML_PAGE``), ``make_pptx``
  (``PPTX_SLIDES``, ``PPTX_TABLE``), ``make_epub`` (``EPUB_CHAPTERS``); and their hostile
  kin: ``make_noise_png``, ``make_bomb_png``, ``make_truncated_tiff``, ``make_script_html``,
  ``make_pptx_without``, ``make_epub_without``, ``make_drm_epub``.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

PAGE_W, PAGE_H = 595.0, 842.0  # A4 in points
MARGIN = 72.0
BODY_SIZE = 11.0
HEADING_SIZES = {"h1": 18.0, "h2": 14.0, "h3": 12.5}
HEADER_TEXT = "Fathom Test Document — internal draft"
FOOTER_TEXT = "Page {page} of {pages}"
FIXED_DATE = "D:20250101000000Z"  # fixed dates keep generated files byte-identical across runs

Item = tuple[str, str]


def _pymupdf() -> Any:
    from fathom.ingestion.pdf import import_pymupdf

    return import_pymupdf()


# ---------------------------------------------------------------------------------------------
# PDF
# ---------------------------------------------------------------------------------------------


def _wrap(text: str, width: float, size: float, font: str) -> list[str]:
    """Greedy word wrap to ``width`` points; explicit newlines force breaks."""
    pymupdf = _pymupdf()

    lines: list[str] = []
    for raw in text.split("\n"):
        line = ""
        for word in raw.split():
            trial = f"{line} {word}" if line else word
            if line and pymupdf.get_text_length(trial, fontname=font, fontsize=size) > width:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
    return lines


def make_pdf(
    path: str | Path,
    pages: list[list[Item]],
    *,
    title: str = "Fathom Test Document",
    header: str | None = HEADER_TEXT,
    footer: str | None = FOOTER_TEXT,
    toc: bool = False,
    columns: int = 1,
    plain_headings: bool = False,
) -> Path:
    """Write a PDF with known text on known pages (see the module docstring for ``pages``).

    ``title`` goes into the metadata; ``toc=True`` writes the outline from the h1-h3 items;
    ``plain_headings`` sets headings in the body size (so only the outline can find them).
    Raises ValueError when a page's content does not fit, so fixtures stay honest.
    """
    pymupdf = _pymupdf()

    path = Path(path)
    doc = pymupdf.open()
    outline: list[list[object]] = []
    gutter = 24.0
    col_w = (PAGE_W - 2 * MARGIN - (columns - 1) * gutter) / columns
    for number, items in enumerate(pages, 1):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        if header:
            page.insert_text((MARGIN, 40), header, fontsize=9, fontname="helv")
        if footer:
            page.insert_text(
                (PAGE_W - MARGIN - 60, PAGE_H - 36),
                footer.format(page=number, pages=len(pages)),
                fontsize=9,
                fontname="helv",
            )
        column = 0
        y = MARGIN
        for kind, text in items:
            x = MARGIN + column * (col_w + gutter)
            if kind == "colbreak":
                column += 1
                if column >= columns:
                    raise ValueError(f"page {number}: no column {column + 1}")
                y = MARGIN
                continue
            if kind == "table":
                y = _draw_table(page, x, y, col_w, [row.split("|") for row in text.split("\n")])
                continue
            if kind in HEADING_SIZES:
                size, font = (BODY_SIZE if plain_headings else HEADING_SIZES[kind]), "hebo"
                y += size * 0.6
                outline.append([int(kind[1]), text, number])
            elif kind == "p":
                size, font = BODY_SIZE, "helv"
            else:
                raise ValueError(f"unknown item kind {kind!r}")
            for line in _wrap(text, col_w, size, font):
                y += size * 1.35
                page.insert_text((x, y), line, fontsize=size, fontname=font)
            y += size * 0.9
            if y > PAGE_H - MARGIN + 10:
                raise ValueError(f"page {number}: content does not fit")
    if toc:
        doc.set_toc(outline)
    doc.set_metadata(
        {
            "title": title,
            "author": "Fathom tests",
            "creator": "tests/docgen.py",
            "producer": "PyMuPDF",
            "creationDate": FIXED_DATE,
            "modDate": FIXED_DATE,
        }
    )
    doc.save(path, garbage=3, deflate=True, no_new_id=True)  # same input, same bytes
    doc.close()
    return path


def _draw_table(page: object, x: float, y: float, width: float, rows: list[list[str]]) -> float:
    """Draw ``rows`` as a ruled grid at (x, y); returns the y below it."""
    n_cols = max(len(r) for r in rows)
    row_h = 20.0
    col_w = width / n_cols
    y += 8
    top = y
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            page.insert_text(  # type: ignore[attr-defined]
                (x + c * col_w + 4, y + 14),
                cell.strip(),
                fontsize=9.5,
                fontname="hebo" if r == 0 else "helv",
            )
        y += row_h
    for i in range(len(rows) + 1):
        page.draw_line((x, top + i * row_h), (x + width, top + i * row_h), width=0.8)  # type: ignore[attr-defined]
    for c in range(n_cols + 1):
        page.draw_line((x + c * col_w, top), (x + c * col_w, y), width=0.8)  # type: ignore[attr-defined]
    return y + 14


def make_encrypted_pdf(path: str | Path, password: str = "s3cret") -> Path:
    """A one-page PDF that needs ``password`` to open (AES-256)."""
    pymupdf = _pymupdf()

    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    page.insert_text((MARGIN, MARGIN), "This text is behind a password.", fontsize=BODY_SIZE)
    doc.save(
        path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password + "-owner"
    )
    doc.close()
    return path


def make_image_only_pdf(path: str | Path, pages: int = 2) -> Path:
    """A PDF whose pages hold only a raster image and vector shapes: no text layer."""
    pymupdf = _pymupdf()

    path = Path(path)
    doc = pymupdf.open()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 48), False)
    pix.clear_with(180)
    for _ in range(pages):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_image(pymupdf.Rect(MARGIN, MARGIN, PAGE_W - MARGIN, 400), pixmap=pix)
        page.draw_circle((PAGE_W / 2, 600), 80, color=(0, 0, 0), fill=(0.2, 0.4, 0.8))
    doc.save(path)
    doc.close()
    return path


def make_truncated_pdf(path: str | Path) -> Path:
    """The first bytes of a valid PDF: header and part of the first object, nothing else."""
    pymupdf = _pymupdf()

    doc = pymupdf.open()
    doc.new_page().insert_text((MARGIN, MARGIN), "Truncated before this text was written.")
    data = doc.tobytes()
    doc.close()
    path = Path(path)
    path.write_bytes(data[:60])
    return path


def _write_raw_pdf(path: str | Path, objects: list[bytes]) -> Path:
    """A PDF file from raw object bodies (object i + 1 is ``objects[i]``; 1 is the catalog),
    with its cross-reference table and trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path = Path(path)
    path.write_bytes(bytes(out))
    return path


def make_zero_page_pdf(path: str | Path) -> Path:
    """A syntactically valid PDF whose page tree has no pages (PyMuPDF refuses to write one)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [] /Count 0 >>",
    ]
    return _write_raw_pdf(path, objects)


# A three-page document exercising pages, hyphenation, headings, a table and running headers.
SAMPLE_PAGES: list[list[Item]] = [
    [
        ("h1", "Introduction"),
        (
            "p",
            "Alpha page one text: the quick brown fox jumps over the lazy dog near the river bank.",
        ),
        ("p", "Dense retrie-\nval finds passages by meaning rather than by shared words alone."),
        ("h2", "Motivation"),
        (
            "p",
            "Readers need answers with page citations so that every claim can be checked quickly.",
        ),
    ],
    [
        ("h1", "Method"),
        ("p", "Bravo page two text: documents are split into chunks that keep their page numbers."),
        (
            "table",
            "Setting|Default|Meaning\nchunk size|180|tokens per chunk\noverlap|32|tokens shared",
        ),
        ("p", "After the table the method section continues with more ordinary body text."),
    ],
    [
        ("h1", "Results"),
        ("p", "Charlie page three text: hybrid search beats either retriever on its own."),
        ("h2", "Error analysis"),
        ("p", "Most misses come from questions whose answer spans two distant sections."),
    ],
]


def make_sample_pdf(path: str | Path, *, toc: bool = False, plain_headings: bool = False) -> Path:
    """``SAMPLE_PAGES`` as a PDF (``toc``: with outline; ``plain_headings``: body-size headings)."""
    return make_pdf(path, SAMPLE_PAGES, toc=toc, plain_headings=plain_headings)


TWO_COLUMN_PAGE: list[Item] = [
    ("p", "Left one: the first paragraph of the left column talks about alpine lakes and rivers."),
    ("p", "Left two: the second paragraph of the left column continues with mountain weather."),
    ("colbreak", ""),
    ("p", "Right one: the first paragraph of the right column turns to coastal towns and ports."),
    ("p", "Right two: the second paragraph of the right column ends with fishing and trade."),
]


def make_two_column_pdf(path: str | Path) -> Path:
    """One page in two columns (``TWO_COLUMN_PAGE``): left column first in reading order."""
    return make_pdf(path, [TWO_COLUMN_PAGE], columns=2, header=None, footer=None)


# ---------------------------------------------------------------------------------------------
# DOCX
# ---------------------------------------------------------------------------------------------

DOCX_TITLE = "Fathom DOCX Fixture"
DOCX_HEADINGS = [("Overview", 1), ("Scope", 2), ("Settings", 1), ("Notes", 2)]
DOCX_PARAGRAPHS = [
    "This document describes how the fixture is laid out for the loader tests.",
    "The scope covers paragraphs, headings and one table with a merged cell.",
    "The table below lists three settings and their defaults.",
    "Text after the page break still belongs to the single page of the document.",
]
DOCX_TABLE = [
    ["Name", "Default", "Unit"],
    ["chunk size", "180", "tokens"],
    ["overlap", "32", "tokens"],
    ["retrieval depth", "10"],  # the last two cells are merged into one
]


def make_docx(path: str | Path, *, title: str = DOCX_TITLE) -> Path:
    """A DOCX: H1 Overview, para, H2 Scope, para, H1 Settings, para, table, page break, H2 Notes."""
    import docx
    from docx.enum.text import WD_BREAK

    path = Path(path)
    d = docx.Document()
    d.core_properties.title = title
    d.add_heading(DOCX_HEADINGS[0][0], level=1)
    d.add_paragraph(DOCX_PARAGRAPHS[0])
    d.add_heading(DOCX_HEADINGS[1][0], level=2)
    d.add_paragraph(DOCX_PARAGRAPHS[1])
    d.add_heading(DOCX_HEADINGS[2][0], level=1)
    d.add_paragraph(DOCX_PARAGRAPHS[2])
    table = d.add_table(rows=len(DOCX_TABLE), cols=3)
    for r, row in enumerate(DOCX_TABLE):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    last = len(DOCX_TABLE) - 1
    table.cell(last, 1).merge(table.cell(last, 2))
    d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    d.add_heading(DOCX_HEADINGS[3][0], level=2)
    d.add_paragraph(DOCX_PARAGRAPHS[3])
    d.save(path)
    return path


def make_empty_docx(path: str | Path) -> Path:
    """A valid DOCX with no text at all."""
    import docx

    path = Path(path)
    docx.Document().save(path)
    return path


# ---------------------------------------------------------------------------------------------
# Text files
# ---------------------------------------------------------------------------------------------

NON_ASCII_TEXT = "Café naïve résumé — “quoted” Straße, Ærø, 東京, emoji ✓.\n\nSecond paragraph ñ.\n"
CP1252_TEXT = "Crème brûlée costs 5 € — “smart quotes” and the ‰ sign.\n"
MARKDOWN_TEXT = """\
# Fathom notes

Intro paragraph that wraps
onto a second line.

## Install

Run the installer.

```
# not a heading inside code
pip install fathom
```

Setext Title
------------

Body under the setext heading.

| key | value |
| --- | ----- |
| k   | 10    |
"""


def make_text(path: str | Path, text: str, encoding: str = "utf-8", bom: bool = False) -> Path:
    """Write ``text`` in ``encoding`` (with a byte-order mark when ``bom``)."""
    path = Path(path)
    data = text.encode(encoding)
    if bom:
        data = {
            "utf-8": codecs.BOM_UTF8,
            "utf-16-le": codecs.BOM_UTF16_LE,
            "utf-16-be": codecs.BOM_UTF16_BE,
        }[encoding] + data
    path.write_bytes(data)
    return path


def make_utf8_text(path: str | Path, bom: bool = False) -> Path:
    """``NON_ASCII_TEXT`` in UTF-8."""
    return make_text(path, NON_ASCII_TEXT, "utf-8", bom=bom)


def make_utf16_text(path: str | Path, big_endian: bool = False) -> Path:
    """``NON_ASCII_TEXT`` in UTF-16 with a byte-order mark."""
    return make_text(path, NON_ASCII_TEXT, "utf-16-be" if big_endian else "utf-16-le", bom=True)


def make_cp1252_text(path: str | Path) -> Path:
    """``CP1252_TEXT`` in Windows-1252 (not valid UTF-8)."""
    return make_text(path, CP1252_TEXT, "cp1252")


def make_markdown(path: str | Path) -> Path:
    """``MARKDOWN_TEXT``: ATX and setext headings, fenced code, a table."""
    return make_text(path, MARKDOWN_TEXT)


def make_empty_file(path: str | Path, content: bytes = b"") -> Path:
    """An empty file (or whitespace only, via ``content``)."""
    path = Path(path)
    path.write_bytes(content)
    return path


def make_binary_text(path: str | Path) -> Path:
    """Binary data (a PNG-like header and NUL bytes) behind a text extension."""
    path = Path(path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    return path


def make_invalid_text(path: str | Path) -> Path:
    """Bytes invalid in UTF-8 and undefined in cp1252 (0x81, 0x8D, 0x8F, 0x90, 0x9D)."""
    path = Path(path)
    path.write_bytes(b"Plain start, then bad bytes: \x81\x8d\x8f\x90\x9d and more text.\n")
    return path


# ---------------------------------------------------------------------------------------------
# The bundled example: a short Fathom user guide
# ---------------------------------------------------------------------------------------------

USER_GUIDE_TITLE = "Fathom User Guide"
USER_GUIDE_PAGES: list[list[Item]] = [
    [
        ("h1", "Fathom User Guide"),
        (
            "p",
            "Fathom is a local-first command-line tool for asking questions about your own "
            "documents. It reads PDF, DOCX, plain-text (.txt) and Markdown (.md) files, splits "
            "them into chunks that remember their page and section, indexes the chunks on your "
            "machine, and answers questions with citations to the pages the answer came from.",
        ),
        (
            "p",
            "Nothing leaves your computer unless you configure a remote model: the embedding "
            "model, the search indexes and the collection files all live in the Fathom data "
            "directory.",
        ),
        ("h2", "Installation"),
        (
            "p",
            "Fathom needs Python 3.11 or newer. Install it into a virtual environment with pip "
            "from the project directory: python -m venv .venv, activate the environment, then "
            "run pip install -e . to get the fathom command. Running python cli.py from the "
            "source tree starts the same program.",
        ),
        (
            "p",
            "Check the installation with fathom --help, which lists the commands, and with "
            "fathom config show, which prints the effective configuration and where each value "
            "came from.",
        ),
        ("h2", "Where Fathom keeps its data"),
        (
            "p",
            "Collections are stored under the Fathom data directory: the FATHOM_HOME environment "
            "variable when it is set, otherwise the platform data directory (on Linux "
            "~/.local/share/fathom). Each collection is a directory with a manifest.json file, "
            "the chunk store, a FAISS index for dense search and the BM25 arrays for keyword "
            "search.",
        ),
    ],
    [
        ("h1", "Ingesting documents"),
        (
            "p",
            "The ingest command takes files and folders. Folders are searched recursively; "
            "hidden files and folders, whose names start with a dot, are skipped, and so are "
            "files with an unsupported extension. Every skipped or failed path is reported with "
            "its reason, and one bad file never stops the rest of the batch.",
        ),
        ("h2", "Supported formats"),
        (
            "p",
            "PDF files keep their page numbers, so answers can cite pages. Section titles come "
            "from the PDF outline when there is one and otherwise from larger heading fonts. "
            "Running headers and footers that repeat on most pages are removed, words split by "
            "a hyphen at the end of a line are joined again, and ruled tables become rows of "
            "cells separated by a vertical bar.",
        ),
        (
            "p",
            "DOCX files keep their headings and tables in document order; PPTX, HTML and EPUB "
            "files keep their slides, headings and chapters. Text files are "
            "decoded as UTF-8, UTF-16 with a byte-order mark, or Windows-1252. Markdown "
            "headings become sections.",
        ),
        ("h2", "What cannot be ingested"),
        (
            "p",
            "A scanned PDF without a text layer is read by OCR when the ocr extra is installed, "
            "and otherwise reported as failed with the install that fixes it. "
            "An encrypted PDF needs its password. Empty files, binary data saved with a text "
            "extension and corrupt or truncated files are reported as failed with the reason "
            "and a suggested fix.",
        ),
        (
            "p",
            "Re-ingesting a file whose bytes have not changed yields the same document and chunk "
            "identifiers, so an unchanged file is not indexed twice.",
        ),
    ],
    [
        ("h1", "Asking questions"),
        (
            "p",
            "The ask command takes a question in quotes. Fathom retrieves the most relevant "
            "chunks, by default with hybrid search that fuses dense embedding search and BM25 "
            "keyword search, and passes them to the answer generator.",
        ),
        (
            "p",
            "Every answer lists its sources: the document title, the page or page range and the "
            "section title of each chunk that was used. Open the cited page to check the claim "
            "yourself.",
        ),
        ("h2", "Machine-readable output"),
        (
            "p",
            "Every data command accepts --json. The result goes to standard output as JSON, "
            "while progress bars, warnings and logs go to standard error, so the output can be "
            "piped into other tools. Batch commands print one JSON object per line.",
        ),
        ("h2", "Exit codes"),
        (
            "p",
            "Fathom exits with 0 on success, 1 on an expected failure such as a file that cannot "
            "be parsed or a missing collection, shown as one clear message, and 2 when the "
            "command line itself is wrong.",
        ),
    ],
    [
        ("h1", "Configuration"),
        (
            "p",
            "Settings come from built-in defaults, then the fathom.toml file (the one named by "
            "--config, else ./fathom.toml), then environment variables named "
            "FATHOM_SECTION__KEY, then command-line flags; later sources win. The table lists "
            "the settings most people change.",
        ),
        (
            "table",
            "Setting|Default|Meaning\n"
            "retrieval.mode|hybrid|dense, bm25 or hybrid search\n"
            "retrieval.k|10|chunks retrieved per question\n"
            "chunker.target_tokens|180|target chunk length in tokens\n"
            "chunker.overlap_tokens|32|tokens shared by neighbouring chunks\n"
            "embedder.name|all-MiniLM-L6-v2|sentence embedding model\n"
            "ingest.max_file_mb|512|larger files are refused\n"
            "ingest.follow_symlinks|true|follow symbolic links in folders",
        ),
        (
            "p",
            "For example, FATHOM_RETRIEVAL__K=5 asks for five chunks per question. An unknown "
            "key or a value of the wrong type is an error that names the key, the value and the "
            "source it came from.",
        ),
    ],
    [
        ("h1", "Troubleshooting"),
        ("h2", "No extractable text"),
        (
            "p",
            "The PDF is a scan or holds only images. Run OCR on it, for example with a tool that "
            "adds a text layer, or export the text from the program that made it.",
        ),
        ("h2", "Encrypted PDF"),
        (
            "p",
            "The file needs a password to open. Provide the password or save an unprotected "
            "copy, then ingest it again.",
        ),
        ("h2", "Cannot decode text"),
        (
            "p",
            "The text file is in an encoding Fathom does not try, or it is binary data with a "
            "text extension. Re-save it as UTF-8.",
        ),
        ("h2", "Answers cite the wrong pages"),
        (
            "p",
            "Check that the PDF has a real text layer in reading order. Two-column layouts are "
            "read column by column; unusual layouts may still need converting before ingest.",
        ),
    ],
]


def make_user_guide_pdf(path: str | Path) -> Path:
    """The bundled example: a 5-page Fathom user guide with an outline and a settings table.

    Topics by page: 1 overview, installation, data directory; 2 ingesting and formats;
    3 asking questions, JSON output, exit codes; 4 configuration and the settings table;
    5 troubleshooting.
    """
    return make_pdf(
        path,
        USER_GUIDE_PAGES,
        title=USER_GUIDE_TITLE,
        header="Fathom User Guide",
        footer="Page {page} of {pages}",
        toc=True,
    )


# ---------------------------------------------------------------------------------------------
# A question-answering set for `fathom eval` tests
# ---------------------------------------------------------------------------------------------

_QA_FIRST = [
    "Aldo",
    "Brisa",
    "Corvin",
    "Dalia",
    "Emrys",
    "Fenna",
    "Galen",
    "Hesper",
    "Ilse",
    "Joran",
    "Kestrel",
    "Lumi",
    "Marek",
    "Nerys",
    "Orrin",
    "Petra",
    "Quill",
    "Rhea",
    "Soren",
    "Tamsin",
    "Ulric",
    "Vesna",
    "Wren",
    "Xavi",
    "Yara",
    "Zephyr",
]
_QA_TOWNS = [
    "Harrowgate",
    "Millbrook",
    "Quenby",
    "Rostfeld",
    "Saltmarsh",
    "Thornwick",
    "Ulverby",
    "Westerhold",
    "Yarrowdale",
    "Zennor",
]
_QA_CRAFTS = [
    "glassblower",
    "clockmaker",
    "cartographer",
    "beekeeper",
    "luthier",
    "bookbinder",
    "stonemason",
    "perfumer",
    "tanner",
    "weaver",
]
_QA_ANIMALS = [
    "a grey heron",
    "a red fox",
    "a tortoise",
    "a raven",
    "a pair of goats",
    "an old hound",
    "a barn owl",
    "three hens",
    "a ferret",
    "a donkey",
]


def make_qa_set(folder: str | Path, n_docs: int = 26, seed: int = 7) -> tuple[Path, Path]:
    """``docs.jsonl`` of short fictional biographies and ``questions.jsonl`` about them.

    Each document has three facts (town, year, companion) among filler sentences, and three
    questions with their answer and document id; every tenth question asks about a person who
    does not exist (unanswerable, no answers)."""
    import json
    import random

    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    docs, questions = [], []
    for i in range(n_docs):
        first = _QA_FIRST[i % len(_QA_FIRST)]
        name = f"{first} {_QA_FIRST[(i * 7 + 3) % len(_QA_FIRST)]}son"
        town = _QA_TOWNS[rng.randrange(len(_QA_TOWNS))]
        craft = _QA_CRAFTS[rng.randrange(len(_QA_CRAFTS))]
        year = 1701 + rng.randrange(180)
        animal = _QA_ANIMALS[rng.randrange(len(_QA_ANIMALS))]
        doc_id = f"bio-{i:03d}"
        text = (
            f"{name} was a {craft} whose workshop stood in the town of {town}. "
            f"Neighbours remembered long evenings of work by lamplight. "
            f"In {year} {name} opened a second workshop and took on two apprentices. "
            f"The trade was hard and the winters were long. "
            f"{name} kept {animal} in the yard behind the workshop. "
            f"Travellers often stopped to ask for directions."
        )
        docs.append({"doc_id": doc_id, "title": f"The life of {name}", "text": text})
        questions += [
            {
                "qid": f"{doc_id}-town",
                "question": f"In which town did {name} have a workshop?",
                "answers": [town],
                "doc_ids": [doc_id],
            },
            {
                "qid": f"{doc_id}-year",
                "question": f"In what year did {name} open a second workshop?",
                "answers": [str(year)],
                "doc_ids": [doc_id],
            },
            {
                "qid": f"{doc_id}-pet",
                "question": f"What animal did {name} keep in the yard?",
                "answers": [animal.split(" ", 1)[1]],
                "doc_ids": [doc_id],
            },
        ]
        if i % 10 == 9:
            questions.append(
                {
                    "qid": f"ghost-{i:03d}",
                    "question": f"Which instrument did Baron Ottokar Vellmar{i} play?",
                    "answers": [],
                    "doc_ids": [],
                    "is_impossible": True,
                }
            )
    docs_path, q_path = folder / "docs.jsonl", folder / "questions.jsonl"
    docs_path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    q_path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return docs_path, q_path


# ---------------------------------------------------------------------------------------------
# Hostile files (the reliability suite)
# ---------------------------------------------------------------------------------------------

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega"
).split()


def make_versioned_corpus(folder: str | Path, n: int, version: int) -> Path:
    """``n`` text files ``f0000.txt`` … of four paragraphs each, every paragraph ending in
    "Version <version> file <i>." — so a reader can tell which ingest's text it sees."""
    import random

    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    rng = random.Random(version)
    for i in range(n):
        paras = [
            " ".join(rng.choice(WORDS) for _ in range(60)) + f". Version {version} file {i}."
            for _ in range(4)
        ]
        (folder / f"f{i:04d}.txt").write_text("\n\n".join(paras))
    return folder


def ingest_command(folder: str | Path, name: str = "k", *extra: str) -> list[str]:
    """``python cli.py ingest FOLDER -c NAME --embedder hashing:64 [extra]`` for a subprocess
    (the hashing embedder needs no model, so crash trials spend their time ingesting)."""
    import sys

    cli = Path(__file__).resolve().parents[2] / "cli.py"
    return [sys.executable, str(cli), "ingest", str(folder), "-c", name,
            "--embedder", "hashing:64", *extra]  # fmt: skip


def make_many_page_pdf(path: str | Path, pages: int = 5000, seed: int = 0) -> Path:
    """A PDF with ``pages`` pages, each with its own line of words, written as raw PDF syntax.

    Writing the objects directly takes milliseconds where PyMuPDF needs seconds for 5,000 pages.
    Page ``i`` (1-based) starts with the word ``page<i>`` so tests can find it.
    """
    import random

    rng = random.Random(seed)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in once the kids are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for i in range(1, pages + 1):
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        text = f"page{i} {words}".encode()
        stream = b"BT /F1 11 Tf 72 720 Td (" + text + b") Tj ET"
        content_id = len(objects) + 1
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        page_id = content_id + 1
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content_id
        )
        kids.append(b"%d 0 R" % page_id)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    return _write_raw_pdf(path, objects)


def mutate(data: bytes, seed: int) -> tuple[bytes, str]:
    """A damaged copy of ``data`` and what was done: truncated, bytes flipped, or a range zeroed.

    Seeded, so a failing variant can be rebuilt from its seed.
    """
    import random

    rng = random.Random(seed)
    kind = ("truncate", "flip", "zero")[seed % 3]
    buf = bytearray(data)
    if kind == "truncate":
        cut = rng.randrange(1, len(buf))
        return bytes(buf[:cut]), f"truncated at {cut}"
    if kind == "flip":
        n = rng.randint(1, 32)
        for _ in range(n):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf), f"{n} bytes flipped"
    start = rng.randrange(len(buf))
    end = min(len(buf), start + rng.randint(1, 512))
    buf[start:end] = bytes(end - start)
    return bytes(buf), f"bytes {start}-{end} zeroed"


def make_zip_bomb_docx(path: str | Path, parts: int = 20, part_mb: int = 20) -> Path:
    """A '.docx' whose parts are runs of spaces: tiny on disk, ``parts * part_mb`` MiB unpacked."""
    import zipfile

    path = Path(path)
    blob = b" " * (part_mb << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", b'<?xml version="1.0"?><Types/>')
        z.writestr("word/document.xml", b"<w:document>" + blob + b"</w:document>")
        for i in range(1, parts):
            z.writestr(f"word/media/pad{i}.xml", blob)
    return path


def make_docx_without(path: str | Path, part: str) -> Path:
    """``make_docx``'s document with the archive member ``part`` left out."""
    import io
    import tempfile
    import zipfile

    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        source = make_docx(Path(tmp) / "full.docx").read_bytes()
    with (
        zipfile.ZipFile(io.BytesIO(source)) as zin,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout,
    ):
        names = zin.namelist()
        if part not in names:
            raise ValueError(f"{part!r} is not in the DOCX ({names})")
        for name in names:
            if name != part:
                zout.writestr(name, zin.read(name))
    return path


def write_large_text(path: str | Path, megabytes: int, seed: int = 0) -> Path:
    """A text file of about ``megabytes`` MiB of word paragraphs, written in 1 MiB pieces."""
    import random

    rng = random.Random(seed)
    block = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(80)) for _ in range(2000))
    piece = (block + "\n\n").encode()
    path = Path(path)
    with open(path, "wb") as fh:
        written = 0
        while written < megabytes << 20:
            fh.write(piece)
            written += len(piece)
    return path


# ---------------------------------------------------------------------------------------------
# Scans, images, HTML, PPTX and EPUB (the OCR and the other loaders)
# ---------------------------------------------------------------------------------------------

# Two pages in a large type, so a low-resolution scan of them reads back reliably and fast.
SCAN_PAGES: list[list[Item]] = [
    [
        ("h1", "Harbour Pilots"),
        ("p", "Harbour pilots guide large vessels through narrow channels into port."),
        ("p", "A pilot boards the ship from a small launch near the breakwater."),
    ],
    [
        ("h1", "Tide Tables"),
        ("p", "The spring tide at Kestrel Point rises four metres above the chart datum."),
        ("p", "Neap tides come twice a month when the moon is at a quarter."),
    ],
]
SCAN_DPI = 110


def _render_pages(source: Path, dpi: int) -> list[Any]:
    """Grey pixmaps of every page of ``source``."""
    pymupdf = _pymupdf()
    with pymupdf.open(source) as doc:
        return [page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY) for page in doc]


def make_scanned_pdf(path: str | Path, pages: list[list[Item]] | None = None) -> Path:
    """A PDF whose pages are only pictures of ``pages`` (default ``SCAN_PAGES``): a text PDF
    rendered at ``SCAN_DPI`` and written back as images, with no text layer."""
    import tempfile

    pymupdf = _pymupdf()
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        text_pdf = make_pdf(Path(tmp) / "text.pdf", pages or SCAN_PAGES, header=None, footer=None)
        pixmaps = _render_pages(text_pdf, SCAN_DPI)
    doc = pymupdf.open()
    for pix in pixmaps:
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_image(page.rect, pixmap=pix)
    doc.save(path, deflate=True, no_new_id=True)
    doc.close()
    return path


MIXED_TEXT_PAGE: list[Item] = [
    ("h1", "Lighthouse Keepers"),
    ("p", "The keeper trimmed the wick and wound the clockwork every evening at dusk."),
]


def make_mixed_pdf(path: str | Path) -> Path:
    """Page 1 with a text layer (``MIXED_TEXT_PAGE``), page 2 a scan of ``SCAN_PAGES[1]``."""
    import tempfile

    pymupdf = _pymupdf()
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        make_pdf(Path(tmp) / "a.pdf", [MIXED_TEXT_PAGE], header=None, footer=None)
        make_scanned_pdf(Path(tmp) / "b.pdf", [SCAN_PAGES[1]])
        doc = pymupdf.open(Path(tmp) / "a.pdf")
        with pymupdf.open(Path(tmp) / "b.pdf") as scan:
            doc.insert_pdf(scan)
        doc.save(path, deflate=True, no_new_id=True)
        doc.close()
    return path


IMAGE_LINES = ["Invoice 4471 from Marlow Timber", "Oak planks delivered on Tuesday"]
TIFF_PAGES = [["Minutes of the rowing club"], ["The new boathouse opens in May"]]


def _text_image(lines: list[str], width: int = 760, size: float = 30.0) -> Any:
    """A PIL grey image of ``lines`` in a large sans-serif type on white."""
    from PIL import Image

    pymupdf = _pymupdf()
    height = int(60 + len(lines) * size * 1.8)
    doc = pymupdf.open()
    page = doc.new_page(width=width, height=height)
    for i, line in enumerate(lines):
        page.insert_text((30, 40 + size + i * size * 1.8), line, fontsize=size, fontname="helv")
    pix = page.get_pixmap(dpi=72, colorspace=pymupdf.csGRAY)
    doc.close()
    return Image.frombytes("L", (pix.width, pix.height), pix.samples)


def make_text_png(path: str | Path, lines: list[str] | None = None) -> Path:
    """A PNG picture of ``lines`` (default ``IMAGE_LINES``)."""
    path = Path(path)
    _text_image(lines or IMAGE_LINES).save(path, format="PNG")
    return path


def make_text_jpeg(path: str | Path, lines: list[str] | None = None) -> Path:
    path = Path(path)
    _text_image(lines or IMAGE_LINES).save(path, format="JPEG", quality=90)
    return path


def make_multipage_tiff(path: str | Path, pages: list[list[str]] | None = None) -> Path:
    """A TIFF with one frame per entry of ``pages`` (default ``TIFF_PAGES``)."""
    path = Path(path)
    frames = [_text_image(lines) for lines in (pages or TIFF_PAGES)]
    frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:])
    return path


def make_truncated_tiff(path: str | Path) -> Path:
    """The first third of a multi-page TIFF."""
    path = make_multipage_tiff(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def make_noise_png(path: str | Path, size: int = 480, seed: int = 0) -> Path:
    """A PNG of random grey noise: an image with no text in it."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    path = Path(path)
    Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8)).save(path, format="PNG")
    return path


def make_bomb_png(path: str | Path, width: int = 20_000, height: int = 20_000) -> Path:
    """A few-hundred-byte PNG whose header declares ``width`` × ``height`` pixels (a
    decompression bomb: decoding it would take gigabytes)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey
    row = b"\x00" + b"\xff" * width
    idat = zlib.compress(row * 16, 9)  # a few rows: the rest is never reached
    path = Path(path)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )
    return path


HTML_TITLE = "Field Guide to Moths"
HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Field Guide to Moths</title>
<script>window.tracking = "analytics-snippet-should-not-appear";</script></head>
<body><nav><a href="/">Home</a> | <a href="/shop">Shop our nets</a> |
<a href="/about">About</a></nav>
<header><p>Example Naturalists Society banner</p></header>
<article><h1>Field Guide to Moths</h1>
<p>Moths are mostly nocturnal insects closely related to butterflies; about 160,000 species
are known.</p>
<h2>Identification</h2>
<p>The Atlas moth has a wingspan of up to 27 centimetres and lives in the forests of Asia.</p>
<ul><li>Antennae of males are often feathery.</li>
<li>Many moths rest with their wings flat.</li></ul>
<h3>Wingspans</h3>
<table><tr><th>Species</th><th>Wingspan</th></tr>
<tr><td>Atlas moth</td><td>27 cm</td></tr><tr><td>Luna moth</td><td>11 cm</td></tr></table>
<h2>Habitat</h2>
<p>Moths live on every continent except Antarctica, from hot deserts to cold mountain meadows.</p>
</article>
<footer><p>Copyright Example Naturalists Society. Subscribe to our newsletter.</p></footer>
</body></html>
"""


def make_html(path: str | Path, html: str = HTML_PAGE) -> Path:
    path = Path(path)
    path.write_text(html, encoding="utf-8")
    return path


def make_script_html(path: str | Path) -> Path:
    """An HTML file that is almost all script: an app shell with no text of its own."""
    script = "function f(n){return n<2?n:f(n-1)+f(n-2)};" * 5000
    return make_html(
        path,
        f"<html><head><title>App</title><script>{script}</script></head>"
        '<body><div id="root"></div><script>render(document.getElementById("root"))</script>'
        "</body></html>",
    )


PPTX_SLIDES = [
    (
        "Quarterly Harvest",
        ["Apple yields rose by twelve percent in the northern orchards."],
        "Mention the frost in March.",
    ),
    ("Storage Plan", ["Cold stores keep the fruit at two degrees."], ""),
]
PPTX_TABLE = [["Orchard", "Tonnes"], ["North", "340"], ["South", "215"]]


def make_pptx(path: str | Path) -> Path:
    """Two slides (``PPTX_SLIDES``: title, body text, notes); slide 2 also has ``PPTX_TABLE``."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    layout = prs.slide_layouts[1]  # title and content
    for i, (title, body, notes) in enumerate(PPTX_SLIDES):
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = "\n".join(body)
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
        if i == 1:
            rows, cols = len(PPTX_TABLE), len(PPTX_TABLE[0])
            frame = slide.shapes.add_table(rows, cols, Inches(1), Inches(5), Inches(6), Inches(1.5))
            for r, row in enumerate(PPTX_TABLE):
                for c, text in enumerate(row):
                    frame.table.cell(r, c).text = text
    prs.core_properties.title = "Harvest Review"
    path = Path(path)
    prs.save(path)
    return path


def _zip_without(source: bytes, path: Path, part: str) -> Path:
    import io
    import zipfile

    with (
        zipfile.ZipFile(io.BytesIO(source)) as zin,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout,
    ):
        names = zin.namelist()
        if part not in names:
            raise ValueError(f"{part!r} is not in the archive ({names})")
        for name in names:
            if name != part:
                zout.writestr(name, zin.read(name))
    return path


def make_pptx_without(path: str | Path, part: str = "ppt/slides/slide1.xml") -> Path:
    """``make_pptx``'s presentation with the archive member ``part`` left out."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        source = make_pptx(Path(tmp) / "full.pptx").read_bytes()
    return _zip_without(source, Path(path), part)


EPUB_TITLE = "The Lighthouse Almanac"
EPUB_CHAPTERS = [
    (
        "Keepers",
        "<h1>Keepers</h1><p>Keepers lit the lamp at sunset and logged the weather.</p>"
        "<h2>Duties</h2><p>Every morning the lens was polished with soft chamois cloth.</p>",
    ),
    (
        "Signals",
        "<h1>Signals</h1><p>Each lighthouse flashes its own pattern so sailors know it.</p>"
        "<table><tr><td>Kestrel Point</td><td>two flashes every ten seconds</td></tr></table>",
    ),
]


def make_epub(path: str | Path) -> Path:
    """An EPUB of ``EPUB_CHAPTERS`` (titled ``EPUB_TITLE``) with a table of contents."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("fathom-test-epub")
    book.set_title(EPUB_TITLE)
    book.set_language("en")
    chapters = []
    for i, (title, body) in enumerate(EPUB_CHAPTERS, 1):
        chapter = epub.EpubHtml(title=title, file_name=f"chap_{i}.xhtml", lang="en")
        chapter.content = f"<html><body>{body}</body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    path = Path(path)
    epub.write_epub(str(path), book)
    return path


def make_epub_without(path: str | Path, part: str = "META-INF/container.xml") -> Path:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        source = make_epub(Path(tmp) / "full.epub").read_bytes()
    return _zip_without(source, Path(path), part)


def make_drm_epub(path: str | Path) -> Path:
    """``make_epub``'s book with its second chapter listed as AES-encrypted in
    META-INF/encryption.xml (as DRM schemes do) and its bytes scrambled."""
    import io
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory() as tmp:
        source = make_epub(Path(tmp) / "full.epub").read_bytes()
    encryption = (
        '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"'
        ' xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        '<enc:CipherData><enc:CipherReference URI="EPUB/chap_2.xhtml"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    path = Path(path)
    with (
        zipfile.ZipFile(io.BytesIO(source)) as zin,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout,
    ):
        for name in zin.namelist():
            data = zin.read(name)
            if name.endswith("chap_2.xhtml"):
                data = bytes(b ^ 0x5A for b in data)
            zout.writestr(name, data)
        zout.writestr("META-INF/encryption.xml", encryption)
    return path
