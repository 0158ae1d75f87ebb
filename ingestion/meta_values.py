"""The vocabulary of document metadata: cleaning property values and dropping junk ones,
reading dates and versions as written, and merging evidence field by field (``ingestion.metadata``
reads the files, ``ingestion.title_block`` a first page's layout).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fathom.core.base import META_FIELDS, DocMeta
from fathom.ingestion.clean import sensible_title, strip_controls

PROPERTIES, TITLE_BLOCK, TEXT = "properties", "title block", "text"
# Which evidence wins, field by field. A date printed on the title page is the publication
# date; a file's creation date is only its export's, so it comes after. The title block names
# every author where a file's author property often holds only whoever saved it.
PREFER: dict[str, tuple[str, ...]] = {
    "title": (PROPERTIES, TITLE_BLOCK, TEXT),
    "authors": (TITLE_BLOCK, PROPERTIES, TEXT),
    "organisation": (TITLE_BLOCK, PROPERTIES, TEXT),
    "date": (TITLE_BLOCK, TEXT, PROPERTIES),
    "version": (TITLE_BLOCK, PROPERTIES, TEXT),
}

# ---------------------------------------------------------------------------------------------
# Cleaning and junk
# ---------------------------------------------------------------------------------------------

_JUNK_TITLE = re.compile(
    r"^(untitled(\s+document)?|powerpoint presentation|presentation\d*|document\d*|slide\s*\d*"
    r"|microsoft (word|powerpoint|excel)\b.*|layout \d+|print|title|no title|none|null|n/?a"
    r"|new document|draft|temp|template|test|unknown)$"
    r"|\.(pdf|docx?|pptx?|xlsx?|txt|md|tex|dvi|ps|rtf|indd|qxd|qxp|html?|eps|ai|cdr|pub)\b"
    r"|^[a-z]:\\|^/|\\",  # a file path
    re.IGNORECASE,
)
_JUNK_PEOPLE = frozenset(
    """user admin administrator owner author authors unknown default guest root test tester
    customer name python-docx python-pptx ebooklib anonymous n/a na none null me owner-pc pc
    install installer staff""".split()
) | {"windows user", "microsoft office user", "office user", "valued customer", "your name",
     "preferred customer", "registered user", "a satisfied microsoft office user"}  # fmt: skip
# Software that writes its name where a person's or a company's belongs.
_PRODUCER = re.compile(
    r"\b(acrobat|distiller|pdf\s*tex|pdftex|latex|tex\b|xetex|luatex|dvips|ghostscript|"
    r"microsoft|word|powerpoint|excel|adobe|indesign|illustrator|quark|libreoffice|openoffice|"
    r"writer|pymupdf|mupdf|reportlab|itext|quartz|pdfium|chromium|skia|wkhtmltopdf|prince|"
    r"primopdf|cutepdf|nitro|foxit|pdf|printer|scanner|xerox|ricoh|konica|kyocera|"
    r"epson|docugen|arbortext|framemaker|keynote|google docs|calibre|pandoc)\b",
    re.IGNORECASE,
)
_JUNK_COMPANY = frozenset(
    {"microsoft", "microsoft corporation", "microsoft corp.", "hp", "hewlett-packard",
     "hewlett-packard company", "hp inc.", "dell", "dell inc.", "dell computer corporation",
     "home", "personal", "private", "company", "your company", "your company name", "toshiba",
     "lenovo", "acer", "asus", "grizli777", "sony", "n/a", "na", "none", "null", "default",
     "organization", "organisation", "home use", "privat"}
)  # fmt: skip
# A word that names an institution: a line or an author property holding one is no person.
ORG = re.compile(
    r"\b(universit\w*|institut\w*|college|school|academy|agency|department|dept\.|ministry|"
    r"office|bureau|cent(?:er|re)|laborator\w*|labs?|corporation|corp\.|inc\.?|ltd\.?|llc|"
    r"gmbh|company|foundation|association|society|council|board|commission|committee|"
    r"authority|administration|organi[sz]ation|research|hospital|consortium|google|deepmind|"
    r"microsoft|openai|ibm|nvidia|division|online)\b",
    re.IGNORECASE,
)
EMAIL = re.compile(r"\S+@\S+")
_URL = re.compile(r"https?://|www\.", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean(value: Any) -> str:
    """``value`` as one line of text: control characters out, whitespace collapsed."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return _SPACES.sub(" ", strip_controls(text)).strip(" \t;,")


def good_title(value: Any) -> str:
    """A property title worth keeping, else '' (a file name, a template's or an app's name)."""
    title = sensible_title(clean(value))
    if not title or _JUNK_TITLE.search(title) or _URL.search(title):
        return ""
    return title


