"""summary.json recomputed by brute force from a synthetic log; log reading and CSV writing."""

from __future__ import annotations

import copy
import csv
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from fathom.core.errors import ParseError
from fathom.core.jsonl import read_log
from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci, stable_seed
from fathom.evaluation.summary import flatten_row, summarize, write_csv, write_summary

STRATEGIES = ["gap", "threshold:p50", "none", "fixed:1"]  # threshold:p50 has no rows
BASELINE = "fixed:4"
STAGES = ["embed", "probe", "decide", "generate"]


def make_run(**overrides) -> dict:
    run = {
        "format": 1,
        "fathom_version": "0.1.0",
        "collection": "café-collection",
        "n_questions": 40,
        "strategies": STRATEGIES,
        "baseline": BASELINE,
        "judge": "contains",
        "slo_ms": 60.0,
        "seed": 11,
        "bootstrap": 300,
    }
    run.update(overrides)
    return run


def make_row(rng: random.Random, qid: str, strategy: str) -> dict:
    k = 0 if strategy == "none" else 1 if strategy == "fixed:1" else rng.choice([0, 2, 4, 8])
    if strategy == BASELINE:
        k = 4
    q = rng.choice([0.0, 1.0, None]) if rng.random() < 0.2 else rng.choice([0.0, 1.0])
    prompt = rng.randint(20, 900)
    return {
        "qid": qid,
        "strategy": strategy,
        "question": f"Question {qid}, with a comma and “quotes”?",
        "gold_answers": ["October 1973", "October"],
        "gold_doc_ids": ["doc-a"],
        "qrels": {"doc-a": 2, "doc-b": 1} if qid.endswith("3") else None,
        "unanswerable": False,
        "query_type": "factual",
        "policy": strategy,
        "k": k,
        "action": str(k),
        "decision_reason": "synthetic",
        "chunk_ids": [f"c-{qid}-{i}" for i in range(k)],
        "context_doc_ids": ["doc-a"] * k,
        "ranked_doc_ids": ["doc-a", "doc-b"],
        "context": "" if k == 0 else "[1] Oil crisis\nIt began in October 1973, in the Gulf.",
        "answer": "October 1973 [1]",
        "abstained": False,
        "confidence": rng.random(),
        "tokens": {
            "embedding": rng.randint(5, 20),
            "context": 0 if k == 0 else rng.randint(100, 800),
            "prompt": prompt,
            "completion": None if rng.random() < 0.1 else rng.randint(1, 60),
        },
        "cost": rng.random() * 1e-4,
        "stages_ms": {s: rng.random() * 20 for s in STAGES if s != "probe" or k > 0},
        "total_ms": None if rng.random() < 0.05 else rng.expovariate(1 / 40),
        "cached_generation": rng.random() < 0.25,
        "metrics": {
            "em": rng.choice([0.0, 1.0]),
            "f1": rng.random(),
            "contains": q,
            "recall@k": None if k == 0 else rng.random(),
            "abstain_correct": None,
            "faithfulness": None if strategy == "none" else rng.random(),
            "quality": q,
        },
    }


