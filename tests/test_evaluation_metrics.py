"""Aggregates of per-query metrics: bootstrap coverage on known distributions, paired
comparisons, percentiles, seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fathom.evaluation import metrics
from fathom.evaluation.metrics import (
    bootstrap_ci,
    cluster_bootstrap_ci,
    cluster_resamples,
    document_ci,
    document_of,
    paired_compare,
    percentiles,
    stable_seed,
)

REPO = Path(__file__).resolve().parent.parent

# --- aggregates ----------------------------------------------------------------------------------


def test_bootstrap_small_cases() -> None:
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([0.25]) == {"mean": 0.25, "lo": 0.25, "hi": 0.25, "n": 1}
    ci = bootstrap_ci([1.0, 1.0, 1.0])
    assert ci == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 3}


def test_bootstrap_is_seeded_and_chunking_does_not_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(5).exponential(size=37)
    a = bootstrap_ci(x, n_boot=500, seed=3)
    assert a == bootstrap_ci(list(x), n_boot=500, seed=3)
    assert a != bootstrap_ci(x, n_boot=500, seed=4)
    assert a["lo"] < a["mean"] < a["hi"]
    assert a["mean"] == pytest.approx(float(np.mean(x)))
    monkeypatch.setattr(metrics, "_BOOT_CHUNK", 100)  # 2 resamples per chunk
    assert bootstrap_ci(x, n_boot=500, seed=3) == a


@pytest.mark.parametrize(
    ("draw", "true_mean"),
    [
        (lambda rng: rng.exponential(size=60), 1.0),
        (lambda rng: (rng.random(60) < 0.3).astype(float), 0.3),
    ],
    ids=["exponential", "bernoulli0.3"],
)
def test_bootstrap_95_covers_the_true_mean(draw, true_mean: float) -> None:
    rng = np.random.default_rng(1000)
    reps = 400
    covered = 0
    for rep in range(reps):
        ci = bootstrap_ci(draw(rng), n_boot=1000, seed=rep)
        covered += ci["lo"] <= true_mean <= ci["hi"]
    assert 0.90 <= covered / reps <= 0.98


def test_cluster_bootstrap_small_cases() -> None:
    assert cluster_bootstrap_ci([], []) is None
    one = cluster_bootstrap_ci([0.0, 1.0, 1.0], ["a", "a", "a"])
    assert one == {"mean": 2 / 3, "lo": 2 / 3, "hi": 2 / 3, "n": 3, "clusters": 1}
    with pytest.raises(ValueError, match="3 values against 2 groups"):
        cluster_bootstrap_ci([0.0, 1.0, 1.0], ["a", "b"])


def test_cluster_bootstrap_with_one_question_per_document_is_the_question_bootstrap() -> None:
    x = np.random.default_rng(7).exponential(size=53)
    by_question = bootstrap_ci(x, n_boot=700, seed=2)
    by_document = cluster_bootstrap_ci(x, [f"d{i}" for i in range(53)], n_boot=700, seed=2)
    assert by_document["clusters"] == 53
    for key in ("mean", "lo", "hi", "n"):
        assert by_document[key] == pytest.approx(by_question[key], rel=1e-12)


def test_copies_of_a_question_inside_its_document_do_not_narrow_the_interval() -> None:
    """Each document's question asked five times over is no more evidence than once: the
    document bootstrap keeps the interval, the question bootstrap narrows it."""
    x = np.random.default_rng(11).random(40)
    docs = [f"d{i}" for i in range(40)]
    once = cluster_bootstrap_ci(x, docs, n_boot=1000, seed=0)
    five = cluster_bootstrap_ci(np.repeat(x, 5), np.repeat(docs, 5).tolist(), n_boot=1000, seed=0)
    assert five["n"] == 200 and five["clusters"] == 40
    assert five["hi"] - five["lo"] == pytest.approx(once["hi"] - once["lo"], rel=1e-9)
    naive = bootstrap_ci(np.repeat(x, 5), n_boot=1000, seed=0)
    assert naive["hi"] - naive["lo"] < 0.6 * (five["hi"] - five["lo"])


def test_cluster_bootstrap_weighs_documents_by_their_questions_and_is_seeded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 9, size=30)
    groups = [f"d{i}" for i, s in enumerate(sizes) for _ in range(s)]
    x = rng.random(len(groups))
    a = cluster_bootstrap_ci(x, groups, n_boot=500, seed=4)
    assert a["mean"] == pytest.approx(float(x.mean()))  # a question mean, not a mean of documents
    assert a["lo"] < a["mean"] < a["hi"]
    assert a == cluster_bootstrap_ci(list(x), groups, n_boot=500, seed=4)
    assert a != cluster_bootstrap_ci(x, groups, n_boot=500, seed=5)
    monkeypatch.setattr(metrics, "_BOOT_CHUNK", 60)  # 2 resamples per chunk
    assert cluster_bootstrap_ci(x, groups, n_boot=500, seed=4) == a


def test_cluster_resamples_draw_as_the_interval_does() -> None:
    groups = ["a", "b", "a", "c", "b", "a"]
    x = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 0.0])
    resamples = cluster_resamples(groups, n_boot=300, seed=9)
    assert len(resamples) == 300
    for r in resamples[:20]:  # whole documents: every question of a drawn one
        for d in set(np.asarray(groups)[r]):
            drawn = sum(np.asarray(groups)[r] == d)
            assert drawn % groups.count(d) == 0
    means = np.array([x[r].mean() for r in resamples])
    ci = cluster_bootstrap_ci(x, groups, n_boot=300, seed=9)
    assert np.quantile(means, [0.025, 0.975]) == pytest.approx([ci["lo"], ci["hi"]])
    assert cluster_resamples([], n_boot=10) == []


def test_document_of_an_eval_row() -> None:
    assert document_of({"qid": "q1", "gold_doc_ids": ["d2", "d1"]}) == "d2"
    assert document_of({"qid": "q1", "gold_doc_ids": []}) == "q1"


def test_document_ci_of_eval_rows_skips_rows_without_the_value() -> None:
    rows = [
        {"qid": f"q{i}", "gold_doc_ids": [f"d{i % 4}"], "f1": None if i == 3 else i / 10}
        for i in range(12)
    ]
    kept = [r for r in rows if r["f1"] is not None]
    expected = cluster_bootstrap_ci([r["f1"] for r in kept], [document_of(r) for r in kept], 300, 1)
    assert document_ci(rows, lambda r: r["f1"], n_boot=300, seed=1) == expected
    assert expected["n"] == 11 and expected["clusters"] == 4


def test_paired_compare() -> None:
    a = [1.0, 0.0, 0.5, 0.5 + 1e-12, 0.7]
    b = [0.0, 1.0, 0.5, 0.5, 0.2]
    assert paired_compare(a, b) == {"win": 0.4, "tie": 0.4, "loss": 0.2, "n": 5}
    assert paired_compare([], []) is None
    with pytest.raises(ValueError):
        paired_compare([1.0], [])


def test_percentiles_linear() -> None:
    # linear interpolation on [1, 2, 3, 4]: position (n-1)·q = 3q
    assert percentiles([4.0, 1.0, 3.0, 2.0]) == pytest.approx(
        {"mean": 2.5, "p50": 2.5, "p95": 3.85, "p99": 3.97}
    )
    assert list(percentiles([1.0])) == ["mean", "p50", "p95", "p99"]
    assert percentiles([1.0, 3.0], qs=(25,)) == {"mean": 2.0, "p25": 1.5}
    assert percentiles([]) is None


def test_stable_seed_is_the_same_in_every_process() -> None:
    code = "from fathom.evaluation.metrics import stable_seed; print(stable_seed(7, 'gap/quality'))"
    seen = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        seen.add(int(out.stdout))
    assert seen == {stable_seed(7, "gap/quality")}
    assert stable_seed(7, "gap/quality") != stable_seed(7, "gap/f1")
    assert stable_seed(7, "gap/quality") != stable_seed(8, "gap/quality")
    assert 0 <= stable_seed(0, "") < 2**64
