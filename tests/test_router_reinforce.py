"""The REINFORCE depth controller: it learns to spend depth only where the reward pays for it,
saves to safetensors, reloads to the same probabilities, and trains deterministically."""

from __future__ import annotations

import numpy as np
import pytest
from fathom.core.errors import FathomError
from fathom.learn.reinforce import train_reinforce
from fathom.router.features import FEATURE_NAMES
from fathom.router.reinforce import ReinforcePolicy
from fathom.router.sweep import Sweep

BUDGETS = (0, 1, 4)


def synthetic(n: int = 256, seed: int = 0):
    """Easy questions are answered at k = 1, hard ones only at k = 4; the query vector says
    which is which."""
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.5
    qvecs = rng.normal(size=(n, 16)).astype(np.float32)
    qvecs[:, 0] = np.where(hard, 2.0, -2.0)
    quality = np.zeros((n, 3), dtype=np.float32)
    quality[~hard, 1:] = 1.0
    quality[hard, 2] = 1.0
    tokens = np.tile(np.array([0, 150, 600], dtype=np.float32), (n, 1))
    feats = rng.normal(size=(n, len(FEATURE_NAMES))).astype(np.float32)
    sweep = Sweep({"judge": "recall"}, BUDGETS, [str(i) for i in range(n)], ["factual"] * n,
                  feats, quality, tokens, np.ones_like(tokens))  # fmt: skip
    return sweep, qvecs, hard


def test_learns_to_go_deep_only_for_hard_questions(tmp_path) -> None:
    sweep, qvecs, hard = synthetic()
    policy = train_reinforce(
        sweep, qvecs, lam=0.3, epochs=40, seed=1, meta={"embedder": "minilm-test"}
    )
    choice = policy.proba(qvecs, sweep.features).argmax(axis=1)
    assert (choice[hard] == 2).mean() > 0.9  # hard: k = 4 (reward 1 − 0.18)
    assert (choice[~hard] == 1).mean() > 0.9  # easy: k = 1 (reward 1 − 0.045)
    curves = policy.meta["curves"]
    assert len(curves) == 40 and curves[-1]["reward"] > curves[0]["reward"]
    path = policy.save(tmp_path / "rl.safetensors")
    again = ReinforcePolicy.load(path)
    np.testing.assert_allclose(
        again.proba(qvecs, sweep.features), policy.proba(qvecs, sweep.features), atol=1e-6
    )
    with pytest.raises(FathomError, match="embedder"):
        ReinforcePolicy.load(path, expect_embedder="another-model")
    assert ReinforcePolicy.load(path, expect_embedder="minilm-test").budgets == BUDGETS


def test_training_is_deterministic_for_a_seed() -> None:
    sweep, qvecs, _ = synthetic(128)
    a = train_reinforce(sweep, qvecs, epochs=5, seed=3)
    b = train_reinforce(sweep, qvecs, epochs=5, seed=3)
    c = train_reinforce(sweep, qvecs, epochs=5, seed=4)
    assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
    assert not all(np.array_equal(a.weights[k], c.weights[k]) for k in a.weights)


def test_constant_features_are_neutral_at_ask_time() -> None:
    """A feature constant in training (no "why" question there, or a large constant whose float32
    std is rounding noise) gets std 1: a "why" question at ask time moves its input by 1, not by
    10⁶ (``std + 1e-6`` sent the policy to one extreme budget)."""
    sweep, qvecs, _ = synthetic(128)
    j = FEATURE_NAMES.index("wh_why")
    big = 1 if j == 0 else 0
    sweep.features[:, j] = 0.0
    sweep.features[:, big] = 1000.1
    policy = train_reinforce(sweep, qvecs, epochs=3, seed=1)
    assert policy.std[j] == policy.std[big] == 1.0
    assert policy.mean[j] == 0.0 and policy.mean[big] == np.float32(1000.1)
    varying = [i for i in range(len(FEATURE_NAMES)) if i not in (j, big)]
    np.testing.assert_allclose(
        policy.std[varying], sweep.features[:, varying].std(axis=0), rtol=1e-5
    )
    assert policy.mean.dtype == policy.std.dtype == np.float32
    x = np.array(sweep.features[:8])
    before = policy.proba(qvecs[:8], x)
    x[:, j] = 1.0
    x[:, big] = 1001.1
    after = policy.proba(qvecs[:8], x)
    assert np.abs(after - before).max() < 0.1
    assert after.max() < 0.9  # no collapse onto one budget


def test_loading_keeps_a_saved_tiny_std(tmp_path) -> None:
    """Policies saved before the std floor keep their stored standardisation when loaded."""
    sweep, qvecs, _ = synthetic(64)
    policy = train_reinforce(sweep, qvecs, epochs=1, seed=0)
    policy.std[0] = 1e-6  # as ``std + 1e-6`` saved it for a constant feature
    again = ReinforcePolicy.load(policy.save(tmp_path / "old.safetensors"))
    np.testing.assert_array_equal(again.std, policy.std)
    np.testing.assert_array_equal(again.mean, policy.mean)
