"""What kind of answer a question wants, beside the query type (which sets retrieval depth).

A person asking a report for "the key findings" wants a few cited sentences from its findings,
"Who wrote it?" the authors, "List the …" every item, "How many …" a number and what was
counted, "What is the … in 2019?" a table's cell with its labels. The kind says which:

``summary``      overview, summary, key findings, what the document is about
``metadata``     who wrote it, when, which organisation, which version, what title (``field``)
``list``         the items of a list: "list …", "what are the N …", "which … are mentioned"
``count``        "how many …", "the number of …"
``table``        a table's cell, by its row and column ("in Table 3, what is …", "which column")
``number``       an amount, percentage, rate, year or other value
``yes_no``       "Is …?", "Does …?"
``comparison``   which of two is greater, the difference between them
``explanation``  why, how something works, what it means
``factoid``      a name, place, term or short fact (everything else)

Rules over the question's words, in that order of precedence (the first that matches wins,
except that a summary, a metadata or a table cue wins over the forms a list, count or number
question shares with them). Deterministic and cheap (regular expressions): every backend
computes the same kind from the same question, the extractive answerer to shape its answer and a
language model's prompt to say what form the answer takes.

A question may also say what Fathom cannot read in a text: what a picture, a chart or a colour
shows, or where on a page something sits (``visual``). Those cues are reported with the kind;
the answerer treats them as evidence that the text may not answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from fathom.router.classify import asks_for_summary

KindName = Literal[
    "summary",
    "metadata",
    "list",
    "count",
    "table",
    "number",
    "yes_no",
    "comparison",
    "explanation",
    "factoid",
]
KINDS: tuple[KindName, ...] = get_args(KindName)
MetaField = Literal["title", "authors", "organisation", "date", "version", ""]

_I = re.IGNORECASE
_DOC = (
    r"(?:document|report|paper|article|study|book|manual|handbook|guide|guidebook|brochure|"
    r"file|publication|thesis|presentation|slides?|deck|standard|proposal|memo|whitepaper|"
    r"white paper|survey|text|work|chapter|review|filing|release|notes|it)"
)
_THIS = rf"(?:this|the|that|these)\s+(?:\w+\s+)?{_DOC}"

# -- metadata --------------------------------------------------------------------------------
_META_AUTHORS = re.compile(
    rf"\bwho\s+(?:wrote|authored|prepared|compiled|created|made|produced)\b(?!.*\b(?:letter|"
    r"email|note|quote|poem|song|code)\b)|"
    r"\bwho\s+(?:is|are|was|were)\s+(?:the\s+)?(?:authors?|writers?|editors?|creators?)\b|"
    r"\b(?:what|which)\s+(?:is|are)\s+the\s+(?:names?\s+of\s+the\s+)?authors?\b|"
    r"\b(?:names?\s+of\s+the\s+|list\s+(?:all\s+)?(?:of\s+)?the\s+)authors?\b|"
    rf"\bauthors?\s+of\s+{_THIS}\b|"
    rf"\b(?:written|authored|prepared|compiled)\s+by\s+whom\b|\bby\s+whom\s+(?:is|was)\s+{_THIS}",
    _I,
)
_META_DATE = re.compile(
    rf"\bwhen\s+(?:was|is|were)\s+{_THIS}\s+(?:\w+\s+)?(?:published|written|released|issued|"
    r"dated|prepared|created|submitted|produced|updated|revised|presented)\b|"
    rf"\b(?:what|which)\s+(?:is\s+the\s+)?(?:date|year)\s+(?:of|was|is|did)\s+(?:the\s+)?"
    rf"(?:publication|release|{_THIS})\b|"
    rf"\b(?:publication|release|issue)\s+date\b|\bdate\s+of\s+{_THIS}\b|"
    rf"\bwhen\s+did\s+{_THIS}\s+(?:come\s+out|appear)\b",
    _I,
)
_META_ORG = re.compile(
    rf"\b(?:which|what)\s+(?:organi[sz]ation|institution|agency|company|university|"
    rf"department|publisher|body|firm|group)\s+(?:\w+\s+){{0,2}}(?:published|wrote|issued|"
    rf"released|produced|prepared|authored|is\s+behind|made)\b|"
    rf"\bwho\s+(?:published|issued|released|commissioned|sponsored|funded)\s+{_THIS}\b|"
    rf"\bwho\s+(?:published|issued|released)\s+it\b|\bpublisher\s+of\s+{_THIS}\b",
    _I,
)
_META_VERSION = re.compile(
    rf"\b(?:which|what)\s+(?:is\s+the\s+)?(?:version|revision|edition)\s+(?:of\s+{_THIS}|"
    rf"is\s+{_THIS}|number)\b|\b{_THIS}'?s?\s+(?:version|revision|edition)\b",
    _I,
)
_META_TITLE = re.compile(
    rf"\bwhat\s+is\s+the\s+(?:full\s+)?title\s+of\s+{_THIS}\b|"
    rf"\bwhat\s+is\s+{_THIS}\s+(?:called|titled|named)\b|"
    rf"\b(?:what|which)\s+is\s+(?:its|the)\s+title\s*\??$|^\s*what(?:'s|\s+is)\s+the\s+title\s*\??$",
    _I,
)
_META_RULES: tuple[tuple[MetaField, re.Pattern[str]], ...] = (
    ("authors", _META_AUTHORS),
    ("date", _META_DATE),
    ("organisation", _META_ORG),
    ("version", _META_VERSION),
    ("title", _META_TITLE),
)

# -- shapes ----------------------------------------------------------------------------------
_COUNT = re.compile(
    r"\bhow\s+many\b|\b(?:the\s+)?(?:total\s+)?number\s+of\b(?!\s+(?:the\s+)?(?:page|section|"
    r"chapter|table|figure)\b)|\bcount\s+(?:of|the)\b|^\s*count\b",
    _I,
)
_LIST = re.compile(
    r"^\s*(?:list|enumerate|name|give|identify|mention)\s+(?:all\s+|each\s+|every\s+|the\s+|"
    r"some\s+|any\s+)?|"
    r"\bin\s+(?:a\s+)?list(?:\s+format)?\b|\blist\s+(?:all|them|each|every|of)\b|"
    r"\benumerate\b|"
    r"\b(?:what|which)\s+(?:are|were)\s+(?:all\s+)?the\s+(?:(?:two|three|four|five|six|"
    r"seven|eight|nine|ten|\d+)\s+|main\s+|key\s+|different\s+|various\s+)?\w+(?:\s+\w+)?s"
    r"\s*(?:\?|$|of\b|in\b|that\b|which\b|mentioned|listed|included|named|shown|described|"
    r"introduced|used|given|for\b|on\b)|"
    r"\b(?:what|which)\s+(?:are|were)\s+(?:all\s+)?the\s+(?:two|three|four|five|six|seven|"
    r"eight|nine|ten|\d+)\s+|"
    r"\b(?:what|which)\s+\w+s\s+(?:are|were)\s+(?:mentioned|listed|included|named|shown|"
    r"described|introduced|covered|used|given)\b|"
    r"\b(?:what|which)\s+(?:kinds?|types?|sorts?)\s+of\b|\bwhat\s+are\s+the\s+components\b|"
    r"\bwho\s+(?:are|were)\s+the\s+\w+s\b|\bwhich\s+\w+(?:\s+\w+)?s\s+(?:does|do|did|has|have)\b",
    _I,
)
_TABLE = re.compile(
    r"\b(?:in|from|according\s+to|of|per)\s+(?:the\s+)?(?:table|tabular)\b|"
    r"\btable\s+(?:\d+|[ivx]+)\b|\b(?:which|what)\s+(?:row|column)\b|"
    r"\b(?:row|column)\s+(?:for|of|labell?ed|headed)\b",
    _I,
)
_NUMBER = re.compile(
    r"\bhow\s+(?:much|long|old|far|tall|often|big|large|high|fast|heavy)\b|"
    r"\b(?:what|which)\s+(?:is|was|were|are)?\s*(?:the\s+)?(?:\w+\s+){0,3}?(?:percentage|"
    r"percent|share|rate|ratio|amount|value|total|sum|number|figure|price|cost|revenue|"
    r"income|profit|loss|margin|growth|average|mean|median|year|date|age|size|score|"
    r"budget|population|capacity|count|proportion|cagr|turnover|balance|expense|expenses|"
    r"sales|dividend|earnings|salary|fee|height|length|weight|distance|duration|temperature)\b|"
    r"\bwhat\s+(?:year|percentage|percent|proportion|share)\b|\bin\s+what\s+year\b|"
    r"\bround(?:ed)?\s+(?:your\s+answer\s+)?to\b|\banswer\s+in\s+(?:million|billion|"
    r"thousand|percentage|percent|dollars)\b|\bgive\s+me\s+an?\s+(?:integer|number)\b|"
    r"\bhow\s+many\s+percent\b|\bwhat\s+%",
    _I,
)
_YES_NO = re.compile(
    r"^\s*(?:is|are|was|were|does|do|did|can|could|has|have|had|will|would|should|must|may)\s+"
    # "… or …?" offers options (a comparison or a choice), unless it is "yes or no"
    r"(?!.*\bor\b(?!\s+['\"‘“]?no\b))",
    _I,
)
_COMPARISON = re.compile(
    r"\bcompare\w*\b|\bcomparison\b|\bversus\b|\bvs\.?\s|\bdifference\s+between\b|"
    r"\bdiffer\w*\b|\b(?:which|who|what)\b[^?]*\b(?:more|less|fewer|greater|higher|lower|"
    r"larger|smaller|better|worse|bigger|longer|shorter|older|newer|most|least|best|worst)\b"
    r"[^?]*\bor\b|\b(?:which|who)\s+(?:is|was|has|had|are|were)\s+(?:the\s+)?(?:more|less|"
    r"greater|higher|lower|larger|smaller|better|worse|bigger)\b|"
    r"\b(?:is|are|was|were)\s+\w+(?:\s+\w+)?\s+(?:more|less|greater|higher|lower|larger|"
    r"smaller|better|worse)\s+than\b",
    _I,
)
_EXPLANATION = re.compile(
    r"^\s*(?:why|how\s+(?:does|do|did|is|are|was|were|can|could|should|would|will|to))\b|"
    r"\bexplain\w*\b|\bwhat\s+(?:is|are)\s+the\s+(?:reasons?|purpose|rationale|role|"
    r"significance|impact|effect|benefits?|advantages?|causes?)\b|\bhow\s+come\b|"
    r"^\s*describe\b|\bwhat\s+does\s+[\w\s'-]{1,40}\s+mean\b|\bfor\s+what\s+reason\b",
    _I,
)
# What a text cannot show: colours, pictures, where on a page something sits.
_VISUAL = re.compile(
    r"\b(?:colou?r(?:ed|s)?|red|green|blue|yellow|orange|purple|pink|grey|gray|black|white|"
    r"brown|picture|photo\w*|image|icon|logo|drawn|drawing|illustration|diagram|chart|graph|"
    r"plot(?:ted)?|bar|pie|map|figure|fig\.|screenshot|shape|box|rectangle|circle|arrow|"
    r"font|bold|italic|underlined|top[- ]left|top[- ]right|bottom[- ]left|bottom[- ]right|"
    r"upper[- ](?:left|right)|lower[- ](?:left|right)|left[- ]hand|right[- ]hand|"
    r"in\s+the\s+(?:top|bottom|middle|corner|background|foreground))\b",
    _I,
)
_PAGE_REF = re.compile(
    r"\b(?:on\s+|in\s+|at\s+)?(?:the\s+)?(?:page|slide|p\.)\s*(\d{1,4})\b|"
    r"\b(?:pages|slides)\s+(\d{1,4})\s*(?:-|–|to|and)\s*(\d{1,4})\b|"
    r"\b(\d{1,4})(?:st|nd|rd|th)\s+(?:page|slide)\b|"
    r"\b(?:the\s+)?(first|second|third|fourth|fifth|last)\s+(?:page|slide)\b",
    _I,
)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}


@dataclass(frozen=True, slots=True)
class AnswerKind:
    """The kind of answer ``question`` wants (``name``, one of ``KINDS``), the metadata
    ``field`` a metadata question asks for, the ``cue`` (the words that decided it), the pages
    or slides the question names (``pages``; ``-1`` the last one), and whether it asks about
    something only a picture shows (``visual``)."""

    name: KindName
    field: MetaField = ""
    cue: str = ""
    pages: tuple[int, ...] = ()
    visual: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "cue": self.cue}
        if self.field:
            out["field"] = self.field
        if self.pages:
            out["pages"] = list(self.pages)
        if self.visual:
            out["visual"] = True
        return out

    @property
    def label(self) -> str:
        """How the report names it: ``metadata (authors)``, ``list``, ``yes/no``."""
        name = "yes/no" if self.name == "yes_no" else self.name
        return f"{name} ({self.field})" if self.field else name


def answer_kind(question: str) -> AnswerKind:
    """The kind of answer ``question`` wants (rules; see the module docstring)."""
    q = " ".join(question.split())
    pages = pages_named(q)
    visual = bool(_VISUAL.search(q))

    def kind(name: KindName, cue: re.Match[str] | str | None, field: MetaField = "") -> AnswerKind:
        words = cue.group(0).strip() if isinstance(cue, re.Match) else (cue or "")
        return AnswerKind(name, field, words, pages, visual)

    for field, rule in _META_RULES:
        m = rule.search(q)
        if m:
            return kind("metadata", m, field)
    if asks_for_summary(q) and not _COUNT.search(q):
        return kind("summary", "asks for a summary")
    m = _TABLE.search(q)
    if m and not _COUNT.search(q):
        return kind("table", m)
    for name, rule in (
        ("count", _COUNT),
        ("comparison", _COMPARISON),
        ("list", _LIST),
        ("number", _NUMBER),
        ("yes_no", _YES_NO),
        ("explanation", _EXPLANATION),
    ):
        m = rule.search(q)
        if m:
            if name == "comparison" and _COUNT.search(q):
                continue
            return kind(name, m)  # type: ignore[arg-type]
    return kind("factoid", None)


def pages_named(question: str) -> tuple[int, ...]:
    """The page or slide numbers ``question`` names ("on page 17", "pages 10 and 11",
    "the 3rd slide", "the last page" → -1), in order, without repeats."""
    out: list[int] = []
    for m in _PAGE_REF.finditer(question):
        single, start, end, nth, word = m.groups()
        if single:
            out.append(int(single))
        elif start and end:
            a, b = int(start), int(end)
            sep = question[m.start(2) : m.end()].lower()
            if " and " in f" {sep} " or b < a or b - a > 50:
                out += [a, b]
            else:
                out += list(range(a, b + 1))
        elif nth:
            out.append(int(nth))
        elif word:
            out.append(-1 if word.lower() == "last" else _ORDINALS[word.lower()])
    return tuple(dict.fromkeys(out))
