"""Depth policies in a ``fathom eval`` run, against the run's own fixed budgets.

A ``fathom eval`` run with fixed budgets (``fixed:1,fixed:2,…``) and depth policies (``forest``,
``cascade``, …) answers the same questions under each. This bench reads its log and, for every
policy row, gives what the issue of depth is about:

* **saving**: 1 − t_P / F(q_P), where F(q) is the context tokens the fixed budgets need to reach
  the policy's answer recall q_P (linear between adjacent budgets; ``policy_tradeoffs``'
  frontier), "above frontier" when no fixed budget reaches it;
* **Δ vs best fixed**: its answer recall against the best fixed budget's, paired;
* **answer quality at its tokens**: its ``--quality`` (default ``contains``, the extractive
  answer's) against what the fixed frontier gives at the policy's mean tokens (interpolated),
  paired.

95 % intervals: a paired bootstrap over questions that recomputes the frontier on every
resample (as ``policy_tradeoffs``), and one over documents (a resample draws documents and
keeps all their questions; the rows' first gold document), the interval a claim rests on. A
run with several sets gives one table per ``--run``.

    python bench/policy_eval.py --run DIR [--run DIR …] [--quality contains] [--fixed 1,2,3,5,8]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import default_out, log, machine_info, print_table, write_json
from fathom.bench.policy_tradeoffs import ABOVE, AT_ZERO, MAX_UNDEFINED, frontier_tokens

N_BOOT = 1000


def load_run(out: Path, quality: str, only: list[int] | None = None) -> dict[str, Any]:
    """``{"fixed": [k…], "policies": [name…], "recall", "quality", "tokens"}``: arrays
    ``(n_questions, n_strategies)`` over the questions every strategy answered, fixed budgets
    first (ascending; those in ``only`` when given), then the policies in the run's order."""
    run = json.loads((out / "run.json").read_text())
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for line in (out / "log.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows.setdefault(r["strategy"], {})[r["qid"]] = r
    names = list(run["strategies"])
    fixed = sorted((int(s.split(":")[1]), s) for s in names if s.startswith("fixed:"))
    if only is not None:
        fixed = [(k, s) for k, s in fixed if k in only]
    policies = [s for s in names if not s.startswith("fixed:") and s != "none"]
    if not fixed or not policies:
        raise SystemExit(f"{out}: needs fixed:K strategies and at least one policy")
    order = [s for _, s in fixed] + policies
    qids = sorted(set.intersection(*(set(rows[s]) for s in order)))

    def grid(get) -> np.ndarray:
        return np.array([[float(get(rows[s][q]) or 0.0) for s in order] for q in qids])

    from fathom.evaluation.metrics import document_of

    return {
        "fixed": [k for k, _ in fixed],
        "policies": policies,
        "recall": grid(lambda r: r["metrics"]["answer_recall"]),
        "quality": grid(lambda r: r["metrics"][quality]),
        "tokens": grid(lambda r: r["tokens"]["context"]),
        "read": grid(lambda r: r["tokens"].get("context_read", r["tokens"]["context"])),
        "n": len(qids),
        "groups": [document_of(rows[order[0]][q]) for q in qids],
        "run": run,
    }


def interp(ft: np.ndarray, fq: np.ndarray, t: float) -> float:
    """The fixed frontier's quality at ``t`` tokens (linear between budgets, flat past the
    deepest)."""
    order = np.argsort(ft)
    return float(np.interp(t, ft[order], np.maximum.accumulate(fq[order])))


def measure(d: dict[str, Any], j: int, idx: np.ndarray) -> dict[str, float]:
    """Saving, Δ recall vs the best fixed budget, and Δ quality vs the frontier at its tokens,
    for policy column ``j`` over the questions ``idx``."""
    nf = len(d["fixed"])
    rec, qual, tok = d["recall"][idx], d["quality"][idx], d["read"][idx]
    fr, ft, fqual = rec[:, :nf].mean(0), tok[:, :nf].mean(0), qual[:, :nf].mean(0)
    q_p, t_p = rec[:, j].mean(), tok[:, j].mean()
    f = frontier_tokens(fr, ft, q_p)
    status = ABOVE if np.isnan(f) else (AT_ZERO if f <= 0 else None)
    return {
        "recall": float(q_p),
        "tokens": float(t_p),
        "saving": float("nan") if status else 1.0 - t_p / f,
        "status": status or "",
        "d_best": float(q_p - fr.max()),
        "quality": float(qual[:, j].mean()),
        "d_quality": float(qual[:, j].mean() - interp(ft, fqual, t_p)),
    }


def evaluate(d: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The fixed budgets' means and each policy's measures with intervals over questions, and
    (``documents``) over documents with their questions kept together."""
    from fathom.evaluation.metrics import cluster_resamples

    n, nf = d["n"], len(d["fixed"])
    boot = np.random.default_rng(seed).integers(0, n, size=(N_BOOT, n))
    doc_boot = cluster_resamples(d["groups"], N_BOOT, seed)
    everyone = np.arange(n)
    out: dict[str, Any] = {"n": n, "documents": len(set(d["groups"])), "fixed": {}}
    out["policies"] = {}
    for i, k in enumerate(d["fixed"]):
        out["fixed"][f"fixed:{k}"] = {
            "recall": float(d["recall"][:, i].mean()),
            "quality": float(d["quality"][:, i].mean()),
            "tokens": float(d["read"][:, i].mean()),
        }
    for p, name in enumerate(d["policies"]):
        j = nf + p
        point = measure(d, j, everyone)
        entry: dict[str, Any] = dict(point)
        entry.update(_intervals(point, [measure(d, j, b) for b in boot]))
        entry["mean_k_tokens_context"] = float(d["tokens"][:, j].mean())
        entry["documents"] = _intervals(point, [measure(d, j, b) for b in doc_boot])
        out["policies"][name] = entry
    return out


def _intervals(point: dict[str, float], samples: list[dict[str, float]]) -> dict[str, Any]:
    """For the saving and both differences: the share of resamples where it is undefined, and
    its 95 % interval (None when the point is undefined or too many resamples are)."""
    out: dict[str, Any] = {}
    for key in ("saving", "d_best", "d_quality"):
        vals = np.array([s[key] for s in samples])
        ok = vals[np.isfinite(vals)]
        undefined = 1 - len(ok) / len(vals)
        out[f"{key}_undefined"] = undefined
        good = np.isfinite(point[key]) and len(ok) and undefined <= MAX_UNDEFINED
        out[f"{key}_ci"] = np.quantile(ok, [0.025, 0.975]).tolist() if good else None
    return out


def _ci(x: float, ci: list | None, pct: bool = False, status: str = "", undefined=0.0) -> str:
    """A value with its interval; without one, the share of resamples where it is undefined
    (the policy above the frontier there)."""
    if not np.isfinite(x):
        return status or "undefined"
    f = (lambda v: f"{v:+.0%}") if pct else (lambda v: f"{v:+.3f}")
    if ci:
        return f"{f(x)} [{f(ci[0])}, {f(ci[1])}]"
    return f(x) + (f" ({undefined:.0%} of resamples undefined)" if undefined else "")


def _by_document(e: dict[str, Any]) -> list[str]:
    """A policy's three intervals over documents, for the table."""
    d = e["documents"]
    out = []
    for key, pct in (("saving", True), ("d_best", False), ("d_quality", False)):
        ci = d[f"{key}_ci"]
        f = "{:+.0%}" if pct else "{:+.3f}"
        out.append("–" if ci is None else f"[{f.format(ci[0])}, {f.format(ci[1])}]")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, help="a fathom eval --out folder")
    ap.add_argument("--quality", default="contains", help="the answer's metric (row metrics)")
    ap.add_argument(
        "--fixed", default="", help="the fixed budgets that make the frontier (default: all)"
    )
    ap.add_argument("--out", type=Path, default=default_out("policy_eval"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"machine": machine_info(), "quality": args.quality, "runs": {}}
    only = [int(k) for k in args.fixed.split(",") if k.strip()] or None
    results["fixed_budgets"] = only
    for folder in args.run:
        d = load_run(Path(folder), args.quality, only)
        res = evaluate(d, args.seed)
        name = Path(folder).name
        results["runs"][name] = {
            "questions": d["run"].get("questions"),
            "doc_split": d["run"].get("doc_split"),
            "generator": d["run"].get("generator"),
            **res,
        }
        table = [
            [k, f"{v['recall']:.3f}", f"{v['quality']:.3f}", f"{v['tokens']:.0f}", *[""] * 6]
            for k, v in res["fixed"].items()
        ]
        for p, e in res["policies"].items():
            table.append(
                [
                    p,
                    f"{e['recall']:.3f}",
                    f"{e['quality']:.3f}",
                    f"{e['tokens']:.0f}",
                    _ci(e["saving"], e["saving_ci"], True, e["status"], e["saving_undefined"]),
                    _ci(e["d_best"], e["d_best_ci"]),
                    _ci(e["d_quality"], e["d_quality_ci"]),
                    *_by_document(e),
                ]
            )
        print_table(
            f"{name}: {res['n']} questions, {res['documents']} documents",
            [
                "strategy",
                "answer recall",
                args.quality,
                "context read",
                "saving vs fixed",
                "Δ recall vs best fixed",
                f"Δ {args.quality} vs fixed at its tokens",
                "saving CI, by document",
                "Δ recall CI, by document",
                f"Δ {args.quality} CI, by document",
            ],
            table,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "policy_eval.json", results)
    log(f"results in {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
