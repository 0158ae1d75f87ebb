"""The shape of an extractive answer by the kind of answer a question wants
(``router.answer_kind``): a list's items, a count and what was counted, a number as written,
and whether the sources read answer at all.

- **list**: the items of the list block in the sources that best matches the question —
  bullets, numbered steps, table rows (their first cell) or lines under a label ending in a
  colon — else the enumeration ("A, B and C") in the sentence that holds the reader's span.
  Items are de-duplicated (case and spacing ignored), each cited to its source.
- **count**: the number the reader's span states, when it is one; else the items of the list
  found as above, counted, saying what was counted.
- **number** and **table**: the number in the reader's span, else the one in its sentence
  nearest to it, as written (with its %, currency or unit word).
- **not answered**: the share of the question's own words (IDF-weighted over the sources read,
  the words every question shares left out) that the sources hold; a question whose words the
  sources mostly lack, or that asks what only a picture or the layout shows, is not answered
  from text (``coverage``, ``should_abstain``).

Deterministic, stdlib only; the extractive answerer (``extractive``) calls it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fathom.core.words import answer_terms

if TYPE_CHECKING:
    from fathom.core.base import Hit

MAX_ITEMS = 25
MAX_ITEM_WORDS = 14
MIN_BLOCK_ITEMS = 2
MIN_LIST_MATCH = 0.5  # the share of the question's weighted terms a list block must hold

_BULLET = re.compile(
    r"^\s*(?:[-•*▪●◦‣–—·■□➢►✓✔]|\(?\d{1,2}[.)]|\(?[a-hA-H][.)]|\(?[ivx]{1,4}\))\s+(\S.*)$"
)
_CELL_SEP = " | "
_LABEL = re.compile(r"[:：]\s*$")
_ENUM_LEAD = re.compile(r"^.*?\b(?:are|were|include|includes|included|including|namely|:)\s+")
_ENUM_SPLIT = re.compile(r"\s*(?:,|;)\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_NUMBER = re.compile(
    r"(?:[$€£¥]\s?)?[-+]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent|per cent))?"
    r"(?:\s?(?:million|billion|thousand|trillion|bn|mn|m|k))?\b%?",
    re.IGNORECASE,
)
_YEAR_ONLY = re.compile(r"(?:1[89]|20)\d\d")
_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "twenty": 20,
}
# Words every question about a document shares: they say nothing about whether it answers.
_GENERIC = frozenset(
    answer_terms(
        "document report paper slide slides page pages according mentioned shown show shows "
        "list many much number total value percentage percent year years answer format round "
        "decimal places integer million billion give write name example following section "
        "table figure chart image picture text described describe state stated"
    )
)


@dataclass(frozen=True, slots=True)
class Item:
    """One item of a list answer and the source (1-based) it comes from."""

    text: str
    n: int


def _clean_item(line: str) -> str:
    """A list line as an item: its lead term when it reads "Term: explanation" or
    "Term – explanation", trimmed of trailing punctuation."""
    text = " ".join(line.split()).strip(" .;,")
    for sep in (": ", " – ", " — ", " - "):
        head, found, _ = text.partition(sep)
        if found and 0 < len(head.split()) <= 6:
            return head.strip(" .;,")
    words = text.split()
    if len(words) > MAX_ITEM_WORDS:
        text = " ".join(words[:MAX_ITEM_WORDS]) + "…"
    return text


def _blocks(hit: Hit, n: int) -> list[tuple[str, list[Item]]]:
    """``(lead, items)`` for each run of list lines in a source: bullets or numbered lines, or
    table rows (their first cell), with the line before the run as its lead."""
    lines = hit.chunk.text.splitlines()
    out: list[tuple[str, list[Item]]] = []
    run: list[Item] = []
    lead = hit.chunk.section or ""
    kind = ""
    previous = lead

    def close() -> None:
        nonlocal run, kind
        if len(run) >= MIN_BLOCK_ITEMS:
            out.append((lead, run))
        run, kind = [], ""

    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        bullet = _BULLET.match(stripped)
        row = _CELL_SEP in stripped
        now = "bullet" if bullet else "row" if row else ""
        if now and now != kind:
            close()
            kind, lead = now, previous
            if row:  # a table's first row is its header, not an item
                lead = f"{lead} {stripped}"
                previous = stripped
                continue
        if bullet:
            run.append(Item(_clean_item(bullet.group(1)), n))
        elif row:
            first = stripped.split("|")[0].strip() or stripped.split("|")[1].strip()
            run.append(Item(_clean_item(first), n))
        else:
            close()
        previous = stripped
    close()
    return out


def _weights(question: str, hits: list[Hit]) -> dict[str, float]:
    """The question's own terms, each weighted by its IDF over the sources read; the type of
    answer asked for ("what animal", "which year": rarely written out) and the words every
    question about a document shares left out."""
    from fathom.stages.generate.sentence_scorer import answer_type_terms

    terms = answer_terms(question) - _GENERIC - answer_type_terms(question)
    docs = [answer_terms(h.chunk.text) for h in hits]
    n = max(1, len(docs))
    return {t: math.log((n + 1) / (1 + sum(t in d for d in docs))) + 1.0 for t in terms}


def list_items(question: str, hits: list[Hit], sentence: str = "", n: int = 0) -> list[Item]:
    """The items a list question asks for: the list block in ``hits`` whose lead and items
    hold most of the question's weighted terms, else the enumeration in the reader's span
    ``sentence`` (from source ``n``); de-duplicated, at most ``MAX_ITEMS``. Empty when neither
    is found."""
    weights = _weights(question, hits)
    total = sum(weights.values()) or 1.0
    best: tuple[float, list[Item]] | None = None
    for i, hit in enumerate(hits[:8], start=1):
        for lead, items in _blocks(hit, i):
            terms = answer_terms(lead) | answer_terms(hit.chunk.section or "")
            for item in items:
                terms |= answer_terms(item.text)
            # the lead and section must name the list; the items alone may match by chance
            named = answer_terms(lead) | answer_terms(hit.chunk.section or "")
            if not any(t in named for t in weights):
                continue
            score = sum(w for t, w in weights.items() if t in terms) / total
            score -= 0.02 * (i - 1)  # a better-ranked source wins a tie
            if best is None or score > best[0]:
                best = (score, items)
    if best is not None and best[0] >= MIN_LIST_MATCH:
        return _unique(best[1])
    if sentence:
        return _unique([Item(t, n) for t in enumeration(sentence)])
    return []


def enumeration(sentence: str) -> list[str]:
    """The items of the enumeration "A, B and C" (or "A and B") in ``sentence``: the longest
    run of short comma- or and-separated phrases; empty when there is none."""
    body = re.sub(
        r"^.*?\b(?:are|were|include|includes|included|including|namely|:)\s+", "", sentence
    )
    body = body.rstrip(" .;")
    parts = [p.strip(" .;,") for p in _ENUM_SPLIT.split(body) if p and p.strip(" .;,")]
    if len(parts) < 2 or any(len(p.split()) > 8 for p in parts[1:]):
        return []
    # The first part still carries the words before the list ("located in Mumbai"): it keeps
    # as many words as the longest of the others.
    longest = max(len(p.split()) for p in parts[1:])
    parts[0] = " ".join(parts[0].split()[-longest:])
    return parts


def _unique(items: list[Item]) -> list[Item]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.text.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out[:MAX_ITEMS]


def number_in(text: str, near: str = "") -> str:
    """The number in ``text`` as written ("12.5%", "$3,362 million", "2019"); the one nearest
    to ``near`` (the reader's span) when there are several; a number word ("three") gives its
    digits. Empty when there is none."""
    found = [m for m in _NUMBER.finditer(text) if any(ch.isdigit() for ch in m.group())]
    if not found:
        words = [w for w in re.findall(r"[a-z]+", text.lower()) if w in _NUMBER_WORDS]
        return str(_NUMBER_WORDS[words[0]]) if words else ""
    if near and near in text and len(found) > 1:
        at = text.index(near)
        found.sort(key=lambda m: abs(m.start() - at))
    return found[0].group().strip()


def count_in(text: str, near: str = "") -> str:
    """The number in ``text`` that can be a count: ``number_in``'s, unless it reads as a year
    ("2022"), an amount ("$3 million") or a share ("12%") — never how many. Empty when none."""
    found = number_in(text, near)
    if not found or not found[0].isdigit() or _YEAR_ONLY.fullmatch(found):
        return ""
    return "" if found.endswith("%") or "cent" in found.lower() else found


def coverage(question: str, hits: list[Hit]) -> float:
    """The share of the question's own weighted terms that the sources read hold (1.0 for a
    question without terms of its own)."""
    weights = _weights(question, hits)
    if not weights:
        return 1.0
    held: set[str] = set()
    for hit in hits:
        held |= answer_terms(hit.chunk.text) | answer_terms(hit.chunk.section or "")
    return sum(w for t, w in weights.items() if t in held) / sum(weights.values())


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell looked up by its row and column labels, in source ``n`` (1-based)."""

    value: str
    row: str
    column: str
    n: int
    line: str  # the table row as written

    @property
    def text(self) -> str:
        """The value with its labels: "1,383 (Goodwill, January 28, 2023)"."""
        labels = ", ".join(x for x in (self.row, self.column) if x)
        return f"{self.value} ({labels})" if labels else self.value


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(hit: Hit) -> list[list[list[str]]]:
    """The tables of a source: runs of at least two rows written ``a | b | c``, as cells."""
    out: list[list[list[str]]] = []
    run: list[list[str]] = []
    for line in hit.chunk.text.splitlines():
        if _CELL_SEP in line:
            run.append(_cells(line))
        else:
            if len(run) >= 2:
                out.append(run)
            run = []
    if len(run) >= 2:
        out.append(run)
    return out


