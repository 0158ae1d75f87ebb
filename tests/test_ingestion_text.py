"""Text and Markdown loaders, decoding, cleaning, JSONL records and the suffix table."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.base import Loader, PageSpan
from fathom.core.errors import ParseError
from fathom.ingestion import LOADERS, SUPPORTED_SUFFIXES, LoadOptions, load_document, load_records
from fathom.ingestion.clean import clean_text, repair_hyphenation, strip_controls
from fathom.ingestion.text import MarkdownLoader, TextLoader

NON_ASCII_CLEAN = "Café naïve résumé — “quoted” Straße, Ærø, 東京, emoji ✓.\n\nSecond paragraph ñ."


# ---------------------------------------------------------------------------------------------
# Encodings
# ---------------------------------------------------------------------------------------------


def test_utf8_non_ascii(tmp_path: Path) -> None:
    path = docgen.make_utf8_text(tmp_path / "notes.txt")
    doc = TextLoader().load(path)
    assert doc.text == NON_ASCII_CLEAN
    assert doc.warnings == ()
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (doc.format, doc.sha256, doc.doc_id, doc.title) == ("txt", sha, sha[:16], "notes")
    assert doc.pages == (PageSpan(1, 0, len(doc.text)),)
    assert doc.sections == ()


def test_utf8_with_bom(tmp_path: Path) -> None:
    doc = TextLoader().load(docgen.make_utf8_text(tmp_path / "bom.txt", bom=True))
    assert doc.text == NON_ASCII_CLEAN
    assert doc.warnings == ()


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_utf16_with_bom(tmp_path: Path, big_endian: bool) -> None:
    doc = TextLoader().load(docgen.make_utf16_text(tmp_path / "wide.txt", big_endian=big_endian))
    assert doc.text == NON_ASCII_CLEAN
    assert any("utf-16" in w for w in doc.warnings)


def test_cp1252(tmp_path: Path) -> None:
    doc = TextLoader().load(docgen.make_cp1252_text(tmp_path / "win.txt"))
    assert doc.text == docgen.CP1252_TEXT.strip()
    assert any("cp1252" in w for w in doc.warnings)


def test_mostly_utf8_with_a_stray_byte_stays_utf8(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    good = "Le café et la crème brûlée sont délicieux. It’s great.\n\n".encode()
    path.write_bytes(good * 3 + b"One stray cp1252 byte: caf\xe9 here.\n")
    doc = TextLoader().load(path)
    assert doc.text.count("Le café et la crème brûlée sont délicieux. It’s great.") == 3
    assert doc.text.endswith("One stray cp1252 byte: caf\ufffd here.")
    assert doc.warnings == ("decoded as UTF-8 with 1 invalid byte replaced by U+FFFD",)


def test_mostly_utf8_where_cp1252_cannot_decode(tmp_path: Path) -> None:
    path = tmp_path / "quotes.txt"  # ” is e2 80 9d in UTF-8; 0x9d is undefined in cp1252
    path.write_bytes("“Quoted” text, ".encode() + b"then bad: \xe9\xff end.")
    doc = TextLoader().load(path)
    assert doc.text == "“Quoted” text, then bad: \ufffd\ufffd end."
    assert doc.warnings == ("decoded as UTF-8 with 2 invalid bytes replaced by U+FFFD",)


@pytest.mark.parametrize("encoding", ["utf-32-le", "utf-32-be"])
def test_utf32_with_bom(tmp_path: Path, encoding: str) -> None:
    """UTF-32's little-endian mark starts with UTF-16's: it must not be read as UTF-16."""
    import codecs

    bom = codecs.BOM_UTF32_LE if encoding.endswith("le") else codecs.BOM_UTF32_BE
    path = tmp_path / "wider.txt"
    path.write_bytes(bom + NON_ASCII_CLEAN.encode(encoding))
    doc = TextLoader().load(path)
    assert doc.text == NON_ASCII_CLEAN
    assert any("utf-32" in w for w in doc.warnings)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom(tmp_path: Path, encoding: str) -> None:
    doc = TextLoader().load(
        docgen.make_text(tmp_path / "wide.txt", docgen.NON_ASCII_TEXT, encoding)
    )
    assert doc.text == NON_ASCII_CLEAN
    assert doc.warnings == (f"decoded as {encoding} (no byte-order mark; not UTF-8)",)


def test_binary_with_nul_in_every_other_byte(tmp_path: Path) -> None:
    path = tmp_path / "samples.txt"  # little-endian int16 samples: NUL high bytes, control lows
    path.write_bytes(bytes(range(1, 9)).replace(b"", b"\x00")[1:] * 200)
    assert_parse_error(TextLoader(), path, "binary data, not text")


def assert_parse_error(loader: TextLoader | MarkdownLoader, path: Path, *fragments: str) -> None:
    with pytest.raises(ParseError) as info:
        loader.load(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    for fragment in fragments:
        assert fragment in message, message


def test_binary_with_text_extension(tmp_path: Path) -> None:
    assert_parse_error(
        TextLoader(), docgen.make_binary_text(tmp_path / "image.txt"), "binary data, not text"
    )
    path = tmp_path / "controls.md"
    path.write_bytes(bytes([1, 2, 3, 4, 5, 6, 7, 8, 14, 15, 16, 17]) * 20 + b"some text")
    assert_parse_error(MarkdownLoader(), path, "binary data, not text")


def test_invalid_bytes_name_the_encodings_tried(tmp_path: Path) -> None:
    assert_parse_error(
        TextLoader(), docgen.make_invalid_text(tmp_path / "bad.txt"), "utf-8", "cp1252"
    )


@pytest.mark.parametrize(
    "content", [b"", b"   \n\n\t  \r\n", b"\xef\xbb\xbf"], ids=["empty", "blank", "bom"]
)
def test_empty(tmp_path: Path, content: bytes) -> None:
    assert_parse_error(
        TextLoader(), docgen.make_empty_file(tmp_path / "e.txt", content), "empty file"
    )


def test_read_errors(tmp_path: Path) -> None:
    assert_parse_error(TextLoader(), tmp_path / "missing.txt", "no such file")
    (tmp_path / "dir.txt").mkdir()
    assert_parse_error(TextLoader(), tmp_path / "dir.txt", "directory")
    big = docgen.make_utf8_text(tmp_path / "big.txt")
    assert_parse_error(TextLoader(LoadOptions(max_bytes=10)), big, "limit")


def test_text_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.txt"
    path.write_text(
        "First line\nwraps here.\r\n\r\n\n\n"
        "Second   paragraph\twith  spaces.\n- item one\n- item two\n"
    )
    doc = TextLoader().load(path)
    assert (
        doc.text
        == "First line wraps here.\n\nSecond paragraph with spaces.\n- item one\n- item two"
    )


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------


def test_markdown_sections_code_and_table(tmp_path: Path) -> None:
    doc = MarkdownLoader().load(docgen.make_markdown(tmp_path / "notes.md"))
    assert doc.format == "md"
    assert doc.title == "Fathom notes"
    assert [(s.title, s.level) for s in doc.sections] == [
        ("Fathom notes", 1),
        ("Install", 2),
        ("Setext Title", 2),
    ]
    for sec in doc.sections:
        assert doc.text[sec.start :].startswith(sec.title + "\n\n")  # no '#' marks, own paragraph
    assert "#" not in doc.text.replace("# not a heading", "")
    assert "Intro paragraph that wraps onto a second line." in doc.text
    assert "# not a heading inside code\npip install fathom" in doc.text  # code kept verbatim
    assert "key | value\nk | 10" in doc.text
    assert "---" not in doc.text
    sec = {s.title: s for s in doc.sections}
    assert sec["Install"].end == sec["Setext Title"].start
    assert sec["Fathom notes"].end == sec["Setext Title"].end == len(doc.text)


def test_markdown_table_without_outer_pipes(tmp_path: Path) -> None:
    path = tmp_path / "prices.md"
    path.write_text(
        "# Prices\n\nIntro.\n"
        "Name | Price | Stock\n--- | :---: | ---:\nApple | 1.20 | 40\nPear | 0.90 | 7\n\n"
        "| a | b |\n--- | ---\n| 1 | 2 |\n\n"
        "Text with a | pipe\nthat is no table.\n\nSetext | title\n---\n\nEnd.\n"
    )
    doc = MarkdownLoader().load(path)
    paragraphs = doc.text.split("\n\n")
    assert paragraphs[1:5] == [
        "Intro.",
        "Name | Price | Stock\nApple | 1.20 | 40\nPear | 0.90 | 7",  # one row per line
        "a | b\n1 | 2",
        "Text with a | pipe that is no table.",
    ]
    assert "---" not in doc.text
    assert [s.title for s in doc.sections] == ["Prices", "Setext | title"]


def test_markdown_section_ends(tmp_path: Path) -> None:
    path = tmp_path / "levels.md"
    path.write_text(
        "# A\n\ntext a\n\n## B\n\ntext b\n\n### C\n\ntext c\n\n## D\n\ntext d\n\n# E\n\ntext e\n"
    )
    doc = MarkdownLoader().load(path)
    sec = {s.title: s for s in doc.sections}
    assert sec["A"].end == sec["E"].start
    assert sec["B"].end == sec["D"].start
    assert sec["C"].end == sec["D"].start
    assert sec["D"].end == sec["E"].start
    assert sec["E"].end == len(doc.text)
    assert doc.section_at(doc.text.index("text c")) == "C"


def test_markdown_front_matter_title(tmp_path: Path) -> None:
    path = tmp_path / "post.markdown"
    path.write_text("---\ntitle: 'Front Title'\ntags: [a]\n---\n\nBody text only.\n")
    doc = load_document(path)
    assert (doc.title, doc.text, doc.format) == ("Front Title", "Body text only.", "md")


# ---------------------------------------------------------------------------------------------
# Cleaning
# ---------------------------------------------------------------------------------------------


def test_strip_controls() -> None:
    raw = "a\x00b\x1b[31mred\x1b[0m soft\u00adhyphen\x07 tab\tkept\r\nline\rend"
    assert strip_controls(raw) == "abred softhyphen tab\tkept\nline\nend"


def test_repair_hyphenation_rules() -> None:
    assert repair_hyphenation("retrie-\nval") == "retrieval"
    assert repair_hyphenation("Self-\nAttention") == "Self-\nAttention"  # next line uppercase
    assert repair_hyphenation("2019-\n2020") == "2019-\n2020"  # not after a letter
    assert repair_hyphenation("a -\nb") == "a -\nb"  # a dash, not a hyphen after a letter


def test_clean_text() -> None:
    raw = "Para  one\nwraps   here.\n\n\n\nPara two\n1. first\n2. second\n\n  \n\nlast-\nly done"
    assert clean_text(raw) == "Para one wraps here.\n\nPara two\n1. first\n2. second\n\nlastly done"


# ---------------------------------------------------------------------------------------------
# Suffix table and JSONL records
# ---------------------------------------------------------------------------------------------


def test_suffix_table(tmp_path: Path) -> None:
    expected = {".pdf", ".docx", ".txt", ".md", ".markdown", ".pptx", ".epub", ".html", ".htm"}
    expected |= {".png", ".jpg", ".jpeg", ".tif", ".tiff"}
    assert expected == set(SUPPORTED_SUFFIXES) == set(LOADERS)
    upper = docgen.make_utf8_text(tmp_path / "LOUD.TXT")
    assert load_document(upper).format == "txt"
    other = tmp_path / "data.csv"
    other.write_text("a,b\n")
    with pytest.raises(ParseError, match=r"unsupported file type '\.csv'"):
        load_document(other)


def test_every_loader_is_built_from_one_options_record(tmp_path: Path) -> None:
    """The table is uniform: each loader takes the one LoadOptions and reads what it needs;
    a text file bigger than ``max_text_chars`` is refused before it is read."""
    options = LoadOptions(max_bytes=10)
    for suffix, factory in LOADERS.items():
        loader = factory(options)
        assert isinstance(loader, Loader), suffix
        assert loader.options is options  # type: ignore[attr-defined]
    big = docgen.make_utf8_text(tmp_path / "big.txt")
    with pytest.raises(ParseError, match=r"ingest\.max_text_mb"):
        load_document(big, LoadOptions(max_text_chars=10))
    assert load_document(big, LoadOptions(max_text_chars=10**6)).text


def write_records(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_load_records(tmp_path: Path) -> None:
    path = write_records(
        tmp_path / "docs.jsonl",
        [
            {"doc_id": "d1", "title": "First", "text": "Plain text.\n\nSecond para.", "extra": 1},
            {"doc_id": 7, "title": "Second", "text": "# Top\n\nintro\n\n## Sub\n\nbody"},
        ],
    )
    docs = list(load_records(path))
    assert [d.source_id for d in docs] == ["d1", "7"]
    first = docs[0]
    sha = hashlib.sha256(("Plain text.\n\nSecond para." + "First").encode()).hexdigest()
    assert (first.doc_id, first.sha256, first.format, first.title) == (
        sha[:16],
        sha,
        "record",
        "First",
    )
    assert first.path == f"{path}#d1"
    assert first.text == "Plain text.\n\nSecond para."  # kept as given
    assert first.pages == (PageSpan(1, 0, len(first.text)),)
    assert first.sections == ()
    second = docs[1]
    assert [(s.title, s.level, s.start) for s in second.sections] == [("Top", 1, 0), ("Sub", 2, 14)]
    assert second.sections[0].end == len(second.text)


def test_load_records_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"doc_id": "a", "title": "", "text": "ok"}\n{"title": "no id"}\n')
    with pytest.raises(ParseError, match=r"docs\.jsonl:2: not a record"):
        list(load_records(path))
    with pytest.raises(ParseError, match="cannot read"):
        list(load_records(tmp_path / "missing.jsonl"))


def test_load_records_is_fast(tmp_path: Path) -> None:
    text = "A sentence about retrieval and citations. " * 25
    path = write_records(
        tmp_path / "docs.jsonl",
        [{"doc_id": str(i), "title": f"Doc {i}", "text": text + str(i)} for i in range(5000)],
    )
    start = time.perf_counter()
    docs = list(load_records(path))
    elapsed = time.perf_counter() - start
    assert len(docs) == 5000 and len({d.doc_id for d in docs}) == 5000
    assert elapsed < 2.0  # generous: typically ~0.1 s; catches an accidental per-character loop
