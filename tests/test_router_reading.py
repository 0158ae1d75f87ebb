"""A depth policy that reads the passages: the reader's readings of the probe's candidates as
features (``router.features.reading_features``), taken once before the decision and reused by
the reranking, logged by the sweep (also ``--context-only``, which generates nothing), trained
on, and standing in with their training medians when the reader cannot run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.core.base import Chunk, DepthQuery, Hit, Probe
from fathom.learn.forest import fit_forest
from fathom.router.features import FEATURE_NAMES, READING_NAMES, reading_features
from fathom.router.forest import ForestPolicy

BUDGETS = (0, 1, 2, 4)


def _hit(i: int, text: str) -> Hit:
    chunk = Chunk(f"c{i}", "d", text, 0, len(text), 1, 1, "", len(text.split()), i)
    return Hit(chunk, 1.0 / (i + 1), ranks={"fused": i + 1})


def _read(hit: Hit, reading: float, margin: float) -> Hit:
    return dataclasses.replace(hit, scores={**hit.scores, "reading": reading, "margin": margin})


def test_reading_features_say_how_sure_the_reader_is_and_where_the_answer_sat() -> None:
    hits = tuple(_hit(i, f"passage {i}") for i in range(6))
    probe = Probe("q", hits)
    # The reader found one answer, in the probe's fifth candidate, and nothing elsewhere.
    sure = (_read(hits[4], 9.0, 4.0), *(_read(h, -6.0, -5.0) for h in hits[:4]))
    f = dict(zip(READING_NAMES, reading_features(sure, probe), strict=True))
    assert f["read_r1"] == 9.0 and f["read_gap12"] == 15.0 and f["read_p1"] > 0.99
    assert f["margin_r1"] == f["margin_max"] == 4.0 and f["answers_read"] == 1
    assert f["read_best_rank"] == pytest.approx(np.log1p(4))
    assert f["read_first_answer_rank"] == pytest.approx(np.log1p(4))
    # The reader's first three are the probe's fifth, first and second.
    assert f["read_overlap@3"] == pytest.approx(2 / 3) and f["read_n"] == 5
    # Unsure: every candidate reads alike and none beats no-answer.
    flat = tuple(_read(h, 0.5, -1.0) for h in hits)
    g = dict(zip(READING_NAMES, reading_features(flat, probe), strict=True))
    assert g["read_gap12"] == 0.0 and g["read_entropy"] == pytest.approx(1.0)
    assert g["answers_read"] == 0 and g["read_first_answer_rank"] == pytest.approx(np.log1p(40))
    assert g["read_overlap@3"] == 1.0
    assert reading_features((), probe) == [0.0] * len(READING_NAMES)


def test_the_reader_reranker_leaves_its_readings_on_the_hits() -> None:
    from fathom.stages.rerank import ReaderReranker

    texts = [
        "The library opened in 1911 on Elm Street.",
        "Aldo Daliason kept his workshop in the town of Mirel until his death.",
        "Bread is baked from flour, water and yeast.",
    ]
    hits = [_hit(i, t) for i, t in enumerate(texts)]
    out = ReaderReranker().load().rerank("In which town did Aldo Daliason have a workshop?", hits)
    assert out[0].chunk.chunk_id == "c1"
    assert all({"reading", "margin", "rerank"} <= set(h.scores) for h in out)
    readings = [h.scores["reading"] for h in out]
    assert readings[0] == max(readings) and out[0].scores["margin"] > out[-1].scores["margin"]


def _reading_forest(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    names = FEATURE_NAMES + READING_NAMES
    # Only the first candidate's span margin varies, and the label follows it: the policy
    # must read to decide.
    x = np.zeros((300, len(names)), dtype=np.float32)
    margin = x[:, names.index("margin_r1")] = rng.normal(size=300)
    y = np.where(margin > 0, 1, 3)
    policy = fit_forest(
        x, y, BUDGETS, names, n_trees=10, meta={"reading_medians": [0.0] * len(READING_NAMES)}
    )
    return policy.save(tmp_path / "reads.npz")


def test_a_forest_trained_on_readings_reads_before_it_decides(tmp_path) -> None:
    path = _reading_forest(tmp_path)
    policy = ForestPolicy.load(path)
    assert policy.reads_passages and policy.feature_names[-len(READING_NAMES) :] == READING_NAMES
    hits = tuple(_hit(i, f"passage {i}") for i in range(6))
    probe = Probe("Who built it?", hits)
    answered = tuple(_read(h, 5.0 - i, 3.0 if i == 0 else -3.0) for i, h in enumerate(hits))
    unanswered = tuple(_read(h, -1.0, -4.0) for h in hits)
    shallow = policy.decide(DepthQuery("Who built it?", probe, "factual", readings=answered))
    deep = policy.decide(DepthQuery("Who built it?", probe, "factual", readings=unanswered))
    assert (shallow.k, deep.k) == (1, 4)
    # Without readings (the reader could not run) it decides on their training medians, and
    # says so.
    blind = policy.decide(DepthQuery("Who built it?", probe, "factual", readings=None))
    assert "the reader could not run" in blind.reason
    # A policy kind that cannot read refuses the reading schema.
    from fathom.core.errors import FathomError
    from fathom.router.features import read_policy_meta

    with pytest.raises(FathomError, match="feature schema"):
        read_policy_meta(path, "forest", 2, ".npz")


@pytest.fixture
def qa(tmp_path, monkeypatch):
    monkeypatch.setenv("FATHOM_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return make_qa_set(tmp_path / "qa", n_docs=12)


def _sweep(runner, docs, questions, out: str, *extra: str):
    from fathom.cli import main

    r = runner.invoke(
        main,
        ["policy", "sweep", "--docs", str(docs), "--questions", str(questions), "--generator",
         "extractive", "--judge", "recall", "--budgets", "0,1,2,4", "--split", "all", "--limit",
         "24", "--out", out, *extra],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in Path(out, "log.jsonl").read_text().splitlines()]
    return {(row["qid"], row["strategy"]): row for row in rows}


def test_a_context_only_sweep_scores_the_same_contexts_without_answering(qa) -> None:
    docs, questions = qa
    runner = CliRunner()
    answered = _sweep(runner, docs, questions, "answered")
    bare = _sweep(runner, docs, questions, "bare", "--context-only")
    assert answered.keys() == bare.keys()
    for key, row in answered.items():
        other = bare[key]
        assert other["chunk_ids"] == row["chunk_ids"], key
        assert other["metrics"]["answer_recall"] == row["metrics"]["answer_recall"]
        assert other["tokens"]["context"] == row["tokens"]["context"]
        assert other["reading"] == pytest.approx(row["reading"])
        assert len(row["reading"]) == len(READING_NAMES)
        assert other["answer"] == ""
    assert any(row["answer"] for row in answered.values())
    # No answer, no stated confidence: a cascade has nothing to climb on in such a sweep.
    from fathom.learn.sweep import load_sweep

    assert np.isnan(load_sweep("bare").confidence).all()
    assert np.isfinite(load_sweep("answered").confidence).any()
    # Only judges that read the context alone can skip the answers.
    from fathom.cli import main

    r = runner.invoke(
        main,
        ["policy", "sweep", "--docs", str(docs), "--questions", str(questions), "--judge",
         "contains", "--context-only", "--out", "no"],
    )  # fmt: skip
    assert r.exit_code != 0 and "--context-only" in r.output


def test_ask_with_a_reading_forest_reads_once_and_reranks_with_the_same_reading(
    qa, tmp_path, monkeypatch
) -> None:
    from fathom.cli import main

    docs, questions = qa
    runner = CliRunner()
    _sweep(runner, docs, questions, "sweep", "--context-only")
    r = runner.invoke(
        main, ["policy", "train", "--sweep", "sweep", "--trees", "5", "--out", "forest.npz"]
    )
    assert r.exit_code == 0, r.output
    meta = json.loads(Path("forest.json").read_text())
    assert meta["feature_names"] == list(FEATURE_NAMES + READING_NAMES)
    assert len(meta["reading_medians"]) == len(READING_NAMES)
    import fathom.stages.rerank as rerank

    calls = []
    real = rerank.ReaderReranker.read

    def counted(self, query, texts):
        calls.append(len(texts))
        return real(self, query, texts)

    monkeypatch.setattr(rerank.ReaderReranker, "read", counted)
    ask = ["ask", str(docs), "In which town did Aldo Daliason have a workshop?", "--generator",
           "extractive", "--policy", "forest.npz", "--json"]  # fmt: skip
    r = runner.invoke(main, ask)
    assert r.exit_code == 0, r.output
    trace = json.loads(r.stdout)["trace"]
    assert trace["decision"]["policy"] == "forest"
    # One reading of the candidates served the decision and the reranking.
    assert len(calls) == 1 and trace["reranker"] == "fathom-reader"
    # Reranking off: the reader still reads for the decision, charged to its own stage.
    calls.clear()
    r = runner.invoke(main, [*ask, "--no-rerank"])
    assert r.exit_code == 0, r.output
    trace = json.loads(r.stdout)["trace"]
    assert len(calls) == 1 and trace["reranker"] == "off" and "read" in trace["stages_ms"]
    # Forest trained without readings: no reading before the decision.
    r = runner.invoke(
        main,
        ["policy", "train", "--sweep", "sweep", "--trees", "5", "--no-reading", "--out",
         "probe.npz"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert not ForestPolicy.load("probe.npz").reads_passages
    calls.clear()
    ask[ask.index("forest.npz")] = "probe.npz"
    r = runner.invoke(main, [*ask, "--no-rerank"])
    assert r.exit_code == 0 and calls == []
    # The reader's files gone: the decision stands on the medians and says so.
    monkeypatch.setenv("FATHOM_READER_DIR", str(tmp_path / "nowhere"))
    ask[ask.index("probe.npz")] = "forest.npz"
    r = runner.invoke(main, [*ask, "--no-rerank"])
    assert r.exit_code == 0, r.output
    assert "the reader could not run" in json.loads(r.stdout)["trace"]["decision"]["reason"]
