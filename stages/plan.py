"""The second step of an answer: decide how it will be made, before anything is generated.

``plan`` asks the depth policy for k (pricing the reading first when the policy prices it),
reranks the candidates, sets the context budget and names the mode the answer is made in. The
result is a frozen ``Plan``; ``stages.execute`` carries it out, and ``Engine.context`` stops
after fitting its candidates into its budget. The policy is asked what it is
(``follows_strategy``, ``climb``), never which class it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fathom.core.base import Decision, DepthPolicy, DepthQuery, Hit
from fathom.stages.generate import opt_in_note
from fathom.stages.pricing import reading_cost
from fathom.stages.records import Prepared, Trace, elapsed_ms
from fathom.stages.rerank import rerank_behind, rerank_head

if TYPE_CHECKING:
    from fathom.stages.parts import Parts

# The budget asked for when the depth decides it: more than any window, so the model's context
# window (``stages.compress.context_budget``) is the cap.
WHOLE_WINDOW = 1 << 30

# single: one answer at depth k, deepened by the feedback loop; hops: the same over a multi-hop
# probe; cascade: up the policy's ladder while the answer's confidence is low; map-reduce:
# every section summarised, then combined; select: each portfolio member answers, the
# generator picks.
Mode = Literal["single", "hops", "cascade", "map-reduce", "select"]


@dataclass(frozen=True, slots=True)
class Plan:
    """How one answer will be made: the depth decision, the candidates in the order generation
    reads them (reranked when ``reranked``), the context budget in the generator's tokens,
    the mode, and for a cascade the ladder it climbs (``router.cascade.Cascade``)."""

    decision: Decision
    mode: Mode
    candidates: tuple[Hit, ...]
    reranked: bool
    budget: int
    climb: Any = None


def start_trace(parts: Parts, prepared: Prepared, no_retrieval: bool) -> Trace:
    """A trace charged with the prepared question's shared stages (not the probe and hop when
    the answer retrieves nothing)."""
    trace = Trace(
        question=prepared.question,
        collection=parts.collection.name,
        currency=parts.cfg.prices.currency,
    )
    manifest = parts.collection.manifest
    precision = manifest.embedder_precision
    trace.embedder = manifest.embedder_id + (f" ({precision})" if precision != "fp32" else "")
    for stage, ms in prepared.stages_ms.items():
        if not (no_retrieval and stage in ("probe", "hop")):
            trace.add_ms(stage, ms)
    trace.tokens["embedding"] += prepared.embedding_tokens
    trace.query_type, trace.type_probs = prepared.query_type, dict(prepared.type_probs)
    if prepared.kind is not None:
        trace.answer_kind = prepared.kind.to_dict()
    trace.strategy = prepared.strategy.to_dict()
    if not no_retrieval:
        trace.hops.extend(prepared.hops)
    if prepared.docs is not None:
        trace.docs = prepared.docs.to_dict()
        if parts.cfg.retrieval.portfolio.strip():
            trace.note(
                "the retriever portfolio was not used: its members search the whole "
                "collection, and this answer reads only the documents --doc selected"
            )
    return trace


def plan(
    parts: Parts,
    prepared: Prepared,
    trace: Trace,
    *,
    k: int | None = None,
    policy: DepthPolicy | None = None,
    rerank: bool | None = None,
    budget_tokens: int | None = None,
    generating: bool = True,
    on_decision: Callable[[Decision], None] | None = None,
) -> Plan:
    """The plan for ``prepared``: depth from a fixed ``k``, else ``policy``, else the query
    type's strategy; candidates reranked (``rerank``: default from the config); the budget
    (``budget_tokens``, else the config's, else what the depth implies). ``generating``: an
    answer will be generated (the report then says why ``auto`` passed over an API key)."""
    from fathom.router.depth import FixedDepth, StrategyDepth

    chooser = FixedDepth(k) if k is not None else policy or StrategyDepth(prepared.strategy)
    decision = decide(parts, prepared, chooser, trace, rerank)
    if on_decision is not None:
        on_decision(decision)
    candidates, reranked = rank_candidates(parts, prepared, decision, rerank, trace)
    if chooser.reads_passages and not reranked and prepared.memo.get("read_by_reranker"):
        # The policy read the candidates with the reranker, which then did not run (k = 0).
        trace.add_ms("read", prepared.memo["rerank"][1])
    gen = parts.generator
    trace.backend, trace.model, trace.selection = gen.name, gen.model, gen.selection
    if generating:
        note = opt_in_note(parts.cfg.generator, gen.name)
        if note is not None:
            trace.notice(note, "an OpenAI API key")
    budget = decided_budget(parts, prepared, chooser.follows_strategy, budget_tokens, trace)
    pf = prepared.portfolio
    mode: Mode
    if prepared.strategy.map_reduce and decision.k > 0 and chooser.follows_strategy:
        # Map-reduce covers the whole collection: only when the strategy chose the depth (a
        # fixed k or a depth policy means exactly that many chunks).
        mode = "map-reduce"
    elif pf is not None and decision.k > 0 and pf.mode == "select":
        mode = "select"
    elif chooser.climb is not None:
        mode = "cascade"
    else:
        mode = "hops" if prepared.hops and decision.k > 0 else "single"
    return Plan(decision, mode, tuple(candidates), reranked, budget, chooser.climb)


def decide(
    parts: Parts,
    prepared: Prepared,
    chooser: DepthPolicy,
    trace: Trace,
    rerank: bool | None = None,
) -> Decision:
    """The depth ``chooser`` decides for ``prepared``, recorded on ``trace``; a policy that
    prices its choice first learns what reading costs this generator, and one that reads
    passages gets the reader's readings (``passage_readings``; ``rerank``: whether the
    candidates will be reranked, default from the config)."""
    if chooser.follows_strategy and parts.policy_notice:
        trace.notices.append(parts.policy_notice)
    cost = _reading_cost(parts, prepared, trace) if chooser.prices_reading else None
    readings = passage_readings(parts, prepared, trace, rerank) if chooser.reads_passages else None
    t = time.perf_counter()
    query = DepthQuery(
        prepared.question,
        prepared.probe,
        prepared.query_type,  # type: ignore[arg-type]
        type_probs=prepared.type_probs,
        qvec=prepared.qvec,
        cost=cost,
        readings=readings,
    )
    decision = chooser.decide(query)
    trace.decision = decision
    trace.add_ms("decide", elapsed_ms(t))
    return decision


def _reading_cost(parts: Parts, prepared: Prepared, trace: Trace) -> Any:
    """What a context token costs the generator (``stages.pricing``). Measuring a prompt
    speed for the first time loads the model: that time is its own stage, not the
    decision's."""
    t = time.perf_counter()
    hits = list(prepared.probe.hits)
    cost, measured = reading_cost(parts.cfg, parts.generator, prepared.question, hits)
    if measured:
        trace.add_ms("measure", elapsed_ms(t))
        trace.note(
            f"measured the generator's prompt speed ({cost.per_token * 1000:.2g} ms per "
            "token) to price the depth; kept in FATHOM_HOME for the next answers"
        )
    return cost