def _label_score(label: str, weights: dict[str, float], numbers: frozenset[str]) -> float:
    """How much of a row or column label the question names: its terms' weight, and a number
    (a year) written in both counting double."""
    terms = answer_terms(label)
    score = sum(w for t, w in weights.items() if t in terms)
    score += sum(2.0 for x in re.findall(r"\d{4}|\d+", label) if x in numbers)
    return score


def table_cell(question: str, hits: list[Hit]) -> Cell | None:
    """The cell of a table in ``hits`` whose row label and column header the question names
    best (both must be named: a row's first cell, a column's header in the table's first row);
    None when no table has both."""
    weights = _weights(question, hits)
    numbers = frozenset(re.findall(r"\d{4}|\d+", question))
    if not weights and not numbers:
        return None
    best: tuple[float, Cell] | None = None
    for i, hit in enumerate(hits[:8], start=1):
        for table in _tables(hit):
            header = table[0]
            columns = [_label_score(h, weights, numbers) for h in header]
            for row in table[1:]:
                if not row or not row[0]:
                    continue
                row_score = _label_score(row[0], weights, numbers)
                if row_score <= 0:
                    continue
                for j in range(1, min(len(row), len(header))):
                    value = row[j]
                    if not value or columns[j] <= 0 or not any(ch.isalnum() for ch in value):
                        continue
                    score = row_score + columns[j] - 0.05 * (i - 1)
                    if best is None or score > best[0]:
                        line = " | ".join(row)
                        best = (score, Cell(value, row[0], header[j], i, line))
    return None if best is None else best[1]