def good_person(value: Any) -> str:
    """One author's name from a property, else '' (a user name, an app, an e-mail address)."""
    name = clean(value).strip(" .")
    low = name.lower()
    if (
        not (2 <= len(name) <= 80)
        or low in _JUNK_PEOPLE
        or EMAIL.search(name)
        or _URL.search(name)
        or _PRODUCER.search(name)
        or ORG.search(name)
        or name[0].islower()
        or "_" in name
        or re.search(r"\d", name)
        or not re.search(r"[^\W\d_]{2}", name)
    ):
        return ""
    if " " not in name and "," not in name and (name.islower() or len(name) <= 3):
        return ""  # a login ("jsmith"), not a name
    return name


def split_people(value: Any) -> tuple[str, ...]:
    """Authors from one property value: split on ';' (else on ',' between full names, ' and ',
    '&'), each kept only if it reads as a person; "Lovelace, Ada" stays one name."""
    text = clean(value)
    if not text:
        return ()
    if ";" in text:
        parts = text.split(";")
    else:
        parts = re.split(r"\s+(?:and|&)\s+|\s*&\s*", text)
        split: list[str] = []
        for part in parts:
            pieces = [p.strip() for p in part.split(",")]
            # "Lovelace, Ada" is one name written surname first; "Ada Lovelace, Grace Hopper"
            # is two: split on commas only when every piece is a full name.
            if len(pieces) > 1 and all(len(p.split()) >= 2 for p in pieces if p):
                split.extend(pieces)
            else:
                split.append(part)
        parts = split
    return unique(good_person(p) for p in parts)


def good_organisation(value: Any) -> str:
    """An organisation from a property, else '' (a PC maker's preset, an app's name)."""
    name = clean(value)
    if (
        not (2 <= len(name) <= 150)
        or name.lower() in _JUNK_COMPANY
        or EMAIL.search(name)
        or _PRODUCER.search(name)
        or not re.search(r"[^\W\d_]{2}", name)
    ):
        return ""
    return name


def unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for v in values:
        if v and v.lower() not in seen:
            seen[v.lower()] = v
    return tuple(seen.values())


# ---------------------------------------------------------------------------------------------
# Dates and versions
# ---------------------------------------------------------------------------------------------

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_DATE_PATTERNS = [
    re.compile(rf"\b{_YEAR}(?P<sep>[-/])(?P<mnum>[01]\d)(?:(?P=sep)(?P<dnum>[0-3]\d))?(?!\d)"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
]
_SEASON = re.compile(rf"\b(?:spring|summer|autumn|fall|winter)\s+{_YEAR}\b", re.IGNORECASE)
_YEAR_LINE = re.compile(rf"^\W*(?:©|\(c\)|copyright)?\s*{_YEAR}\W*$", re.IGNORECASE)
_PDF_DATE = re.compile(r"^(?:D:)?((?:19|20)\d{2})(\d{2})?(\d{2})?")


def find_date(text: str, year_alone: bool = False) -> tuple[str, str] | None:
    """The first date written in ``text`` as ``(as written, ISO)``: "12 March 2012", "March 12,
    2012", "March 2012", "2012-03-12", a season and year; with ``year_alone``, a line that is
    only a year ("2012", "© 2012"). None when there is none."""
    best: tuple[int, str, str] | None = None
    for pattern in _DATE_PATTERNS:
        m = pattern.search(text)
        if m is None:
            continue
        iso = _iso(m)
        if iso and (best is None or m.start() < best[0]):
            best = (m.start(), m.group(0).strip(" ,."), iso)
    if best is not None:
        return best[1], best[2]
    m = _SEASON.search(text)
    if m:
        return m.group(0), m.group("year")
    if year_alone:
        m = _YEAR_LINE.match(text.strip())
        if m:
            return m.group("year"), m.group("year")
    return None


def _iso(m: re.Match[str]) -> str:
    groups = m.groupdict()
    year = int(groups["year"])
    if groups.get("mnum"):
        month = int(groups["mnum"])
    else:
        month = _MONTHS.get((groups.get("month") or "").lower().rstrip("."), 0)
    day = int(groups.get("dnum") or groups.get("day") or 0)
    if not 1 <= month <= 12 or day > 31:
        return ""
    if day:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}"


def property_date(value: Any) -> tuple[str, str] | None:
    """A date property (a datetime, ``D:20120315…`` of a PDF, ISO text, or words) as
    ``(as written, ISO)``."""
    if value is None or value == "":
        return None
    if hasattr(value, "year") and hasattr(value, "month"):
        iso = f"{value.year:04d}-{value.month:02d}-{getattr(value, 'day', 1):02d}"
        return iso, iso
    text = clean(value)
    m = _PDF_DATE.match(text)
    if m and (text.startswith("D:") or re.fullmatch(r"\d{8,14}\D*.*", text)):
        parts = [p for p in m.groups() if p]
        if len(parts) >= 2 and not 1 <= int(parts[1]) <= 12:
            parts = parts[:1]
        iso = "-".join(parts)
        return iso, iso
    found = find_date(text, year_alone=True)
    if found is None and re.fullmatch(r"(?:19|20)\d{2}", text):
        return text, text
    return found