def rank_candidates(
    parts: Parts, prepared: Prepared, decision: Decision, rerank: bool | None, trace: Trace
) -> tuple[list[Hit], bool]:
    """The candidates in the order generation reads them (reranked when it applies), and
    whether the reranker applies. In portfolio select mode each member's results are
    reranked by the selection instead (the probe's are not used)."""
    pf = prepared.portfolio if decision.k > 0 else None
    if pf is not None:
        trace.portfolio = pf.summary()
    fuse = pf is not None and pf.mode == "fuse"
    candidates = list(pf.fused) if fuse and pf is not None else list(prepared.probe.hits)
    if not (decision.k > 0 and _reranks(parts, prepared, rerank, candidates)):
        trace.reranker = "off"
        return candidates, False
    reranker = parts.reranker()
    trace.reranker = reranker.name
    if parts.rerank_notice:
        trace.note(parts.rerank_notice)
    if pf is not None and pf.mode == "select":
        return candidates, True
    memo = _reranked(parts, prepared, reranker, candidates)
    trace.add_ms("rerank", memo[1])
    return list(memo[0]), True


def _reranks(parts: Parts, prepared: Prepared, rerank: bool | None, candidates: list) -> bool:
    """Whether ``candidates`` are reranked: ``rerank`` (default from the config), the query
    type's strategy, and more than one to order."""
    wanted = parts.cfg.rerank.enabled if rerank is None else rerank
    return bool(wanted and prepared.strategy.rerank and len(candidates) > 1)


