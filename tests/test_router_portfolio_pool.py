"""The retriever pool: every member searches one collection, scores lie in [0, 1], and
`fathom portfolio build|show` chooses members greedily and reports the baselines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.core.config import load_config
from fathom.index.collection import Collection
from fathom.index.embed import embedder_id_for, make_query_embedder
from fathom.index.targets import resolve_target
from fathom.learn.portfolio_runs import member_scores
from fathom.learn.portfolio_select import coverage
from fathom.learn.questions import load_questions
from fathom.router.portfolio.pool import DEFAULT_POOL, PoolSearcher


def test_every_member_searches_and_scores(tmp_path: Path, minilm, monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FATHOM_DATA", str(tmp_path))
    docs, qfile = make_qa_set(tmp_path / "qa", n_docs=12)
    cfg = load_config()
    name = resolve_target(cfg, str(docs))
    coll = Collection.open(cfg, name, expect_embedder=embedder_id_for(cfg.embedder))
    embedder = make_query_embedder(cfg.embedder, cfg.models_path())
    questions = [q for q in load_questions(qfile) if q.doc_ids][:12]
    searcher = PoolSearcher(coll)
    qvec = embedder.embed_query(questions[0].question)
    for member in DEFAULT_POOL:
        rows = searcher.rows(member, questions[0].question, qvec, 5)
        assert 0 < len(rows) <= 5 and len(set(rows)) == len(rows), member.name
    scores, by = member_scores(coll, embedder, questions, DEFAULT_POOL, n=3)
    assert by == "docs" and scores.shape == (len(questions), len(DEFAULT_POOL))
    assert ((scores >= 0) & (scores <= 1)).all()
    # Fictional biographies with distinctive names: BM25 finds the right one nearly always.
    assert scores[:, [m.name for m in DEFAULT_POOL].index("bm25")].mean() >= 0.8
    answers, by = member_scores(coll, embedder, questions, DEFAULT_POOL[:2], n=3, by="answer")
    assert by == "answer" and set(np.unique(answers)) <= {0.0, 1.0}


def test_portfolio_build_and_show(tmp_path: Path, minilm, monkeypatch) -> None:
    from fathom.cli import main

    monkeypatch.setenv("FATHOM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FATHOM_DATA", str(tmp_path))
    docs, qfile = make_qa_set(tmp_path / "qa", n_docs=12)
    runner = CliRunner()
    out = tmp_path / "p.json"
    args = ["portfolio", "build", "--docs", str(docs), "--questions", str(qfile), "--size", "3",
            "--top-n", "2", "--split", "all", "--out", str(out)]  # fmt: skip
    r = runner.invoke(main, args)
    assert r.exit_code == 0, r.output
    info = json.loads(out.read_text())
    # the questions under FATHOM_DATA are recorded as $FATHOM_DATA/…, no folder of this machine
    assert info["questions"] == "$FATHOM_DATA/qa/" + qfile.name
    assert len(info["members"]) == 3 and len(set(info["members"])) == 3
    assert info["coverage"] == sorted(info["coverage"])
    assert info["coverage"][-1] >= info["baselines"]["best_single"]["coverage"]
    assert info["coverage"][-1] <= info["baselines"]["all_members"]["coverage"] + 1e-9
    with np.load(out.with_suffix(".scores.npz")) as data:
        scores = data["scores"]
    names = [m["name"] for m in info["pool"]]
    assert coverage(scores, [names.index(m) for m in info["members"]]) == info["coverage"][-1]
    # A second build reuses the cached scores (same result, no re-scoring needed).
    r = runner.invoke(main, args)
    assert r.exit_code == 0 and json.loads(out.read_text())["members"] == info["members"]
    r = runner.invoke(main, ["portfolio", "show", str(out)])
    assert r.exit_code == 0 and info["members"][0] in r.output and "best single member" in r.output
    # Held-out evaluation: the same questions here, so the numbers must match the build's.
    r = runner.invoke(
        main, ["portfolio", "eval", str(out), "--questions", str(qfile), "--split", "all",
               "--bootstrap", "200", "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    ev = json.loads(r.stdout)
    oracle = ev["coverage"]["portfolio, best member per question (oracle)"]
    assert oracle["mean"] == pytest.approx(info["coverage"][-1])
    gain = ev["differences"]["portfolio (oracle) − best single"]
    best = info["baselines"]["best_single"]["coverage"]
    assert gain["mean"] == pytest.approx(info["coverage"][-1] - best, abs=1e-6)
    assert gain["lo"] <= gain["mean"] <= gain["hi"]
    # The router chooses among the portfolio's members; at every ℓ below the portfolio's size
    # it is compared with a random ℓ members, and all members fused are reported.
    assert info["router"]["members"] == info["members"]
    for ell in (1, 2):
        for row in (f"router, top {ell} fused", f"random {ell} fused (expected)"):
            assert 0.0 <= ev["coverage"][row]["mean"] <= 1.0, row
        assert f"router − random at ℓ = {ell}" in ev["differences"]
    assert "all 3 members fused" in ev["coverage"]
    assert "top 3 by average, fused" in ev["coverage"]


def test_members_run_together_give_what_each_gives_alone(
    tmp_path: Path, minilm, monkeypatch
) -> None:
    from fathom.index.retrieve import CollectionRetriever

    monkeypatch.setenv("FATHOM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FATHOM_DATA", str(tmp_path))
    docs, qfile = make_qa_set(tmp_path / "qa", n_docs=12)
    cfg = load_config()
    coll = Collection.open(
        cfg, resolve_target(cfg, str(docs)), expect_embedder=embedder_id_for(cfg.embedder)
    )
    embedder = make_query_embedder(cfg.embedder, cfg.models_path())
    searcher = PoolSearcher(coll)
    for q in load_questions(qfile)[:5]:
        qvec = embedder.embed_query(q.question)
        together = searcher.run_many(list(DEFAULT_POOL), q.question, qvec, 5)
        for m in DEFAULT_POOL:
            if m.kind in ("dense", "bm25", "hybrid"):
                # The shared searches give what Fathom's own retriever gives for this config.
                alone = CollectionRetriever(
                    coll, embedder, mode=m.kind, fusion=m.params.get("fusion", "convex"),
                    dense_weight=m.params.get("dense_weight", 0.5),
                ).probe(q.question, 5, qvec=qvec)  # fmt: skip
                assert together[m.name] == [h.row for h in alone.hits], m.name
            else:
                assert together[m.name] == searcher.rows(m, q.question, qvec, 5), m.name
        # MMR re-orders the dense pool: same chunks as the dense top 50, not the dense order.
        mmr = together["dense-mmr"]
        assert set(mmr) <= set(coll.dense.search(qvec, 50)[1].tolist())