_VERSION = re.compile(
    r"\b(?:version|ver\.|release|edition)\s*:?\s*\d+(?:[.\-]\d+)*[a-z]?\b"
    r"|\b(?:revision|rev\.?)\s*:?\s*(?:\d+(?:\.\d+)*|[A-Z])\b"
    r"|(?<![\w.])v\.?\s?\d+(?:\.\d+)+\b|(?<![\w.])v\d+\b",
    re.IGNORECASE,
)


def find_version(text: str) -> str:
    """The version a line states ("Version 2.1", "v1.2", "Revision B"), as written; ''."""
    m = _VERSION.search(text)
    return m.group(0).strip() if m else ""


# ---------------------------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Found:
    """Evidence being gathered: the first value of each field wins, with its origin."""

    title: str = ""
    authors: tuple[str, ...] = ()
    organisation: str = ""
    date: str = ""
    iso_date: str = ""
    version: str = ""
    origin: dict[str, tuple[str, int]] = field(default_factory=dict)

    def put(self, name: str, value: Any, source: str, page: int = 0) -> bool:
        """Set field ``name`` unless it is set or ``value`` is empty; whether it was set.
        ``date`` takes an ``(as written, ISO)`` pair."""
        if not value or name in self.origin:
            return False
        if name == "date":
            self.date, self.iso_date = value
        else:
            setattr(self, name, value)
        self.origin[name] = (source, page)
        return True

    def meta(self) -> DocMeta:
        return DocMeta(
            title=self.title,
            authors=self.authors,
            organisation=self.organisation,
            date=self.date,
            iso_date=self.iso_date,
            version=self.version,
            origin=tuple((f, *self.origin[f]) for f in META_FIELDS if f in self.origin),
        )


def merge(parts: Iterable[DocMeta], prefer: dict[str, tuple[str, ...]] = PREFER) -> DocMeta:
    """One record from several readings: each field from the reading whose source ``prefer``
    ranks first for it (then the order of ``parts``)."""
    parts = [p for p in parts if not p.is_empty()]
    out = Found()
    for name in META_FIELDS:
        ranks = prefer.get(name, ())

        def rank(meta: DocMeta, name: str = name, ranks: tuple[str, ...] = ranks) -> int:
            source = meta.source_of(name)
            return ranks.index(source[0]) if source and source[0] in ranks else len(ranks)

        for part in sorted(parts, key=rank):
            source = part.source_of(name)
            if source is None:
                continue
            value: Any = (part.date, part.iso_date) if name == "date" else getattr(part, name)
            if out.put(name, value, *source):
                break
    return out.meta()


def guarded(read: Callable[..., DocMeta], *args: Any) -> DocMeta:
    """``read(*args)``, or an empty record when it raises: metadata never fails a load."""
    try:
        return read(*args)
    except Exception:  # any library's error on any file: the document loads without it
        return DocMeta()


# an author line in a document's opening text: "By Ada Lovelace", "Prepared by A and B",
# "Authors: A, B" (a slide deck's or a report's title slide or page)
_BYLINE = re.compile(
    r"^(?:(?:prepared|written|presented|compiled|edited|authored)\s+by|by|authors?\s*:)"
    r"\s+(?P<people>.+)$",
    re.IGNORECASE,
)

# degrees and honours after a name: "G. A. Lebour, M.A., F.G.S."
_DEGREES = re.compile(
    r"(?:\s*,\s*(?:(?:[A-Z][a-z]?\.){1,4}|Ph\.?\s?D\.?|MD|MBA|MSc|BSc|FRS|Esq\.?))+\s*,?\s*$"
)


def byline(line: str) -> tuple[str, ...]:
    """The people an author line names ("Prepared by Mara Lindqvist and Tomas Okafor"), or ()."""
    m = _BYLINE.match(line.strip())
    people = split_people(_DEGREES.sub("", m.group("people")).strip(" .,")) if m else ()
    # a full name has two words at least: "By Region" is a heading, not an author
    return people if people and all(len(p.split()) >= 2 for p in people) else ()


def with_text_fallback(meta: DocMeta, text: str, first_heading: str = "") -> DocMeta:
    """``meta`` with what the opening text states filled in where it has nothing (it never
    replaces a field): the first heading as title, an author line, a date line, a version line
    (origin ``text``, page 1)."""
    found = Found()
    if not meta.title and first_heading:
        found.put("title", good_title(first_heading), TEXT, 1)
    for line in text[:3000].splitlines()[:40]:
        line = line.strip()
        if not line or len(line.split()) > 12:
            continue
        if not meta.authors:
            found.put("authors", byline(line), TEXT, 1)
        if not meta.date:
            found.put("date", find_date(line), TEXT, 1)
        if not meta.version:
            found.put("version", find_version(line), TEXT, 1)
    return merge([meta, found.meta()])
