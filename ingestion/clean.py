"""Text cleaning and document assembly shared by the loaders.

Cleaning works with regular expressions over whole strings (no per-character Python loops):
newlines are normalised, control characters / ANSI escapes / NUL / soft hyphens removed,
end-of-line hyphenation repaired, wrapped lines inside a paragraph joined, runs of spaces
collapsed, and paragraphs separated by exactly one blank line.

``assemble`` turns a loader's list of ``Block`` (paragraph, heading or table, with its page)
into the final text plus page and section spans, so every loader computes offsets the same way.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fathom.core.base import DocMeta, Document, PageSpan, SectionSpan
from fathom.core.errors import ParseError

DEFAULT_MAX_BYTES = 512 * 1024 * 1024

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# C0 controls except \t and \n, DEL, C1 controls, soft hyphen, zero-width chars, stray BOMs.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b\u2060\ufeff]")
_NEWLINES = re.compile(r"\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# "retrie-\nval" -> "retrieval": a letter, a hyphen at end of line, a lowercase letter next.
_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-[ \t]*\n[ \t]*(?=[a-zà-ÿ])")
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_SPACE_AROUND_NL = re.compile(r" *\n *")
_BLANK_RUNS = re.compile(r"\n{3,}")
# A newline inside a paragraph becomes a space, except before a list item ("- x", "2) x").
_SOFT_BREAK = re.compile(r"\n(?!\s*(?:[-*+•▪◦●‣–■□➢✓]|\d{1,3}[.)]|[a-zA-Z][.)])\s)")


def strip_controls(text: str) -> str:
    """Normalise newlines to \\n and drop ANSI escapes, control characters, NUL and soft hyphens."""
    text = _NEWLINES.sub("\n", text)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text)


def repair_hyphenation(text: str) -> str:
    """Join words split by a hyphen at a line end when the next line starts in lowercase."""
    return _HYPHEN_BREAK.sub("", text)


def join_wrapped_lines(text: str) -> str:
    """Join the lines of one paragraph with spaces, keeping the breaks before list items."""
    return _SOFT_BREAK.sub(" ", text)


def clean_text(text: str, *, join_lines: bool = True) -> str:
    """Clean controls, hyphenation, wrapped lines and spaces; one blank line between paragraphs."""
    text = strip_controls(text)
    text = _SPACES.sub(" ", text.replace("\t", " "))
    text = _SPACE_AROUND_NL.sub("\n", text)
    text = repair_hyphenation(text)
    paragraphs = [p.strip("\n ") for p in re.split(r"\n{2,}", text)]
    if join_lines:
        paragraphs = [join_wrapped_lines(p) for p in paragraphs]
    return "\n\n".join(p for p in paragraphs if p)


def clean_paragraph(text: str, *, join_lines: bool = True) -> str:
    """Clean one paragraph: like ``clean_text`` but blank lines inside it are dropped too."""
    text = _SPACES.sub(" ", strip_controls(text).replace("\t", " "))
    if "\n" not in text:  # most DOCX and PDF paragraphs: nothing more to do
        return text.strip()
    text = _SPACE_AROUND_NL.sub("\n", text).strip("\n ")
    text = _BLANK_RUNS.sub("\n", text.replace("\n\n", "\n"))
    text = repair_hyphenation(text)
    return join_wrapped_lines(text) if join_lines else text


def normalise_line(text: str) -> str:
    """A key for comparing lines: lowercase, digits as '#', single spaces (for headers/footers)."""
    return " ".join(re.sub(r"\d+", "#", text.lower()).split())


def clean_cell(text: str | None) -> str:
    """One table cell on one line: no newlines, no ``|`` that would break the row format."""
    if not text:
        return ""
    return " ".join(strip_controls(text).replace("|", "/").split())


def table_row(cells: Iterable[str | None]) -> str:
    """Cells joined by `` | `` (trailing empty cells dropped); '' when the row is empty."""
    parts = [clean_cell(c) for c in cells]
    while parts and not parts[-1]:
        parts.pop()
    if not any(parts):
        return ""
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------

BlockKind = Literal["para", "heading", "table", "code"]


@dataclass(slots=True)
class Block:
    """One paragraph-level unit from a loader (text not yet cleaned), with its page and level."""

    text: str
    kind: BlockKind = "para"
    page: int = 1
    level: int = 0  # heading level (1 = top) for kind == "heading"
    title: str = ""  # section title when it differs from the heading text (e.g. PDF outline)


@dataclass(frozen=True, slots=True)
class Assembled:
    """Final text with its page and section spans."""

    text: str
    pages: tuple[PageSpan, ...]
    sections: tuple[SectionSpan, ...]
    headings: tuple[str, ...]  # heading texts in order (the first may serve as the title)


def assemble(
    blocks: Iterable[Block],
    n_pages: int = 1,
    extra_sections: Iterable[tuple[str, int, int]] = (),
) -> Assembled:
    """Clean each block and join them with one blank line, tracking page and section offsets.

    ``extra_sections`` are ``(title, level, page)`` headings whose text was not found on the page
    (e.g. a PDF outline entry): their section starts at the start of that page.
    """
    parts: list[str] = []
    page_starts: dict[int, int] = {}
    page_ends: dict[int, int] = {}
    heads: list[tuple[int, str, int]] = []  # (offset, title, level)
    heading_texts: list[str] = []
    offset = 0
    for block in blocks:
        if block.kind == "table":
            text = "\n".join(
                line for line in (clean_cell_row(r) for r in block.text.split("\n")) if line
            )
        elif block.kind == "code":
            text = clean_paragraph(block.text, join_lines=False)
        elif block.kind == "heading":
            text = " ".join(repair_hyphenation(strip_controls(block.text)).split())
        else:
            text = clean_paragraph(block.text)
        if not text:
            continue
        if parts:
            offset += 2
        page_starts.setdefault(block.page, offset)
        if block.kind == "heading":
            heads.append((offset, block.title or text, max(1, block.level)))
            heading_texts.append(text)
        parts.append(text)
        offset += len(text)
        page_ends[block.page] = offset
    full = "\n\n".join(parts)

    pages: list[PageSpan] = []
    n_pages = max(n_pages, max(page_starts, default=1))
    cursor = 0
    for number in range(1, n_pages + 1):
        if number in page_starts:
            start = max(page_starts[number], cursor)
            end = max(page_ends[number], start)
        else:  # an empty page: a zero-width span where it would have been
            start = end = cursor
        pages.append(PageSpan(number, start, end))
        cursor = end

    for title, level, page in extra_sections:
        start = next((p.start for p in pages if p.number == page), 0)
        heads.append((start, title, max(1, level)))
    heads.sort(key=lambda h: h[0])
    return Assembled(
        full, tuple(pages), sections_from_headings(heads, len(full)), tuple(heading_texts)
    )


def clean_cell_row(row: str) -> str:
    """Re-clean one already-joined table row (controls and spaces only)."""
    return " ".join(strip_controls(row).split())


def sections_from_headings(
    heads: list[tuple[int, str, int]], text_len: int
) -> tuple[SectionSpan, ...]:
    """Each heading's section runs to the next heading of the same or higher level (or the end)."""
    open_: list[tuple[int, str, int]] = []  # stack of (start, title, level), levels increasing
    ordered: list[SectionSpan | None] = []
    slots: list[int] = []
    for start, title, level in heads:
        while open_ and open_[-1][2] >= level:
            s, t, lv = open_.pop()
            ordered[slots.pop()] = SectionSpan(t, lv, s, start)
        open_.append((start, title, level))
        ordered.append(None)
        slots.append(len(ordered) - 1)
    while open_:
        s, t, lv = open_.pop()
        ordered[slots.pop()] = SectionSpan(t, lv, s, text_len)
    return tuple(s for s in ordered if s is not None)


