"""The portfolio router reads the probe `ask` makes: its features at build time come from the
configured retriever at the depth `ask` probes to, the portfolio records that probe, and a run
whose probe differs is refused. Also: hybrid members search as deep as the retriever does, and
the members' results fuse with the configured ``rrf_k``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.cli import main
from fathom.core.base import Hit
from fathom.core.config import load_config
from fathom.core.errors import ConfigError
from fathom.evaluation.portfolio import evaluate_portfolio
from fathom.index.collection import Collection
from fathom.index.embed import embedder_id_for, query_embedder_for
from fathom.index.retrieve import CollectionRetriever
from fathom.index.targets import resolve_target
from fathom.learn.portfolio_build import build_portfolio
from fathom.learn.portfolio_runs import member_runs
from fathom.learn.questions import load_questions
from fathom.router.classify import QueryClassifier
from fathom.router.features import FEATURE_NAMES, probe_features
from fathom.router.portfolio.pool import DEFAULT_POOL, PoolSearcher
from fathom.router.portfolio.router import LEGACY_PROBE, probe_settings
from fathom.router.portfolio.runtime import PortfolioRuntime
from fathom.stages.pipeline import Engine

# Enough chunks (one per biography) that a probe to 40 or 50 is deeper than one to 20.
N_DOCS = 60
RRF = {"generator.backend": "extractive", "retrieval.fusion": "rrf", "retrieval.rrf_k": 30}


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory, minilm):
    """(home, collection name, questions file) shared by the module's tests."""
    tmp = tmp_path_factory.mktemp("probe")
    home = tmp / "home"
    docs, qfile = make_qa_set(tmp / "qa", n_docs=N_DOCS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FATHOM_HOME", str(home))
        name = resolve_target(load_config(), str(docs))
    return home, name, qfile


@pytest.fixture
def home(qa, monkeypatch):
    monkeypatch.setenv("FATHOM_HOME", str(qa[0]))
    return qa


def _open(cfg, name: str):
    embedder_id = embedder_id_for(cfg.embedder)
    coll = Collection.open(cfg, name, expect_embedder=embedder_id)
    return coll, query_embedder_for(cfg, coll), embedder_id


def _build(cfg, name: str, questions, **kw) -> dict:
    coll, embedder, embedder_id = _open(cfg, name)
    clf = QueryClassifier.from_config(cfg)
    return build_portfolio(coll, embedder, embedder_id, clf, questions, size=3, n=3, by=None, **kw)


def _runtime(cfg, name: str, info: dict) -> PortfolioRuntime:
    coll, _embedder, embedder_id = _open(cfg, name)
    dim = coll.manifest.embedder_dim
    return PortfolioRuntime(info, coll, embedder_id, dim, 1, "fuse", name="p", cfg=cfg)


def test_router_trains_on_the_features_ask_reads(home) -> None:
    """With RRF fusion configured, the build's features are those of the Engine's probe, at
    the default depth and behind a deeper --k (cut to the trained depth, or probed again when
    the deeper probe fused deeper candidate lists)."""
    _home, name, qfile = home
    questions = [q for q in load_questions(qfile) if q.doc_ids][:6]
    for overrides, deep in ((RRF, 40), ({**RRF, "retrieval.candidates": 25}, 50)):
        cfg = load_config(overrides=overrides)
        coll, embedder, _id = _open(cfg, name)
        clf = QueryClassifier.from_config(cfg)
        runs = member_runs(coll, embedder, questions, DEFAULT_POOL[:1], 3, classifier=clf)
        engine = Engine(cfg, name)
        preps = [engine.prepare(q.question) for q in questions]
        for q, built, prep in zip(questions, runs.features, preps, strict=True):
            at_ask = probe_features(q.question, prep.probe, prep.type_probs)
            # Features as `ask` computes them: equal up to float noise of the embedding.
            np.testing.assert_allclose(built, at_ask, atol=1e-4, err_msg=q.question)
        assert runs.probe == probe_settings(cfg)
        info = _build(cfg, name, questions)
        assert info["probe"] == probe_settings(cfg)
        assert info["probe"]["retrieval.fusion"] == "rrf"
        runtime = _runtime(cfg, name, info)
        for q, prep in zip(questions, preps, strict=True):
            at_ask = probe_features(q.question, prep.probe, prep.type_probs)
            np.testing.assert_allclose(
                runtime.features(q.question, prep.qvec, prep.probe, prep.type_probs), at_ask
            )
            deeper = engine.prepare(q.question, depth=deep)
            assert len(deeper.probe.hits) == deep
            got = runtime.features(q.question, deeper.qvec, deeper.probe, deeper.type_probs)
            assert got.shape == (len(FEATURE_NAMES),)
            np.testing.assert_allclose(got, at_ask, atol=1e-6, err_msg=q.question)


def test_a_portfolio_trained_on_another_probe_is_refused(home, tmp_path: Path) -> None:
    _home, name, qfile = home
    questions = [q for q in load_questions(qfile) if q.doc_ids][:6]
    plain = load_config(overrides={"generator.backend": "extractive"})
    info = _build(plain, name, questions)
    assert info["probe"] == LEGACY_PROBE  # the defaults are what older portfolios used
    _runtime(plain, name, info)
    legacy = {k: v for k, v in info.items() if k != "probe"}
    _runtime(plain, name, legacy)  # an older portfolio under the defaults still loads
    rrf = load_config(overrides=RRF)
    for case in (info, legacy):
        with pytest.raises(ConfigError, match=r"retrieval\.fusion = 'convex' at build, 'rrf'"):
            _runtime(rrf, name, case)
    deeper = load_config(overrides={"rerank.candidates": 30})
    with pytest.raises(ConfigError, match=r"rerank\.candidates = 20 at build, 30 now"):
        _runtime(deeper, name, info)
    # rrf_k does not change a convex probe.
    _runtime(load_config(overrides={"retrieval.rrf_k": 5}), name, info)
    coll, embedder, embedder_id = _open(rrf, name)
    with pytest.raises(ConfigError, match=r"retrieval\.fusion"):
        evaluate_portfolio(
            info, coll, embedder, embedder_id, QueryClassifier.from_config(rrf), questions, 10
        )
    # And on the command line: one clear message, exit code 1.
    path = tmp_path / "p.json"
    path.write_text(json.dumps(info))
    args = ["ask", name, questions[0].question, "--portfolio", str(path), "--generator",
            "extractive", "--json"]  # fmt: skip
    r = CliRunner().invoke(main, args, env={"FATHOM_RETRIEVAL__FUSION": "rrf"})
    assert r.exit_code == 1, r.output
    assert "retrieval.fusion = 'convex' at build, 'rrf' now" in r.output
    assert "fathom portfolio build" in r.output and "Traceback" not in r.output


def test_a_new_probe_setting_is_not_served_from_the_cache(home, tmp_path: Path) -> None:
    _home, name, qfile = home
    questions = [q for q in load_questions(qfile) if q.doc_ids][:6]
    cache = tmp_path / "p.scores.npz"
    convex = _build(load_config(), name, questions, cache=cache)
    rrf = _build(load_config(overrides=RRF), name, questions, cache=cache)
    assert rrf["probe"]["retrieval.fusion"] == "rrf"
    assert rrf["router"]["mean"] != convex["router"]["mean"]  # features computed again


def test_hybrid_members_search_as_deep_as_the_retriever(home) -> None:
    """Asked for more rows than ``candidates``, a hybrid member fuses lists that deep, as
    CollectionRetriever.probe does, instead of stopping at ``candidates`` rows."""
    _home, name, qfile = home
    cfg = load_config()
    coll, embedder, _id = _open(cfg, name)
    searcher = PoolSearcher(coll, candidates=5)
    q = load_questions(qfile)[0].question
    qvec = embedder.embed_query(q)
    for m in DEFAULT_POOL:
        if m.kind != "hybrid":
            continue
        alone = CollectionRetriever(
            coll, embedder, "hybrid", rrf_k=int(m.params.get("rrf_k", 60)), candidates=5,
            fusion=m.params["fusion"], dense_weight=m.params.get("dense_weight", 0.5),
        ).probe(q, 12, qvec=qvec)  # fmt: skip
        rows = searcher.rows(m, q, qvec, 12)
        assert len(rows) == 12 and rows == [h.row for h in alone.hits], m.name


def test_members_results_fuse_with_the_configured_rrf_k(home) -> None:
    _home, name, qfile = home
    questions = [q for q in load_questions(qfile) if q.doc_ids][:6]
    info = _build(load_config(), name, questions)
    runtime = _runtime(load_config(overrides={"retrieval.rrf_k": 5}), name, info)
    assert runtime.rrf_k == 5
    coll = runtime.collection
    a, b = coll.chunks([0, 1])
    lists = {"x": [Hit(chunk=a, score=1.0, row=0), Hit(chunk=b, score=0.5, row=1)],
             "y": [Hit(chunk=b, score=1.0, row=1)]}  # fmt: skip
    fused = runtime.fuse(lists, 2)
    assert [h.row for h in fused] == [1, 0]
    assert fused[0].score == pytest.approx(1 / 7 + 1 / 6)
    assert fused[1].score == pytest.approx(1 / 6)
    assert runtime.fuse(lists, 2, rrf_k=60)[1].score == pytest.approx(1 / 61)
    q = questions[0].question
    hits = runtime.member_hits(q, coll.dense.rows_vectors([0])[0], list(info["members"][:1]), 3)
    assert [h.score for h in next(iter(hits.values()))] == pytest.approx([1 / 6, 1 / 7, 1 / 8])
