"""The portfolio router: per-member ridge regressions choose which members run; deterministic,
saved as JSON, and refuses inputs of another kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fathom.core.errors import ConfigError
from fathom.learn.portfolio_build import train_router
from fathom.learn.portfolio_runs import fuse_rows
from fathom.router.portfolio.router import PortfolioRouter

SCHEMA = {"embedder": "e", "dim": 2, "probe_features": 3, "n_probe_features": 3}


def _data(n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    # Member "a" serves questions with x0 > 0, "b" those with x0 < 0, "c" a third of all.
    s = np.stack([(x[:, 0] > 0), (x[:, 0] < 0), rng.random(n) < 0.33], axis=1).astype(float)
    return x, s


def test_router_learns_which_member_serves_a_question() -> None:
    x, s = _data()
    router = train_router(x[:300], s[:300], ["a", "b", "c"], SCHEMA)
    chosen = router.choose(x[300:], 1)
    got = np.array([s[300 + i, ["a", "b", "c"].index(c[0])] for i, c in enumerate(chosen)])
    random_choice = s[300:].mean(axis=1)
    assert got.mean() > 0.9 > random_choice.mean() + 0.4
    assert [len(c) for c in router.choose(x[:3], 2)] == [2, 2, 2]
    with pytest.raises(ConfigError, match="ell"):
        router.choose(x[:3], 4)


def test_router_is_deterministic_and_round_trips_through_json() -> None:
    x, s = _data()
    a = train_router(x, s, ["a", "b", "c"], SCHEMA)
    b = train_router(x, s, ["a", "b", "c"], SCHEMA)
    assert np.array_equal(a.coef, b.coef) and a.alpha == b.alpha
    back = PortfolioRouter.from_dict(json.loads(json.dumps(a.to_dict())), expect_schema=SCHEMA)
    assert np.allclose(back.predict(x[:20]), a.predict(x[:20]))
    with pytest.raises(ConfigError, match="another embedder"):
        PortfolioRouter.from_dict(a.to_dict(), expect_schema={**SCHEMA, "embedder": "other"})
    with pytest.raises(ConfigError, match="inputs"):
        a.predict(np.zeros((1, 4)))


def test_ties_keep_the_greedy_order() -> None:
    x = np.random.default_rng(1).normal(size=(50, 3))
    s = np.ones((50, 3))  # nothing to learn: every member serves every question
    router = train_router(x, s, ["first", "second", "third"], SCHEMA)
    assert {tuple(c) for c in router.choose(x, 2)} == {("first", "second")}


def test_fuse_rows_is_reciprocal_rank_fusion() -> None:
    assert fuse_rows([[1, 2, 3], [3, 4]], 10) == [3, 1, 2, 4]  # 3: 1/63 + 1/61 wins
    assert fuse_rows([[5, 6]], 1) == [5]
    assert fuse_rows([[2, 1], [1, 2]], 2) == [1, 2]  # equal sums: lower row first
