"""One question, end to end: embed → classify → probe → decide depth → rerank → compress →
generate → feedback (deeper retrieval while confidence is low) → report. Plain code; every
stage's time, tokens and decision go into the ``Trace``.

The probe is shared: the depth policy reads its scores and the later stages reuse its hits, so a
small k never costs a second search. ``Engine`` keeps the collection and models loaded across
questions (``fathom chat``); ``ask`` builds one for a single question. The steps live in their
own modules: the feedback rules in ``feedback.loop``, the deadline in ``stages.deadline``,
whole-document summaries in ``stages.summary``, portfolio select mode in ``stages.select``,
multi-hop retrieval in ``index.hops``, the report records in ``stages.records``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Citation, Decision, Hit, Probe, cited_text
from fathom.core.errors import FathomError, IndexMismatchError
from fathom.feedback.confidence import attribute
from fathom.feedback.loop import FeedbackLoop, answer_confidence, support_score
from fathom.index.targets import resolve_target
from fathom.stages.deadline import AnswerClock
from fathom.stages.generate import opt_in_note
from fathom.stages.generate.prompt import render_sources
from fathom.stages.history import record_ask
from fathom.stages.pricing import reading_cost
from fathom.stages.records import Answer, Context, Prepared, Trace, elapsed_ms, price
from fathom.stages.rerank import rerank_behind, rerank_head

if TYPE_CHECKING:
    from fathom.core.config import Config

Progress = Callable[..., None]
TokenSink = Callable[[str], None]

# The budget asked for when the depth decides it: more than any window, so the model's context
# window (``stages.compress.context_budget``) is the cap.
WHOLE_WINDOW = 1 << 30


class Engine:
    """A collection with its models loaded, answering questions one after another."""

    def __init__(self, cfg: Config, collection: str, generator: Any | None = None) -> None:
        from fathom.index.collection import Collection
        from fathom.index.embed import SentenceVectors, embedder_id_for, query_embedder_for
        from fathom.index.retrieve import retriever_for

        self.cfg = cfg
        self.collection = Collection.open(
            cfg, collection, expect_embedder=embedder_id_for(cfg.embedder)
        )
        self.embedder = query_embedder_for(cfg, self.collection)
        self.retriever = retriever_for(cfg, self.collection, self.embedder)
        # The reranker's sentence vectors, which the extractive answerer reads again.
        self.sentence_vectors = SentenceVectors(self.embedder)
        self._vectors_given = False
        self.clock = AnswerClock(cfg.generator)
        self._generator = generator
        self._owns_generator = generator is None  # made here, so closed here
        self._policy: Any = False  # not loaded yet (None: the strategy default)
        self._portfolio: Any = False  # not loaded yet (None: no portfolio configured)
        self._sparse = None  # BM25-only retriever for further hops
        self._classifier = None
        self._classifier_embeds = False
        self._policy_notice = ""
        self._reranker = None
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

            self._generator = make_generator(self.cfg.generator, self.cfg.models_path())
        if not self._vectors_given:
            self._generator.use_vectors(self.sentence_vectors)
            self._vectors_given = True
        return self._generator

    def depth_policy(self) -> Any | None:
        """The configured depth policy (``retrieval.policy``), or None for the strategy's."""
        if self._policy is False:
            from fathom.router.depth import configured_policy

            self._policy, self._policy_notice = configured_policy(self.cfg)
        return self._policy

    def portfolio(self) -> Any | None:
        """The configured retriever portfolio (``retrieval.portfolio``), or None."""
        if self._portfolio is False:
            self._portfolio = None
            if self.cfg.retrieval.portfolio.strip():
                from fathom.index.embed import embedder_id_for
                from fathom.router.portfolio.runtime import PortfolioRuntime

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
                self.cfg.rerank, self.sentence_vectors, vectors=self.vectors
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
        further hops of a multi-hop strategy) to at least ``depth`` hits. ``retrieve=False``
        stops after classifying."""
        from fathom.router.strategy import probe_depth, strategy_for

        question = question.strip()
        if not question:
            raise FathomError("the question is empty")
        stages: dict[str, float] = {}
        t = time.perf_counter()
        qvec = self.embedder.embed_query(question)
        embedding_tokens = self._count_embedding_tokens([question])
        stages["embed"] = elapsed_ms(t)

        t = time.perf_counter()
        classifier = self.classifier  # built first: it says whether it embeds on its own
        own = self._classifier_embeds  # its own embedder: not the collection's vector
        qtype, probs = classifier.classify(question, embedding=None if own else qvec)
        strategy = strategy_for(qtype, question)
        stages["classify"] = elapsed_ms(t)

        hops: list[str] = []
        portfolio = None
        probe = Probe(query=question, hits=(), timings_ms={})
        if retrieve:
            depth = probe_depth(strategy.k_max, self.cfg.rerank.candidates, depth)
            t = time.perf_counter()
            probe = self.retriever.probe(question, depth, qvec=qvec)
            stages["probe"] = elapsed_ms(t)
            if self.portfolio() is not None:
                t = time.perf_counter()
                portfolio = self._portfolio_lists(question, qvec, probe, probs, depth)
                stages["portfolio"] = elapsed_ms(t)
            if strategy.iterative:
                t = time.perf_counter()
                probe = self._hops(question, probe, depth, strategy.max_hops, hops)
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
        )

    def _portfolio_lists(
        self, question: str, qvec: Any, probe: Probe, probs: dict[str, float], depth: int
    ) -> dict[str, Any]:
        """The members the portfolio's router chooses (reading the first hop's probe, as it
        was trained on), each member's hits and their fusion."""
        runtime = self.portfolio()
        names = runtime.choose(question, qvec, probe, probs)
        lists = runtime.member_hits(question, qvec, names, depth)
        return {
            "name": runtime.name,
            "mode": runtime.mode,
            "members": names,
            "hits": lists,
            "fused": tuple(runtime.fuse(lists, depth)),
        }

    def _hops(self, question: str, probe: Probe, depth: int, max_hops: int, hops: list[str]):
        """Up to ``max_hops`` retrievals in all: each further hop follows the bridge entities
        of the fused results so far (searched with BM25 alone: no embedding tokens), and stops
        when it would repeat a query. The follow-up queries are appended to ``hops``."""
        from fathom.index.hops import next_hop
        from fathom.index.retrieve import CollectionRetriever

        if self._sparse is None:
            self._sparse = CollectionRetriever(self.collection, None, mode="bm25")
        for _ in range(max(1, max_hops) - 1):
            rrf_k = self.cfg.retrieval.rrf_k
            deeper, follow = next_hop(self._sparse, question, probe, depth, rrf_k, hops)
            if not follow:
                break
            probe = deeper
            hops.append(follow)
        return probe

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
        prepared, policy = self._prepare_with_policy(question, k, policy)
        return self.answer(
            prepared,
            k=k,
            policy=policy,
            rerank=rerank,
            budget_tokens=budget_tokens,
            on_token=on_token,
            on_event=on_event,
        )

    def _prepare_with_policy(
        self, question: str, k: int | None, policy: Any | None
    ) -> tuple[Prepared, Any | None]:
        """``question`` prepared as deep as its depth policy needs, and that policy: ``policy``,
        else (without ``k``) the configured one, unless the question asks about the whole
        document: no depth covers that, and the strategy's map-reduce reads every section."""
        from fathom.router.depth import requested_depth

        configured = self.depth_policy() if k is None and policy is None else None
        depth = requested_depth(k, policy or configured)
        prepared = self.prepare(question, retrieve=k != 0, depth=depth)
        if configured is not None and not prepared.strategy.map_reduce:
            policy = configured
        return prepared, policy

    def _chooser(self, prepared: Prepared, k: int | None, policy: Any | None) -> Any:
        """What decides the depth: a fixed ``k``, else ``policy``, else the query type's
        strategy."""
        from fathom.router.depth import FixedDepth, StrategyDepth

        return FixedDepth(k) if k is not None else policy or StrategyDepth(prepared.strategy)

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
        from fathom.router.cascade import CascadeDepth
        from fathom.router.depth import StrategyDepth

        emit = on_event or (lambda *a, **kw: None)
        gen = self.generator
        self.clock.begin(gen)
        trace = self._start_trace(prepared, no_retrieval=k == 0)

        chooser = self._chooser(prepared, k, policy)
        decision = self._decide(prepared, chooser, trace)
        emit("decision", decision=decision, query_type=prepared.query_type)

        # Rerank the candidates, then the context budget.
        candidates, use_rerank = self._candidates(prepared, decision, rerank, trace)
        trace.backend, trace.model, trace.selection = gen.name, gen.model, gen.selection
        note = opt_in_note(self.cfg.generator, gen.name)
        if note is not None:
            trace.notice(note, "an OpenAI API key")
        # Depth and context budget are one decision. A depth the query type's strategy chose
        # comes with that type's budget; a depth a policy chose or a caller asked for (--k,
        # fixed:k) means that many chunks, so its budget is what they take, up to what the
        # model's context window holds (the compressor still drops near-duplicates and keeps
        # long chunks' relevant sentences). An explicit budget (argument, then
        # `compress.budget_tokens` / --budget-tokens) wins over both.
        strategy = prepared.strategy
        by_strategy = isinstance(chooser, StrategyDepth)
        budget = self._decided_budget(prepared, by_strategy, budget_tokens, trace)

        # Generate (a whole-document summary, or an answer with feedback rounds).
        if strategy.map_reduce and decision.k > 0 and by_strategy:
            # Map-reduce covers the whole collection: only when the strategy chose the depth (a
            # fixed k or a depth policy means exactly that many chunks).
            draft, used = self._summary().run(
                prepared.question, self.collection.store.all, budget, trace, on_token
            )
            conf = self.scorer.score(draft, used)
            trace.add_round(decision.k, draft, conf, len(used))
        else:
            climb = chooser.cascade if isinstance(chooser, CascadeDepth) else None
            used, draft, conf = self._answer_with_feedback(
                prepared,
                decision,
                candidates,
                use_rerank,
                budget,
                trace,
                feedback,
                on_token,
                emit,
                climb,
            )

        # The report.
        trace.cost = price(self.cfg, gen.model, trace.tokens["prompt"], trace.tokens["completion"])
        sources = tuple(self._citation(i, h) for i, h in enumerate(used, start=1))
        cited = tuple(sources[n - 1] for n in draft.citations if 1 <= n <= len(sources))
        return Answer(
            question=prepared.question,
            text=draft.text,
            citations=cited,
            sources=sources,
            # "answerer": the answerer's own stated probability (the extractive scorer's)
            confidence={**conf.to_dict(), "answerer": draft.confidence},
            trace=trace,
            used=tuple(used),
        )

    # -- steps of answer() -------------------------------------------------------------------

    def _start_trace(self, prepared: Prepared, no_retrieval: bool) -> Trace:
        """A trace charged with the prepared question's shared stages."""
        trace = Trace(
            question=prepared.question,
            collection=self.collection.name,
            currency=self.cfg.prices.currency,
        )
        precision = self.collection.manifest.embedder_precision
        trace.embedder = self.collection.manifest.embedder_id + (
            f" ({precision})" if precision != "fp32" else ""
        )
        for stage, ms in prepared.stages_ms.items():
            if not (no_retrieval and stage in ("probe", "hop")):
                trace.add_ms(stage, ms)
        trace.tokens["embedding"] += prepared.embedding_tokens
        trace.query_type, trace.type_probs = prepared.query_type, dict(prepared.type_probs)
        trace.strategy = prepared.strategy.to_dict()
        if not no_retrieval:
            trace.hops.extend(prepared.hops)
        return trace

    def _reading_cost(self, prepared: Prepared, trace: Trace) -> Any:
        """What a context token costs the generator (``stages.pricing``). Measuring a prompt
        speed for the first time loads the model: that time is its own stage, not the
        decision's."""
        t = time.perf_counter()
        hits = list(prepared.probe.hits)
        cost, measured = reading_cost(self.cfg, self.generator, prepared.question, hits)
        if measured:
            trace.add_ms("measure", elapsed_ms(t))
            trace.note(
                f"measured the generator's prompt speed ({cost.per_token * 1000:.2g} ms per "
                "token) to price the depth; kept in FATHOM_HOME for the next answers"
            )
        return cost

    def _candidates(
        self, prepared: Prepared, decision: Decision, rerank: bool | None, trace: Trace
    ) -> tuple[list[Hit], bool]:
        """The candidates in the order generation reads them (reranked when it applies), and
        whether the reranker applies. In portfolio select mode each member's results are
        reranked by the selection instead (the probe's are not used)."""
        pf = prepared.portfolio if decision.k > 0 else None
        if pf is not None:
            trace.portfolio = {key: pf[key] for key in ("name", "mode", "members")}
        fuse = pf is not None and pf["mode"] == "fuse"
        candidates = list(pf["fused"]) if fuse else list(prepared.probe.hits)
        use_rerank = self.cfg.rerank.enabled if rerank is None else rerank
        use_rerank = (
            use_rerank and prepared.strategy.rerank and decision.k > 0 and len(candidates) > 1
        )
        if not use_rerank:
            trace.reranker = "off"
            return candidates, False
        reranker = self.reranker()
        trace.reranker = reranker.name
        if self._rerank_notice:
            trace.note(self._rerank_notice)
        if pf is not None and pf["mode"] == "select":
            return candidates, True
        memo = prepared.memo.get("rerank")
        if memo is None:  # the same for every depth: rerank once per prepared question
            t = time.perf_counter()
            n = rerank_head(self.cfg.rerank, reranker)
            memo = (rerank_behind(reranker, prepared.question, candidates, n), elapsed_ms(t))
            prepared.memo["rerank"] = memo
        trace.add_ms("rerank", memo[1])
        return list(memo[0]), True

    def _answer_with_feedback(
        self,
        prepared: Prepared,
        decision: Decision,
        candidates: list[Hit],
        use_rerank: bool,
        budget: int,
        trace: Trace,
        feedback: bool | None,
        on_token: TokenSink | None,
        emit: Progress,
        climb: Any | None = None,
    ) -> tuple[list[Hit], Any, Any]:
        """The answer at the decided depth, deepened by the feedback loop's rules, or, for a
        cascade (``climb``: its ``router.cascade.Cascade``), up its ladder while the answer's
        own confidence is low."""
        question, strategy, pf = prepared.question, prepared.strategy, prepared.portfolio
        select = pf is not None and decision.k > 0 and pf["mode"] == "select"
        kept_at: dict[int, list[str]] = {}

        def sources_at(kk: int) -> list[str]:  # what compression keeps at depth kk
            if kk not in kept_at:
                fit = self.compressor.fit(question, candidates[:kk], budget)
                kept_at[kk] = [h.chunk.chunk_id for h in fit]
            return kept_at[kk]

        if select:
            # Deeper means each member answers from more of its own results.
            assert pf is not None
            deepest = max(len(pf["hits"][name]) for name in pf["members"])
            answered: dict[tuple[str, int], Any] = {}  # (member, depth) → its answer
            selection = self._selection(use_rerank)

            def attempt(kk: int, escalated: bool):
                if escalated and on_token is not None:
                    on_token("\n")
                return selection.answer(prepared, kk, budget, trace, on_token, use_rerank, answered)

        else:
            deepest = len(candidates)

            def attempt(kk: int, escalated: bool):
                return self._generate_round(
                    question, candidates, kk, budget, trace, on_token, escalated=escalated
                )

        if climb is not None:
            loop = FeedbackLoop.climbing(climb.ladder, climb.threshold)
            score = answer_confidence
        else:
            loop = FeedbackLoop.from_config(self.cfg.feedback, enabled=feedback)
            score = support_score
        result = loop.run(
            decision.k,
            attempt,
            deepest=deepest,
            k_min=strategy.k_min,
            k_max=strategy.k_max,
            round_fits=lambda kk, new_k: self.clock.round_fits(trace, kk, new_k),
            same_sources=None if select else lambda a, b: sources_at(a) == sources_at(b),
            on_escalate=lambda score, new_k: emit("escalate", confidence=score, k=new_k),
            charge=lambda ms: trace.add_ms("feedback", ms),
            score=score,
        )
        if result.stopped == "same sources":
            # Deeper retrieval changes nothing the generator reads (the context budget is full
            # of better sources): regenerating would repeat the same prompt.
            trace.notice(
                f"feedback stopped at k = {result.k}: k = {result.stopped_at} gives the "
                f"generator the same sources (the {budget}-token context budget is full), so "
                "regenerating would repeat the same prompt",
                "feedback stopped",
            )
        elif result.stopped == "deadline":
            trace.notice(
                f"feedback stopped at k = {result.k} (confidence {result.conf.score:.2f}): a "
                f"round at k = {result.stopped_at} would end past the answer deadline",
                "feedback stopped",
            )
        if result.k != decision.k:
            reason = loop.reason(decision.reason, result.k)
            trace.decision = replace(decision, k=result.k, reason=reason)
        return result.used, result.draft, result.conf

    def _summary(self):
        from fathom.stages.summary import CollectionSummary

        return CollectionSummary(
            self.generator, self.compressor, self.clock, self._budget, self._context_tokens
        )

    def _selection(self, use_rerank: bool):
        from fathom.stages.select import PortfolioSelect

        return PortfolioSelect(
            generator=self.generator,
            compressor=self.compressor,
            scorer=self.scorer,
            clock=self.clock,
            reranker=self.reranker,
            rerank_candidates=(
                rerank_head(self.cfg.rerank, self.reranker())
                if use_rerank
                else self.cfg.rerank.candidates
            ),
            generate_round=self._generate_round,
            budget_for=self._budget,
            context_tokens=self._context_tokens,
            vectors=self.vectors,
        )

    # -- pieces ------------------------------------------------------------------------------

    def _context_tokens(self, kept: list[Hit]) -> int:
        """Tokens of the sources as the prompt writes them (``generator.framing``)."""
        if not kept:
            return 0
        return sum(self.generator.count_tokens([render_sources(kept, self.cfg.generator.framing)]))

    def _decide(self, prepared: Prepared, chooser: Any, trace: Trace) -> Decision:
        """The depth ``chooser`` decides for ``prepared``, recorded on ``trace``; a policy that
        prices its choice first learns what reading costs this generator."""
        from fathom.router.depth import StrategyDepth

        if isinstance(chooser, StrategyDepth) and self._policy_notice:
            trace.notices.append(self._policy_notice)
        cost = self._reading_cost(prepared, trace) if chooser.prices_reading else None
        t = time.perf_counter()
        decision = chooser.decide(
            prepared.question,
            prepared.probe,
            prepared.query_type,
            type_probs=prepared.type_probs,
            qvec=prepared.qvec,
            cost=cost,
        )
        trace.decision = decision
        trace.add_ms("decide", elapsed_ms(t))
        return decision

    def _decided_budget(
        self, prepared: Prepared, by_strategy: bool, budget_tokens: int | None, trace: Trace
    ) -> int:
        """The context budget for this answer, and on ``trace`` what set it: ``explicit`` (the
        argument or ``compress.budget_tokens``), ``query type`` (``by_strategy``: the strategy
        chose the depth) or ``depth`` (a policy or a fixed k did: the window's room)."""
        question = prepared.question
        explicit = budget_tokens or self.cfg.compress.budget_tokens
        if explicit:
            budget, source = self._budget(question, explicit), "explicit"
        elif by_strategy:
            budget, source = self._budget(question, prepared.strategy.budget_tokens), "query type"
        else:
            budget, source = self._budget(question, WHOLE_WINDOW), "depth"
        trace.budget = {"tokens": budget, "source": source}
        return budget

    def _budget(self, question: str, wanted: int) -> int:
        """The context budget: what was asked for, capped so the prompt fits the window."""
        from fathom.stages.compress import context_budget

        return context_budget(self.generator, self.cfg.generator, question, wanted)

    def _fit(
        self, question: str, candidates: list[Hit], k: int, budget: int, trace: Trace
    ) -> list[Hit]:
        """The top ``k`` candidates compressed into ``budget``; a notice when none fits."""
        kept = self.compressor.fit(question, candidates[:k], budget) if k > 0 else []
        if k > 0 and candidates and not kept:
            trace.notice(
                f"no source fits the {budget}-token context budget (--budget-tokens, "
                "compress.budget_tokens): answered without sources",
                "no source fits",
            )
        return kept

    def _generate_round(
        self,
        question: str,
        candidates: list[Hit],
        k: int,
        budget: int,
        trace: Trace,
        on_token: TokenSink | None = None,
        escalated: bool = False,
        deadline: bool = True,
        until: float | None = None,
    ):
        """Compress the top ``k``, generate, score. ``deadline``: hold the generation to
        ``until`` (default: ``generator.deadline_ms`` counted on ``trace``); off for select-mode
        members without a time window, whose traces start at zero."""
        until = (self.clock.until(trace) if until is None else until) if deadline else None
        t = time.perf_counter()
        kept = self._fit(question, candidates, k, budget, trace)
        # Sources whose reading would already pass the deadline are left out.
        kept = self.clock.readable(question, kept, until, trace)
        trace.add_ms("compress", elapsed_ms(t))
        trace.set_context([h.chunk.text for h in kept], self._context_tokens(kept))
        t = time.perf_counter()
        if escalated and on_token is not None:
            on_token("\n")
        timing = self.clock.time_budget(trace, until) if deadline else {}
        draft = self.generator.generate(question, kept, on_token=on_token, **timing)
        trace.add_ms("generate", elapsed_ms(t))
        self.clock.note_cut(draft, trace)
        trace.add_generation(draft)
        t = time.perf_counter()
        conf = self.scorer.score(draft, kept, self.vectors(kept))
        if conf.sentences:
            trace.tokens["embedding"] += self._count_embedding_tokens(
                [d["sentence"] for d in conf.sentences]
            )
        attributed = attribute(draft, conf)
        if attributed is not None:
            draft = attributed
            trace.note(
                f"{draft.model} cited no sources; Fathom attributed each answer sentence to "
                "its best-supporting source"
            )
        after = elapsed_ms(t)
        trace.add_ms("feedback", after)
        self.clock.scored(after)
        source = self.generator.template_source
        if source and not source.startswith("the file's"):
            trace.note(f"{draft.model}: the GGUF has no chat template; prompted with {source}")
        trace.add_round(k, draft, conf, len(kept))
        return kept, draft, conf

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
            text=cited_text(c.text),
        )

    # -- the context alone, and a newer generation -----------------------------------------

    def context(
        self,
        question: str,
        *,
        k: int | None = None,
        rerank: bool | None = None,
        budget_tokens: int | None = None,
    ) -> Context:
        """What ``ask`` would hand the generator for ``question``, without generating: the
        depth the configured policy (or ``k``) decides, the candidates reranked and compressed
        into the decided context budget, and their token count in the generator's tokenizer.
        The feedback loop, which deepens only after reading an answer, does not run."""
        from fathom.router.cascade import CascadeDepth
        from fathom.router.depth import StrategyDepth

        prepared, policy = self._prepare_with_policy(question, k, None)
        trace = self._start_trace(prepared, no_retrieval=k == 0)
        chooser = self._chooser(prepared, k, policy)
        decision = self._decide(prepared, chooser, trace)
        candidates, _ = self._candidates(prepared, decision, rerank, trace)
        gen = self.generator
        trace.backend, trace.model, trace.selection = gen.name, gen.model, gen.selection
        by_strategy = isinstance(chooser, StrategyDepth)
        budget = self._decided_budget(prepared, by_strategy, budget_tokens, trace)
        if prepared.strategy.map_reduce and by_strategy and decision.k > 0:
            trace.note(
                "a whole-document question: ask summarises every section (map-reduce); this "
                f"context is the top {decision.k} chunks"
            )
        if isinstance(chooser, CascadeDepth):
            trace.note(
                "a cascade deepens only after reading its answers; this context is its first "
                f"rung, k = {decision.k}"
            )
        t = time.perf_counter()
        kept = self._fit(prepared.question, candidates, decision.k, budget, trace)
        trace.add_ms("compress", elapsed_ms(t))
        trace.set_context([h.chunk.text for h in kept], self._context_tokens(kept))
        sources = tuple(self._citation(i, h) for i, h in enumerate(kept, start=1))
        return Context(question=prepared.question, sources=sources, trace=trace, used=tuple(kept))

    def reopen(self) -> bool:
        """Move to the collection's newest committed generation when one was committed since
        this engine opened it (by this process or another), keeping the loaded models; whether
        it moved. The collection must keep its embedder and precision (an ingest ensures it
        unless it rebuilds; open a new Engine then)."""
        from fathom.index.collection import Collection
        from fathom.index.embed import embedder_id_for
        from fathom.index.retrieve import retriever_for

        old = self.collection
        fresh = Collection.open(
            self.cfg, old.name, expect_embedder=embedder_id_for(self.cfg.embedder)
        )
        if fresh.manifest.generation == old.manifest.generation:
            fresh.close()
            return False
        if fresh.manifest.embedder_precision != old.manifest.embedder_precision:
            fresh.close()
            raise IndexMismatchError(
                f"collection {old.name!r} was rebuilt at precision "
                f"{fresh.manifest.embedder_precision!r}, this engine embeds at "
                f"{old.manifest.embedder_precision!r} — open a new Engine for it"
            )
        self.collection = fresh
        self.retriever = retriever_for(self.cfg, fresh, self.embedder)
        self._paths = {d.doc_id: d.path for d in fresh.manifest.documents}
        self._sparse = None
        self._portfolio = False
        old.close()
        return True

    def close(self) -> None:
        """Close the collection and the generator this engine made (not one it was given)."""
        self.collection.close()
        if self._owns_generator and self._generator is not None:
            self._generator.close()


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
    resolve_ms = elapsed_ms(t0)
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
    record_ask(cfg, target, answer)
    return answer
