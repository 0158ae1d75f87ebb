"""bench/answer_kinds.py: the summary of the added time by kind."""

from __future__ import annotations

from fathom.bench.answer_kinds import markdown, summarise


def test_summary_by_kind_and_overall() -> None:
    rows = [
        {"kind": "list", "added_ms": 1.0, "reader_ms": 100.0},
        {"kind": "list", "added_ms": 3.0, "reader_ms": 120.0},
        {"kind": "count", "added_ms": 2.0, "reader_ms": 90.0},
    ]
    s = summarise(rows)
    assert list(s) == ["all", "count", "list"]
    assert s["all"]["n"] == 3 and s["all"]["added_ms"]["p50"] == 2.0
    assert s["list"]["added_ms"]["p50"] == 2.0 and s["count"]["reader_ms"]["p50"] == 90.0
    md = markdown(
        {
            "command": "python bench/answer_kinds.py --home DIR",
            "machine": {"cpu": "CPU", "cpus": 2, "memory_gb": 24},
            "split": "test",
            "rows": rows,
            "summary": s,
        }
    )
    assert "| list | 2 | 2.00 |" in md and "3 text-only questions" in md