def make_log(seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(40):
        for s in ["gap", "none", "fixed:1", BASELINE]:
            if s == BASELINE and i % 7 == 0:
                continue  # questions the baseline never answered: unpaired
            rows.append(make_row(rng, f"q{i:02d}", s))
    return rows


# --- brute force ---------------------------------------------------------------------------------


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    h = (len(xs) - 1) * q / 100
    lo = int(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def values(rows: list[dict], get) -> list[float]:
    return [v for r in rows if (v := get(r)) is not None]


def total_tokens(r: dict) -> float | None:
    t = r["tokens"]
    return None if t["completion"] is None else t["prompt"] + t["completion"]


def test_summary_matches_brute_force() -> None:
    rows, run = make_log(), make_run()
    summary = summarize(rows, run)

    assert summary["format"] == 1
    assert summary["run"] == run
    assert summary["n_questions"] == 40
    assert list(summary["strategies"]) == ["gap", "none", "fixed:1", BASELINE]

    for name, s in summary["strategies"].items():
        mine = [r for r in rows if r["strategy"] == name]
        assert s["n"] == len(mine)

        for metric in ["quality", "em", "f1", "contains", "recall@k", "faithfulness"]:
            xs = values(mine, lambda r, m=metric: r["metrics"][m])
            if not xs:
                assert metric not in s["metrics"]
                continue
            got = s["metrics"][metric]
            assert got["n"] == len(xs)
            assert got["mean"] == pytest.approx(mean(xs), rel=1e-12)
            assert got["lo"] <= got["mean"] <= got["hi"]
        documented = ["quality", "em", "f1", "contains", "recall@k", "faithfulness"]
        assert list(s["metrics"]) == [m for m in documented if m in s["metrics"]]

        for field in ["context", "prompt", "completion", "embedding"]:
            xs = values(mine, lambda r, f=field: r["tokens"][f])
            assert s["tokens"][field]["n"] == len(xs)
            assert s["tokens"][field]["mean"] == pytest.approx(mean(xs), rel=1e-12)
        totals = values(mine, total_tokens)
        assert s["tokens"]["total"]["n"] == len(totals) < len(mine)
        assert s["tokens"]["total"]["mean"] == pytest.approx(mean(totals), rel=1e-12)

        costs = [r["cost"] for r in mine]
        assert s["cost"]["mean"] == pytest.approx(mean(costs), rel=1e-12)
        assert s["cost"]["per_1000"] == pytest.approx(1000 * mean(costs), rel=1e-12)

        ms = values(mine, lambda r: r["total_ms"])
        assert list(s["latency_ms"]) == ["mean", "p50", "p95", "p99"]
        assert s["latency_ms"]["mean"] == pytest.approx(mean(ms), rel=1e-12)
        for q in (50, 95, 99):
            assert s["latency_ms"][f"p{q}"] == pytest.approx(percentile(ms, q), rel=1e-12)
        for stage in STAGES:
            xs = values(mine, lambda r, st=stage: r["stages_ms"].get(st))
            if not xs:
                assert stage not in s["stages_ms"]
                continue
            assert s["stages_ms"][stage]["p95"] == pytest.approx(percentile(xs, 95), rel=1e-12)

        slo = s["slo_compliance"]
        assert slo["n"] == len(ms)
        assert slo["mean"] == pytest.approx(sum(x <= run["slo_ms"] for x in ms) / len(ms))
        assert slo["lo"] <= slo["mean"] <= slo["hi"]

        assert s["k"]["mean"] == pytest.approx(mean([r["k"] for r in mine]), rel=1e-12)
        expected_actions = Counter(r["action"] for r in mine)
        expected_actions.setdefault("0", 0)
        assert s["actions"] == dict(expected_actions)
        assert list(s["actions"]) == sorted(s["actions"], key=int)
        assert s["cache_hits"] == sum(r["cached_generation"] for r in mine)

    # the "none" strategy never retrieves and has no faithfulness values at all
    assert summary["strategies"]["none"]["actions"] == {"0": 40}
    assert "faithfulness" not in summary["strategies"]["none"]["metrics"]
    assert "probe" not in summary["strategies"]["none"]["stages_ms"]
    for s in summary["strategies"].values():
        assert "abstain_correct" not in s["metrics"]  # null in every row


def test_bootstraps_are_seeded_by_strategy_and_metric() -> None:
    rows, run = make_log(), make_run()
    s = summarize(rows, run)["strategies"]["gap"]
    xs = values([r for r in rows if r["strategy"] == "gap"], lambda r: r["metrics"]["f1"])
    seed = stable_seed(run["seed"], "gap/f1")
    assert s["metrics"]["f1"] == bootstrap_ci(xs, n_boot=run["bootstrap"], seed=seed)
    other = summarize(rows, make_run(seed=12))["strategies"]["gap"]["metrics"]["f1"]
    assert other["mean"] == s["metrics"]["f1"]["mean"]
    assert (other["lo"], other["hi"]) != (s["metrics"]["f1"]["lo"], s["metrics"]["f1"]["hi"])


def test_vs_baseline_pairs_common_questions() -> None:
    rows, run = make_log(), make_run()
    summary = summarize(rows, run)
    assert "vs_baseline" not in summary["strategies"][BASELINE]
    base = {r["qid"]: r for r in rows if r["strategy"] == BASELINE}
    for name in ["gap", "none", "fixed:1"]:
        vs = summary["strategies"][name]["vs_baseline"]
        pairs = [
            (r["metrics"]["quality"], base[r["qid"]]["metrics"]["quality"])
            for r in rows
            if r["strategy"] == name and r["qid"] in base
        ]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        n = len(pairs)
        assert 0 < n < 40
        assert vs["baseline"] == BASELINE
        assert vs["n"] == n == vs["quality_diff"]["n"]
        assert vs["win"] == pytest.approx(sum(a > b for a, b in pairs) / n)
        assert vs["loss"] == pytest.approx(sum(a < b for a, b in pairs) / n)
        assert vs["tie"] == pytest.approx(sum(a == b for a, b in pairs) / n)
        assert vs["quality_diff"]["mean"] == pytest.approx(mean([a - b for a, b in pairs]))
        diffs = [
            total_tokens(r) - total_tokens(base[r["qid"]])
            for r in rows
            if r["strategy"] == name
            and r["qid"] in base
            and total_tokens(r) is not None
            and total_tokens(base[r["qid"]]) is not None
        ]
        assert vs["tokens_diff"]["n"] == len(diffs)
        assert vs["tokens_diff"]["mean"] == pytest.approx(mean(diffs), rel=1e-12)


def test_no_baseline_rows_and_no_slo() -> None:
    rows = [r for r in make_log() if r["strategy"] != BASELINE]
    summary = summarize(rows, make_run(slo_ms=None))
    assert list(summary["strategies"]) == ["gap", "none", "fixed:1"]
    for s in summary["strategies"].values():
        assert "vs_baseline" not in s
        assert "slo_compliance" not in s


def test_summary_is_order_independent_and_deterministic() -> None:
    rows, run = make_log(), make_run()
    rows.append(copy.deepcopy(rows[5]))  # a duplicated (qid, strategy) with other content
    rows[-1]["metrics"]["f1"] = 0.123
    expected = json.dumps(summarize(rows, run))
    assert json.dumps(summarize(rows, run)) == expected
    for seed in range(3):
        shuffled = copy.deepcopy(rows)
        random.Random(seed).shuffle(shuffled)
        assert json.dumps(summarize(shuffled, run)) == expected  # same keys in the same order


def test_write_summary_round_trip(tmp_path: Path) -> None:
    summary = summarize(make_log(), make_run())
    path = tmp_path / "summary.json"
    write_summary(path, summary)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert "café-collection" in text  # not \u-escaped
    assert text.startswith('{\n  "format": 1,\n  "run": {')
    assert json.loads(text) == summary
    write_summary(path, summarize(make_log(), make_run()))
    assert path.read_text(encoding="utf-8") == text
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left over


def test_read_log_drops_a_truncated_last_line(tmp_path: Path) -> None:
    rows = make_log()[:3]
    full = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path = tmp_path / "log.jsonl"
    path.write_text(full, encoding="utf-8")
    assert read_log(path) == rows
    path.write_text(full + json.dumps(make_log()[3])[:57], encoding="utf-8")
    assert read_log(path) == rows
    path.write_text(full + "\n\n", encoding="utf-8")
    assert read_log(path) == rows


def test_read_log_rejects_damage_before_the_end(tmp_path: Path) -> None:
    rows = make_log()[:3]
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1][:40]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ParseError, match="line 2"):
        read_log(path)


