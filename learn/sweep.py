"""A budget sweep, read back: the training data of the depth policies.

``fathom policy sweep`` is a ``fathom eval`` run whose strategies are the fixed budgets (``none``
for 0) over the *training* half of the documents, with every question's probe features logged:
per question and budget it gives the judge's quality, the context tokens and the measured
latency. ``load_sweep`` turns its log into arrays (a ``router.sweep.Sweep``); ``combine_sweeps``
joins several document sets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fathom.core.errors import FathomError
from fathom.core.jsonl import read_log
from fathom.router.sweep import Sweep

WARN_RECALL = 0.6  # below this answer recall at the deepest budget, the sweep warns


def budget_strategies(budgets: list[int]) -> list[str]:
    """``[0, 1, 4]`` → ``["none", "fixed:1", "fixed:4"]``."""
    if sorted(set(budgets)) != list(budgets) or not budgets or budgets[0] < 0:
        raise FathomError(f"budgets {budgets}: need distinct non-negative values, ascending")
    return ["none" if b == 0 else f"fixed:{b}" for b in budgets]


def _budget_of(strategy: str) -> int:
    return 0 if strategy == "none" else int(strategy.split(":", 1)[1])


def load_sweep(directory: str | Path, quality: str = "quality") -> Sweep:
    """Read a sweep's ``run.json`` and ``log.jsonl`` into arrays (complete questions only);
    ``quality`` names the row metric to imitate (default: the run's judge)."""
    directory = Path(directory)
    run, by_q, qids = _read_run(directory, quality)
    return _sweep_arrays(directory, run, [by_q[q] for q in qids], qids, quality)


def _read_run(
    directory: Path, metric: str
) -> tuple[dict[str, Any], dict[str, dict[str, dict]], list[str]]:
    """The run's record (its judge set to ``metric`` when that is not the run's own), its log
    rows by question and strategy, and the questions with a row for every budget."""
    run_path = directory / "run.json"
    if not run_path.is_file():
        raise FathomError(f"{directory}: no run.json — run `fathom policy sweep` first")
    run = json.loads(run_path.read_text(encoding="utf-8"))
    if not run.get("features"):
        raise FathomError(f"{directory}: this run did not log probe features (not a sweep)")
    strategies = run["strategies"]
    if metric != "quality":
        run = {**run, "judge": {"answer_recall": "recall"}.get(metric, metric)}
    by_q: dict[str, dict[str, dict]] = {}
    for row in read_log(directory / "log.jsonl"):
        by_q.setdefault(row["qid"], {})[row["strategy"]] = row
    qids = [q for q in run["qids"] if q in by_q and len(by_q[q]) == len(strategies)]
    if not qids:
        raise FathomError(f"{directory}: no question has rows for every budget yet")
    known = set(by_q[qids[0]][strategies[-1]]["metrics"]) | {"quality"}
    if metric not in known:
        raise FathomError(
            f"--quality {metric!r}: not a metric of this sweep ({', '.join(sorted(known))})"
        )
    return run, by_q, qids


def _sweep_arrays(
    directory: Path,
    run: dict[str, Any],
    by_strategy: list[dict[str, dict]],
    qids: list[str],
    metric: str,
) -> Sweep:
    """The ``Sweep`` of the questions ``qids`` (their rows by strategy in ``by_strategy``),
    those without logged probe features left out."""
    import numpy as np

    strategies = run["strategies"]
    budgets = tuple(_budget_of(s) for s in strategies)
    feats, quality, tokens, latency, types, total, stated = [], [], [], [], [], [], []
    recall = []
    kept: list[str] = []
    texts: list[str] = []
    groups: list[str] = []
    probed: list[list[int] | None] = []
    unanswered = bool(run.get("context_only"))
    readings: list[list[float] | None] = []
    for q, by_s in zip(qids, by_strategy, strict=True):
        rows = [by_s[s] for s in strategies]
        with_features = next((r for r in rows if r.get("features")), None)
        if with_features is None:
            continue
        kept.append(q)
        texts.append(rows[-1]["question"])
        gold = rows[-1].get("gold_doc_ids") or [q]
        groups.append(str(gold[0]))
        feats.append(with_features["features"])
        probed.append(with_features.get("probe_tokens"))
        readings.append(with_features.get("reading"))
        quality.append([float(r["metrics"].get(metric) or 0.0) for r in rows])
        tokens.append([float(r["tokens"]["context"]) for r in rows])
        total.append([float(r["tokens"]["prompt"] + r["tokens"]["completion"]) for r in rows])
        latency.append([float(r["total_ms"]) for r in rows])
        # A context-only sweep answered nothing: no answer stated a confidence.
        stated.append([float("nan") if unanswered else _stated(r) for r in rows])
        types.append(rows[-1]["query_type"])
        if rows[-1]["metrics"].get("answer_recall") is not None:
            recall.append(float(rows[-1]["metrics"]["answer_recall"]))
    run["_deepest_recall"] = float(np.mean(recall)) if recall else None
    return Sweep(
        run,
        budgets,
        kept,
        types,
        np.asarray(feats, dtype=np.float32),
        np.asarray(quality, dtype=np.float32),
        np.asarray(tokens, dtype=np.float32),
        np.asarray(latency, dtype=np.float32),
        np.asarray(total, dtype=np.float32),
        texts,
        np.asarray(stated, dtype=np.float32),
        [str(run.get("questions") or directory.name)] * len(kept),
        groups,
        None if any(p is None for p in probed) else [list(p) for p in probed],  # type: ignore[union-attr]
        None if any(r is None for r in readings) else np.asarray(readings, dtype=np.float32),
    )


def _stated(row: dict[str, Any]) -> float:
    """A row's answer confidence as a cascade reads it (``feedback.loop.answer_confidence``):
    0 for an abstention, the answerer's own probability, else (a model that states none) the
    feedback scorer's support; NaN for a sweep made before rows carried the answerer's."""
    if "answerer_confidence" not in row:
        return float("nan")
    if row.get("abstained"):
        return 0.0
    value = row["answerer_confidence"]
    if value is None:
        value = row.get("confidence")
    return float("nan") if value is None else float(value)


def combine_sweeps(sweeps: list[Sweep]) -> Sweep:
    """One training set from several sweeps over the same budgets (e.g. SQuAD, COVID-QA and
    HotpotQA training halves)."""
    import numpy as np

    if not sweeps:
        raise FathomError("no sweeps to combine")
    budgets = sweeps[0].budgets
    for s in sweeps[1:]:
        if s.budgets != budgets:
            raise FathomError(f"sweeps use different budgets: {budgets} and {s.budgets}")
    if len(sweeps) == 1:
        return sweeps[0]
    run = dict(sweeps[0].run)
    run["questions"] = [s.run.get("questions") for s in sweeps]
    run["docs"] = [s.run.get("docs") for s in sweeps]
    judges = {str(s.run.get("judge")) for s in sweeps}
    run["judge"] = judges.pop() if len(judges) == 1 else sorted(judges)
    # A set used whole (``--split all``, recorded as None; e.g. a benchmark's own training sample)
    # beside the training halves of others: the record keeps each sweep's split.
    splits = [s.run.get("doc_split") for s in sweeps]
    run["doc_split"] = splits[0] if len(set(map(str, splits))) == 1 else splits
    return Sweep(
        run,
        budgets,
        [q for s in sweeps for q in s.qids],
        [t for s in sweeps for t in s.query_types],
        np.concatenate([s.features for s in sweeps]),
        np.concatenate([s.quality for s in sweeps]),
        np.concatenate([s.tokens for s in sweeps]),
        np.concatenate([s.latency for s in sweeps]),
        np.concatenate([s.total_tokens for s in sweeps]),
        [t for s in sweeps for t in (s.questions or [""] * len(s.qids))],
        np.concatenate([_confidence(s) for s in sweeps]),
        [name for s in sweeps for name in (s.sets or [""] * len(s.qids))],
        [g for s in sweeps for g in (s.groups or s.qids)],
        None
        if any(s.probe_tokens is None for s in sweeps)
        else [p for s in sweeps for p in s.probe_tokens],  # type: ignore[union-attr]
        None
        if any(s.reading is None for s in sweeps)
        else np.concatenate([s.reading for s in sweeps]),
    )


def _confidence(sweep: Sweep) -> Any:
    import numpy as np

    if sweep.confidence is not None:
        return sweep.confidence
    return np.full(sweep.quality.shape, np.nan, dtype=np.float32)