# "What does NARL stand for?", "What is the full form of MST?", "What is NARL short for?"
_ASKS_EXPANSION = re.compile(
    r"\b(?P<acr>[A-Z][A-Za-z]*[A-Z][A-Za-z]*s?)\b[^?]*\b(?:stand|stands|short)\s+for\b|"
    r"\b(?:full\s+form|expansion|abbreviation|acronym)\s+(?:of|for)\s+(?:the\s+)?"
    r"(?P<acr2>[A-Z][A-Za-z]*[A-Z][A-Za-z]*s?)\b"
)
_JOINING = frozenset("of and for the on in to &".split())


@dataclass(frozen=True, slots=True)
class Expansion:
    """An acronym's expansion as a source writes it, with source ``n`` (1-based)."""

    acronym: str
    text: str
    n: int


def asked_acronym(question: str) -> str:
    """The acronym ``question`` asks the meaning of ("What does NARL stand for?" → "NARL"),
    or ""."""
    m = _ASKS_EXPANSION.search(question)
    if not m:
        return ""
    acr = m.group("acr") or m.group("acr2") or ""
    return acr[:-1] if acr.endswith("s") and acr[:-1].isupper() else acr


def expansion(question: str, hits: list[Hit]) -> Expansion | None:
    """The words whose initials spell the acronym the question asks about, as the sources
    write it — "National Atmospheric Research Laboratory (NARL)" — preferring a run written
    next to the acronym in brackets; joining words ("of", "and", "for", "the") may sit
    between, as they do in a name. None when the question asks no such thing or no source
    spells it out."""
    acr = asked_acronym(question)
    letters = [ch for ch in acr if ch.isupper()]  # "IoT": Internet of Things
    if len(letters) < 2:
        return None
    best: tuple[int, Expansion] | None = None
    for n, hit in enumerate(hits, start=1):
        words = list(re.finditer(r"[A-Za-z][\w'-]*|&", hit.chunk.text))
        for i in range(len(words)):
            found = _spelled(words, i, letters)
            if found is None:
                continue
            a, b = words[i].start(), words[found].end()
            text = hit.chunk.text[a:b]
            after = hit.chunk.text[b : b + len(acr) + 4]
            rank = (2 if f"({acr}" in after else 0) + (1 if n == 1 else 0)
            if best is None or rank > best[0]:
                best = (rank, Expansion(acr, text, n))
    return best[1] if best is not None else None


def _spelled(words: list[re.Match[str]], i: int, letters: list[str]) -> int | None:
    """The index of the last word of the run from ``words[i]`` whose capitalised words'
    initials are ``letters`` in order (joining words may sit between), or None."""
    k = 0
    j = i
    while j < len(words) and k < len(letters):
        word = words[j].group()
        if word[0].isupper() and word[0] == letters[k]:
            k += 1
        elif word.lower() in _JOINING and j > i:
            pass
        else:
            return None
        j += 1
    return j - 1 if k == len(letters) else None