def test_flatten_row() -> None:
    row = make_log()[3]
    row["qrels"] = {"doc-a": 2, "doc-b": 1}
    row["tokens"]["completion"] = None
    flat = flatten_row(row)
    assert flat["gold_answers"] == "October 1973|October"
    assert flat["tokens.completion"] == ""
    assert flat["tokens.prompt"] == row["tokens"]["prompt"]
    assert flat["metrics.recall@k"] == row["metrics"]["recall@k"]
    assert flat["metrics.abstain_correct"] == ""
    assert flat["stages_ms.embed"] == row["stages_ms"]["embed"]
    assert flat["qrels"] == "doc-a=2|doc-b=1"
    assert flat["unanswerable"] == "false"
    assert "tokens" not in flat and "metrics" not in flat
    assert flatten_row({"qrels": None, "chunk_ids": []}) == {"qrels": "", "chunk_ids": ""}


def test_csv_round_trip(tmp_path: Path) -> None:
    rows = make_log()[:12]
    del rows[5]["cost"]  # a row without a column gets an empty cell
    path = tmp_path / "log.csv"
    write_csv(path, rows)
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        back = list(reader)
    assert header[:3] == ["qid", "strategy", "question"]
    assert "metrics.quality" in header and "stages_ms.generate" in header
    assert len(header) == len(set(header))
    assert len(back) == len(rows)
    for row, got in zip(rows, back, strict=True):
        flat = flatten_row(row)
        assert got == {c: str(flat.get(c, "")) for c in header}
        assert got["context"] == row["context"]  # newlines and commas survive
        if row["total_ms"] is not None:
            assert float(got["total_ms"]) == row["total_ms"]
    assert back[5]["cost"] == ""


