"""The utility router: priors per query type from a sweep, presets trading quality for latency
and tokens, JSON persistence, and its place among eval strategies."""

from __future__ import annotations

import numpy as np
import pytest
from fathom.bench.support.hits import make_hit
from fathom.core.base import DepthQuery, Probe
from fathom.core.errors import ConfigError, FathomError
from fathom.evaluation.strategies import make_policy, parse_strategy
from fathom.learn.reinforce import train_reinforce
from fathom.learn.utility import fit_utility
from fathom.router.sweep import Sweep
from fathom.router.utility import UtilityPolicy

BUDGETS = (0, 1, 2, 5, 12)


def sweep() -> Sweep:
    """Factual questions are answered at k = 2; multi-hop ones need k = 12."""
    n = 60
    types = ["factual"] * 40 + ["multi_hop"] * 20
    quality = np.zeros((n, len(BUDGETS)), dtype=np.float32)
    quality[:40, 2:] = 1.0
    quality[40:, 4] = 1.0
    quality[40:, 3] = 0.5
    tokens = np.tile(np.array([0, 120, 240, 600, 1400], dtype=np.float32), (n, 1))
    latency = np.tile(np.array([50, 60, 70, 100, 200], dtype=np.float32), (n, 1))
    return Sweep({"judge": "recall"}, BUDGETS, [str(i) for i in range(n)], types,
                 np.zeros((n, 3), np.float32), quality, tokens, latency, tokens + 90)  # fmt: skip


def probe() -> Probe:
    return Probe("q", tuple(make_hit(i, f"text {i}") for i in range(1, 21)), {})


def test_priors_by_type_and_presets_shift_the_choice(tmp_path) -> None:
    bundles = {"skip": 0, "light": 2, "medium": 5, "heavy": 12}
    pol = fit_utility(sweep(), bundles, preset="balanced")
    assert pol.priors["factual"]["light"]["quality"] == pytest.approx(1.0)
    assert pol.priors["multi_hop"]["heavy"]["quality"] == pytest.approx(1.0)
    assert (
        pol.decide(DepthQuery("q", probe(), "factual")).k == 2
    )  # cheapest bundle with full quality
    assert pol.decide(DepthQuery("q", probe(), "multi_hop")).k == 12  # the depth it needs
    # Pure quality: ties go to the smaller budget; a heavy cost weight gives up multi-hop depth.
    assert (
        fit_utility(sweep(), bundles, "quality").decide(DepthQuery("q", probe(), "multi_hop")).k
        == 12
    )
    cost = fit_utility(sweep(), bundles, "cost")
    u = cost.utilities("multi_hop")
    assert u["heavy"] < fit_utility(sweep(), bundles, "quality").utilities("multi_hop")["heavy"]
    # Unknown types fall back to the pooled priors.
    d = pol.decide(DepthQuery("q", probe(), "summarization"))
    assert "all types" in d.reason and set(d.scores) == {"u_skip", "u_light", "u_medium", "u_heavy"}
    # JSON round trip, preset overridable at load.
    path = pol.save(tmp_path / "u.json")
    again = UtilityPolicy.load(path, preset="latency")
    assert again.priors == pol.priors and again.preset == "latency"
    with pytest.raises(ConfigError):
        UtilityPolicy.load(path, preset="fastest")
    with pytest.raises(FathomError):
        fit_utility(sweep(), {"odd": 3})


def test_eval_strategy_spec_loads_the_file(tmp_path) -> None:
    path = fit_utility(sweep()).save(tmp_path / "u.json")
    spec = parse_strategy(f"utility:{path}@cost")
    assert spec.kind == "utility" and spec.preset == "cost"
    policy, k = make_policy(spec)
    assert k is None and policy.preset == "cost" and policy.name == spec.name


def test_load_policy_dispatches_on_the_file(tmp_path) -> None:
    from fathom.learn.forest import fit_forest
    from fathom.router.forest import ForestPolicy
    from fathom.router.registry import load_policy
    from fathom.router.reinforce import ReinforcePolicy

    util = fit_utility(sweep()).save(tmp_path / "u.json")
    assert isinstance(load_policy(util), UtilityPolicy)
    with pytest.raises(FathomError):
        load_policy(tmp_path / "missing.npz")
    s = sweep()
    from fathom.router.features import FEATURE_NAMES

    s.features = np.zeros((len(s.qids), len(FEATURE_NAMES)), np.float32)
    rl = train_reinforce(s, np.zeros((len(s.qids), 8), np.float32), epochs=1)
    assert isinstance(load_policy(rl.save(tmp_path / "r.safetensors")), ReinforcePolicy)
    labels = np.zeros(len(s.qids), dtype=int)
    labels[:10] = 2
    forest = fit_forest(s.features, labels, BUDGETS, FEATURE_NAMES, n_trees=2)
    assert isinstance(load_policy(forest.save(tmp_path / "f.npz")), ForestPolicy)
