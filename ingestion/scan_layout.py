"""What a scan's layout lacks: font weight, and type sizes a title can be told by.

OCR gives text boxes, not fonts. A box's height separates a large heading from the body, but
not a heading set in bold at the body's size, nor a title in capitals (no taller than a line of
body text with descenders). So on pages read by OCR, headings are also found by their section
number (``mark_numbered_headings``), and a document without a metadata title is titled by its
first page's opening block (``opening_title``). Both work on ``pdf_layout``'s records.
"""

from __future__ import annotations

import itertools
import re

from fathom.ingestion.pdf_layout import (
    _GUTTER,
    _HEADING_MAX_CHARS,
    _HEADING_MAX_LINES,
    _HEADING_MAX_WORDS,
    _TERMINAL,
    Line,
    Page,
    _gap_breaks,
    _row_tolerance,
    _rows,
    _two_columns,
)

# Numbered headings in the body's size ("4 DECISION MAKING TASKS", "3.1 Setup", "A.1 HotpotQA"):
# bold is what sets them apart, and a scan's text boxes carry no weight, only text and position.
_NUMBERED = re.compile(
    r"^\s*(?P<num>(?:[1-9]\d?|[A-Z])(?:\.[1-9]\d?){1,3}\.?|[1-9]\d?\.?)\s+(?P<title>\S.*)$"
)
_NUMBER_ONLY = re.compile(r"^\s*(?:[1-9]\d?|[A-Z])(?:\.[1-9]\d?){0,3}\.?\s*$")
_MINOR_WORDS = frozenset(
    "a an and as at but by for from in into nor of on or over per the to via vs with".split()
)
_NUMBERED_MAX_WORDS = 12
_NUMBERED_MAX_CHARS = 100
_CODE_CHARS = re.compile(r"[_=*<>{}\[\]|\\@#$^~]")  # identifiers, markup: code, not a title
# A page with at least this many lines opening with a section number, holding at least this
# share of its text (with the page numbers), lists contents: none of its lines is a heading.
_CONTENTS_LINES = 5
_CONTENTS_SHARE = 0.7
_CAPITALISED_SHARE = 0.8  # of a title's letters (capitals) or of its major words (title case)


def mark_numbered_headings(pages: list[Page]) -> None:
    """Short lines standing alone that start with a section number ("4", "3.1", "A.1") and go
    on in capitals or title case become headings, level by the number's depth ("3.1" -> 2).

    For text read by OCR, where headings set in bold at the body's size look like body text.
    A line continuing a paragraph, sharing its row with other text (a table row), in sentence
    case, ending a sentence, holding code, or in a run of numbered lines (a list) is not a
    heading, nor is any line of a page mostly of numbered lines (a list of contents).
    """
    for page in pages:
        lines = [ln for ln in page.lines if ln.horizontal and not ln.drop]
        if _contents_page(lines):
            continue
        # id of a row's first line -> (its title line, the number set apart or None, level)
        found: dict[int, tuple[Line, Line | None, int]] = {}
        spans = [(ln.x0, ln.x1, len(ln.text)) for ln in lines]
        two = page.width and _two_columns(spans, page.width / 2)
        middle = page.width / 2 if two else None
        for ln in lines:
            if not ln.heading:
                head = _numbered_title(ln, lines, middle)
                if head is not None:
                    found[id(head[0] or ln)] = (ln, *head)
        for ln, number, level in found.values():
            first = number or ln
            if _continues_paragraph(first, ln, lines, found) or _in_numbered_run(first, lines):
                continue
            ln.heading = level
            if number is not None:
                number.heading, number.block = level, ln.block


def _contents_page(lines: list[Line]) -> bool:
    """Whether the page is a list of contents: mostly numbered entries and page numbers."""
    entries = sum(1 for ln in lines if _NUMBERED.match(ln.text))
    numbered = sum(len(ln.text) for ln in lines if _numbered_start(ln.text))
    total = sum(len(ln.text) for ln in lines)
    return entries >= _CONTENTS_LINES and numbered >= _CONTENTS_SHARE * total


def _numbered_title(
    line: Line, lines: list[Line], middle: float | None
) -> tuple[Line | None, int] | None:
    """(the number set apart on the same row, or None; the level) when ``line`` is the title
    of a numbered heading alone on its row (in its column, when ``middle`` divides the page
    into two); None when it is not one."""
    number: Line | None = None
    match = _NUMBERED.match(line.text)
    if match is not None:
        digits, title = match["num"], match["title"]
    else:
        number = _number_beside(line, lines)
        if number is None:
            return None
        digits, title = number.text.strip(), line.text.strip()
    if not _heading_title(title):
        return None
    first = number or line
    mates = [x for x in _row_mates(line, lines) if x is not number]
    if any(_same_column(first, line, x, middle) for x in mates):
        return None  # a row of a table or of a list of contents, or text beside it
    return number, min(6, _number_depth(digits))


def _heading_title(title: str) -> bool:
    """A heading's title: short, no sentence end, and in capitals or title case."""
    title = title.strip()
    words = title.split()
    if not (1 <= len(words) <= _NUMBERED_MAX_WORDS) or len(title) > _NUMBERED_MAX_CHARS:
        return False
    if not title[0].isalpha() or not title[0].isupper() or re.search(r"[.,;:]$|\.\s", title):
        return False
    if _CODE_CHARS.search(title):
        return False
    letters = [c for c in title if c.isalpha()]
    alnum = sum(c.isalnum() for c in title)
    if len(letters) < 2 or len(letters) < 0.8 * alnum:
        return False  # mostly figures: a row of numbers, not a title
    if _in_capitals(title):
        return True
    major = [w for w in words if re.search(r"[^\W\d_]", w) and w.lower() not in _MINOR_WORDS]
    capitalised = [w for w in major if next(c for c in w if c.isalpha()).isupper()]
    return len(capitalised) >= _CAPITALISED_SHARE * len(major)


