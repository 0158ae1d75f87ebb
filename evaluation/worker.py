"""One evaluation worker: an engine answering questions under every strategy, and the log row
each (question, strategy) becomes.

A question's shared stages (embed, classify, probe) run once and every strategy reuses them;
each row is timed as an answer of its own (no KV cache kept from the last one, replayed cache
time counted). Scores that judge what a strategy did come from its own context and answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fathom.core.base import source_id
from fathom.evaluation.cache import CachingGenerator
from fathom.evaluation.strategies import StrategySpec, make_policy, parse_strategies
from fathom.learn.questions import Question
from fathom.router.depth import requested_depth

MIN_SUPPORT = 0.35  # a sentence counts as supported from this support score (as attribution)
RANKED_DOCS = 100


class ContextOnly:
    """A generator that answers nothing: each round's context is built as the wrapped
    generator's would be (its context window and tokenizer), then left unanswered. A sweep
    judged by its contexts alone (``--context-only``) runs without generating."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, question: str, hits: list[Any], **_: Any) -> Any:
        from fathom.core.base import Draft

        return Draft("", (), 0, 0, self.inner.name, self.inner.model)

    def summarize(self, hits: list[Any], on_token: Any = None, question: Any = None) -> Any:
        return self.generate("", hits)


def generator_settings(cfg: Any) -> dict[str, Any]:
    g = cfg.generator
    return {
        "max_tokens": g.max_tokens,
        "temperature": g.temperature,
        "context_window": g.context_window,
    }


def config_fingerprint(cfg: Any) -> dict[str, Any]:
    """The configuration sections that change a row (no secrets, no paths to this machine's
    home): a resumed run must match them, and the generation cache keys on the generator's."""
    data = cfg.to_dict(mask_secrets=True)
    gen = {k: v for k, v in data["generator"].items() if k not in ("api_key", "timeout_s")}
    keep = ("embedder", "chunker", "index", "retrieval", "rerank", "compress", "feedback")
    out = {k: data[k] for k in keep}
    out["embedder"] = {k: v for k, v in out["embedder"].items() if k != "cache_dir"}
    out["generator"] = gen
    return out


def _source_id(hit: Any) -> str:
    return source_id(hit.chunk)


def eval_abstained(answer: Any) -> bool:
    """Whether the answer abstains, by ``judges.is_abstention`` on its text; an answer the
    deadline cut to nothing did not abstain (it said nothing), so it earns no credit on an
    unanswerable question."""
    cut = any(n.startswith("answer cut at") for n in getattr(answer.trace, "notices", ()))
    if cut and not answer.text.strip():
        return False
    from fathom.feedback.judges import is_abstention

    return is_abstention(answer.text)


def _row(
    q: Question,
    spec: StrategySpec,
    answer: Any,
    context: str,
    prepared: Any,
    extra: dict[str, Any],
    judge: str,
) -> dict[str, Any]:
    tr = answer.trace
    decision = tr.decision
    used = list(answer.used)
    context_docs = [_source_id(h) for h in used]
    ranked = list(dict.fromkeys(_source_id(h) for h in prepared.probe.hits))[:RANKED_DOCS]
    if not spec.retrieves:
        ranked = []
    # The eval's own abstention rule on the answer text (judges.is_abstention), not the
    # feedback scorer's narrower one: the scores must not depend on the feedback settings.
    abstained = eval_abstained(answer)
    # Exact match and F1 score the answer itself: the span when the answerer gave one (the
    # reader's), the whole text otherwise; ``contains`` reads the whole text.
    span = getattr(answer, "span", None)
    short = span["text"] if span else answer.text
    texts = (answer.text, short)
    m = _metrics(q, spec, *texts, context, context_docs, ranked, abstained, extra, judge)
    return {
        "qid": q.qid,
        "strategy": spec.name,
        "question": q.question,
        "gold_answers": list(q.answers),
        "gold_doc_ids": list(q.doc_ids),
        "qrels": q.qrels,
        "unanswerable": q.unanswerable,
        "query_type": tr.query_type,
        "policy": decision.policy if decision else "",
        "k": decision.k if decision else 0,
        "action": str(decision.k if decision else 0),
        "decision_reason": decision.reason if decision else "",
        "chunk_ids": [h.chunk.chunk_id for h in used],
        "context_doc_ids": context_docs,
        "ranked_doc_ids": ranked,
        "context": context,
        "answer": answer.text,
        "span": span["text"] if span else None,
        # whether that span clears the reader's bar (an unsure one's answer says so); None
        # without a span
        "span_sure": bool(span.get("sure", True)) if span else None,
        "abstained": abstained,
        "confidence": answer.confidence.get("score"),
        # The answerer's own probability that it answered (the extractive scorer's); None for
        # a model that states none. A cascade over budgets reads it.
        "answerer_confidence": answer.confidence.get("answerer"),
        "tokens": dict(tr.tokens),
        "cost": tr.cost,
        "stages_ms": {k: round(v, 3) for k, v in tr.stages_ms.items()},
        "total_ms": round(tr.total_ms, 3),
        "cached_generation": bool(extra.get("cached")),
        "metrics": m,
    }


