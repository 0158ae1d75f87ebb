"""The first step of an answer: the question-only stages every depth shares.

Embed the question, classify its type (and so its strategy) and the kind of answer it wants
(``router.answer_kind``), probe the collection to the
depth the decision will need, run the retriever portfolio's chosen members, and follow the
further hops of a multi-hop strategy. The result, ``Prepared``, is reused by every depth an
evaluation tries, so one question is embedded and searched once.

Document patterns (``--doc``) are matched first (``index.doc_filter``), before any work: every
retrieval of the question then searches those documents only, so the depth policy decides on
their probe. A retriever portfolio, whose members search views of the whole collection, is
not run under a filter (the trace says so).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fathom.core.base import DepthPolicy, Probe
from fathom.core.errors import FathomError
from fathom.router.answer_kind import answer_kind
from fathom.stages.records import PortfolioLists, Prepared, elapsed_ms

if TYPE_CHECKING:
    from fathom.index.doc_filter import DocFilter
    from fathom.stages.parts import Parts


def prepare(
    parts: Parts,
    question: str,
    *,
    retrieve: bool = True,
    depth: int = 0,
    docs: Sequence[str] = (),
) -> Prepared:
    """The question-only stages, shared by every depth: embed, classify, probe (and a
    multi-hop strategy's further hops) to at least ``depth`` hits, in the documents the
    patterns ``docs`` select (all without any). ``retrieve=False`` stops after classifying."""
    from fathom.index.doc_filter import select_documents
    from fathom.router.strategy import probe_depth, strategy_for

    question = question.strip()
    if not question:
        raise FathomError("the question is empty")
    within = select_documents(parts.collection.manifest, docs)
    stages: dict[str, float] = {}
    t = time.perf_counter()
    qvec = parts.embedder.embed_query(question)
    embedding_tokens = parts.count_embedding_tokens([question])
    stages["embed"] = elapsed_ms(t)

    t = time.perf_counter()
    classifier = parts.classifier  # built first: it says whether it embeds on its own
    own = parts.classifier_embeds  # its own embedder: not the collection's vector
    qtype, probs = classifier.classify(question, embedding=None if own else qvec)
    strategy, kind = strategy_for(qtype, question), answer_kind(question)
    stages["classify"] = elapsed_ms(t)

    hops: list[str] = []
    portfolio, probe = None, Probe(query=question, hits=(), timings_ms={})
    if retrieve:
        depth = probe_depth(strategy.k_max, parts.cfg.rerank.candidates, depth)
        t = time.perf_counter()
        probe = parts.retriever.probe(question, depth, qvec=qvec, within=within)
        stages["probe"] = elapsed_ms(t)
        if within is None and parts.portfolio() is not None:
            t = time.perf_counter()
            portfolio = portfolio_lists(parts, question, qvec, probe, probs, depth)
            stages["portfolio"] = elapsed_ms(t)
        if strategy.iterative:
            t = time.perf_counter()
            probe = follow_hops(parts, question, probe, depth, strategy.max_hops, hops, within)
            stages["hop"] = elapsed_ms(t)
    return Prepared(
        question=question,
        qvec=qvec,
        query_type=qtype,
        type_probs=dict(probs),
        strategy=strategy,
        probe=probe,
        stages_ms=stages,
        embedding_tokens=embedding_tokens,
        hops=tuple(hops),
        portfolio=portfolio,
        docs=within,
        kind=kind,
    )


def prepare_for(
    parts: Parts,
    question: str,
    k: int | None,
    policy: DepthPolicy | None,
    docs: Sequence[str] = (),
) -> tuple[Prepared, DepthPolicy | None]:
    """``question`` prepared as deep as its depth policy needs (within the documents ``docs``
    select), and that policy: ``policy``, else (without ``k``) the configured one, unless the
    question asks about the whole document: no depth covers that, and the strategy's
    map-reduce reads every section."""
    from fathom.router.depth import requested_depth

    configured = parts.depth_policy() if k is None and policy is None else None
    depth = requested_depth(k, policy or configured)
    prepared = prepare(parts, question, retrieve=k != 0, depth=depth, docs=docs)
    if configured is not None and not prepared.strategy.map_reduce:
        policy = configured
    return prepared, policy


def portfolio_lists(
    parts: Parts, question: str, qvec: Any, probe: Probe, probs: dict[str, float], depth: int
) -> PortfolioLists:
    """The members the portfolio's router chooses (reading the first hop's probe, as it was
    trained on), each member's hits and their fusion."""
    runtime = parts.portfolio()
    assert runtime is not None
    names = runtime.choose(question, qvec, probe, probs)
    lists = runtime.member_hits(question, qvec, names, depth)
    return PortfolioLists(
        name=runtime.name,
        mode=runtime.mode,
        members=tuple(names),
        hits={name: tuple(hits) for name, hits in lists.items()},
        fused=tuple(runtime.fuse(lists, depth)),
    )


def follow_hops(
    parts: Parts,
    question: str,
    probe: Probe,
    depth: int,
    max_hops: int,
    hops: list[str],
    within: DocFilter | None = None,
) -> Probe:
    """Up to ``max_hops`` retrievals in all: each further hop follows the bridge entities of
    the fused results so far (searched with BM25 alone: no embedding tokens, ``within`` the
    same documents), and stops when it would repeat a query. The follow-up queries are
    appended to ``hops``."""
    from fathom.index.hops import next_hop

    for _ in range(max(1, max_hops) - 1):
        rrf_k = parts.cfg.retrieval.rrf_k
        deeper, follow = next_hop(parts.sparse, question, probe, depth, rrf_k, hops, within)
        if not follow:
            break
        probe = deeper
        hops.append(follow)
    return probe
