"""bench/policy_slo.py's deadline projection on a hand-made sweep whose times are exact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fathom.bench.policy_slo import deadline_projection
from fathom.router.sweep import Sweep


def _row(qid: str, k: int, answer: str, prompt: int, out: int) -> dict:
    generate = 100.0 + 2.0 * prompt + 10.0 * out  # exactly linear: the fit must recover it
    return {
        "qid": qid,
        "k": k,
        "answer": answer,
        "gold_answers": ["Paris"],
        "tokens": {"prompt": prompt, "completion": out},
        "stages_ms": {"rerank": 50.0, "generate": generate},
        "total_ms": 50.0 + generate,
    }


def test_answers_past_the_slo_are_cut_at_it(tmp_path: Path) -> None:
    rows = [
        _row("a", 0, "I think it is Paris", 40, 6),
        _row("a", 1, "Paris", 200, 2),
        _row("b", 0, "no idea", 40, 3),
        # Long: 30 completion tokens; the answer word comes last, after the deadline.
        _row("b", 1, " ".join(["well"] * 29 + ["Paris"]), 260, 30),
    ]
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    quality = np.array([[0.4, 1.0], [0.0, 0.07]])  # as the sweep scored them
    latency = np.array([[r["total_ms"] for r in rows[:2]], [r["total_ms"] for r in rows[2:]]])
    sweep = Sweep(
        run={"generator": {"model": "not-the-packaged-one.gguf"}},
        budgets=(0, 1),
        qids=["a", "b"],
        query_types=["factual", "factual"],
        features=np.zeros((2, 1)),
        quality=quality,
        tokens=np.zeros((2, 2)),
        latency=latency,
    )
    slo = 800.0  # b at k = 1 takes 50 + 100 + 520 + 300 = 970 ms; every other row fits
    capped, fit = deadline_projection(str(tmp_path), sweep, slo)
    assert abs(fit["ms_per_completion_token"] - 10.0) < 1e-6 and fit["r2"] > 0.999
    assert fit["rows_cut"] == 1
    # Rows within the SLO are untouched.
    assert np.array_equal(capped.quality[0], quality[0])
    assert np.array_equal(capped.latency[0], latency[0])
    assert capped.quality[1, 0] == quality[1, 0] and capped.latency[1, 0] == latency[1, 0]
    # The cut row keeps the 13 tokens that fit (800 − 670 = 130 ms): "Paris" is lost.
    assert capped.latency[1, 1] == pytest.approx(800.0) and capped.latency[1, 1] <= slo + 1e-6
    assert capped.quality[1, 1] == 0.0


def test_an_answer_cut_to_nothing_is_not_an_abstention(tmp_path: Path) -> None:
    """On an unanswerable question f1("", []) is 1 (an abstention): a cut that delivers nothing
    must score 0, while an abstention delivered before the deadline keeps its credit."""
    rows = [
        {**_row("u", 0, "Paris is the capital", 40, 4), "gold_answers": []},
        # Past the SLO before its first token: nothing is delivered.
        {**_row("u", 1, "Paris is the capital of France", 400, 6), "gold_answers": []},
        {**_row("v", 0, "I don't know", 40, 3), "gold_answers": []},
        # Cut after "I don't know": the abstention reached the user in time.
        {**_row("v", 1, "I don't know, the sources do not say", 325, 40), "gold_answers": []},
    ]
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    quality = np.array([[0.0, 0.0], [1.0, 1.0]])
    latency = np.array([[r["total_ms"] for r in rows[:2]], [r["total_ms"] for r in rows[2:]]])
    sweep = Sweep(
        run={"generator": {"model": "not-the-packaged-one.gguf"}},
        budgets=(0, 1),
        qids=["u", "v"],
        query_types=["factual", "factual"],
        features=np.zeros((2, 1)),
        quality=quality,
        tokens=np.zeros((2, 2)),
        latency=latency,
    )
    # u at k = 1: 50 + 100 + 800 = 950 ms before any token; v at k = 1 has 150 ms left for
    # 15 of its 40 tokens, 3 of its 8 words.
    capped, fit = deadline_projection(str(tmp_path), sweep, 950.0)
    assert fit["rows_cut"] == 2
    assert capped.quality[0, 1] == 0.0  # not credited as an abstention
    assert capped.quality[1, 1] == 1.0
