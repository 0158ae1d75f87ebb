"""Evaluation plots and report, on a synthetic run built by hand to docs/eval-format.md."""

from __future__ import annotations

import copy
import io
import math
import subprocess
import sys
from pathlib import Path

import pytest
from fathom.evaluation.plots import cost_per_1000, pareto_front, write_plots
from fathom.evaluation.report import COLUMNS, MISSING, summary_rows, table_data, write_report
from fathom.terminal.tables import eval_table

REPO = Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
N_QUESTIONS = 10
STRATEGIES = ("none", "fixed:4", "gap")
PLOTS = ("pareto.png", "latency_cdf.png", "actions.png", "cost.png")


# ---------------------------------------------------------------------------------------------
# a synthetic run: 3 strategies x 10 questions
# ---------------------------------------------------------------------------------------------


def _row(q: int, strategy: str) -> dict:
    """One log.jsonl row; quality means are none 0.3, fixed:4 0.8, gap 0.7."""
    if strategy == "none":
        k, ctx, prompt, emb, ms, good = 0, 0, 40, 0, 5.0 + q, q < 3
        stages = {"embed": 0.0, "classify": 0.3, "decide": 0.0, "generate": ms - 0.3}
    elif strategy == "fixed:4":
        # 20 ms .. 5.5 s: with "none" the latencies span three decades (log x), q9 misses the SLO.
        k, ctx, prompt, emb, ms, good = 4, 400, 450, 12, 20.0 * 2 ** (q * 0.9), q < 8
        stages = {"embed": 9.0, "probe": 4.0, "decide": 0.0, "generate": ms - 13.0}
    else:
        k = (0, 2, 4)[q % 3]
        ctx, prompt, emb, ms, good = 100 * k, 40 + 100 * k, 12, 20.0 + 10 * q, q < 7
        stages = {"embed": 9.0, "probe": 4.0, "decide": 0.1, "generate": ms - 13.1}
    quality = 1.0 if good else 0.0
    return {
        "qid": f"q{q}",
        "strategy": strategy,
        "question": f"Question {q}?",
        "gold_answers": [f"answer {q}"],
        "gold_doc_ids": [f"doc{q}"],
        "qrels": None,
        "unanswerable": False,
        "query_type": "factual",
        "policy": strategy,
        "k": k,
        "action": str(k),
        "decision_reason": "synthetic",
        "chunk_ids": [f"c-{q}-{i}" for i in range(k)],
        "context_doc_ids": [f"doc{q}"] * k,
        "ranked_doc_ids": [f"doc{q}"],
        "context": "[1] text" if k else "",
        "answer": f"answer {q}" if good else "no idea",
        "abstained": False,
        "confidence": 0.5,
        "tokens": {"embedding": emb, "context": ctx, "prompt": prompt, "completion": 10},
        "cost": 0.0,
        "stages_ms": stages,
        "total_ms": ms,
        "cached_generation": False,
        "metrics": {
            "em": quality,
            "f1": quality,
            "contains": quality,
            "answer_recall": 1.0 if k else 0.0,
            "recall@k": 1.0 if k else 0.0,
            "mrr": 1.0,
            "ndcg@10": 1.0,
            "abstain_correct": None,
            "faithfulness": 1.0,
            "context_relevance": 0.5 if k else None,
            "answer_relevance": 0.6,
            "quality": quality,
        },
    }


def _ci(values: list[float], half: float) -> dict:
    mean = sum(values) / len(values)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": len(values)}


def _pct(values: list[float], p: float) -> float:
    """Linear-interpolation percentile (numpy's default)."""
    v = sorted(values)
    pos = (len(v) - 1) * p / 100
    lo = math.floor(pos)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)


def _latency(values: list[float]) -> dict:
    return {
        "mean": sum(values) / len(values),
        "p50": _pct(values, 50),
        "p95": _pct(values, 95),
        "p99": _pct(values, 99),
    }


