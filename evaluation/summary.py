"""``summary.json`` from ``run.json`` and the per-query log; reading the log, writing the CSV.

The summary is a pure function of the rows and the run settings: rows are put in a canonical
order first and every bootstrap is seeded from the run's seed and the metric's name, so
``fathom eval report`` rebuilds the same file byte for byte. Format: ``docs/eval-format.md``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from fathom.evaluation.metrics import (
    bootstrap_ci,
    cluster_bootstrap_ci,
    document_of,
    paired_compare,
    percentiles,
    stable_seed,
)

FORMAT = 1

# Summary order for the metrics a log row documents; unknown names follow, sorted.
METRIC_ORDER = (
    "quality",
    "em",
    "f1",
    "contains",
    "answer_recall",
    "recall@k",
    "mrr",
    "ndcg@10",
    "context_ndcg@10",
    "abstain_correct",
    "faithfulness",
    "context_relevance",
    "answer_relevance",
)
TOKEN_FIELDS = ("context", "prompt", "completion", "embedding")


def _number(v: Any) -> float | None:
    """``v`` as a float, or ``None`` for null, non-numbers and NaN (means skip them)."""
    if v is None or isinstance(v, str):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _canonical_order(rows: list[dict]) -> list[dict]:
    """Rows sorted by (strategy, qid); duplicates of a pair by their JSON text."""
    keyed = sorted(rows, key=lambda r: (str(r.get("strategy")), str(r.get("qid"))))
    out: list[dict] = []
    i = 0
    while i < len(keyed):
        j = i + 1
        key = (str(keyed[i].get("strategy")), str(keyed[i].get("qid")))
        while j < len(keyed) and (str(keyed[j].get("strategy")), str(keyed[j].get("qid"))) == key:
            j += 1
        group = keyed[i:j]
        if len(group) > 1:
            group.sort(key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
        out.extend(group)
        i = j
    return out


def _tokens(row: dict) -> dict[str, float | None]:
    """The row's token counts with ``total`` = prompt + completion (null if either is)."""
    raw = row.get("tokens") or {}
    out = {name: _number(raw.get(name)) for name in TOKEN_FIELDS}
    p, c = out["prompt"], out["completion"]
    out["total"] = None if p is None or c is None else p + c
    return out


def _quality(row: dict) -> float | None:
    return _number((row.get("metrics") or {}).get("quality"))


def action_key(action: str) -> tuple[int, float, str]:
    """Sort key for actions: numeric depths in order, then anything else by name."""
    try:
        return (0, float(action), action)
    except ValueError:
        return (1, 0.0, action)