def test_metrics_have_an_interval_over_documents_too() -> None:
    """Beside each metric's interval over questions, ``metrics_documents`` resamples documents
    with their questions kept together, seeded the same way; with every question about one of
    a few documents it is wider than the question interval, never narrower."""
    rows, run = make_log(), make_run()
    for i, r in enumerate(rows):
        r["gold_doc_ids"] = [f"doc-{i % 3}"]
    s = summarize(rows, run)["strategies"]["gap"]
    mine = [r for r in rows if r["strategy"] == "gap"]
    xs = values(mine, lambda r: r["metrics"]["f1"])
    docs = [r["gold_doc_ids"][0] for r in mine if r["metrics"]["f1"] is not None]
    seed = stable_seed(run["seed"], "gap/f1")
    want = cluster_bootstrap_ci(xs, docs, n_boot=run["bootstrap"], seed=seed)
    assert s["metrics_documents"]["f1"] == want and want["clusters"] == 3
    assert s["metrics_documents"]["f1"]["mean"] == s["metrics"]["f1"]["mean"]
    doc_width = want["hi"] - want["lo"]
    assert doc_width >= s["metrics"]["f1"]["hi"] - s["metrics"]["f1"]["lo"] - 1e-9
    vs = s["vs_baseline"]
    assert vs["quality_diff_documents"]["mean"] == pytest.approx(vs["quality_diff"]["mean"])
    assert vs["quality_diff_documents"]["clusters"] <= 3


def test_how_the_answers_ended_by_kind() -> None:
    rows = make_log()
    for i, r in enumerate(rows):
        r["abstained"] = i % 5 == 0
        r["span_sure"] = None if i % 3 == 0 else i % 4 != 0  # no span, or sure but every 4th
        r["unanswerable"] = i % 2 == 1
    summary = summarize(rows, make_run())
    for name, s in summary["strategies"].items():
        mine = [r for r in rows if r["strategy"] == name]
        for kind, part in (
            (None, mine),
            ("unanswerable", [r for r in mine if r["unanswerable"]]),
            ("answerable", [r for r in mine if not r["unanswerable"]]),
        ):
            got = s["answers"] if kind is None else s["answers"][kind]
            assert got["n"] == len(part)
            assert got["abstained"] == pytest.approx(mean([r["abstained"] for r in part]))
            assert got["unsure"] == pytest.approx(mean([r["span_sure"] is False for r in part]))
    # all answerable: no split by kind
    plain = summarize(make_log(), make_run())["strategies"]["gap"]["answers"]
    assert set(plain) == {"n", "abstained", "unsure"} and plain["unsure"] == 0.0
