"""Rule-based depth policies: fixed k, the largest-gap cut (Adaptive-k), the threshold gate."""

from __future__ import annotations

import dataclasses

import pytest
from fathom.bench.support.hits import make_hit
from fathom.core.base import DepthQuery, Probe
from fathom.core.errors import ConfigError
from fathom.router.depth import FixedDepth, ScoreGapDepth, ScoreThresholdDepth, top_similarity


def probe_with(dense: list[float], fused: list[float] | None = None) -> Probe:
    fused = fused or [1.0 / (i + 1) for i in range(len(dense))]
    hits = tuple(
        dataclasses.replace(make_hit(i + 1, f"text {i}"), score=f, scores={"dense": d})
        for i, (d, f) in enumerate(zip(dense, fused, strict=True))
    )
    return Probe(query="q", hits=hits, timings_ms={})


def test_fixed_depth_clips_to_the_hits() -> None:
    assert FixedDepth(3).decide(DepthQuery("q", probe_with([0.9, 0.8]), "factual")).k == 2
    assert FixedDepth(0).decide(DepthQuery("q", probe_with([0.9]), "factual")).k == 0
    with pytest.raises(ConfigError):
        FixedDepth(-1)


def test_gap_cuts_at_the_largest_similarity_gap() -> None:
    # sorted similarities 0.82 0.80 0.79 | 0.41 0.40: the largest gap follows rank 3
    d = ScoreGapDepth().decide(
        DepthQuery("q", probe_with([0.80, 0.82, 0.41, 0.79, 0.40]), "factual")
    )
    assert d.k == 3 and d.scores["gap"] == pytest.approx(0.79 - 0.41)
    # k_min keeps at least two even when the biggest gap is after the first
    d = ScoreGapDepth(2, 20).decide(DepthQuery("q", probe_with([0.9, 0.3, 0.29, 0.1]), "factual"))
    assert d.k == 3  # gaps from rank 2 on: 0.01, 0.19 → cut after rank 3
    # the dense scores, not the rank-only fused scores, decide
    d = ScoreGapDepth().decide(
        DepthQuery("q", probe_with([0.9, 0.2], fused=[0.5, 0.49]), "factual")
    )
    assert d.k == 1
    with pytest.raises(ConfigError):
        ScoreGapDepth(3, 2)


def test_threshold_gate_fits_a_percentile_and_gates() -> None:
    gate = ScoreThresholdDepth.fit([0.2, 0.4, 0.6, 0.8], 50, k=2)
    assert gate.threshold == pytest.approx(0.5) and gate.name == "threshold:p50:2"
    assert gate.decide(DepthQuery("q", probe_with([0.55, 0.5, 0.3]), "factual")).k == 2
    low = gate.decide(DepthQuery("q", probe_with([0.45, 0.3]), "factual"))
    assert low.k == 0 and "skipped" in low.reason and low.scores["top"] == pytest.approx(0.45)
    assert top_similarity(probe_with([])) == 0.0
    with pytest.raises(ConfigError):
        ScoreThresholdDepth.fit([], 50)
    with pytest.raises(ConfigError):
        ScoreThresholdDepth.fit([0.1], 120)