def _strategy_summary(rows: list[dict], base_rows: list[dict], is_baseline: bool) -> dict:
    slo = RUN["slo_ms"]
    tokens = {key: [float(r["tokens"][key]) for r in rows] for key in rows[0]["tokens"]}
    tokens["total"] = [
        r["tokens"]["embedding"] + r["tokens"]["prompt"] + r["tokens"]["completion"] for r in rows
    ]
    costs = [r["cost"] for r in rows]
    actions: dict[str, int] = {}
    for r in rows:
        actions[r["action"]] = actions.get(r["action"], 0) + 1
    stage_names = list(dict.fromkeys(s for r in rows for s in r["stages_ms"]))
    out = {
        "n": len(rows),
        "metrics": {
            name: _ci([r["metrics"][name] for r in rows], 0.05)
            for name in ("quality", "em", "f1", "contains", "answer_recall")
        },
        "tokens": {key: _ci(v, 5.0) for key, v in tokens.items()},
        "cost": {**_ci(costs, 0.0), "per_1000": 1000 * sum(costs) / len(costs)},
        "latency_ms": _latency([r["total_ms"] for r in rows]),
        "stages_ms": {s: _latency([r["stages_ms"][s] for r in rows]) for s in stage_names},
        "slo_compliance": _ci([1.0 if r["total_ms"] <= slo else 0.0 for r in rows], 0.1),
        "k": _ci([float(r["k"]) for r in rows], 0.3),
        "actions": dict(sorted(actions.items(), key=lambda a: int(a[0]))),
        "cache_hits": 0,
    }
    if not is_baseline:
        diffs = [
            r["metrics"]["quality"] - b["metrics"]["quality"]
            for r, b in zip(rows, base_rows, strict=True)
        ]
        n = len(diffs)
        out["vs_baseline"] = {
            "baseline": RUN["baseline"],
            "n": n,
            "win": sum(d > 1e-9 for d in diffs) / n,
            "tie": sum(abs(d) <= 1e-9 for d in diffs) / n,
            "loss": sum(d < -1e-9 for d in diffs) / n,
            "quality_diff": _ci(diffs, 0.1),
            "tokens_diff": _ci([0.0] * n, 0.0),
        }
    return out


RUN = {
    "format": 1,
    "fathom_version": "0.1.0",
    "collection": "synthetic-3f2a",
    "docs": "/data/docs.jsonl",
    "questions": "/data/questions.jsonl",
    "n_questions": N_QUESTIONS,
    "n_fit_questions": 5,
    "strategies": list(STRATEGIES),
    "baseline": "fixed:4",
    "generator": {"backend": "extractive", "model": "extractive"},
    "judge": "contains",
    "slo_ms": 2000.0,
    "seed": 0,
    "bootstrap": 2000,
    "fitted": {"gap": {"threshold": 0.0312, "percentile": 50, "k": 4}},
    "created": "2026-11-30T08:00:00Z",
}


@pytest.fixture
def rows() -> list[dict]:
    return [_row(q, s) for s in STRATEGIES for q in range(N_QUESTIONS)]


@pytest.fixture
def summary(rows: list[dict]) -> dict:
    by = {s: [r for r in rows if r["strategy"] == s] for s in STRATEGIES}
    return {
        "format": 1,
        "run": copy.deepcopy(RUN),
        "n_questions": N_QUESTIONS,
        "strategies": {
            s: _strategy_summary(by[s], by[RUN["baseline"]], s == RUN["baseline"])
            for s in STRATEGIES
        },
    }


# ---------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------


def test_write_plots_writes_pngs(tmp_path: Path, summary: dict, rows: list[dict]) -> None:
    paths = write_plots(tmp_path / "out", summary, rows)
    assert [p.name for p in paths] == list(PLOTS)
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000
        assert data.startswith(PNG_SIGNATURE)
        assert b"Matplotlib version" not in data


def test_write_plots_is_deterministic(tmp_path: Path, summary: dict, rows: list[dict]) -> None:
    first = write_plots(tmp_path / "a", summary, rows)
    second = write_plots(tmp_path / "b", summary, rows)
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_write_plots_skips_empty_plots(tmp_path: Path, summary: dict) -> None:
    paths = write_plots(tmp_path / "no-rows", summary, [])
    assert [p.name for p in paths] == ["pareto.png", "actions.png", "cost.png"]
    assert not (tmp_path / "no-rows" / "latency_cdf.png").exists()

    empty = {"format": 1, "run": RUN, "n_questions": 0, "strategies": {}}
    assert write_plots(tmp_path / "empty", empty, []) == []


@pytest.mark.parametrize(
    ("points", "front"),
    [
        ([], []),
        ([(3.0, 0.5)], [0]),
        # (2, .7) dominates (3, .6) and, at equal cost, (2, .4); (1, .5) is cheaper.
        ([(1.0, 0.5), (2.0, 0.7), (3.0, 0.6), (2.0, 0.4)], [0, 1]),
        # Exact duplicates both stay; equal quality at a higher cost is dominated.
        ([(1.0, 0.5), (1.0, 0.5), (2.0, 0.5), (0.5, 0.2)], [3, 0, 1]),
        # Equal cost: only the better quality survives.
        ([(1.0, 0.5), (1.0, 0.9)], [1]),
        # Sorted by cost whatever the input order.
        ([(30.0, 0.9), (10.0, 0.1), (20.0, 0.5)], [1, 2, 0]),
        # A NaN point is ignored rather than dominating or being dominated.
        ([(math.nan, 1.0), (1.0, 0.1), (2.0, math.nan)], [1]),
    ],
)
def test_pareto_front(points: list[tuple[float, float]], front: list[int]) -> None:
    assert pareto_front(points) == front


