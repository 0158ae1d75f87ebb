"""bench/policy_tradeoffs.py: the token saving against the fixed frontier and its interval."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from fathom.bench.policy_tradeoffs import ABOVE, AT_ZERO, MAX_UNDEFINED, _pct, saving, score

# Three questions, budgets 0 / 1 / 2 at 0 / 100 / 200 tokens; k = 0 already answers the first.
QUALITY = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1.0]])
TOKENS = np.array([[0, 100, 200]] * 3, dtype=float)


def _sweep(quality: np.ndarray, tokens: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(quality=quality, tokens=tokens, budgets=list(range(quality.shape[1])))


def _boot(n: int, size: int = 400, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(size, n))


@pytest.mark.parametrize(
    "choice",
    [
        [0, 0, 0],  # the none row itself: on the frontier at 0 tokens
        [1, 0, 0],  # q(none)'s quality, paying 33 tokens for it
    ],
)
def test_a_policy_at_or_below_k0_is_not_above_the_frontier(choice):
    r = score(_sweep(QUALITY, TOKENS), np.array(choice), _boot(3))
    assert np.isnan(r["saving"]) and r["saving_status"] == AT_ZERO
    assert r["saving_ci"] is None
    assert _pct(r["saving"], r["saving_ci"], r["saving_status"], r["saving_undefined"]) == AT_ZERO


def test_a_policy_above_the_best_fixed_budget_is_above_the_frontier():
    # Each question's best budget: 1.0 on both, above either fixed budget's 0.5.
    quality = np.array([[1, 0], [0, 1.0]])
    tokens = np.array([[100, 200]] * 2, dtype=float)
    r = score(_sweep(quality, tokens), np.array([0, 1]), _boot(2))
    assert np.isnan(r["saving"]) and r["saving_status"] == ABOVE
    assert r["saving_ci"] is None and r["saving_undefined"] > 0
    assert _pct(r["saving"], r["saving_ci"], r["saving_status"], r["saving_undefined"]) == ABOVE


def _near_best(frac: float) -> tuple[SimpleNamespace, np.ndarray, np.ndarray]:
    """A policy whose quality is close to the best fixed budget's: some resamples put it above."""
    rng = np.random.default_rng(0)
    n = 300
    u = rng.random(n)
    quality = (u[:, None] < np.array([0.0, 0.70, 0.85, 0.90])[None, :]).astype(float)
    flip = rng.random(n) < 0.05
    quality[flip, 3], quality[flip, 2] = 0, 1
    tokens = np.tile([0, 200, 400, 800.0], (n, 1))
    best = np.where(quality[:, 2] >= quality[:, 3], 2, 3)
    best = np.where(rng.random(n) < 0.5, best, 3)
    choice = np.where(np.random.default_rng(5).random(n) < frac, 2, best)
    return _sweep(quality, tokens), choice, _boot(n, 1000)


def test_the_saving_interval_reports_undefined_resamples_and_withholds_when_many():
    sweep, choice, boot = _near_best(0.5)
    r = score(sweep, choice, boot)
    sb = np.array([saving(sweep.quality, sweep.tokens, choice, b) for b in boot])
    share = float(np.isnan(sb).mean())
    assert np.isfinite(r["saving"]) and r["saving_status"] is None
    assert r["saving_undefined"] == pytest.approx(share) and share > MAX_UNDEFINED
    assert r["saving_ci"] is None  # an interval over the defined resamples would be biased
    assert "of resamples undefined" in _pct(
        r["saving"], r["saving_ci"], r["saving_status"], r["saving_undefined"]
    )


def test_the_saving_interval_is_given_when_few_resamples_are_undefined():
    sweep, choice, boot = _near_best(0.7)
    r = score(sweep, choice, boot)
    sb = np.array([saving(sweep.quality, sweep.tokens, choice, b) for b in boot])
    assert r["saving_undefined"] == pytest.approx(float(np.isnan(sb).mean()))
    assert 0 < r["saving_undefined"] <= MAX_UNDEFINED
    lo, hi = r["saving_ci"]
    assert lo <= r["saving"] <= hi
    assert [lo, hi] == pytest.approx(np.quantile(sb[np.isfinite(sb)], [0.025, 0.975]).tolist())


def test_a_point_estimate_that_is_undefined_gets_no_interval():
    # Above the frontier on the whole set, but defined on many resamples.
    sweep, choice, boot = _near_best(0.3)
    r = score(sweep, choice, boot)
    assert np.isnan(r["saving"]) and r["saving_status"] == ABOVE
    assert r["saving_ci"] is None and 0 < r["saving_undefined"] < 1


def test_against_kstar_is_paired_question_by_question():
    """Against k* (the top budget here): the quality given up and the share of its tokens not
    read, with intervals over questions and over documents."""
    r = score(_sweep(QUALITY, TOKENS), np.array([0, 0, 1]), _boot(3), [np.array([0, 1, 2])], 2)
    vs = r["vs_kstar"]
    assert vs["quality_delta"] == pytest.approx(-2 / 3)  # the 2nd and 3rd lose their answer
    assert vs["tokens_saved"] == pytest.approx(1 - (100 / 3) / 200)
    assert vs["documents"]["quality_delta_ci"] == pytest.approx([-2 / 3, -2 / 3])
    lo, hi = vs["quality_delta_ci"]
    assert -1.0 <= lo <= vs["quality_delta"] <= hi <= 0.0
    at_kstar = score(_sweep(QUALITY, TOKENS), np.array([2, 2, 2]), _boot(3), None, 2)
    assert at_kstar["vs_kstar"]["quality_delta"] == 0 and at_kstar["vs_kstar"]["tokens_saved"] == 0