def _metrics(
    q: Question,
    spec: StrategySpec,
    text: str,
    short: str,
    context: str,
    context_docs: list[str],
    ranked: list[str],
    abstained: bool,
    extra: dict[str, Any],
    judge: str,
) -> dict[str, Any]:
    """A row's metrics: the answer (``short`` for exact match and F1, ``text`` for contains)
    against the gold answers, the context and its
    documents against the gold documents, the judges' ``extra`` scores, and ``quality`` (the
    run's ``judge``)."""
    from fathom.feedback import judges as M

    golds = list(q.answers)
    gold_docs = list(q.doc_ids)
    m: dict[str, Any] = {
        "em": M.exact_match(short, golds, abstained=abstained),
        "f1": M.f1(short, golds, abstained=abstained),
        "contains": M.contains(text, golds),
        "answer_recall": M.answer_recall(context, golds),
        "recall@k": M.recall_at_k(context_docs, gold_docs),
        # The probe's ranking: a property of the index, the same for every retrieving strategy.
        "mrr": M.mrr(ranked, gold_docs) if spec.retrieves else None,
        "ndcg@10": M.ndcg_at_k(ranked, gold_docs, q.qrels, 10) if spec.retrieves else None,
        # What the strategy put in the context: its documents in context order, each once
        # (0 with an empty context when the question has relevant documents).
        "context_ndcg@10": M.ndcg_at_k(list(dict.fromkeys(context_docs)), gold_docs, q.qrels, 10),
        "abstain_correct": extra.get("abstain_correct"),
        "faithfulness": extra.get("faithfulness"),
        "context_relevance": extra.get("context_relevance"),
        "answer_relevance": extra.get("answer_relevance"),
    }
    if q.unanswerable:
        m["contains"] = m["em"]  # abstaining is the right answer
    m["quality"] = {
        "contains": m["contains"],
        "f1": m["f1"],
        "qrels": m["context_ndcg@10"],  # the context's documents, not the shared probe's
        "recall": m["answer_recall"],  # retrieval alone: a gold answer in the context
    }[judge]
    return m


