"""The extractive answer by the kind of answer a question wants (``router.answer_kind``): when
the sources read do not answer, a table cell, a list's items or a count, and the short answer
of a span (``shapes`` finds what each reads).

- **Not answered**: the sources hold under ``MIN_COVERAGE`` of the question's own weighted
  words (``shapes.coverage``), or, without a sure span from the reader, under
  ``MIN_COVERAGE_UNSURE`` of them, or the question asks what only a picture, a colour or the
  layout shows. A summary is never "not answered" here. The answer then says the sources do
  not answer and lists the ``RELATED`` best-ranked sources as related.
- **Table** (and a number, count, factoid or comparison without a sure span): the cell whose
  row label and column header the question names, with both labels and the row as written,
  cited.
- **List**: the items of the best-matching list block (bullets, numbered steps, table rows) or
  of the enumeration in the span's sentence, one a line, each cited. **Count**: the number the
  span states when it is sure, else those items counted, named.
- **Acronym**: what an acronym the question asks about stands for, as a source spells it out
  (its capitalised words' initials, joining words between), cited — whatever the kind.
- **Short answer**: for a number, count or table question the number in the span (else the one
  in its sentence nearest to it), as written; otherwise the span.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.core.base import Draft, Hit
    from fathom.router.answer_kind import AnswerKind

# Without a sure span, the sources read answer a question only when they hold this share of
# its own weighted words (``shapes.coverage``), fitted on the training halves' answerable and
# unanswerable questions (bench/abstention.py --fit, docs/results/abstention/fit.md). A bar for
# every answer, sure span or not (``MIN_COVERAGE``), fitted at 0: any higher bar abstained on
# more answerable questions (8.3 % at 0.5 against 2.9 %) for hardly more unanswerable ones
# (66.1 % against 64.9 %).
MIN_COVERAGE = 0.0
MIN_COVERAGE_UNSURE = 0.75
RELATED = 3  # an abstention lists this many of the best-ranked sources as related
# Kinds whose answer may stand in a table's cell: looked up there when the reader's span is not
# sure (a table row is never a span: the reader answers from sentences).
_CELL_KINDS = ("number", "count", "factoid", "comparison")


@dataclass(frozen=True, slots=True)
class Shaped:
    """An answer in its kind's shape: the text, the sources it cites, its short answer, and
    the reader's probability behind it when it read one."""

    text: str
    citations: tuple[int, ...]
    short: str | tuple[str, ...]
    confidence: float | None = None


def not_answered(
    question: str, kind: AnswerKind, span: Any, hits: list[Hit], reader: bool = True
) -> bool:
    """Whether the sources read do not answer ``question`` (see the module docstring);
    ``reader``: whether a span reader read them (without one, only the coverage bar holds)."""
    from fathom.stages.generate.shapes import coverage

    if kind.name == "summary" or not hits:
        return False
    held = coverage(question, hits)
    if held < MIN_COVERAGE:
        return True
    if not reader:
        return False  # no reader, no span to be sure of: the quotes' own bar decides
    return not _sure(kind.name, span) and (held < MIN_COVERAGE_UNSURE or kind.visual)


def _sure(kind: str, span: Any) -> bool:
    """Whether the reader's span is sure and, for a count question, states a count (a year or
    an amount in a sure span does not answer "how many")."""
    from fathom.stages.generate.shapes import count_in

    if span is None or not span.sure:
        return False
    return kind != "count" or bool(count_in(span.text))


def related(hits: list[Hit]) -> tuple[int, ...]:
    """The sources an abstention lists as related: the best-ranked ones."""
    return tuple(range(1, min(RELATED, len(hits)) + 1))


def shaped(question: str, kind: AnswerKind, span: Any, hits: list[Hit]) -> Shaped | None:
    """The answer in the shape ``kind`` wants, when it has one here: a table cell (a table
    question, or one of ``_CELL_KINDS`` without a sure span), a list's items, a count; None
    when the answer is the span's."""
    sure = _sure(kind.name, span)
    if kind.name == "table" or (kind.name in _CELL_KINDS and not sure):
        cell = _cell(question, hits)
        if cell is not None:
            return cell
    if kind.name in ("list", "count"):
        return _listed(question, kind.name, span, hits)
    return None


def acronym_answer(question: str, hits: list[Hit]) -> Shaped | None:
    """What an acronym the question asks about stands for, as a source spells it out
    (``shapes.expansion``), cited; None when it asks no such thing or no source spells it.
    Looked for before anything else: it needs no reader, and it answers whatever the kind."""
    from fathom.stages.generate.shapes import expansion

    found = expansion(question, hits)
    if found is None:
        return None
    return Shaped(f"{found.acronym} stands for {found.text} [{found.n}].", (found.n,), found.text)


def _cell(question: str, hits: list[Hit]) -> Shaped | None:
    """The table cell the question names by its row and column (``shapes.table_cell``): its
    value, its labels and the row it stands in, cited; None when no table has both."""
    from fathom.stages.generate.shapes import table_cell

    cell = table_cell(question, hits)
    if cell is None:
        return None
    return Shaped(f'{cell.text} — "{cell.line}" [{cell.n}]', (cell.n,), cell.value)


def _listed(question: str, kind: str, span: Any, hits: list[Hit]) -> Shaped | None:
    """A list question's items, one a line, each cited; a count question's number (the
    reader's sure span when it states one — then None: the span answers — else the items
    counted, named). None when no list is found."""
    from fathom.stages.generate.shapes import list_items

    if kind == "count" and _sure(kind, span):
        return None
    sentence, n = (span.sentence, span.n) if span is not None else ("", 0)
    items = list_items(question, hits, sentence, n)
    if len(items) < 2:
        return None
    lines = "\n".join(f"- {item.text} [{item.n}]" for item in items)
    cited = tuple(dict.fromkeys(item.n for item in items))
    confidence = None if span is None else round(span.probability, 4)
    if kind == "count":
        text = f"{len(items)} — counted in the sources:\n{lines}"
        return Shaped(text, cited, str(len(items)), confidence)
    return Shaped(lines, cited, tuple(item.text for item in items), confidence)


def with_short(draft: Draft, kind: str, span: Any) -> Draft:
    """``draft`` with its short answer: for a number, count or table question the number in
    the span (else in its sentence, nearest the span); for a yes/no question "Yes" or "No" as
    the span's sentence reads (``yes_or_no``); otherwise the span's text."""
    from fathom.stages.generate.shapes import count_in, number_in

    if span is None or not draft.citations:
        return draft
    short = span.text
    if kind == "yes_no":
        short = yes_or_no(span.sentence or span.text)
    elif kind == "count":
        short = count_in(span.text) or count_in(span.sentence, near=span.text) or span.text
    elif kind in ("number", "table"):
        short = number_in(span.text) or number_in(span.sentence, near=span.text) or span.text
    return dataclasses.replace(draft, short=short)


_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|cannot|without|unable|lacks?|fails?|failed)\b|n't\b",
    re.IGNORECASE,
)


def yes_or_no(sentence: str) -> str:
    """ "No" when the sentence that answers a yes/no question is negated, else "Yes": what the
    sentence quoted says, in one word (the question's own negation flips nothing: "Isn't it
    waterproof?" asked of "It is not waterproof." is answered "No", as a person would)."""
    return "No" if _NEGATION.search(sentence) else "Yes"
