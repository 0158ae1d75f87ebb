"""The title block of a laid-out first page (a PDF's, or a scan's as OCR read it): the largest
type near the top is the title; the short lines under it name the authors, their organisation,
the date and the version.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from fathom.core.base import DocMeta
from fathom.ingestion.meta_values import (
    EMAIL,
    ORG,
    TEXT,
    TITLE_BLOCK,
    Found,
    find_date,
    find_version,
    good_organisation,
    good_title,
    unique,
)
from fathom.ingestion.pdf_layout import Line, Page

_ARXIV = re.compile(
    r"arXiv:\s*(?P<id>\d{4}\.\d{4,5})(?P<version>v\d+)?\s*(?:\[[^\]]*\])?\s*(?P<date>"
    r"[0-3]?\d\s+[A-Za-z]{3,9}\.?\s+(?:19|20)\d{2})?"
)
_ACRONYM = re.compile(r"\b(WHO|UN|OECD|NASA|NIST|UNICEF|UNESCO|IMF|FAO|USAID|EPA|CDC|NIH|GAO)\b")
# A person's role ("Carroll Doherty, Director of Political Research"): not an organisation.
_ROLE = re.compile(
    r"\b(director|manager|associate|senior|professor|president|chair\w*|editor|officer|"
    r"researcher|fellow|surgeon|general|secretary|dean|head|lead|analyst|student)\b",
    re.IGNORECASE,
)
# Of an affiliation's parts ("Department of X, Princeton University"), the institution.
_INSTITUTION = re.compile(
    r"\b(universit\w*|institut\w*|college|academy|agency|ministry|corporation|inc\.?|ltd\.?|"
    r"llc|gmbh|company|foundation|organi[sz]ation|google|deepmind|microsoft|openai|ibm|nvidia)\b",
    re.IGNORECASE,
)
_STOP = re.compile(
    r"^\s*(?:\d+\.?\s*)?(abstract|summary|executive summary|introduction|contents|table of "
    r"contents|foreword|preface|keywords|background|overview)\b",
    re.IGNORECASE,
)
_MARKS = re.compile(r"[*∗†‡§¶#⋆♯✝✉⁎]+|[\u00b9\u00b2\u00b3\u2070-\u209f]+")
_ATTACHED_NUMBERS = re.compile(r"(?<=[^\W\d_])\d+(?:\s*,\s*\d+)*(?=[\s,;]|$)")
_LEADING_NUMBERS = re.compile(r"^\s*[\d,\s]*(?=[^\W\d_])")
_PARTICLES = frozenset(
    "van von de der den da di del della la le du dos das bin al el ten ter y e".split()
)
_NOT_NAME_WORDS = frozenset(
    """the a an of and or for in on at to with from by via using towards toward into over under
    new report guide handbook manual study analysis review survey overview introduction
    annual final draft interim technical white paper policy brief plan strategy framework
    model models learning language data system systems network networks approach method
    methods results evaluation assessment development management health care public
    national international global world annual edition volume chapter part section appendix
    united states america europe european university institute department center centre
    prepared submitted presented published edited contents table figure abstract summary
    executive january february march april may june july august september october november
    december version revision corporate governance cloud help support user owner manual more
    than just about what how why our your their its all best top key free digital mobile
    online media market marketing business trends brochure wireless headset""".split()
)
_NAME_SUFFIXES = re.compile(
    r"(tions?|ments?|ness|ology|ities|ics|ings|ships?|ware|ized?|ised?)$", re.IGNORECASE
)


def person_names(line: str) -> tuple[str, ...]:
    """The names a title block's author line lists ("Ada Lovelace1, Charles Babbage*,2 and
    Grace Hopper†", "Liangming Pan1,2 Xiaobao Wu3"), footnote marks and numbers stripped (a
    mark ends a name); () unless every part is a name."""
    text = re.sub(r"^\s*(?:by|authors?|written by|prepared by)\s*:?\s+", "", line, flags=re.I)
    text = _MARKS.sub(",", text)
    text = _ATTACHED_NUMBERS.sub(",", text)
    text = re.sub(r"\([^)]*\)", " ", text)  # "(Princeton)", "(equal contribution)"
    parts = re.split(r"\s*[,;]\s*|\s+(?:and|&)\s+|\s*&\s*|\s{3,}", text)
    names: list[str] = []
    for part in parts:
        part = " ".join(part.split()).strip(" .")
        if not part or re.fullmatch(r"[\d\s,.]*", part):
            continue
        if part.lower() in {"jr", "sr", "ii", "iii", "phd", "md", "ph.d"}:
            continue
        if not _is_name(part):
            return ()
        names.append(part)
    return unique(names)


def _is_name(part: str) -> bool:
    tokens = part.split()
    if (
        not 2 <= len(tokens) <= 5
        or len(part) > 45
        or ORG.search(part)
        or _ACRONYM.search(part)
        or _ROLE.search(part)
    ):
        return False
    real = 0
    for tok in tokens:
        low = tok.lower().strip(".")
        if tok in _PARTICLES:  # "van", "de": lower case inside a name ("Du" is a surname)
            continue
        if low in _NOT_NAME_WORDS or (_NAME_SUFFIXES.search(low) and len(low) > 6):
            return False
        core = tok.replace("-", "").replace("'", "").replace("’", "").replace(".", "")
        if not core or not core.isalpha() or not tok[0].isupper():
            return False
        real += 1
    return real >= 2 or (real == 1 and len(tokens) >= 2 and tokens[0].endswith("."))


@dataclass(slots=True)
class _Row:
    """Lines of one visual row of the page, left to right."""

    lines: list[Line]

    @property
    def text(self) -> str:
        return " ".join(ln.text.strip() for ln in self.lines)

    @property
    def size(self) -> float:
        return max(ln.size for ln in self.lines)

    @property
    def y0(self) -> float:
        return min(ln.y0 for ln in self.lines)

    @property
    def y1(self) -> float:
        return max(ln.y1 for ln in self.lines)


def _rows(lines: list[Line]) -> list[_Row]:
    rows: list[_Row] = []
    for ln in sorted(lines, key=lambda ln: (round(ln.base), ln.x0)):
        if rows and abs(rows[-1].lines[0].base - ln.base) <= 2.0:
            rows[-1].lines.append(ln)
        else:
            rows.append(_Row([ln]))
    for row in rows:
        row.lines.sort(key=lambda ln: ln.x0)
    return rows


def title_block(pages: list[Page]) -> DocMeta:
    """What the first page with text shows in its title area: the largest type near the top
    is the title; the short lines around it give authors, organisation, date and version
    (origin ``title block``); a short date, version or organisation line elsewhere on that
    page, and an arXiv stamp, are origin ``text``. On a page read by OCR the boxes' heights stand
    for the type's size."""
    first = next((p for p in pages[:3] if p.lines), None)
    found = Found()
    if first is None:
        return found.meta()
    number = first.number
    _arxiv_stamp(first, found)
    lines = [ln for ln in first.lines if ln.horizontal and not ln.drop and ln.text.strip()]
    if not lines:
        return found.meta()
    rows = _rows(lines)
    body = _body_size(pages)
    title_rows = _title_rows(rows, first.height, body)
    if title_rows:
        start, end = title_rows
        text = " ".join(rows[i].text for i in range(start, end))
        found.put("title", good_title(text), TITLE_BLOCK, number)
        _read_block(rows[end : end + 14], found, number, below=True)
        _read_block(rows[max(0, start - 6) : start], found, number, below=False)
    for row in rows:  # what the rest of the page states, on short lines only
        if len(row.text.split()) <= 12:
            found.put("date", find_date(row.text, year_alone=True), TEXT, number)
            found.put("version", find_version(row.text), TEXT, number)
            if len(row.text.split()) <= 10 and _is_org(row.text) and not find_date(row.text):
                found.put("organisation", _org_text(row.text), TEXT, number)
    return found.meta()