def get_path(d: Any, *keys: str) -> Any:
    """``d[k1][k2]…``, or None when a level is missing or null."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _strategy_order(run: dict, present: set[str]) -> list[str]:
    """``run["strategies"]`` order; then the baseline and any other logged strategy, sorted."""
    order = [s for s in dict.fromkeys(run.get("strategies") or []) if s in present]
    baseline = run.get("baseline")
    if baseline in present and baseline not in order:
        order.append(baseline)
    order.extend(sorted(present.difference(order)))
    return order


def _ci(values: list[float], run: dict, strategy: str, name: str) -> dict | None:
    return bootstrap_ci(
        values,
        n_boot=int(run.get("bootstrap", 2000)),
        seed=stable_seed(int(run.get("seed", 0)), f"{strategy}/{name}"),
    )


def _documents_ci(
    pairs: list[tuple[float, str]], run: dict, strategy: str, name: str
) -> dict | None:
    """The document-level interval of ``(value, document)`` pairs: documents resampled with
    their questions kept together (``metrics.cluster_bootstrap_ci``), seeded as ``_ci``."""
    return cluster_bootstrap_ci(
        [v for v, _ in pairs],
        [d for _, d in pairs],
        n_boot=int(run.get("bootstrap", 2000)),
        seed=stable_seed(int(run.get("seed", 0)), f"{strategy}/{name}"),
    )


def _summarize_strategy(
    strategy: str, rows: list[dict], run: dict, baseline_rows: list[dict] | None
) -> dict:
    out: dict[str, Any] = {"n": len(rows)}
    out["metrics"], out["metrics_documents"] = _metrics(strategy, rows, run)
    out.update(_tokens_and_cost(strategy, rows, run))
    out.update(_latency(strategy, rows, run))
    out.update(_depth_decisions(strategy, rows, run))
    out["answers"] = _answers(rows)
    if baseline_rows:
        vs = _versus(strategy, rows, baseline_rows, run)
        if vs is not None:
            out["vs_baseline"] = vs
    return out


def _metrics(
    strategy: str, rows: list[dict], run: dict
) -> tuple[dict[str, dict], dict[str, dict | None]]:
    """Each quality metric's mean and interval over questions, in METRIC_ORDER, then any other
    by name; and the same metrics' intervals over documents (questions about one document are
    not independent: a claim about documents rests on these)."""
    names: set[str] = set()
    for r in rows:
        names.update((r.get("metrics") or {}).keys())
    ordered = [m for m in METRIC_ORDER if m in names] + sorted(names.difference(METRIC_ORDER))
    metrics: dict[str, dict] = {}
    by_documents: dict[str, dict | None] = {}
    for m in ordered:
        pairs = [
            (x, document_of(r))
            for r in rows
            if (x := _number((r.get("metrics") or {}).get(m))) is not None
        ]
        ci = _ci([x for x, _ in pairs], run, strategy, m)
        if ci is not None:
            metrics[m] = ci
            by_documents[m] = _documents_ci(pairs, run, strategy, m)
    return metrics, by_documents


def _tokens_and_cost(strategy: str, rows: list[dict], run: dict) -> dict[str, Any]:
    """``tokens`` (each field and the total) and, when rows have it, ``cost``."""
    token_rows = [_tokens(r) for r in rows]
    tokens: dict[str, dict] = {}
    for name in (*TOKEN_FIELDS, "total"):
        values = [t[name] for t in token_rows if t[name] is not None]
        ci = _ci(values, run, strategy, f"tokens.{name}")
        if ci is not None:
            tokens[name] = ci
    out: dict[str, Any] = {"tokens": tokens}
    cost = _ci(
        [x for r in rows if (x := _number(r.get("cost"))) is not None], run, strategy, "cost"
    )
    if cost is not None:
        out["cost"] = {**cost, "per_1000": cost["mean"] * 1000}
    return out


def _latency(strategy: str, rows: list[dict], run: dict) -> dict[str, Any]:
    """``latency_ms`` percentiles, each stage's (``stages_ms``), and the share within the
    run's SLO (``slo_compliance``) when it has one."""
    out: dict[str, Any] = {}
    total_ms = [x for r in rows if (x := _number(r.get("total_ms"))) is not None]
    latency = percentiles(total_ms)
    if latency is not None:
        out["latency_ms"] = latency
    stage_names: dict[str, None] = {}
    for r in rows:
        stage_names.update(dict.fromkeys((r.get("stages_ms") or {}).keys()))
    stages: dict[str, dict] = {}
    for stage in stage_names:
        values = [
            x for r in rows if (x := _number((r.get("stages_ms") or {}).get(stage))) is not None
        ]
        p = percentiles(values)
        if p is not None:
            stages[stage] = p
    out["stages_ms"] = stages
    slo = run.get("slo_ms")
    if slo is not None:
        met = [1.0 if ms <= slo else 0.0 for ms in total_ms]
        ci = _ci(met, run, strategy, "slo_compliance")
        if ci is not None:
            out["slo_compliance"] = ci
    return out


def _depth_decisions(strategy: str, rows: list[dict], run: dict) -> dict[str, Any]:
    """The depth ``k`` chosen, how often each action was taken, and the generation cache's
    hits."""
    out: dict[str, Any] = {}
    k = _ci([x for r in rows if (x := _number(r.get("k"))) is not None], run, strategy, "k")
    if k is not None:
        out["k"] = k
    counts = Counter(str(r["action"]) for r in rows if r.get("action") is not None)
    counts.setdefault("0", 0)  # retrieval skipped: always reported, even when it never happened
    out["actions"] = {a: counts[a] for a in sorted(counts, key=action_key)}
    out["cache_hits"] = sum(1 for r in rows if r.get("cached_generation") is True)
    return out


def _answers(rows: list[dict]) -> dict[str, Any]:
    """How the answers ended: the shares that abstained and that gave a span marked unsure
    (``span_sure`` false: under the reader's bar), over all rows and, when some questions are
    unanswerable, over each kind."""

    def shares(part: list[dict]) -> dict[str, Any]:
        n = len(part)
        return {
            "n": n,
            "abstained": sum(bool(r.get("abstained")) for r in part) / n if n else None,
            "unsure": sum(r.get("span_sure") is False for r in part) / n if n else None,
        }

    out = shares(rows)
    if any(r.get("unanswerable") for r in rows):
        out["unanswerable"] = shares([r for r in rows if r.get("unanswerable")])
        out["answerable"] = shares([r for r in rows if not r.get("unanswerable")])
    return out