def _row_mates(line: Line, lines: list[Line]) -> list[Line]:
    """The other lines on ``line``'s visual row (baselines within a third of the font size)."""
    tol = _row_tolerance(line)
    return [x for x in lines if x is not line and abs(x.base - line.base) <= tol]


def _number_beside(line: Line, lines: list[Line]) -> Line | None:
    """A section number set as its own line just left of ``line`` on the same row."""
    height = line.y1 - line.y0
    for x in _row_mates(line, lines):
        if _NUMBER_ONLY.match(x.text) and x.x1 <= line.x0 + 1.0 and line.x0 - x.x1 < 3 * height:
            return x
    return None


def _same_column(first: Line, last: Line, other: Line, middle: float | None) -> bool:
    """Whether ``other`` shares the column of the row from ``first`` to ``last``: on a page
    of two columns (split at ``middle``) the other column's lines may share the row."""
    if middle is None or first.x0 < middle - _GUTTER < middle + _GUTTER < last.x1:
        return True  # one column, or a row across the middle
    if last.x1 <= middle + _GUTTER:
        return other.x0 < middle - _GUTTER
    return other.x1 > middle + _GUTTER


def _continues_paragraph(
    first: Line, last: Line, lines: list[Line], found: dict[int, tuple[Line, Line | None, int]]
) -> bool:
    """Whether the line just above the row, at the paragraph's line spacing, runs on into it
    (no sentence end, and not itself a numbered heading): the row is then the next line of a
    paragraph."""
    above = [
        x
        for x in lines
        if x.y1 <= first.y0 + 0.5 * (first.y1 - first.y0)
        and min(x.x1, last.x1) - max(x.x0, first.x0) > 0
        and x.base < first.base - 1.0
    ]
    if not above:
        return False
    prev = max(above, key=lambda x: x.y1)
    heads = {id(ln) for ln, _, _ in found.values()}
    if id(prev) in found or id(prev) in heads:
        return False
    return not _gap_breaks(prev, first) and not _TERMINAL.search(prev.text)


def _in_numbered_run(start: Line, lines: list[Line]) -> bool:
    """Whether the row starting at ``start`` has a numbered neighbour of the same depth at
    line spacing just above or below it in its column: items of a list."""
    depth = _depth(start.text)
    for x in lines:
        if x is start or not _numbered_start(x.text):
            continue
        if _depth(x.text) != depth or min(x.x1, start.x1) - max(x.x0, start.x0) <= 0:
            continue
        upper, lower = (x, start) if x.y0 < start.y0 else (start, x)
        if upper.base < lower.base - 1.0 and not _gap_breaks(upper, lower):
            return True
    return False


def _numbered_start(text: str) -> bool:
    """Whether ``text`` starts with a section or list number (or is one)."""
    return bool(_NUMBERED.match(text) or _NUMBER_ONLY.match(text))


def _depth(text: str) -> int:
    """The depth of the number ``text`` starts with ("3.1" -> 2; 0 without one)."""
    match = _NUMBERED.match(text) or _NUMBER_ONLY.match(text)
    if match is None:
        return 0
    return _number_depth(match.groupdict().get("num") or text.strip())


def _number_depth(digits: str) -> int:
    """How deep a section number is ("4" -> 1, "3.1" -> 2, "B.2.1." -> 3)."""
    return digits.rstrip(".").count(".") + 1


def opening_title(pages: list[Page]) -> str:
    """The first page's opening block when it reads as a title ('' if not): at most
    ``_HEADING_MAX_LINES`` rows, ``_HEADING_MAX_WORDS`` words and ``_HEADING_MAX_CHARS``
    characters, starting with a capital, ending no sentence, and not a numbered section heading.
    For a scan, whose text boxes do not tell a title's type size from the body's (a title in
    capitals measures no taller than a line of body text with descenders)."""
    first = next((p for p in pages if p.lines), None)
    if first is None:
        return ""
    lines = [ln for ln in first.lines if ln.horizontal and not ln.drop]
    if not lines:
        return ""
    top = min(lines, key=lambda ln: (ln.y0, ln.x0))
    rows = _rows([ln for ln in lines if ln.block == top.block])
    # A title in capitals set close above the text it opens shares that text's block: its rows
    # in capitals are the title.
    caps = list(itertools.takewhile(lambda row: _in_capitals(" ".join(x.text for x in row)), rows))
    if caps and len(caps) < len(rows):
        rows = caps
    title = " ".join(" ".join(ln.text.strip() for ln in row) for row in rows).strip()
    if (
        len(rows) > _HEADING_MAX_LINES
        or len(title) > _HEADING_MAX_CHARS
        or len(title.split()) > _HEADING_MAX_WORDS
        or not title[:1].isupper()
        or _TERMINAL.search(title)
        or _NUMBERED.match(title)
    ):
        return ""
    return title


def _in_capitals(text: str) -> bool:
    """Whether ``text`` is set in capitals: at least ``_CAPITALISED_SHARE`` of two or more
    letters."""
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 2 and sum(c.isupper() for c in letters) >= _CAPITALISED_SHARE * len(
        letters
    )
