"""Retrieval strategy per query type: how many chunks, how many tokens, and which extra steps.

The numbers are starting defaults for the depth policy to refine, not its replacement: a
``DepthPolicy`` picks ``k`` from the probe's scores and clamps it to ``[k_min, k_max]`` of the
strategy (``Strategy.clamp``); the budget caps what the compressor hands the generator.

- **factual**: the answer sits in one passage. Few chunks (k 4 in [1, 8]) and a tight budget
  (1000 tokens); reranking matters most here because precision at the top decides the answer.
- **summarization**: coverage beats precision. k 12 in [8, 20] and 3000 tokens; no rerank, since a
  cross-encoder trained for relevance would crowd out the sections that make a summary complete
  (the compressor's MMR keeps variety instead). When the question targets the whole document
  ("summarize the report", "key findings", "what is this paper about") retrieval cannot cover it:
  ``map_reduce`` summarises every section and merges the partial summaries within the budget.
  A scoped request ("summarize section 3", "what the guideline says about X") stays retrieval.
- **reasoning**: one context, read more widely than a lookup to catch causes, conditions and
  exceptions: k 6 in [3, 12], 2000 tokens, reranked.
- **multi_hop**: facts about two or more entities that one query rarely retrieves together. k 8 in
  [4, 16], 2500 tokens, reranked, and ``iterative``: retrieve, generate a follow-up query for the
  missing link, retrieve again, up to ``max_hops`` retrievals (2, or 3 for a visibly longer chain).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    from fathom.core.base import QueryType


@dataclass(frozen=True, slots=True)
class Strategy:
    """How to answer one kind of question: depth bounds, context budget and extra steps."""

    query_type: QueryType
    k_default: int
    k_min: int
    k_max: int
    budget_tokens: int
    rerank: bool = True
    iterative: bool = False
    max_hops: int = 1
    map_reduce: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.k_min <= self.k_default <= self.k_max:
            raise ConfigError(
                f"strategy {self.query_type}: need k_min ≤ k_default ≤ k_max, got "
                f"{self.k_min}, {self.k_default}, {self.k_max}"
            )
        if self.max_hops < 1 or (self.max_hops > 1 and not self.iterative):
            raise ConfigError(
                f"strategy {self.query_type}: max_hops = {self.max_hops} needs iterative = True "
                "(and at least 1)"
            )

    def clamp(self, k: int) -> int:
        """``k`` limited to ``[k_min, k_max]``."""
        return max(self.k_min, min(self.k_max, k))

    def describe(self) -> str:
        """One line for traces and ``--explain`` output."""
        steps = []
        if self.map_reduce:
            steps.append("map-reduce over every section")
        if self.iterative:
            steps.append(f"iterative retrieval, up to {self.max_hops} hops")
        steps.append("rerank" if self.rerank else "no rerank")
        return (
            f"{self.query_type}: k {self.k_default} in [{self.k_min}, {self.k_max}], "
            f"budget {self.budget_tokens} tokens, " + ", ".join(steps)
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


STRATEGIES: dict[QueryType, Strategy] = {
    "factual": Strategy("factual", 4, 1, 8, 1000, rerank=True),
    "summarization": Strategy("summarization", 12, 8, 20, 3000, rerank=False),
    "reasoning": Strategy("reasoning", 6, 3, 12, 2000, rerank=True),
    "multi_hop": Strategy("multi_hop", 8, 4, 16, 2500, rerank=True, iterative=True, max_hops=2),
}

_I = re.IGNORECASE
_DOC_NOUNS = (
    r"document|doc|docs|report|paper|article|manual|handbook|guide|guideline|contract|agreement|"
    r"policy|thesis|dissertation|transcript|minutes|notes|brochure|whitepaper|white paper|readme|"
    r"review|study|book|memo|filing|proposal|plan|protocol|assessment|opinion|statement|survey|"
    r"specification|spec|prospectus|bylaws|nda|lease|letter|release notes|codebase|file|text|"
    r"collection|corpus|10-k|deck|presentation|postmortem|post-mortem"
)
# A single named part of a document: "section 3", "the methods section", "chapter on trade".
# Plurals ("the main sections"), "section-by-section" and "a one-paragraph summary" ask about the
# whole; "an executive summary of X" is a format, "the executive summary" a part.
_PART = re.compile(
    r"(?<![\w-])(?:section|chapter|appendix|clause|paragraph|page|table|figure|part|schedule|"
    r"annex|exhibit|slide|(?:the|its|this) (?:abstract|introduction|conclusion|executive summary))"
    r"\b(?!s\b|-)",
    _I,
)
# A topic narrower than the document: "about X", "on X", "regarding X" — unless the preposition
# belongs to the document itself ("the report on climate risk") or nothing follows ("about?").
_TOPIC = re.compile(
    r"(\b[\w-]+)\s+(?:about|on|regarding|concerning|dealing with|related to|relating to|"
    r"with respect to|in terms of)\s+(?!(?:the |this |that |its )?(?:whole |entire |full )?"
    rf"(?:{_DOC_NOUNS})\b)(?=\w)",
    _I,
)
# Content picked out of a document: "the risk factors disclosed in the 10-K".
_PICKED = re.compile(
    r"\b(?:described|presented|disclosed|listed|discussed|mentioned|shown|covered|reported|"
    r"proposed|set out|outlined|introduced) (?:in|by)\b",
    _I,
)
_DOC_BEFORE = re.compile(rf"^(?:{_DOC_NOUNS})$", _I)
_LINK = re.compile(
    r"\b(?:that|who|whom|whose|which|where|when)\b|\bof (?:the|its|their)\b|\w(?:'s|’s)\s|"
    r"\b\w+(?:ed|en)\s+(?:by|in|at|for)\s+the\b",
    _I,
)
_LEAD_WH = re.compile(
    r"^\s*(?:(?:in|on|at|from|to|for|by|of|with)\s+)?(?:what|which|who|whom|whose|when|where)\b",
    _I,
)


# A summary request must say so: "summarize", "overview", "key findings", "main points", "what is
# this report about", "gist", "tl;dr". Without a cue it is a question about something specific.
_SUMMARY_CUE = re.compile(
    r"\b(?:summar\w*|sum (?:it |this |that |them )?up|overview|outline|recap|gist|tl;?dr|synopsis|"
    r"abstract|highlights?|takeaways?|walk (?:me |us )?through|main sections?|"
    r"key (?:findings?|points?|results?|messages?|ideas?|conclusions?)|main (?:points?|ideas?|"
    r"findings?|themes?|arguments?|conclusions?|topics?)|what (?:is|are) (?:this|these|the) "
    r"(?:\w+ )?(?:documents?|reports?|papers?|articles?|books?|guides?|manuals?|files?) about)\b",
    _I,
)


def targets_whole_document(question: str) -> bool:
    """True when a summary request covers a whole document rather than a part or a topic."""
    if not _SUMMARY_CUE.search(question):
        return False
    if _PART.search(question) or _PICKED.search(question):
        return False
    return all(_DOC_BEFORE.match(m.group(1)) for m in _TOPIC.finditer(question))


def chain_length(question: str) -> int:
    """Rough count of the links between entities ("the CEO of the firm that bought …")."""
    return len(_LINK.findall(_LEAD_WH.sub("", question, count=1)))


# Engine.prepare probes at least this deep, whatever the strategy and the reranker ask for.
MIN_PROBE_DEPTH = 20


def probe_depth(k_max: int, rerank_candidates: int, requested: int = 0) -> int:
    """How many hits a question's probe fetches: enough for the strategy's deepest k, the
    reranker's candidates and any depth asked for (``--k``, a policy's deepest budget), and at
    least ``MIN_PROBE_DEPTH`` (the probe features read the top 20). ``Engine.prepare`` and the
    portfolio router's training use this one rule."""
    return max(k_max, rerank_candidates, requested, MIN_PROBE_DEPTH)


def strategy_for(qtype: QueryType, question: str) -> Strategy:
    """The strategy for ``qtype``, adjusted to what ``question`` asks.

    Summaries of a whole document switch on ``map_reduce``; a multi-hop question with three or
    more links ("the price of the company that bought the startup founded by …") gets a third hop.
    """
    try:
        base = STRATEGIES[qtype]
    except KeyError:
        raise ConfigError(
            f"query type {qtype!r}: no strategy (known: {', '.join(STRATEGIES)})"
        ) from None
    if qtype == "summarization" and targets_whole_document(question):
        return replace(base, map_reduce=True)
    if qtype == "multi_hop" and chain_length(question) >= 3:
        return replace(base, max_hops=3)
    return base
