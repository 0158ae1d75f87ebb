"""Two strategies of one ``fathom eval`` run, question by question: what the second costs and
gains against the first, in the backend's own seconds and in the tokens it processed.

For the cascade against the one-shot forest, say: both answered the same questions with the
same index and generator, so each question gives a paired difference of

* **seconds**: end-to-end (``total_ms``) and the generator's share (``stages_ms.generate``,
  every round of the cascade included);
* **context tokens read**: ``tokens.context_read``, the sources a backend that keeps the shared
  prompt prefix evaluates (a deeper cascade round that extends the shallower one's sources
  counts only the new ones);
* **prompt tokens sent**: ``tokens.prompt``, every generation's whole prompt (what a backend
  without a prompt cache evaluates), and the final depth k;
* the judge's metrics (answer recall, and F1 / contains when the run has them).

95 % intervals come from a bootstrap over questions (paired: the same resample for both), and
from one over documents (a resample draws documents and keeps all their questions), the
interval a claim rests on.

    python bench/policy_pair.py --run DIR --a forest --b cascade [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import (
    default_out,
    eval_rows_by_qid,
    machine_info,
    print_table,
    write_json,
)
from fathom.evaluation.metrics import bootstrap_ci

N_BOOT = 2000
MEASURES: dict[str, Any] = {
    "seconds end to end": lambda r: r["total_ms"] / 1000,
    "seconds generating": lambda r: r["stages_ms"].get("generate", 0.0) / 1000,
    "context tokens read": lambda r: r["tokens"].get("context_read", r["tokens"]["context"]),
    "prompt tokens sent": lambda r: r["tokens"]["prompt"],
    "mean k": lambda r: r["k"],
}
METRICS = ("answer_recall", "f1", "contains")


def load_pairs(run: Path, a: str, b: str) -> tuple[list[str], dict[str, dict[str, dict]]]:
    """The questions both strategies answered, and each strategy's rows by question id."""
    rows = {s: eval_rows_by_qid(run, s) for s in (a, b)}
    qids = sorted(set(rows[a]) & set(rows[b]))
    if not qids:
        raise SystemExit(f"{run}: no question answered by both {a!r} and {b!r}")
    return qids, rows


def compare(run: Path, a: str, b: str, seed: int = 0) -> dict[str, Any]:
    qids, rows = load_pairs(run, a, b)
    measures = dict(MEASURES)
    first = rows[a][qids[0]]["metrics"]
    for m in METRICS:
        if first.get(m) is not None:
            measures[m] = lambda r, m=m: r["metrics"].get(m) or 0.0
    from fathom.evaluation.metrics import cluster_bootstrap_ci, document_of

    docs = [document_of(rows[a][q]) for q in qids]
    out: dict[str, Any] = {"n": len(qids), "documents": len(set(docs)), "a": a, "b": b}
    out["measures"] = {}
    for name, get in measures.items():
        xa = np.array([float(get(rows[a][q])) for q in qids])
        xb = np.array([float(get(rows[b][q])) for q in qids])
        d = bootstrap_ci(xb - xa, n_boot=N_BOOT, seed=seed)
        by_doc = cluster_bootstrap_ci(xb - xa, docs, n_boot=N_BOOT, seed=seed)
        out["measures"][name] = {
            a: float(xa.mean()),
            b: float(xb.mean()),
            "diff": d["mean"],
            "diff_ci": [d["lo"], d["hi"]],
            "diff_ci_documents": [by_doc["lo"], by_doc["hi"]],
            "ratio": float(xb.mean() / xa.mean()) if xa.mean() else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a fathom eval --out folder")
    ap.add_argument("--a", default="forest", help="the reference strategy")
    ap.add_argument("--b", default="cascade", help="the strategy compared with it")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=default_out("policy_pair"))
    args = ap.parse_args(argv)
    run_info = json.loads((args.run / "run.json").read_text())
    result = compare(args.run, args.a, args.b, args.seed)
    result["run"] = args.run.name
    result["generator"] = run_info.get("generator")
    result["machine"] = machine_info()
    table = [
        [
            name,
            f"{m[args.a]:.3f}",
            f"{m[args.b]:.3f}",
            f"{m['diff']:+.3f} [{m['diff_ci'][0]:+.3f}, {m['diff_ci'][1]:+.3f}]",
            f"[{m['diff_ci_documents'][0]:+.3f}, {m['diff_ci_documents'][1]:+.3f}]",
            "–" if m["ratio"] is None else f"{m['ratio']:.2f}×",
        ]
        for name, m in result["measures"].items()
    ]
    title = f"{args.run.name}: {result['n']} questions answered by both"
    title += f", {result['documents']} documents"
    columns = [" ", args.a, args.b, f"{args.b} − {args.a} [95% CI]", "CI by document", "ratio"]
    print_table(title, columns, table)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "policy_pair.json", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
