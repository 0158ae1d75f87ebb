"""bench/policy_pair.py: two strategies of one fathom eval run, paired question by question."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench.policy_pair import compare, main


def _row(qid: str, strategy: str, recall: float, read: int, prompt: int, ms: float, k: int):
    return {
        "qid": qid,
        "strategy": strategy,
        "k": k,
        "metrics": {"answer_recall": recall, "f1": None},
        "tokens": {"context": read, "context_read": read, "prompt": prompt},
        "stages_ms": {"generate": ms / 2},
        "total_ms": ms,
    }


def _run(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir()
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    (folder / "run.json").write_text(json.dumps({"strategies": strategies, "generator": {}}))
    (folder / "log.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def test_the_differences_are_paired_per_question_and_only_over_shared_questions(
    tmp_path: Path,
) -> None:
    rows = []
    for i in range(20):
        rows.append(_row(f"q{i}", "forest", 1.0, 800, 1000, 4000.0, 4))
        # The cascade reads half the sources, sends more prompt (two rounds), misses q0 and q1.
        rows.append(_row(f"q{i}", "cascade", 0.0 if i < 2 else 1.0, 400, 1300, 3000.0, 2))
    rows.append(_row("only-forest", "forest", 0.0, 5000, 9000, 90000.0, 20))
    out = compare(_run(tmp_path / "run", rows), "forest", "cascade")
    m = out["measures"]
    assert out["n"] == 20
    assert m["context tokens read"]["diff"] == pytest.approx(-400)
    assert m["context tokens read"]["diff_ci"] == pytest.approx([-400, -400])
    assert m["prompt tokens sent"]["diff"] == pytest.approx(300)
    assert m["seconds end to end"]["diff"] == pytest.approx(-1.0)
    assert m["seconds generating"]["ratio"] == pytest.approx(0.75)
    assert m["answer_recall"]["diff"] == pytest.approx(-0.1)
    lo, hi = m["answer_recall"]["diff_ci"]
    assert lo < -0.1 < hi <= 0
    assert "f1" not in m  # a metric the run did not judge is left out


def test_no_shared_question_is_an_error(tmp_path: Path) -> None:
    rows = [_row("a", "forest", 1, 1, 1, 1.0, 1), _row("b", "cascade", 1, 1, 1, 1.0, 1)]
    with pytest.raises(SystemExit, match="no question answered by both"):
        main(["--run", str(_run(tmp_path / "run", rows)), "--out", str(tmp_path / "out")])