def test_cost_plot_uses_tokens_when_every_cost_is_zero(
    tmp_path: Path, summary: dict, rows: list[dict]
) -> None:
    kind, values = cost_per_1000(summary)
    assert kind == "tokens"
    # fixed:4: 12 embedding + 450 prompt + 10 completion tokens per question.
    assert values["fixed:4"] == pytest.approx(472_000)
    assert list(values) == list(STRATEGIES)
    assert "cost.png" in [p.name for p in write_plots(tmp_path, summary, rows)]

    priced = copy.deepcopy(summary)
    priced["strategies"]["fixed:4"]["cost"]["per_1000"] = 1.25
    kind, values = cost_per_1000(priced)
    assert kind == "cost"
    assert values == {"none": 0.0, "fixed:4": 1.25, "gap": 0.0}


def test_modules_import_without_matplotlib_or_rich() -> None:
    code = (
        "import sys, evaluation.plots, evaluation.report; "
        "print(sorted(m for m in ('matplotlib', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# table and report
# ---------------------------------------------------------------------------------------------


def test_eval_table(summary: dict) -> None:
    from rich.console import Console

    console = Console(record=True, width=200, file=io.StringIO())
    console.print(eval_table(*table_data(summary)))
    text = console.export_text()
    for name in STRATEGIES:
        assert name in text
    assert "judge: contains" in text
    assert f"{N_QUESTIONS} questions" in text
    assert "0.800 [0.750, 0.850]" in text  # fixed:4 quality
    assert "baseline" in text
    assert "0% / 50% / 50%" in text  # none vs fixed:4: q0-2 and q8-9 tie, q3-7 lost
    assert "0% / 90% / 10%" in text  # gap vs fixed:4: only q7 lost


def test_missing_metrics_show_a_dash(summary: dict) -> None:
    del summary["strategies"]["gap"]["metrics"]["answer_recall"]
    summary["strategies"]["gap"]["slo_compliance"] = None
    gap = dict(zip(COLUMNS, summary_rows(summary)[2], strict=True))
    assert gap["strategy"] == "gap"
    assert gap["answer recall"] == MISSING
    assert gap["SLO %"] == MISSING
    assert gap["F1"] == "0.700"


def test_write_report(tmp_path: Path, summary: dict, rows: list[dict]) -> None:
    out = tmp_path / "run"
    for s in summary["strategies"].values():
        s["answers"] = {"n": N_QUESTIONS, "abstained": 0.1, "unsure": 0.2}
    plots = write_plots(out, summary, rows)
    path = write_report(out, summary, plots)
    assert path == out / "report.md"
    text = path.read_text(encoding="utf-8")
    for name in PLOTS:
        assert f"]({name})" in text
    assert "![Quality vs tokens](pareto.png)" in text
    assert "| " + " | ".join(COLUMNS) + " |" in text
    assert "## Latency by stage" in text
    assert "| strategy | embed | classify | probe | decide | generate | total |" in text
    assert "| gap | 0.0312 | 50 | 4 |" in text  # fitted thresholds
    assert "| setting | value |\n|---|---|" in text
    assert "2026-11-30T08:00:00Z" in text
    assert "2000 ms" in text
    assert "bootstrap" in text
    assert "## How the answers ended" in text
    assert "| strategy | abstained | marked unsure |" in text
    assert "| gap | 10.0% | 20.0% |" in text

    first = path.read_bytes()
    write_report(out, summary, plots)
    assert path.read_bytes() == first


def test_the_table_gives_the_intervals_over_documents(summary: dict) -> None:
    gap = summary["strategies"]["gap"]
    gap["metrics_documents"] = {"quality": {"mean": 0.7, "lo": 0.55, "hi": 0.82, "n": 10}}
    gap.setdefault("vs_baseline", {})["quality_diff_documents"] = {
        "mean": -0.1, "lo": -0.3, "hi": 0.05, "n": 10
    }  # fmt: skip
    rows = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in summary_rows(summary)}
    assert rows["gap"]["by document"] == "[0.550, 0.820]"
    assert rows["gap"]["Δ by document"] == "[-0.300, +0.050]"
    baseline = summary["run"]["baseline"]
    assert rows[baseline]["Δ by document"] == MISSING


def test_how_the_answers_ended_is_split_by_kind_when_some_are_unanswerable(summary: dict) -> None:
    from fathom.evaluation.report import _answers_table

    for s in summary["strategies"].values():
        s["answers"] = {
            "n": 4, "abstained": 0.25, "unsure": 0.5,
            "unanswerable": {"n": 2, "abstained": 0.5, "unsure": 0.5},
            "answerable": {"n": 2, "abstained": 0.0, "unsure": 0.5},
        }  # fmt: skip
    table = _answers_table(summary)
    assert table[0] == (
        "| strategy | abstained | marked unsure | abstained, unanswerable | unsure, unanswerable "
        "| abstained, answerable | unsure, answerable |"
    )
    assert any(
        row.startswith("| gap | 25.0% | 50.0% | 50.0% | 50.0% | 0.0% | 50.0% |") for row in table
    )
    for s in summary["strategies"].values():
        del s["answers"]
    assert _answers_table(summary) == []
