"""bench/policy_eval.py: a policy row of a fathom eval run against the run's fixed budgets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench.policy_eval import evaluate, load_run


def _run(folder: Path, rows: list[tuple[str, str, float, float, int]]) -> Path:
    """A minimal eval folder: rows of (qid, strategy, answer recall, contains, context)."""
    folder.mkdir()
    strategies = list(dict.fromkeys(s for _, s, *_ in rows))
    (folder / "run.json").write_text(json.dumps({"strategies": strategies}))
    lines = [
        json.dumps(
            {
                "qid": q,
                "strategy": s,
                "metrics": {"answer_recall": r, "contains": c},
                "tokens": {"context": t, "context_read": t},
            }
        )
        for q, s, r, c, t in rows
    ]
    (folder / "log.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_a_policy_that_reads_deep_only_where_needed_saves(tmp_path: Path) -> None:
    # Four questions: two answered at k = 1, two only at k = 2 (100 tokens a chunk). The
    # policy reads 2 chunks only for the two that need them: fixed:2's recall at 150 tokens.
    rows = []
    for q, need in (("a", 1), ("b", 1), ("c", 2), ("d", 2)):
        rows += [
            (q, "fixed:1", float(need == 1), float(need == 1), 100),
            (q, "fixed:2", 1.0, 1.0, 200),
            (q, "forest", 1.0, 1.0, 100 * need),
        ]
    res = evaluate(load_run(_run(tmp_path / "run", rows), "contains"))
    forest = res["policies"]["forest"]
    assert forest["recall"] == 1.0 and forest["tokens"] == 150
    assert forest["saving"] == pytest.approx(0.25)  # F(1.0) = 200 tokens
    assert forest["d_best"] == 0.0 and forest["d_quality"] == pytest.approx(0.25)


def test_a_policy_above_every_fixed_budget_has_no_saving(tmp_path: Path) -> None:
    rows = [
        ("a", "fixed:1", 0.0, 0.0, 100),
        ("b", "fixed:1", 1.0, 1.0, 100),
        ("a", "cascade", 1.0, 1.0, 300),
        ("b", "cascade", 1.0, 1.0, 100),
    ]
    res = evaluate(load_run(_run(tmp_path / "run", rows), "contains"))
    c = res["policies"]["cascade"]
    assert c["status"] == "above frontier" and c["saving_ci"] is None and c["d_best"] == 0.5