def _arxiv_stamp(page: Page, found: Found) -> None:
    """arXiv's margin stamp ("arXiv:2210.03629v2 [cs.SE] 10 Mar 2023"): version and date."""
    for ln in page.lines:
        m = _ARXIV.search(ln.text)
        if m is None:
            continue
        if m.group("date"):
            found.put("date", find_date(m.group("date")), TEXT, page.number)
        if m.group("version"):
            found.put("version", m.group("version"), TEXT, page.number)
        return


def _body_size(pages: list[Page]) -> float:
    sizes: Counter[float] = Counter()
    for page in pages[:20]:
        for ln in page.lines:
            if ln.horizontal:
                sizes[round(ln.size, 1)] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _title_rows(rows: list[_Row], height: float, body: float) -> tuple[int, int] | None:
    """``[start, end)`` of the rows set in the page's largest type in its top two thirds, when
    that type is larger than the body's and reads as a title."""
    limit = height * 0.7 if height else float("inf")
    top = [i for i, r in enumerate(rows) if r.y1 <= limit and re.search(r"[^\W\d_]{2}", r.text)]
    sizes = sorted({round(rows[i].size * 2) / 2 for i in top}, reverse=True)
    for size in sizes[:3]:
        if size < max(body * 1.12, body + 0.9):
            return None
        group = [i for i in top if rows[i].size >= size - 0.5]
        start = group[0]
        end = start + 1
        # the rows of that size right under the first: one title set over several lines
        while end < len(rows) and rows[end].size >= size - 0.5 and end - start < 4:
            if rows[end].y0 - rows[end - 1].y1 > 1.5 * size:
                break
            end += 1
        text = " ".join(rows[i].text for i in range(start, end))
        if (
            len(text) <= 250
            and not _STOP.match(text)
            and not _just_date(text)
            and good_title(text)
            and not _only_org(text)
        ):
            return start, end
    return None