class QuestionWorker:
    """One engine answering questions under every strategy; builds log rows."""

    def __init__(self, cfg: Any, run: dict[str, Any]) -> None:
        from fathom.stages.generate import make_generator
        from fathom.stages.pipeline import Engine

        self.cfg = cfg
        self.run = run
        self.specs = parse_strategies(run["strategies"])
        from fathom.index.embed import embedder_id_for

        embedder = embedder_id_for(cfg.embedder)
        self.policies = {s.name: make_policy(s, run.get("fitted"), embedder) for s in self.specs}
        gen = make_generator(cfg.generator, cfg.models_path())
        self.cache: CachingGenerator | None = None
        # The extractive answerer is deterministic and takes milliseconds: nothing to save,
        # and a cached quote would outlive a change to its code.
        if run.get("context_only"):
            gen = ContextOnly(gen)
        elif run.get("cache", True) and gen.language_model:
            from fathom import __version__

            gen = self.cache = CachingGenerator(
                gen,
                cfg.home_path() / "cache" / "generations.db",
                {**config_fingerprint(cfg)["generator"], "fathom": __version__},
            )
        self.generator = gen
        self.engine = Engine(cfg, run["collection"], generator=gen)
        self.has_unanswerable = bool(run.get("has_unanswerable"))

    def rows(self, q: Question, todo: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rows for ``q`` under the strategies in ``todo`` (default: all)."""
        from fathom.stages.generate.prompt import render_sources

        wanted = set(todo) if todo is not None else {s.name for s in self.specs}
        specs = [s for s in self.specs if s.name in wanted]
        if not specs:
            return []
        retrieve = any(s.retrieves for s in specs)
        # One probe serves every strategy: as deep as the deepest of them, by ask's rule.
        chosen = [self.policies[s.name] for s in specs]
        depth = max(requested_depth(k, policy) for policy, k in chosen)
        prepared = self.engine.prepare(q.question, retrieve=retrieve, depth=depth)
        features = probe_tokens = reading = None
        if self.run.get("features") and retrieve:
            from fathom.router.features import probe_features

            features = probe_features(prepared.question, prepared.probe, prepared.type_probs)
            if self.run.get("reading"):
                reading = self._reading(prepared)
            # What each probed chunk holds, in rank order: a policy prices its depth with the
            # question's own chunks (``router.cost.ContextTokens``), fitted on these.
            probe_tokens = [h.chunk.n_tokens for h in prepared.probe.hits]
        out = []
        for spec in specs:
            policy, k = self.policies[spec.name]
            # Each row is timed as an answer of its own: no KV cache kept from the last one.
            self.generator.forget()
            cache = self.cache
            if cache is not None:
                cache.take_replayed_ms()
            hits0 = cache.hits if cache is not None else 0
            answer = self.engine.answer(
                prepared, k=k, policy=policy, feedback=spec.feedback, rerank=None
            )
            if cache is not None and (replayed := cache.take_replayed_ms()):
                answer.trace.add_ms("generate", replayed)
            cached = cache is not None and cache.hits > hits0
            used = list(answer.used)
            context = render_sources(used, self.engine.cfg.generator.framing) if used else ""
            extra = self._extra(q, prepared, answer, used)
            extra["cached"] = cached
            row = _row(q, spec, answer, context, prepared, extra, self.run["judge"])
            if features is not None:
                row["features"] = features
                row["probe_tokens"] = probe_tokens
                if reading is not None:
                    row["reading"] = reading
            out.append(row)
        return out

    def _reading(self, prepared: Any) -> list[float] | None:
        """What Fathom's reader makes of the question's candidates
        (``router.features.reading_features``), read as ``ask`` reads them for a policy that
        reads passages; None when the reader cannot run."""
        from fathom.router.features import reading_features
        from fathom.stages.plan import passage_readings

        readings = passage_readings(self.engine.parts, prepared)
        return None if readings is None else reading_features(readings, prepared.probe)

    def _extra(self, q: Question, prepared: Any, answer: Any, used: list) -> dict[str, Any]:
        import numpy as np

        abstained = eval_abstained(answer)  # as _row scores it
        extra: dict[str, Any] = {}
        if self.has_unanswerable:
            extra["abstain_correct"] = float(abstained == q.unanswerable)
        sentences = answer.confidence.get("sentences") or []
        if not abstained and sentences:
            supported = [s for s in sentences if s.get("support", 0.0) >= MIN_SUPPORT]
            extra["faithfulness"] = len(supported) / len(sentences)
        qv = np.asarray(prepared.qvec, dtype=np.float32)
        vecs = self.engine.vectors(used) if used else None
        if vecs is not None and len(vecs):
            extra["context_relevance"] = float(np.mean(vecs @ qv))
        if answer.text.strip() and not abstained:
            av = np.asarray(self.engine.embedder.embed_query(answer.text), dtype=np.float32)
            extra["answer_relevance"] = float(av @ qv)
        return extra

    def close(self) -> None:
        self.engine.close()
        self.generator.close()
