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
from fathom.evaluation.metrics import bootstrap_ci, paired_compare, percentiles, stable_seed

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
