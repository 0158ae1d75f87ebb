"""Plain-text and Markdown loaders: careful decoding, then paragraphs and (Markdown) headings."""

from __future__ import annotations

import codecs
import contextlib
import os
import re
from pathlib import Path

from fathom.core.base import Document
from fathom.core.errors import ParseError
from fathom.ingestion.clean import (
    Block,
    assemble,
    check_text_size,
    make_document,
    read_source,
    table_row,
)
from fathom.ingestion.options import LoadOptions

# Tried in this order for files without a UTF-16 byte-order mark; the first that decodes wins.
ENCODINGS = ("utf-8", "cp1252")
_SNIFF_BYTES = 8192
# Control bytes that never appear in text (keeps \t \n \v \f \r and ESC, which ANSI logs use).
_BINARY_BYTES = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27)) + b"\x7f"
_BINARY_FIX = "check the file type or convert it to text"
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


def decode_text_with_warnings(path: str, data: bytes) -> tuple[str, str, list[str]]:
    """Decode ``data`` as (text, encoding, warnings).

    Tries UTF-32 and UTF-16 with a BOM, BOM-less UTF-16 (NULs in every other byte), UTF-8
    (strict, then with the few invalid bytes replaced when the rest is clearly UTF-8), then
    cp1252.
    """
    # UTF-32's little-endian mark starts with UTF-16's: test it first.
    boms = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
            (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip
    enc = next((enc for bom, enc in boms if data.startswith(bom)), None)
    if enc is not None:
        return _decode_marked(path, data, enc)
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head:
        return _decode_wide(path, data, head)
    if len(head) - len(head.translate(None, _BINARY_BYTES)) > len(head) // 10:
        raise ParseError(path, "binary data, not text", _BINARY_FIX)
    try:
        return data.decode("utf-8-sig"), "utf-8", []
    except UnicodeDecodeError as exc:
        first_error = exc
    return _decode_mostly_utf8(path, data, first_error)


def _decode_marked(path: str, data: bytes, enc: str) -> tuple[str, str, list[str]]:
    """``data`` that starts with a UTF-32 or UTF-16 byte-order mark, decoded as ``enc``."""
    label = enc.upper()
    try:
        text = data.decode(enc)
    except UnicodeDecodeError as exc:
        raise ParseError(
            path,
            f"has a {label} byte-order mark but is not valid {label} ({exc.reason})",
            "re-save it as UTF-8",
        ) from None
    if _looks_binary(text[:_SNIFF_BYTES]):
        raise ParseError(path, "binary data, not text", _BINARY_FIX)
    return text, enc, [f"decoded as {enc} (not UTF-8)"]


def _decode_wide(path: str, data: bytes, head: bytes) -> tuple[str, str, list[str]]:
    """``data`` with NULs in its first bytes: UTF-16 without a byte-order mark, or binary."""
    wide = _utf16_without_bom(head)
    if wide is not None:
        try:
            text = data.decode(wide)
        except UnicodeDecodeError:
            text = ""
        if text and not _looks_binary(text[:_SNIFF_BYTES]):
            return text, wide, [f"decoded as {wide} (no byte-order mark; not UTF-8)"]
    raise ParseError(path, "binary data, not text", _BINARY_FIX)


def _decode_mostly_utf8(
    path: str, data: bytes, first_error: UnicodeDecodeError
) -> tuple[str, str, list[str]]:
    """``data`` that is not valid UTF-8: UTF-8 with its few invalid bytes replaced, or cp1252;
    ``first_error`` is where UTF-8 failed."""
    # Mostly UTF-8 with a few stray bytes (a pasted cp1252 character, a cut-off sequence):
    # decoding it all as cp1252 would garble every accented character, so replace the strays.
    escaped = data.decode("utf-8-sig", errors="surrogateescape")
    n_bad = len(_ESCAPED_BYTE.findall(escaped))
    n_good = len(_NON_ASCII.findall(escaped)) - n_bad
    if n_good >= n_bad:
        plural = "byte" if n_bad == 1 else "bytes"
        return (
            _ESCAPED_BYTE.sub("\ufffd", escaped),
            "utf-8",
            [f"decoded as UTF-8 with {n_bad} invalid {plural} replaced by U+FFFD"],
        )
    try:
        return data.decode("cp1252"), "cp1252", ["decoded as cp1252 (not UTF-8)"]
    except UnicodeDecodeError:
        pos = first_error.start
        raise ParseError(
            path,
            f"cannot decode text (tried {', '.join(ENCODINGS)}; "
            f"byte 0x{data[pos]:02x} at offset {pos})",
            "re-save it as UTF-8",
        ) from None


# surrogateescape decodes each byte that is not valid UTF-8 to U+DC80..U+DCFF.
_ESCAPED_BYTE = re.compile(r"[\udc80-\udcff]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _looks_binary(head_text: str) -> bool:
    """True when more than a tenth of ``head_text`` is control characters."""
    return len(_CONTROL_CHARS.findall(head_text)) > len(head_text) // 10


def _utf16_without_bom(head: bytes) -> str | None:
    """'utf-16-le' or 'utf-16-be' when ``head`` looks like UTF-16 without a byte-order mark.

    Mostly-ASCII UTF-16 has a NUL in every other byte (the high byte of each unit) and almost none
    in the other position; binary data rarely keeps that pattern for a whole sniff window.
    """
    pairs = len(head) // 2
    if pairs < 4:
        return None
    even = head[0 : 2 * pairs : 2].count(0)
    odd = head[1 : 2 * pairs : 2].count(0)
    if odd >= pairs * 0.3 and even <= pairs // 50:
        return "utf-16-le"
    if even >= pairs * 0.3 and odd <= pairs // 50:
        return "utf-16-be"
    return None


def _read_text(path: str | Path, options: LoadOptions) -> tuple[bytes, str, list[str]]:
    """The file's bytes, its decoded text and the decoding's warnings. A file whose size is
    over ``options.max_text_chars`` is refused before it is read (its text would be too)."""
    name = str(path)
    if options.max_text_chars is not None:
        with contextlib.suppress(OSError):  # read_source reports an unreadable file
            check_text_size(name, os.stat(path).st_size, options.max_text_chars)
    data = read_source(path, options.max_bytes)
    text, _, warnings = decode_text_with_warnings(name, data)
    if not text.strip():
        raise ParseError(name, "empty file", "remove it or give it some content")
    return data, text, warnings


class TextLoader:
    """Loads ``.txt``: paragraphs separated by blank lines, wrapped lines joined."""

    format = "txt"

    def __init__(self, options: LoadOptions | None = None) -> None:
        self.options = options or LoadOptions()

    def load(self, path: str | Path) -> Document:
        """Read and decode the file into a Document with one page and no sections."""
        data, text, warnings = _read_text(path, self.options)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        blocks = [Block(p) for p in re.split(r"\n[ \t]*\n", text)]
        assembled = assemble(blocks)
        if not assembled.text:
            raise ParseError(str(path), "no text", "the file holds only control characters")
        return make_document(path, data, self.format, assembled, warnings=warnings)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


def parse_markdown(text: str) -> tuple[list[Block], str]:
    """Markdown as blocks: ATX/setext headings, fenced code kept verbatim, tables as rows.

    Returns the blocks and the front-matter ``title:`` ('' when there is none).
    """
    text, title = _front_matter(text.replace("\r\n", "\n").replace("\r", "\n"))
    found = _MarkdownBlocks()
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        fence = _FENCE.match(lines[i])
        if fence:
            found.flush()
            i = _fenced_code(lines, i, fence.group(1), found.blocks)
            continue
        found.read(lines, i)
        i += 1
    found.flush()
    return found.blocks, title


class _MarkdownBlocks:
    """The blocks ``parse_markdown`` has found, and the paragraph or table it is reading."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.para: list[str] = []
        self.table: list[str] = []
        self.in_table = False  # inside a table (its rows may lack the outer pipes)

    def flush(self) -> None:
        """End the paragraph or table being read."""
        self.in_table = False
        if self.para:
            self.blocks.append(Block("\n".join(self.para)))
            self.para.clear()
        if self.table:
            self.blocks.append(_table_block(self.table))
            self.table.clear()

    def read(self, lines: list[str], i: int) -> None:
        """Take in ``lines[i]``, a line outside fenced code."""
        line = lines[i]
        if not line.strip():
            self.flush()
            return
        atx = _ATX.match(line)
        if atx:
            self.flush()
            if atx.group(2):
                self.blocks.append(Block(atx.group(2), "heading", level=len(atx.group(1))))
            return
        if _TABLE_LINE.match(line) or ("|" in line and (self.in_table or _starts_table(lines, i))):
            if self.para:
                self.flush()
            self.in_table = True
            if not _TABLE_RULE.match(line):
                self.table.append(line)
            return
        if self.in_table:
            self.flush()
        setext = _SETEXT.match(line)
        if setext and self.para:
            level = 1 if setext.group(1)[0] == "=" else 2
            self.blocks.append(Block(" ".join(self.para), "heading", level=level))
            self.para.clear()
            return
        if setext and not self.para:  # a thematic break ("---" on its own)
            return
        self.para.append(line)


def _front_matter(text: str) -> tuple[str, str]:
    """``text`` without its YAML front matter, and the front matter's ``title:`` ('' when
    there is none)."""
    front = _FRONT_MATTER.match(text)
    if not front:
        return text, ""
    title = ""
    match = re.search(r"(?m)^title:[ \t]*(.+?)[ \t]*$", front.group(1))
    if match:
        title = match.group(1).strip("'\"")
    return text[front.end() :], title


def _fenced_code(lines: list[str], i: int, marker: str, blocks: list[Block]) -> int:
    """Append the fenced code opened at ``lines[i]`` to ``blocks``, verbatim, one block per
    run of lines between blank lines; the index of the line after the closing fence."""
    code: list[str] = []
    i += 1
    while i < len(lines) and not lines[i].lstrip().startswith(marker):
        code.append(lines[i])
        i += 1
    for chunk in re.split(r"\n\s*\n", "\n".join(code)):
        if chunk.strip():
            blocks.append(Block(chunk, "code"))
    return i + 1  # past the closing fence (or past the end)


def _table_block(table: list[str]) -> Block:
    """A table's lines (delimiter rows left out) as one block of `` | ``-joined rows."""
    rows = (table_row(c.strip() for c in row.strip().strip("|").split("|")) for row in table)
    return Block("\n".join(r for r in rows if r), "table")


def _starts_table(lines: list[str], i: int) -> bool:
    """True when ``lines[i]`` is the header of a table without outer pipes (``a | b``): the next
    line is a delimiter row such as ``--- | ---`` (with a pipe, so it is not a setext underline)."""
    return i + 1 < len(lines) and "|" in lines[i + 1] and bool(_TABLE_RULE.match(lines[i + 1]))


class MarkdownLoader:
    """Loads ``.md``/``.markdown``: headings become sections, the ``#`` marks dropped."""

    format = "md"

    def __init__(self, options: LoadOptions | None = None) -> None:
        self.options = options or LoadOptions()

    def load(self, path: str | Path) -> Document:
        """Read, decode and parse the Markdown file into a Document with sections."""
        data, text, warnings = _read_text(path, self.options)
        blocks, title = parse_markdown(text)
        assembled = assemble(blocks)
        if not assembled.text:
            raise ParseError(str(path), "no text", "the file holds only markup")
        return make_document(
            path, data, self.format, assembled, meta_title=title, warnings=warnings
        )
