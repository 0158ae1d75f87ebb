"""The report of one ask: ``Trace`` (what each stage did and cost), ``Prepared`` (a question
after the stages every depth shares), ``Answer`` (what ``ask`` returns and ``--json`` prints,
docs/answer.schema.json) and ``Context`` (what the generator would read, without generating)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fathom.core.base import Citation, Decision, Draft, Hit, Probe

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.index.doc_filter import DocFilter
    from fathom.router.answer_kind import AnswerKind


def elapsed_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` reading), as stages report them."""
    return (time.perf_counter() - t0) * 1000


@dataclass
class Trace:
    """What one ask did and what it cost; filled in stage by stage."""

    question: str
    collection: str
    query_type: str = ""
    type_probs: dict[str, float] = field(default_factory=dict)
    # The kind of answer the question wants (``router.answer_kind.AnswerKind.to_dict``).
    answer_kind: dict[str, Any] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    # "context": the final answer's sources; "context_read": every round's sources as a
    # backend keeping the shared prompt prefix reads them (``set_context``).
    tokens: dict[str, int] = field(
        default_factory=lambda: {
            "embedding": 0,
            "context": 0,
            "context_read": 0,
            "prompt": 0,
            "completion": 0,
        }
    )
    cost: float = 0.0
    currency: str = "USD"
    backend: str = ""
    model: str = ""
    selection: str = ""  # why this backend answers ("configured", or what auto found)
    reranker: str = ""
    embedder: str = ""  # the query embedder: model id, with " (int8)" when quantized
    notices: list[str] = field(default_factory=list)
    hops: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    portfolio: dict[str, Any] | None = None  # name, mode and the members the router chose
    # The context budget the sources were fitted to, in the generator's tokens, and what set
    # it: "query type" (the strategy's), "depth" (a policy or fixed k: the window's room) or
    # "explicit" (--budget-tokens, compress.budget_tokens).
    budget: dict[str, Any] = field(default_factory=lambda: {"tokens": 0, "source": ""})
    # The documents a --doc filter kept (``DocFilter.to_dict``); None: the whole collection.
    # Reported beside the collection (``Answer.to_dict``), not in the trace's own object.
    docs: dict[str, Any] | None = None
    # The previous generation's source texts and their tokens (``set_context``); not reported.
    _last_read: tuple[tuple[str, ...], int] = field(default=((), 0), repr=False, compare=False)

    def add_ms(self, stage: str, ms: float) -> None:
        self.stages_ms[stage] = self.stages_ms.get(stage, 0.0) + ms

    def note(self, text: str) -> None:
        """Add a notice once (a later round saying the same adds nothing)."""
        if text not in self.notices:
            self.notices.append(text)

    def notice(self, text: str, kind: str) -> None:
        """Add a notice, replacing the one of the same ``kind`` (its opening words) that an
        earlier round of the same answer left."""
        self.notices[:] = [n for n in self.notices if not n.startswith(kind)]
        self.notices.append(text)

    def set_context(self, sources: list[str], tokens: int) -> None:
        """The sources of the generation about to run (their texts, in prompt order) and their
        ``tokens``. ``context_read`` grows by what is new: when these sources extend the
        previous generation's (a deeper round of the same answer, in the same order), a
        backend that keeps the shared prompt prefix (llama.cpp, Ollama) evaluates only the
        sources after it; otherwise all of them."""
        texts = tuple(sources)
        prev, prev_tokens = self._last_read
        extends = bool(prev) and texts[: len(prev)] == prev
        self.tokens["context"] = tokens
        self.tokens["context_read"] += max(0, tokens - prev_tokens) if extends else tokens
        self._last_read = (texts, tokens)

    def add_generation(self, draft: Draft) -> None:
        """Charge one generation's prompt and completion tokens."""
        self.tokens["prompt"] += draft.prompt_tokens
        self.tokens["completion"] += draft.completion_tokens

    def add_round(self, k: int, draft: Draft, conf: Any, n_sources: int) -> None:
        """Record one generation at depth ``k`` from ``n_sources`` sources, with its score."""
        self.rounds.append(
            {
                "k": k,
                "sources": n_sources,
                "confidence": round(conf.score, 4),
                "abstained": conf.abstained,
                "prompt_tokens": draft.prompt_tokens,
                "completion_tokens": draft.completion_tokens,
                "generate_ms": round(draft.ms, 3),
                "answer": draft.text,
            }
        )

    @property
    def total_ms(self) -> float:
        return sum(self.stages_ms.values())

    @property
    def passes(self) -> int:
        """How many depths the answer was generated at: 1, plus one per feedback deepening.
        (``rounds`` has every generation; in portfolio select mode that is each member's
        answer and the selection, all at the same depth.)"""
        return len({r["k"] for r in self.rounds})

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_type": self.query_type,
            "type_probs": {k: round(v, 4) for k, v in self.type_probs.items()},
            "answer_kind": dict(self.answer_kind),
            "strategy": self.strategy,
            "decision": self.decision.to_dict() if self.decision else None,
            "stages_ms": {k: round(v, 3) for k, v in self.stages_ms.items()},
            "total_ms": round(self.total_ms, 3),
            "tokens": dict(self.tokens),
            "cost": self.cost,
            "currency": self.currency,
            "backend": self.backend,
            "model": self.model,
            "selection": self.selection,
            "reranker": self.reranker,
            "embedder": self.embedder,
            "notices": list(self.notices),
            "hops": list(self.hops),
            "rounds": list(self.rounds),
            "portfolio": dict(self.portfolio) if self.portfolio else None,
            "budget": dict(self.budget),
        }