def _just_date(text: str) -> bool:
    """A line that is only a date ("March 2012", "2012")."""
    found = find_date(text, year_alone=True)
    return found is not None and len(found[0]) >= len(text.strip(" ,.")) - 3


def _only_org(text: str) -> bool:
    """A line that is just an organisation's name in large type (a logo line)."""
    return _is_org(text) and len(text.split()) <= 6 and not re.search(r"[:?]", text)


def _is_org(text: str) -> bool:
    """A line naming an organisation: a short line with an institution's word, not a sentence
    (which starts in lower case or runs on with a comma or hyphen)."""
    text = text.strip()
    if (
        not text
        or text[0].islower()
        or text[-1] in ",-;:"
        or not 2 <= len(text.split()) <= 16
        or _ROLE.search(text)
        or re.search(r"\d{3,}|\s\d+$", text)  # a file number, "Organisation 11"
    ):
        return False
    # the institution's word capitalised, as in a name ("Research Center", not "research")
    return any(m.group(0)[0].isupper() for m in ORG.finditer(text)) or bool(_ACRONYM.search(text))


def _org_text(text: str) -> str:
    """The organisation a line names: footnote marks out; of an affiliation's comma-separated
    parts, the institution's ("Princeton University" of "Department of X, Princeton
    University, NJ")."""
    text = _LEADING_NUMBERS.sub("", _MARKS.sub(" ", text))
    text = " ".join(text.split()).strip(" ,;")
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1:
        part = next((p for p in parts if _INSTITUTION.search(p)), text)
        text = part if len(part.split()) > 1 else text  # "ACME, INC." stays whole
    return good_organisation(text)


def _read_block(rows: list[_Row], found: Found, number: int, below: bool) -> None:
    """Authors, organisation, date and version from the rows next to the title."""
    for row in rows:
        text = row.text.strip()
        if _STOP.match(text) or len(text.split()) > 20:
            break  # the abstract or the body begins
        if EMAIL.search(text) and not person_names(EMAIL.sub(" ", text)):
            continue
        short = len(text.split()) <= 12
        date = find_date(text, year_alone=True)
        if date and short:
            found.put("date", date, TITLE_BLOCK, number)
            continue
        version = find_version(text)
        if version and short:
            found.put("version", version, TITLE_BLOCK, number)
            continue
        if below and found.origin.get("authors", (TITLE_BLOCK, number)) == (TITLE_BLOCK, number):
            names = _row_names(row)
            if names:
                found.authors = unique([*found.authors, *names])
                found.origin["authors"] = (TITLE_BLOCK, number)
                continue
        for ln in row.lines:
            if _is_org(ln.text):
                found.put("organisation", _org_text(ln.text), TITLE_BLOCK, number)


def _row_names(row: _Row) -> tuple[str, ...]:
    """The names on a row of the title block: each line of it a list of names (authors set
    side by side in columns), or the row's whole text one; () otherwise."""
    per_line = [person_names(EMAIL.sub(" ", ln.text)) for ln in row.lines]
    if len(per_line) > 1 and all(per_line):
        return unique(n for names in per_line for n in names)
    return person_names(EMAIL.sub(" ", row.text))
