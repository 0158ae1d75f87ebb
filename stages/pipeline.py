"""One question, end to end: classify → probe → decide depth → rerank → compress → generate →
feedback (deeper retrieval when confidence is low). Plain code; every stage's time, tokens and
decision go into the ``Trace``.

The probe is shared: the depth policy reads its scores and the later stages reuse its hits, so a
small k never costs a second search. ``Engine`` keeps the collection and models loaded across
questions (``fathom chat``); ``ask`` builds one for a single question.
"""

from __future__ import annotations

import collections
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.feedback.confidence import attribute
from fathom.stages.base import Citation, Decision, Draft, Hit, Probe
from fathom.stages.errors import CollectionNotFound, FathomError, IndexMismatchError
from fathom.stages.generate.prompt import render_block, renumber_citations, strip_citations

if TYPE_CHECKING:
    from fathom.stages.config import Config

Progress = Callable[..., None]
TokenSink = Callable[[str], None]


@dataclass
class Trace:
    """What one ask did and what it cost; filled in stage by stage."""

    question: str
    collection: str
    query_type: str = ""
    type_probs: dict[str, float] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(
        default_factory=lambda: {"embedding": 0, "context": 0, "prompt": 0, "completion": 0}
    )
    cost: float = 0.0
    currency: str = "USD"
    backend: str = ""
    model: str = ""
    reranker: str = ""
    embedder: str = ""  # the query embedder: model id, with " (int8)" when quantized
    notices: list[str] = field(default_factory=list)
    hops: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    portfolio: dict[str, Any] | None = None  # name, mode and the members the router chose

    def add_ms(self, stage: str, ms: float) -> None:
        self.stages_ms[stage] = self.stages_ms.get(stage, 0.0) + ms

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
            "strategy": self.strategy,
            "decision": self.decision.to_dict() if self.decision else None,
            "stages_ms": {k: round(v, 3) for k, v in self.stages_ms.items()},
            "total_ms": round(self.total_ms, 3),
            "tokens": dict(self.tokens),
            "cost": self.cost,
            "currency": self.currency,
            "backend": self.backend,
            "model": self.model,
            "reranker": self.reranker,
            "embedder": self.embedder,
            "notices": list(self.notices),
            "hops": list(self.hops),
            "rounds": list(self.rounds),
            "portfolio": dict(self.portfolio) if self.portfolio else None,
        }


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
    # With a retriever portfolio: its name and mode, the members the router chose, each
    # member's hits and their fusion.
    portfolio: dict[str, Any] | None = None
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "citations": [c.to_dict() for c in self.citations],
            "sources": [c.to_dict() for c in self.sources],
            "confidence": self.confidence,
            "collection": self.trace.collection,
            "trace": self.trace.to_dict(),
        }


# ---------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------


def resolve_target(
    cfg: Config,
    target: str,
    progress: Progress | None = None,
    rebuild: bool = False,
    embedder: Any | None = None,
    password: str | None = None,
) -> str:
    """The collection for ``target``: a file or folder (ingested on first use, with
    ``embedder`` when given; ``password`` opens encrypted PDFs) or a name."""
    from fathom.index.collection import collection_for, collections_root, ingest_paths
    from fathom.index.embed import embedder_id_for
    from fathom.index.manifest import read_manifest

    path = Path(target)
    if path.exists():
        name = collection_for([path], embedder=embedder_id_for(cfg.embedder))
        manifest = read_manifest(collections_root(cfg) / name)
        # With a password, files that failed before (an encrypted PDF) are tried again.
        retry = (
            password is not None
            and manifest is not None
            and any(d.status == "failed" for d in manifest.documents)
        )
        if rebuild or manifest is None or retry:
            report = ingest_paths(
                cfg,
                [path],
                name,
                rebuild=rebuild,
                progress=progress,
                embedder=embedder,
                password=password,
            )
            if report.total_chunks == 0:
                reasons = "; ".join(f.reason for f in report.files if f.reason) or "no text"
                raise FathomError(f"{target}: nothing could be indexed ({reasons})")
        elif manifest.n_chunks == 0:  # indexed before, and nothing could be: say so again
            reasons = "; ".join(d.error for d in manifest.documents if d.error) or "no text"
            raise FathomError(f"{target}: nothing could be indexed ({reasons})")
        return name
    if read_manifest(collections_root(cfg) / target) if _valid_name(target) else None:
        return target
    raise CollectionNotFound(
        f"{target}: no such file, folder or collection — give a PDF, DOCX, TXT or MD file, a "
        "folder, or a name from `fathom collections list`"
    )


def _valid_name(name: str) -> bool:
    return bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", name))


# ---------------------------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------------------------