@dataclass(frozen=True, slots=True)
class PortfolioLists:
    """A retriever portfolio's results for one question: its name and mode (``fuse`` or
    ``select``), the members its router chose, each member's hits, and their fusion."""

    name: str
    mode: str
    members: tuple[str, ...]
    hits: dict[str, tuple[Hit, ...]]
    fused: tuple[Hit, ...]

    def summary(self) -> dict[str, Any]:
        """What the trace reports: the name, the mode and the chosen members."""
        return {"name": self.name, "mode": self.mode, "members": list(self.members)}


@dataclass(frozen=True, slots=True)
class Prepared:
    """A question after the stages every depth shares (``Engine.prepare``)."""

    question: str
    qvec: Any  # (dim,) float32 query embedding
    query_type: str
    type_probs: dict[str, float]
    strategy: Any  # router.strategy.Strategy
    probe: Probe
    stages_ms: dict[str, float]
    embedding_tokens: int
    hops: tuple[str, ...] = ()
    portfolio: PortfolioLists | None = None  # with a retriever portfolio
    docs: DocFilter | None = None  # the documents retrieval was restricted to (--doc)
    kind: AnswerKind | None = None  # the kind of answer the question wants
    # Work later stages share across depths (the reranked candidates), with its cost in ms.
    memo: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Answer:
    question: str
    text: str
    citations: tuple[Citation, ...]
    sources: tuple[Citation, ...]
    confidence: dict[str, Any]
    trace: Trace
    used: tuple[Hit, ...] = ()  # the hits the final answer was generated from, in source order
    span: dict[str, Any] | None = None  # the exact answer span, when the answerer found one
    # The short answer apart from the text (a span, a number, a list's items), when stated.
    short: str | tuple[str, ...] | None = None
    abstained: bool = False  # the answer says the sources do not answer
    related: tuple[Citation, ...] = ()  # with an abstention: the closest passages read
    # In a conversation (chat, ask --session): the question as asked and as answered
    # (``stages.followup.Rewrite.to_dict``); None outside one.
    followup: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema_version": ANSWER_SCHEMA_VERSION,
            "question": self.question,
            "answer": self.text,
            "citations": [c.to_dict() for c in self.citations],
            "sources": [c.to_dict() for c in self.sources],
            "confidence": self.confidence,
            "collection": self.trace.collection,
            "trace": self.trace.to_dict(),
            "kind": self.trace.answer_kind.get("name", ""),
            "short_answer": list(self.short) if isinstance(self.short, tuple) else self.short,
            "abstained": self.abstained,
        }
        if self.related:
            out["related"] = [c.to_dict() for c in self.related]
        if self.span is not None:
            out["span"] = self.span
        if self.trace.docs is not None:
            out["docs"] = self.trace.docs
        if self.followup is not None:
            out["followup"] = dict(self.followup)
        return out


@dataclass(frozen=True, slots=True)
class Context:
    """What the generator would read for a question (``Engine.context``): the sources at the
    decided depth, fitted to the context budget, and the trace of the steps that chose them."""

    question: str
    sources: tuple[Citation, ...]
    trace: Trace
    used: tuple[Hit, ...] = ()  # the compressed hits, in source order

    def to_dict(self) -> dict[str, Any]:
        out = {
            "question": self.question,
            "sources": [c.to_dict() for c in self.sources],
            "collection": self.trace.collection,
            "trace": self.trace.to_dict(),
        }
        if self.trace.docs is not None:
            out["docs"] = self.trace.docs
        return out


# docs/answer.schema.json; 11: kind, short_answer, abstained, related, trace.answer_kind;
# 10: span.sure; 9: followup; 8: docs; 7: span; 6: tokens.context_read;
# 5: trace.budget; 4: trace.decision.cost; 3: confidence.answerer; 2: sources' text
ANSWER_SCHEMA_VERSION = 11


def price(cfg: Config, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """Cost from the configured price table (per million tokens); unlisted models cost 0."""
    entry = cfg.prices.models.get(model)
    if not entry:
        return 0.0
    return (prompt_tokens * entry[0] + completion_tokens * entry[1]) / 1_000_000