# ---------------------------------------------------------------------------------------------
# Reading files and building documents
# ---------------------------------------------------------------------------------------------


def check_text_size(name: str, size: int, limit: int) -> None:
    """ParseError when a document's text (or a text file's size) is over ``limit`` characters:
    indexing holds a document's text several times over."""
    if size > limit:
        raise ParseError(
            name,
            f"holds {size / 2**20:.0f} MiB of text, over the {limit / 2**20:.0f} MiB limit "
            "(ingest.max_text_mb)",
            "split the file, or raise ingest.max_text_mb (indexing needs about 20x that in memory)",
        )


def read_source(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The file's bytes; ParseError for a missing, unreadable, oversized or empty file."""
    name = str(path)
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise ParseError(
                name,
                f"file is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit",
                "raise ingest.max_file_mb or split the file",
            )
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except ParseError:
        raise
    except IsADirectoryError:
        raise ParseError(
            name, "is a directory, not a file", "pass the files or use discover()"
        ) from None
    except FileNotFoundError:
        raise ParseError(name, "no such file", "check the path") from None
    except PermissionError as exc:
        raise ParseError(
            name, f"cannot read: {exc.strerror}", "check the file's permissions"
        ) from None
    except OSError as exc:
        raise ParseError(name, f"cannot read: {exc.strerror or exc}", "check the file") from None
    if len(data) > max_bytes:  # grew while we read it
        raise ParseError(
            name, f"file is over the {max_bytes / 2**20:.0f} MiB limit", "split the file"
        )
    if not data.strip():
        raise ParseError(name, "empty file", "remove it or give it some content")
    return data


_BAD_TITLE = re.compile(
    r"^(untitled|no title|title|document\d*|microsoft word\b.*|slide \d+|none|null)$"
    r"|\.(pdf|docx?|txt|md|tex|dvi|ps|rtf|indd|qxd)$"
    r"|^\S*_\S*$",  # one token with an underscore: a file or template name, not a title
    re.IGNORECASE,
)


def sensible_title(title: str | None) -> str:
    """The metadata title if it looks like a real title, else ''."""
    if not title:
        return ""
    title = " ".join(strip_controls(title).split())
    if (
        not (2 <= len(title) <= 250)
        or not re.search(r"[^\W\d_]{2}", title)
        or _BAD_TITLE.search(title)
    ):
        return ""
    return title


def make_document(
    path: str | Path,
    data: bytes,
    fmt: str,
    assembled: Assembled,
    *,
    meta_title: str | None = None,
    warnings: Iterable[str] = (),
    ocr_pages: tuple[int, ...] = (),
    meta: DocMeta | None = None,
) -> Document:
    """A Document with content-derived ids and the title rule: metadata, first heading, stem;
    ``meta`` is what the document says about itself (``ingestion.metadata``)."""
    sha = hashlib.sha256(data).hexdigest()
    title = sensible_title(meta_title)
    if not title and assembled.headings:
        title = assembled.headings[0]
    if not title:
        title = Path(path).stem
    return Document(
        doc_id=sha[:16],
        path=str(path),
        title=title,
        text=assembled.text,
        sha256=sha,
        format=fmt,
        pages=assembled.pages,
        sections=assembled.sections,
        warnings=tuple(warnings),
        ocr_pages=ocr_pages,
        meta=meta or DocMeta(),
    )