def price(cfg: Config, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """Cost from the configured price table (per million tokens); unlisted models cost 0."""
    entry = cfg.prices.models.get(model)
    if not entry:
        return 0.0
    return (prompt_tokens * entry[0] + completion_tokens * entry[1]) / 1_000_000


class Engine:
    """A collection with its models loaded, answering questions one after another."""

    def __init__(self, cfg: Config, collection: str, generator: Any | None = None) -> None:
        from fathom.index.collection import Collection
        from fathom.index.embed import embedder_id_for, query_embedder_for
        from fathom.stages.retrieve import retriever_for

        self.cfg = cfg
        self.collection = Collection.open(
            cfg, collection, expect_embedder=embedder_id_for(cfg.embedder)
        )
        self.embedder = query_embedder_for(cfg, self.collection)
        self.retriever = retriever_for(cfg, self.collection, self.embedder)
        self._generator = generator
        # What scoring an answer took lately: a deadline keeps the most of it back for the
        # work after generation, so the whole answer is done by the deadline.
        self._after_generate: collections.deque[float] = collections.deque([25.0], maxlen=64)
        self._policy: Any = False  # not loaded yet (None: the strategy default)
        self._portfolio: Any = False  # not loaded yet (None: no portfolio configured)
        self._sparse = None  # BM25-only retriever for second hops
        self._classifier = None
        self._classifier_embeds = False
        self._policy_notice = ""
        self._reranker = None
        self._replayed_at_start = 0.0  # a replaying generator's replayed_ms when answer() began
        self._rerank_notice: str | None = None
        self._compressor = None
        self._scorer = None
        self._token_counter = None
        self._paths = {d.doc_id: d.path for d in self.collection.manifest.documents}

    # -- lazily built parts ------------------------------------------------------------------

    @property
    def generator(self):
        if self._generator is None:
            from fathom.stages.generate import make_generator

            self._generator = make_generator(self.cfg.generator)
        inner = getattr(self._generator, "inner", self._generator)  # under an eval cache
        if getattr(inner, "speed_file", False) is None:
            inner.speed_file = self.cfg.models_path() / "llamacpp-speed.json"
        return self._generator

    def depth_policy(self) -> Any | None:
        """The configured depth policy (``retrieval.policy``), or None for the strategy's."""
        if self._policy is False:
            from fathom.index.embed import embedder_id_for
            from fathom.router.forest import default_policy_path, load_policy

            choice = self.cfg.retrieval.policy.strip()
            path = None
            if choice == "auto":
                path = default_policy_path() if default_policy_path().is_file() else None
            elif choice and choice != "strategy":
                path = Path(choice)
            expect = embedder_id_for(self.cfg.embedder)
            try:
                self._policy = load_policy(path, expect_embedder=expect) if path else None
            except IndexMismatchError:
                if choice != "auto":
                    raise  # a policy asked for by name: its mismatch is an error
                # The shipped policy reads scores of the embedder it was trained on; another
                # embedder's mean something else. Use the query type's strategy, and say so.
                self._policy = None
                self._policy_notice = (
                    f"depth policy: the shipped one was trained on another embedder's scores, "
                    f"not {expect}'s; the query type's strategy chose the depth (train one for "
                    "this embedder with `fathom policy sweep` and `fathom policy train`)"
                )
        return self._policy

    def portfolio(self) -> Any | None:
        """The configured retriever portfolio (``retrieval.portfolio``), or None."""
        if self._portfolio is False:
            self._portfolio = None
            if self.cfg.retrieval.portfolio.strip():
                from fathom.index.embed import embedder_id_for
                from fathom.router.portfolio_runtime import PortfolioRuntime

                self._portfolio = PortfolioRuntime.load(
                    self.cfg,
                    self.collection,
                    embedder_id_for(self.cfg.embedder),
                    self.collection.manifest.embedder_dim,
                )
        return self._portfolio

    @property
    def classifier(self):
        """The query-type classifier. It reads questions through the embedder it was trained
        on: with a collection built on another (``--embedder``), it embeds each question itself
        with its own (``self._classifier_embeds``) instead of refusing to classify."""
        if self._classifier is None:
            from fathom.index.embed import embedder_id_for, make_query_embedder
            from fathom.router.classify import DEFAULT_POLICY, QueryClassifier, QueryTypePolicy

            policy = QueryTypePolicy.load(DEFAULT_POLICY)  # read once, here
            embedder_cfg = self.cfg.embedder
            if policy.embedder_id != embedder_id_for(embedder_cfg):
                embedder_cfg = replace(embedder_cfg, name=policy.embedder_id, precision="fp32")
                self._classifier_embeds = True
            embedder = make_query_embedder(embedder_cfg, self.cfg.models_path())
            self._classifier = QueryClassifier(embedder, DEFAULT_POLICY, policy=policy)
        return self._classifier

    def reranker(self):
        if self._reranker is None:
            from fathom.stages.rerank import make_reranker

            self._reranker, self._rerank_notice = make_reranker(
                self.cfg.rerank, self.embedder, vectors=self.vectors
            )
        return self._reranker

    @property
    def compressor(self):
        if self._compressor is None:
            from fathom.stages.compress import ContextCompressor

            c = self.cfg.compress
            self._compressor = ContextCompressor(
                self.generator.count_tokens,
                embedder=self.embedder,
                dedupe_threshold=c.dedupe_threshold,
                mmr_lambda=c.mmr_lambda,
                sentence_select_over=c.sentence_select_over,
                condense_to=c.condense_to,
                framing=self.cfg.generator.framing,
                vectors=self.vectors,
                embed_sentences=False,  # term overlap: no model call per sentence per ask
            )
        return self._compressor

    @property
    def scorer(self):
        if self._scorer is None:
            from fathom.feedback.confidence import SupportScorer

            self._scorer = SupportScorer(self.embedder)
        return self._scorer

    def _count_embedding_tokens(self, texts: list[str]) -> int:
        if self._token_counter is None:
            from fathom.chunking.tokens import token_counter_for

            self._token_counter = token_counter_for(self.embedder.model_dir())
        return sum(self._token_counter.count(texts))

    # -- one question ------------------------------------------------------------------------

    def prepare(self, question: str, *, retrieve: bool = True, depth: int = 0) -> Prepared:
        """The question-only stages, shared by every depth: embed, classify, probe (and the
        second hop of a multi-hop strategy) to at least ``depth`` hits. ``retrieve=False``
        stops after classifying."""
        from fathom.router.strategy import probe_depth, strategy_for

        question = question.strip()
        if not question:
            raise FathomError("the question is empty")
        stages: dict[str, float] = {}
        t = time.perf_counter()
        qvec = self.embedder.embed_query(question)
        embedding_tokens = self._count_embedding_tokens([question])
        stages["embed"] = _ms(t)

        t = time.perf_counter()
        classifier = self.classifier
        own = self._classifier_embeds  # its own embedder: not the collection's vector
        qtype, probs = classifier.classify(question, embedding=None if own else qvec)
        strategy = strategy_for(qtype, question)
        stages["classify"] = _ms(t)

        hops: list[str] = []
        portfolio = None
        if retrieve:
            depth = probe_depth(strategy.k_max, self.cfg.rerank.candidates, depth)
            t = time.perf_counter()
            probe = self.retriever.probe(question, depth, qvec=qvec)
            stages["probe"] = _ms(t)
            runtime = self.portfolio()
            if runtime is not None:
                # The router reads the first hop's probe, as it was trained on.
                t = time.perf_counter()
                names = runtime.choose(question, qvec, probe, probs)
                lists = runtime.member_hits(question, qvec, names, depth)
                portfolio = {
                    "name": runtime.name,
                    "mode": runtime.mode,
                    "members": names,
                    "hits": lists,
                    "fused": tuple(runtime.fuse(lists, depth)),
                }
                stages["portfolio"] = _ms(t)
            if strategy.iterative:
                # Up to max_hops retrievals in all: each further hop follows the bridge entities
                # of the fused results so far, and stops when it would repeat a query.
                t = time.perf_counter()
                for _ in range(max(1, strategy.max_hops) - 1):
                    deeper, follow = self._second_hop(question, probe, depth, hops)
                    if not follow:
                        break
                    probe = deeper
                    hops.append(follow)  # searched with BM25 only: no embedding tokens
                stages["hop"] = _ms(t)
        else:
            probe = Probe(query=question, hits=(), timings_ms={})
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
        )

    def ask(
        self,
        question: str,
        *,
        k: int | None = None,
        policy: Any | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
        on_token: TokenSink | None = None,
        on_event: Progress | None = None,
    ) -> Answer:
        """Answer ``question``; ``k`` fixes the depth, else ``policy``, else the strategy."""
        configured = self.depth_policy() if k is None and policy is None else None
        # The probe goes as deep as the deepest budget the policy may choose (its features were
        # computed on a probe that deep when it was trained).
        depth = k or policy_depth(policy or configured)
        prepared = self.prepare(question, retrieve=k != 0, depth=depth)
        # The configured depth policy, unless the question asks about the whole document: no
        # depth covers that, and the strategy's map-reduce reads every section instead.
        if configured is not None and not prepared.strategy.map_reduce:
            policy = configured
        return self.answer(
            prepared,
            k=k,
            policy=policy,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_token=on_token,
            on_event=on_event,
        )

    def answer(
        self,
        prepared: Prepared,
        *,
        k: int | None = None,
        policy: Any | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
        feedback: bool | None = None,
        on_token: TokenSink | None = None,
        on_event: Progress | None = None,
    ) -> Answer:
        """Decide the depth for a prepared question, then rerank, compress, generate and (when
        ``feedback``, default from the config) deepen while confidence is low.

        The trace charges the shared stages of ``prepared`` too, except the probe and hop when
        the decision is a fixed k = 0 (a no-retrieval run never needs them).
        """
        from fathom.router.depth import FixedDepth, StrategyDepth

        question, strategy, probe = prepared.question, prepared.strategy, prepared.probe
        emit = on_event or (lambda *a, **kw: None)
        self._replayed_at_start = getattr(self.generator, "replayed_ms", 0.0)
        trace = Trace(
            question=question, collection=self.collection.name, currency=self.cfg.prices.currency
        )
        precision = self.collection.manifest.embedder_precision
        trace.embedder = self.collection.manifest.embedder_id + (
            f" ({precision})" if precision != "fp32" else ""
        )
        no_retrieval = k == 0
        for stage, ms in prepared.stages_ms.items():
            if not (no_retrieval and stage in ("probe", "hop")):
                trace.add_ms(stage, ms)
        trace.tokens["embedding"] += prepared.embedding_tokens
        trace.query_type, trace.type_probs = prepared.query_type, dict(prepared.type_probs)
        trace.strategy = strategy.to_dict()
        if not no_retrieval:
            trace.hops.extend(prepared.hops)
        qtype = prepared.query_type

        t = time.perf_counter()
        chooser = FixedDepth(k) if k is not None else policy or StrategyDepth(strategy)
        if isinstance(chooser, StrategyDepth) and self._policy_notice:
            trace.notices.append(self._policy_notice)
        extra: dict[str, Any] = {}  # learned policies read the router and the query vector too
        if getattr(chooser, "uses_type_probs", False):
            extra["type_probs"] = prepared.type_probs
        if getattr(chooser, "uses_qvec", False):
            extra["qvec"] = prepared.qvec
        decision = chooser.decide(question, probe, qtype, **extra)
        trace.decision = decision
        trace.add_ms("decide", _ms(t))
        emit("decision", decision=decision, query_type=qtype)

        pf = prepared.portfolio if decision.k > 0 else None
        if pf is not None:
            trace.portfolio = {k: pf[k] for k in ("name", "mode", "members")}
        candidates = list(pf["fused"]) if pf and pf["mode"] == "fuse" else list(probe.hits)
        use_rerank = self.cfg.rerank.enabled if rerank is None else rerank
        use_rerank = use_rerank and strategy.rerank and decision.k > 0 and len(candidates) > 1
        select = pf is not None and pf["mode"] == "select"
        if use_rerank and select:
            # Each member's own results are reranked in _select; the probe's are not used.
            trace.reranker = self.reranker().name
            if self._rerank_notice and self._rerank_notice not in trace.notices:
                trace.notices.append(self._rerank_notice)
        elif use_rerank:
            reranker = self.reranker()
            memo = prepared.memo.get("rerank")
            if memo is None:  # the same for every depth: rerank once per prepared question
                t = time.perf_counter()
                head = candidates[: self.cfg.rerank.candidates]
                memo = (_behind(reranker.rerank(question, head), candidates[len(head) :]), _ms(t))
                prepared.memo["rerank"] = memo
            candidates = list(memo[0])
            trace.reranker = reranker.name
            if self._rerank_notice and self._rerank_notice not in trace.notices:
                trace.notices.append(self._rerank_notice)
            trace.add_ms("rerank", memo[1])
        else:
            trace.reranker = "off"

        gen = self.generator
        trace.backend, trace.model = gen.name, gen.model
        # An explicit budget (argument, then `compress.budget_tokens` / --budget-tokens) wins
        # over the query type's.
        wanted = budget_tokens or self.cfg.compress.budget_tokens or strategy.budget_tokens
        budget = self._budget(question, wanted)

        # Map-reduce covers the whole collection: only when the strategy chose the depth (a fixed
        # k or a depth policy means exactly that many chunks).
        if strategy.map_reduce and decision.k > 0 and isinstance(chooser, StrategyDepth):
            draft, used = self._map_reduce(question, budget, trace, on_token)
            conf = self.scorer.score(draft, used)
            trace.rounds.append(_round(decision.k, draft, conf, len(used)))
        else:
            if select:
                # Deeper means each member answers from more of its own results.
                deepest = max(len(pf["hits"][name]) for name in pf["members"])
                answered: dict[tuple[str, int], Any] = {}  # (member, depth) → its answer

                def attempt(kk: int, escalated: bool):
                    if escalated and on_token is not None:
                        on_token("\n")
                    return self._select(prepared, kk, budget, trace, on_token, use_rerank, answered)

            else:
                deepest = len(candidates)

                def attempt(kk: int, escalated: bool):
                    return self._generate_round(
                        question, candidates, kk, budget, trace, on_token, escalated=escalated
                    )

                kept_at: dict[int, list[str]] = {}

                def sources_at(kk: int) -> list[str]:  # what compression keeps at depth kk
                    if kk not in kept_at:
                        fit = self.compressor.fit(question, candidates[:kk], budget)
                        kept_at[kk] = [h.chunk.chunk_id for h in fit]
                    return kept_at[kk]

            kk = decision.k
            used, draft, conf = attempt(kk, False)
            rounds = 0
            fb = self.cfg.feedback
            while (
                (fb.enabled if feedback is None else feedback)
                and conf.score < fb.threshold
                and rounds < fb.max_rounds
                and kk < min(deepest, strategy.k_max * 2)
                # Retrieved but none used (the budget or the deadline left every source out):
                # going deeper cannot change that.
                and (kk == 0 or bool(used))
            ):
                t = time.perf_counter()
                new_k = max(kk + 1, math.ceil(max(kk, 1) * fb.growth), strategy.k_min)
                new_k = min(new_k, deepest)
                if not self._round_fits(trace, kk, new_k):
                    break
                if not select and sources_at(new_k) == sources_at(kk):
                    # Deeper retrieval changes nothing the generator reads (the context budget
                    # is full of better sources): regenerating would repeat the same prompt.
                    trace.add_ms("feedback", _ms(t))
                    _notice(
                        trace,
                        f"feedback stopped at k = {kk}: k = {new_k} gives the generator the same "
                        f"sources (the {budget}-token context budget is full), so regenerating "
                        "would repeat the same prompt",
                        "feedback stopped",
                    )
                    break
                rounds += 1
                emit("escalate", confidence=conf.score, k=new_k)
                trace.add_ms("feedback", _ms(t))
                kk = new_k
                used, draft, conf = attempt(kk, True)
            if kk != decision.k:
                trace.decision = Decision(
                    k=kk,
                    policy=decision.policy,
                    reason=f"{decision.reason}; feedback deepened to k = {kk} "
                    f"(confidence was below {fb.threshold})",
                    scores=decision.scores,
                )
        trace.cost = price(self.cfg, gen.model, trace.tokens["prompt"], trace.tokens["completion"])
        sources = tuple(self._citation(i, h) for i, h in enumerate(used, start=1))
        cited = tuple(sources[n - 1] for n in draft.citations if 1 <= n <= len(sources))
        return Answer(
            question=question,
            text=draft.text,
            citations=cited,
            sources=sources,
            confidence=conf.to_dict(),
            trace=trace,
            used=tuple(used),
        )

    # -- pieces ----------------------------------------------------------------------------------

    def _context_tokens(self, kept: list[Hit]) -> int:
        """Tokens of the sources as the prompt writes them (``generator.framing``)."""
        if not kept:
            return 0
        rendered = _render_sources(kept, self.cfg.generator.framing)
        return sum(self.generator.count_tokens([rendered]))

    def _budget(self, question: str, wanted: int) -> int:
        """The context budget: what was asked for, capped so the prompt fits the window."""
        from fathom.stages.compress import prompt_overhead
        from fathom.stages.generate.prompt import build_messages

        gen = self.generator
        # Chat-template tokens (the no-source prompt minus its message texts), plus everything
        # a prompt with sources spends outside the sources themselves.
        bare = build_messages(question, [])
        template = gen.prompt_tokens(question, []) - sum(
            gen.count_tokens([m["content"] for m in bare])
        )
        framing = self.cfg.generator.framing
        overhead = max(0, template) + prompt_overhead(question, gen.count_tokens, framing=framing)
        room = gen.context_window - overhead - self.cfg.generator.max_tokens - 16
        if room <= 0:
            raise FathomError(
                f"the question alone ({overhead} tokens) leaves no room in the "
                f"{gen.context_window}-token context of {gen.model} — raise "
                "generator.context_window or shorten the question"
            )
        return max(0, min(wanted, room))

    def _until(self, trace: Trace) -> float | None:
        """The ``time.perf_counter()`` time by which generation must end: ``generator.deadline_ms``
        counted on ``trace``, less the time kept back for scoring (None without a deadline)."""
        deadline = self.cfg.generator.deadline_ms
        if deadline <= 0:
            return None
        return time.perf_counter() + (deadline - trace.total_ms - self._reserve_ms) / 1000

    def _now(self) -> float:
        """The clock deadlines are held to: ``time.perf_counter()`` plus the generation time an
        evaluation's cache replayed since this answer began (a replay returns at once, but the
        run counts the time the replayed answer took, so later steps must have that much less).
        ``_until`` needs no such term: ``trace.total_ms`` leaves replayed time out as well."""
        replayed = getattr(self.generator, "replayed_ms", 0.0) - self._replayed_at_start
        return time.perf_counter() + replayed / 1000

    def _time_budget(self, trace: Trace, until: float | None = None) -> dict[str, float]:
        """``{"time_budget_ms": …}`` for a generate call: the time left before ``until``
        (default: what ``generator.deadline_ms`` leaves after the stages ``trace`` has timed so
        far and the scoring still to come); {} without a deadline, or when the backend cannot
        stop on time — the report says so."""
        deadline = self.cfg.generator.deadline_ms
        if deadline <= 0:
            return {}
        if not getattr(self.generator, "supports_deadline", False):
            note = (
                f"generator.deadline_ms = {deadline:g} is held by the in-process backends "
                f"(llamacpp, huggingface) only; {self.generator.name} answered in full"
            )
            if note not in trace.notices:
                trace.notices.append(note)
            return {}
        until = self._until(trace) if until is None else until
        return {"time_budget_ms": max(0.0, (until - self._now()) * 1000)}

    @property
    def _reserve_ms(self) -> float:
        return max(self._after_generate)

    def _fit_in_time(
        self, question: str, kept: list[Hit], until: float | None, trace: Trace
    ) -> list[Hit]:
        """The most of ``kept`` (its best-first prefix) the generator can read before ``until``,
        by its own measure of prompt evaluation: all of it without a deadline or a measure.

        A generator that can measure itself but has not yet (the first prompt on a machine) is
        measured first, once, and the report says so."""
        expect = getattr(self.generator, "expected_prefill_ms", None)
        if until is None or not kept or expect is None:
            return kept
        measure = getattr(self.generator, "measure_prefill", None)
        if callable(measure) and expect(1) is None:
            ms = measure(question, kept)
            if (rate := expect(1)) is not None:
                _notice(
                    trace,
                    f"measured the generator's prompt speed on the first source first "
                    f"({rate:.2f} ms per token in {ms:.0f} ms, kept for later answers): the "
                    "deadline needs it to tell which sources can be read in time",
                    "measured the generator's prompt speed",
                )

        def fits(n: int) -> bool:
            ms = expect(self.generator.prompt_tokens(question, kept[:n]))
            return ms is None or self._now() + ms / 1000 <= until

        if fits(len(kept)):
            return kept
        lo, hi = 0, len(kept) - 1  # reading time grows with the sources: binary search
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return kept[:lo]

    def _readable(
        self, question: str, kept: list[Hit], until: float | None, trace: Trace
    ) -> list[Hit]:
        """``_fit_in_time``, saying in the report how many sources it left out."""
        fitted = self._fit_in_time(question, kept, until, trace)
        if len(fitted) < len(kept):
            n_left, n_all = len(kept) - len(fitted), len(kept)
            count = "" if n_left == n_all else f" ({n_left} of {n_all})"
            _notice(
                trace,
                f"sources left out{count}: reading them would pass the "
                f"{self.cfg.generator.deadline_ms:g} ms deadline (generator.deadline_ms)",
                "sources left out",
            )
        return fitted

    def _windows(self, until: float | None, n: int, parts: int) -> list[float | None]:
        """Ends of the first ``n`` of ``parts`` equal windows of the time left before ``until``
        (all None without a deadline): step i must be done by the end of window i + 1, so time
        one step leaves unused passes on to the next."""
        if until is None:
            return [None] * n
        start = self._now()
        step = (until - start) / max(parts, 1)
        return [start + (i + 1) * step for i in range(n)]

    def _round_fits(self, trace: Trace, k: int, new_k: int) -> bool:
        """Whether a feedback round at ``new_k`` can finish within ``generator.deadline_ms``:
        it is expected to take the last pass's generation time, scaled by the depth (a pass is
        the rounds at the last depth: in portfolio select mode, the members and the selection)."""
        deadline = self.cfg.generator.deadline_ms
        if deadline <= 0:
            return True
        last = 0.0
        for r in reversed(trace.rounds):
            if r["k"] != trace.rounds[-1]["k"]:
                break
            last += r["generate_ms"]
        expected = last * new_k / max(k, 1) + self._reserve_ms
        return trace.total_ms + expected <= deadline

    def _note_cut(self, draft: Draft, trace: Trace) -> None:
        if draft.finish_reason == "deadline":
            note = (
                f"answer cut at the {self.cfg.generator.deadline_ms:g} ms deadline "
                f"(generator.deadline_ms) after {draft.completion_tokens} tokens"
            )
            _notice(trace, note, "answer cut at")

    def _generate_round(
        self,
        question: str,
        candidates: list[Hit],
        k: int,
        budget: int,
        trace: Trace,
        on_token: TokenSink | None,
        escalated: bool = False,
        deadline: bool = True,
        until: float | None = None,
    ):
        """Compress the top ``k``, generate, score. ``deadline``: hold the generation to
        ``until`` (default: ``generator.deadline_ms`` counted on ``trace``); off for select-mode
        members without a time window, whose traces start at zero."""
        until = (self._until(trace) if until is None else until) if deadline else None
        t = time.perf_counter()
        kept = self.compressor.fit(question, candidates[:k], budget) if k > 0 else []
        if k > 0 and candidates and not kept:
            _notice(
                trace,
                f"no source fits the {budget}-token context budget (--budget-tokens, "
                "compress.budget_tokens): answered without sources",
                "no source fits",
            )
        # Sources whose reading would already pass the deadline are left out.
        kept = self._readable(question, kept, until, trace)
        trace.add_ms("compress", _ms(t))
        trace.tokens["context"] = self._context_tokens(kept)
        t = time.perf_counter()
        if escalated and on_token is not None:
            on_token("\n")
        timing = self._time_budget(trace, until) if deadline else {}
        draft = self.generator.generate(question, kept, on_token=on_token, **timing)
        trace.add_ms("generate", _ms(t))
        self._note_cut(draft, trace)
        trace.tokens["prompt"] += draft.prompt_tokens
        trace.tokens["completion"] += draft.completion_tokens
        t = time.perf_counter()
        conf = self.scorer.score(draft, kept, self.vectors(kept))
        if conf.sentences:
            trace.tokens["embedding"] += self._count_embedding_tokens(
                [d["sentence"] for d in conf.sentences]
            )
        attributed = attribute(draft, conf)
        if attributed is not None:
            draft = attributed
            note = (
                f"{draft.model} cited no sources; Fathom attributed each answer sentence to "
                "its best-supporting source"
            )
            if note not in trace.notices:
                trace.notices.append(note)
        after = _ms(t)
        trace.add_ms("feedback", after)
        self._after_generate.append(after)
        source = getattr(self.generator, "template_source", "")
        if source and not source.startswith("the file's"):
            note = f"{draft.model}: the GGUF has no chat template; prompted with {source}"
            if note not in trace.notices:
                trace.notices.append(note)
        trace.rounds.append(_round(k, draft, conf, len(kept)))
        return kept, draft, conf

    def _select(
        self,
        prepared: Prepared,
        k: int,
        budget: int,
        trace: Trace,
        on_token: TokenSink | None,
        use_rerank: bool,
        answered: dict[tuple[str, int], Any],
    ):
        """Portfolio ``select`` mode: one answer per chosen member from its own top ``k`` (at
        once when the generator is a server), then the generator picks or merges them over the
        union of their sources, renumbered so the candidates' citations stay valid. Without a
        language model (the extractive answerer), the candidate with the highest support
        confidence wins. ``answered`` carries member answers across feedback rounds of one
        answer, so a member with no deeper results is not asked the same prompt again."""
        from fathom.stages.generate.prompt import parse_citations

        question = prepared.question
        pf = prepared.portfolio
        assert pf is not None

        def member_answer(
            name: str, sub: Trace, until: float | None
        ) -> tuple[str, list[Hit], Any, Any]:
            hits = list(pf["hits"][name])
            # A member with fewer hits than a deeper round asks for gives the same prompt
            # again: its answer from the last round stands (and costs nothing more).
            depth = min(k, len(hits))
            done = answered.get((name, depth))
            if done is not None:
                return name, *done
            if use_rerank and len(hits) > 1:
                memo = prepared.memo.get(f"rerank:{name}")
                if memo is None:
                    t = time.perf_counter()
                    head = hits[: self.cfg.rerank.candidates]
                    memo = (
                        _behind(self.reranker().rerank(question, head), hits[len(head) :]),
                        _ms(t),
                    )
                    prepared.memo[f"rerank:{name}"] = memo
                    sub.add_ms("rerank", memo[1])  # charged once, not again per round
                hits = list(memo[0])
            used, draft, conf = self._generate_round(
                question, hits, k, budget, sub, None, deadline=until is not None, until=until
            )
            answered[(name, depth)] = (used, draft, conf)
            return name, used, draft, conf

        names = list(pf["members"])
        subs = [Trace(question=question, collection=trace.collection) for _ in names]
        # A language model selects among two or more answers; else the best-supported one stands.
        selects = self.generator.name != "extractive" and len(names) > 1
        # Under a deadline the members (and the selection) share the time left in equal
        # windows; the members' own traces start at zero, so each gets its window as a time.
        windows = self._windows(self._until(trace), len(names), len(names) + int(selects))
        if self.generator.name in ("ollama", "openai") and len(names) > 1:
            # A server answers the members' requests concurrently; each member keeps its own
            # trace, and a stage costs the slowest member's time (they overlap).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(names), thread_name_prefix="fathom-select") as ex:
                candidates = list(ex.map(member_answer, names, subs, windows))
            for stage in {st for sub in subs for st in sub.stages_ms}:
                trace.add_ms(stage, max(sub.stages_ms.get(stage, 0.0) for sub in subs))
        else:
            candidates = [
                member_answer(n, sub, w) for n, sub, w in zip(names, subs, windows, strict=True)
            ]
            for sub in subs:
                for stage, ms in sub.stages_ms.items():
                    trace.add_ms(stage, ms)
        for sub in subs:
            for key, n_tokens in sub.tokens.items():
                if key != "context":
                    trace.tokens[key] += n_tokens
            trace.tokens["context"] = max(trace.tokens["context"], sub.tokens["context"])
            trace.rounds.extend(sub.rounds)
        for name, sub in zip(names, subs, strict=True):
            for note in sub.notices:
                kind = next((k for k in _DEADLINE_NOTICES if note.startswith(k)), None)
                if kind is None:
                    if note not in trace.notices:
                        trace.notices.append(note)
                elif selects:  # about one member's answer, not the final one
                    _notice(trace, f"member {name}: {note}", f"member {name}: {kind}")
                else:
                    _notice(trace, note, kind)
        gen = self.generator
        if not selects:
            best = max(range(len(candidates)), key=lambda i: candidates[i][3].score)
            name, used, draft, conf = candidates[best]
            trace.tokens["context"] = subs[best].tokens["context"]
            _notice(
                trace,
                f"portfolio select: kept the answer from {name} (highest support "
                f"confidence, {conf.score:.2f}, of {len(candidates)} members)",
                "portfolio select:",
            )
            if on_token is not None:
                on_token(draft.text)
            return used, draft, conf

        # The union of the candidates' sources, in member order, each once.
        union: list[Hit] = []
        number: dict[str, int] = {}
        for _name, used, _draft, _conf in candidates:
            for h in used:
                if h.chunk.chunk_id not in number:
                    union.append(h)
                    number[h.chunk.chunk_id] = len(union)
        until = self._until(trace)
        t = time.perf_counter()

        def selector_for(kept: list[Hit]) -> str:
            """The selection's question: the candidates with citations renumbered to ``kept``."""
            renumber = {h.chunk.chunk_id: i for i, h in enumerate(kept, start=1)}
            lines = []
            for i, (_name, used, draft, _conf) in enumerate(candidates):
                mapping = {
                    n: renumber[h.chunk.chunk_id]
                    for n, h in enumerate(used, start=1)
                    if h.chunk.chunk_id in renumber
                }
                text = renumber_citations(draft.text, mapping).strip()
                lines.append(f"({chr(65 + i)}) {text}")
            return (
                f"{question}\n\nCandidate answers, each written from different search results "
                "(their [n] refer to the sources above):\n"
                + "\n".join(lines)
                + "\n\nGive the best-supported answer: pick one candidate, or merge them when "
                "they complement each other. Keep the citations."
            )

        # The selection's prompt holds the candidates as well as the sources: the sources get
        # the budget less what the candidates take of the context window.
        kept = self.compressor.fit(question, union, self._budget(selector_for(union), budget))

        # What the selection must read before the deadline: the sources and the candidates
        # (measured with the numbering before any cut, which changes only citation numbers).
        kept = self._readable(selector_for(kept), kept, until, trace)
        trace.add_ms("compress", _ms(t))
        selector = selector_for(kept)
        trace.tokens["context"] = self._context_tokens(kept)
        t = time.perf_counter()
        draft = gen.generate(selector, kept, on_token=on_token, **self._time_budget(trace, until))
        trace.add_ms("generate", _ms(t))
        self._note_cut(draft, trace)
        trace.tokens["prompt"] += draft.prompt_tokens
        trace.tokens["completion"] += draft.completion_tokens
        draft = replace(draft, citations=parse_citations(draft.text, len(kept)))
        t = time.perf_counter()
        conf = self.scorer.score(draft, kept, self.vectors(kept))
        trace.add_ms("feedback", _ms(t))
        trace.rounds.append(_round(k, draft, conf, len(kept)))
        _notice(
            trace,
            f"portfolio select: {gen.model} chose among the answers of "
            f"{', '.join(c[0] for c in candidates)}",
            "portfolio select:",
        )
        return kept, draft, conf

    def _second_hop(
        self, question: str, probe: Probe, depth: int, asked: list[str] | None = None
    ) -> tuple[Probe, str]:
        """Multi-hop: a follow-up query from what the hops so far found, then fuse both lists.

        The follow-up is the question plus bridge entities — exact names, which BM25 matches
        best — so a further hop searches BM25 alone and skips another query embedding.
        Returns the fused probe and the follow-up query ("" when there was none, or when it
        repeats one in ``asked``)."""
        import numpy as np

        from fathom.stages.retrieve import CollectionRetriever, rrf_fuse

        follow = followup_query(question, list(probe.hits[:3]), asked or ())
        if not follow or follow in (asked or ()):
            return probe, ""
        if self._sparse is None:
            self._sparse = CollectionRetriever(self.collection, None, mode="bm25")
        second = self._sparse.probe(follow, depth)

        # The second hop's scores and ranks are kept under "hop2_*" names, so "dense" and "bm25"
        # always mean the first hop's lists; a chunk both hops found keeps its first-hop hit.
        by_id: dict[str, Hit] = {
            h.chunk.chunk_id: replace(
                h,
                scores={f"hop2_{k}": v for k, v in h.scores.items()},
                ranks={f"hop2_{k}": v for k, v in h.ranks.items()},
            )
            for h in second.hits
        }
        for h in probe.hits:
            other = by_id.get(h.chunk.chunk_id)
            by_id[h.chunk.chunk_id] = (
                h
                if other is None
                else replace(
                    h, scores={**other.scores, **h.scores}, ranks={**other.ranks, **h.ranks}
                )
            )
        ids = list(by_id)
        index = {cid: i for i, cid in enumerate(ids)}

        def as_ranked(p: Probe):
            rows = np.array([index[h.chunk.chunk_id] for h in p.hits], dtype=np.int64)
            return np.array([h.score for h in p.hits]), rows

        fused = rrf_fuse(
            {"hop1": as_ranked(probe), "hop2": as_ranked(second)}, self.cfg.retrieval.rrf_k, depth
        )
        hits = tuple(
            replace(
                by_id[ids[row]],
                score=score,
                ranks={**by_id[ids[row]].ranks, **ranks},
            )
            for row, score, ranks, _ in fused
        )
        return Probe(query=question, hits=hits, timings_ms={**probe.timings_ms}), follow

    def _map_reduce(self, question: str, budget: int, trace: Trace, on_token: TokenSink | None):
        """Summaries over the whole collection: one source per section (map), then one answer."""
        from fathom.stages.base import Chunk

        gen = self.generator
        llm = gen.name != "extractive"
        # Under a deadline the sections and the final answer share the time left: section i must
        # be done by the end of the (i+1)-th of n+1 equal windows (time one leaves unused passes
        # on); a section whose sources cannot be read within its window is not summarised.
        held = llm and getattr(gen, "supports_deadline", False)
        until = self._until(trace) if held else None
        t = time.perf_counter()
        chunks = self.collection.store.all()
        sections: dict[tuple[str, str], list[tuple[int, Chunk]]] = {}
        for row, c in enumerate(chunks):  # store order is the vector row
            sections.setdefault((c.doc_id, c.section), []).append((row, c))
        groups = list(sections.values())
        max_sections = 12
        if len(groups) > max_sections:
            # Keep the largest sections (most text), in document order.
            keep = sorted(range(len(groups)), key=lambda i: -sum(c.n_tokens for _, c in groups[i]))
            groups = [groups[i] for i in sorted(keep[:max_sections])]
        per_section = max(64, budget // max(1, len(groups)))
        instruction = "Summarize the main points of these sources in two sentences."
        # A model reads up to three times its share per section (it keeps two sentences of
        # it), but never more than the section prompt's own room in the context window.
        section_budget = (
            min(per_section * 3, self._budget(instruction, 10**9)) if llm else per_section
        )
        section_hits: list[Hit] = []
        windows = self._windows(until, len(groups), len(groups) + 1)
        skipped = cut = 0
        for group, window in zip(groups, windows, strict=True):
            hits = [Hit(chunk=c, score=1.0, row=row) for row, c in group]
            head = group[0][1]
            kept = self.compressor.fit(
                f"main points of {head.section or head.title}",
                hits,
                section_budget,
            )
            if not kept:
                continue
            if window is not None:
                kept = self._fit_in_time(instruction, kept, window, trace)
                if not kept or self._now() >= window:
                    skipped += 1
                    continue
            if llm:
                draft = gen.generate(instruction, kept, **self._time_budget(trace, window))
                trace.tokens["prompt"] += draft.prompt_tokens
                trace.tokens["completion"] += draft.completion_tokens
                first, last = kept[0].chunk, kept[-1].chunk
                text = strip_citations(draft.text).strip()
                if draft.finish_reason == "deadline":
                    cut += 1
                    if len(text.split()) < _MIN_SUMMARY_WORDS:
                        text = ""  # a fragment says less than the section's own text
                chunk = replace(
                    first, text=text or first.text, page_end=max(first.page_end, last.page_end)
                )
                section_hits.append(Hit(chunk=chunk, score=1.0))
            else:
                section_hits.append(kept[0])
        trace.add_ms("map", _ms(t))
        if skipped:
            _notice(
                trace,
                f"{skipped} of {len(groups)} sections not summarised: reading them would pass "
                f"the {self.cfg.generator.deadline_ms:g} ms deadline (generator.deadline_ms)",
                f"{skipped} of {len(groups)} sections",
            )
        if cut:
            _notice(
                trace,
                f"{cut} of {len(groups)} section summaries cut at the "
                f"{self.cfg.generator.deadline_ms:g} ms deadline (generator.deadline_ms); those "
                f"under {_MIN_SUMMARY_WORDS} words were replaced by their section's own text",
                f"{cut} of {len(groups)} section summaries",
            )
        t = time.perf_counter()
        kept = self._readable(
            question, self.compressor.fit(question, section_hits, budget), until, trace
        )
        trace.add_ms("compress", _ms(t))
        trace.tokens["context"] = self._context_tokens(kept)
        t = time.perf_counter()
        if hasattr(gen, "summarize"):  # no model: a lead-sentence summary, one per section
            draft = gen.summarize(kept, on_token=on_token)
        else:
            timing = self._time_budget(trace, until)
            draft = gen.generate(question, kept, on_token=on_token, **timing)
            self._note_cut(draft, trace)
        trace.add_ms("generate", _ms(t))
        trace.tokens["prompt"] += draft.prompt_tokens
        trace.tokens["completion"] += draft.completion_tokens
        return draft, kept

    def vectors(self, hits: list[Hit]):
        """The stored embeddings of ``hits`` ``(len(hits), dim)``, or None if one has no row."""
        if not hits or any(h.row < 0 for h in hits):
            return None
        return self.collection.dense.rows_vectors(h.row for h in hits)

    def _citation(self, n: int, hit: Hit) -> Citation:
        c = hit.chunk
        return Citation(
            n=n,
            chunk_id=c.chunk_id,
            doc_id=c.doc_id,
            title=c.title,
            path=self._paths.get(c.doc_id, ""),
            pages=c.pages,
            section=c.section,
            score=round(float(hit.score), 6),
        )

    def close(self) -> None:
        self.collection.close()


_CAPS = re.compile(
    r"\b[A-Z][a-zA-Z0-9'’-]+(?:[ \t]+(?:(?:of|the|de|von|van|and)[ \t]+)?[A-Z][a-zA-Z0-9'’-]+)*"
)


def followup_query(question: str, hits: list[Hit], asked: list[str] | tuple[str, ...] = ()) -> str:
    """A further hop's query: the question plus the bridge entities the hops so far surfaced.

    Capitalised phrases (names, places, titles) from the top hits that the question, and the
    follow-ups already ``asked``, do not contain are the likely bridges; the most frequent few
    are appended.
    """
    q_lower = " ".join([question, *asked]).lower()
    counts: dict[str, int] = {}
    for h in hits:
        for m in _CAPS.finditer(h.chunk.text):
            phrase = m.group(0).strip()
            if len(phrase) < 3 or phrase.lower() in q_lower:
                continue
            counts[phrase] = counts.get(phrase, 0) + 1
    if not counts:
        return ""
    bridges = sorted(counts, key=lambda p: (-counts[p], -len(p)))[:3]
    return f"{question} {' '.join(bridges)}"


def _render_sources(hits: list[Hit], framing: str) -> str:
    """The sources as the prompt writes them under ``framing`` (what ``context`` counts)."""
    return "\n\n".join(render_block(i, h, framing) for i, h in enumerate(hits, start=1))


# Deadline notices about one generation: in portfolio select mode a member's are named for it.
_DEADLINE_NOTICES = ("answer cut at", "sources left out")
# A section summary cut at the deadline shorter than this is replaced by the section's text.
_MIN_SUMMARY_WORDS = 8


def policy_depth(policy: Any | None) -> int:
    """The deepest budget a depth policy may choose (0 without one): how deep the probe must
    go for it. Forest and REINFORCE policies list ``budgets``; utility policies ``bundles``."""
    if policy is None:
        return 0
    budgets = list(getattr(policy, "budgets", ()) or ())
    budgets += list((getattr(policy, "bundles", None) or {}).values())
    return max(budgets, default=0)


def _behind(head: list[Hit], tail: list[Hit]) -> list[Hit]:
    """``head`` (reranked) then ``tail`` (the candidates beyond ``rerank.candidates``, never
    reranked), the tail's scores put just below the head's lowest in their order: its fused
    scores are on another scale, and the compressor orders sources by score."""
    if not head or not tail:
        return head + tail
    floor = min(h.score for h in head)
    step = 1e-6 * max(1.0, abs(floor))
    return head + [replace(h, score=floor - step * i) for i, h in enumerate(tail, start=1)]


def _notice(trace: Trace, text: str, kind: str) -> None:
    """Add a notice, replacing the one of the same ``kind`` (its opening words) that an
    earlier round of the same answer left."""
    trace.notices[:] = [n for n in trace.notices if not n.startswith(kind)]
    trace.notices.append(text)


def _round(k: int, draft: Draft, conf: Any, n_sources: int) -> dict[str, Any]:
    return {
        "k": k,
        "sources": n_sources,
        "confidence": round(conf.score, 4),
        "abstained": conf.abstained,
        "prompt_tokens": draft.prompt_tokens,
        "completion_tokens": draft.completion_tokens,
        "generate_ms": round(draft.ms, 3),
        "answer": draft.text,
    }


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def ask(
    cfg: Config,
    target: str,
    question: str,
    *,
    k: int | None = None,
    rerank: bool | None = None,
    budget_tokens: int | None = None,
    rebuild: bool = False,
    progress: Progress | None = None,
    on_token: TokenSink | None = None,
    on_event: Progress | None = None,
    collection: str | None = None,
) -> Answer:
    """Resolve ``target`` (ingesting it on first use), answer ``question``, record it.

    ``collection`` is ``target``'s collection when the caller resolved it already.
    """
    t0 = time.perf_counter()
    name = collection or resolve_target(cfg, target, progress=progress, rebuild=rebuild)
    resolve_ms = _ms(t0)
    engine = Engine(cfg, name)
    try:
        answer = engine.ask(
            question,
            k=k,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_token=on_token,
            on_event=on_event,
        )
    finally:
        engine.close()
    answer.trace.stages_ms = {"open": resolve_ms, **answer.trace.stages_ms}
    record(cfg, target, answer)
    return answer


def record(cfg: Config, target: str, answer: Answer) -> None:
    """Append the ask to ``history.db``."""
    from fathom.stages.history import History

    tr = answer.trace
    History(cfg.home_path() / "history.db").record(
        {
            "question": answer.question,
            "target": target,
            "collection": tr.collection,
            "query_type": tr.query_type,
            "policy": tr.decision.policy if tr.decision else "",
            "k": tr.decision.k if tr.decision else 0,
            "reason": tr.decision.reason if tr.decision else "",
            "total_ms": tr.total_ms,
            "stages_ms": tr.stages_ms,
            "prompt_tokens": tr.tokens["prompt"],
            "completion_tokens": tr.tokens["completion"],
            "context_tokens": tr.tokens["context"],
            "embedding_tokens": tr.tokens["embedding"],
            "cost": tr.cost,
            "currency": tr.currency,
            "backend": tr.backend,
            "model": tr.model,
            "confidence": answer.confidence.get("score"),
            "rounds": tr.passes,
            "answer": answer.text,
        }
    )
