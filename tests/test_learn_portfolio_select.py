"""Greedy portfolio selection: within (1 − 1/e) of exhaustive search, diminishing gains, and
better than picking the members with the best average when they overlap."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from fathom.core.errors import ConfigError
from fathom.learn.portfolio_select import (
    GREEDY_BOUND,
    coverage,
    exhaustive_portfolio,
    greedy_portfolio,
    top_k_by_average,
)


def _pools(seed: int):
    """Random score matrices of pools of 2–10 members: binary (recall of one gold document),
    fractional (recall of several), and correlated (members that are variations of each other)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    m = int(rng.integers(2, 11))
    yield (rng.random((n, m)) < rng.random(m)).astype(float)
    yield rng.integers(0, 5, size=(n, m)) / 4.0
    base = rng.random((n, 1))
    yield np.clip(base + 0.3 * rng.standard_normal((n, m)), 0, 1)


@pytest.mark.parametrize("seed", range(40))
def test_greedy_is_within_one_minus_one_over_e_of_exhaustive_search(seed: int) -> None:
    for scores in _pools(seed):
        for size in range(1, scores.shape[1] + 1):
            greedy = greedy_portfolio(scores, size)
            best = exhaustive_portfolio(scores, size)
            assert greedy.value <= best.value + 1e-12
            assert greedy.value >= GREEDY_BOUND * best.value - 1e-12
            assert greedy.value == pytest.approx(coverage(scores, greedy.members))
            # Monotone and submodular: coverage never falls, gains never grow.
            assert all(b >= a - 1e-12 for a, b in itertools.pairwise(greedy.coverage))
            assert all(b <= a + 1e-12 for a, b in itertools.pairwise(greedy.gains))
            assert len(set(greedy.members)) == size


def test_greedy_finds_the_optimum_on_a_classic_overlap_case() -> None:
    # Members 0 and 1 are the best on average but serve the same questions; member 2 serves the
    # questions they miss. Top-2-by-average covers 60 %, the greedy pair 100 %.
    scores = np.array(
        [[1, 1, 0], [1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1], [1, 1, 0]], dtype=float
    )
    assert top_k_by_average(scores, 2).members == (0, 1)
    assert top_k_by_average(scores, 2).value == pytest.approx(4 / 6)
    greedy = greedy_portfolio(scores, 2)
    assert greedy.members == (0, 2) and greedy.value == 1.0
    assert greedy.gains == pytest.approx((4 / 6, 2 / 6))
    assert exhaustive_portfolio(scores, 2).value == 1.0


def test_bad_scores_and_sizes_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        greedy_portfolio(np.array([[0.5, 1.5]]), 1)
    with pytest.raises(ConfigError, match="between 1 and"):
        greedy_portfolio(np.ones((3, 2)), 3)
    with pytest.raises(ConfigError, match="too many"):
        exhaustive_portfolio(np.ones((2, 40)), 10)