def _reranked(
    parts: Parts, prepared: Prepared, reranker: Any, candidates: list[Hit]
) -> tuple[list[Hit], float]:
    """``(candidates reranked, ms)``: the same for every depth, so reranked once per prepared
    question (kept in its memo)."""
    memo = prepared.memo.get("rerank")
    if memo is None:
        t = time.perf_counter()
        n = rerank_head(parts.cfg.rerank, reranker)
        memo = (rerank_behind(reranker, prepared.question, candidates, n), elapsed_ms(t))
        prepared.memo["rerank"] = memo
    return memo


def passage_readings(
    parts: Parts, prepared: Prepared, trace: Trace | None = None, rerank: bool | None = None
) -> tuple[Hit, ...] | None:
    """The probe's first ``rerank.candidates`` as Fathom's reader reads them, best reading
    first (``DepthQuery.readings``), for a depth policy that reads passages; None when the
    reader cannot run. Where the reader is the reranker that will order the candidates, this
    is that reranking, done before the decision instead of after it (kept for every depth);
    otherwise (reranking off, another reranker, a portfolio) the reader reads them for the
    decision alone, charged to the ``read`` stage. ``rerank``: whether the candidates will be
    reranked (default from the config)."""
    from fathom.core.errors import BackendUnavailable
    from fathom.stages.rerank import ReaderReranker

    if "readings" in prepared.memo:
        return prepared.memo["readings"]  # type: ignore[no-any-return]
    hits = list(prepared.probe.hits)
    n = max(1, parts.cfg.rerank.candidates)
    reranks = prepared.portfolio is None and _reranks(parts, prepared, rerank, hits)
    reranker = parts.reranker() if reranks else None
    readings: tuple[Hit, ...] | None = ()
    if isinstance(reranker, ReaderReranker):
        readings = tuple(_reranked(parts, prepared, reranker, hits)[0][:n])
        prepared.memo["read_by_reranker"] = True
    elif hits:
        t = time.perf_counter()
        try:
            readings = tuple(ReaderReranker().load().rerank(prepared.question, hits[:n]))
        except BackendUnavailable:
            readings = None
        if trace is not None:
            trace.add_ms("read", elapsed_ms(t))
    prepared.memo["readings"] = readings
    return readings


def decided_budget(
    parts: Parts,
    prepared: Prepared,
    by_strategy: bool,
    budget_tokens: int | None,
    trace: Trace,
) -> int:
    """The context budget for this answer, and on ``trace`` what set it: ``explicit`` (the
    argument or ``compress.budget_tokens``), ``query type`` (``by_strategy``: the strategy
    chose the depth) or ``depth`` (a policy or a fixed k did: the window's room).

    Depth and context budget are one decision. A depth the query type's strategy chose comes
    with that type's budget; a depth a policy chose or a caller asked for (--k, fixed:k) means
    that many chunks, so its budget is what they take, up to what the model's context window
    holds (the compressor still drops near-duplicates and keeps long chunks' relevant
    sentences). An explicit budget wins over both."""
    question = prepared.question
    explicit = budget_tokens or parts.cfg.compress.budget_tokens
    if explicit:
        budget, source = parts.budget(question, explicit), "explicit"
    elif by_strategy:
        budget, source = parts.budget(question, prepared.strategy.budget_tokens), "query type"
    else:
        budget, source = parts.budget(question, WHOLE_WINDOW), "depth"
    trace.budget = {"tokens": budget, "source": source}
    return budget