def _versus(strategy: str, rows: list[dict], baseline_rows: list[dict], run: dict) -> dict | None:
    """Paired comparison with the baseline over the questions both have a quality for."""
    base = {r.get("qid"): r for r in baseline_rows}
    q_pairs: list[tuple[float, float]] = []
    q_docs: list[str] = []
    t_diffs: list[float] = []
    seen: set = set()
    for r in rows:
        qid = r.get("qid")
        b = base.get(qid)
        if b is None or qid in seen:  # a duplicated row pairs once, at its first (canonical) copy
            continue
        seen.add(qid)
        qa, qb = _quality(r), _quality(b)
        if qa is not None and qb is not None:
            q_pairs.append((qa, qb))
            q_docs.append(document_of(r))
        ta, tb = _tokens(r)["total"], _tokens(b)["total"]
        if ta is not None and tb is not None:
            t_diffs.append(ta - tb)
    cmp = paired_compare([a for a, _ in q_pairs], [b for _, b in q_pairs])
    if cmp is None:
        return None
    out: dict[str, Any] = {
        "baseline": run["baseline"],
        "n": cmp["n"],
        "win": cmp["win"],
        "tie": cmp["tie"],
        "loss": cmp["loss"],
        "quality_diff": _ci([a - b for a, b in q_pairs], run, strategy, "vs_baseline.quality_diff"),
    }
    diffs = [(a - b, d) for (a, b), d in zip(q_pairs, q_docs, strict=True)]
    out["quality_diff_documents"] = _documents_ci(diffs, run, strategy, "vs_baseline.quality_diff")
    tokens_diff = _ci(t_diffs, run, strategy, "vs_baseline.tokens_diff")
    if tokens_diff is not None:
        out["tokens_diff"] = tokens_diff
    return out


def summarize(rows: list[dict], run: dict) -> dict:
    """The ``summary.json`` object for ``rows`` (the log) under ``run`` (``run.json``).

    The same rows in any order give an identical dict. Strategies appear in the order of
    ``run["strategies"]`` (those with no rows are skipped), then the baseline if it is not
    listed, then any other logged strategy by name.
    """
    rows = _canonical_order(rows)
    by_strategy: dict[str, list[dict]] = {}
    for r in rows:
        by_strategy.setdefault(str(r.get("strategy")), []).append(r)
    baseline = run.get("baseline")
    baseline_rows = by_strategy.get(baseline) if baseline is not None else None
    strategies = {
        s: _summarize_strategy(s, by_strategy[s], run, baseline_rows if s != baseline else None)
        for s in _strategy_order(run, set(by_strategy))
    }
    return {
        "format": FORMAT,
        "run": run,
        "n_questions": len({r.get("qid") for r in rows}),
        "strategies": strategies,
    }


def write_summary(path: str | os.PathLike, summary: dict) -> None:
    """Write ``summary`` as indented UTF-8 JSON with a final newline, atomically."""
    text = json.dumps(summary, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    _write_atomic(Path(path), text)


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    return v


def flatten_row(row: dict) -> dict[str, Any]:
    """One log row as CSV cells: nested keys joined with ``.``, lists joined with ``|``.

    ``None`` becomes ``""`` and booleans ``true``/``false``. ``qrels`` maps document ids to
    grades, so it becomes one ``id=grade|…`` cell rather than a column per document.
    """
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and prefix != "qrels":
            for key, v in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), v)
        elif isinstance(value, dict):
            out[prefix] = "|".join(f"{k}={_cell(v)}" for k, v in value.items())
        elif isinstance(value, list | tuple):
            out[prefix] = "|".join(str(_cell(v)) for v in value)
        else:
            out[prefix] = _cell(value)

    walk("", row)
    return out


def write_csv(path: str | os.PathLike, rows: list[dict]) -> None:
    """Write ``rows`` flattened to ``log.csv``; columns in first-seen order, missing cells empty."""
    flat = [flatten_row(r) for r in rows]
    columns: dict[str, None] = {}
    for f in flat:
        columns.update(dict.fromkeys(f))
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
