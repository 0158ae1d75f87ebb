"""Portfolio members run together against the slowest of them run alone.

For each question, every member of the portfolio is timed alone (one after another), then all of
them together (``PoolSearcher.run_many``, which runs the dense and BM25 searches the members share
once and fuses per member), and together with the independent searches in threads for
comparison. Target: together ≤ 1.3 × the slowest member alone. Query embedding is excluded (done
once, shared by the members). Members may be views (``fathom collections views``).

    python bench/portfolio_parallel.py --collection NAME [--portfolio FILE | --members A,B,C]
        [--home DIR] [--questions FILE] [--limit 200]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from fathom.bench.common import (
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    read_jsonl,
    write_json,
)

TARGET = 1.3
DEFAULT_MEMBERS = "hybrid-convex-0.5,bm25-prf,dense-mmr"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default=None, help="FATHOM_HOME holding the collection")
    ap.add_argument("--collection", required=True)
    ap.add_argument("--portfolio", default=None, help="a `fathom portfolio build` JSON")
    ap.add_argument("--members", default=DEFAULT_MEMBERS)
    ap.add_argument("--data", default=None)
    ap.add_argument("--questions", default=None, help="JSONL (default: HotpotQA dev500)")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--n", type=int, default=10, help="chunks per member")
    ap.add_argument(
        "--ell",
        type=int,
        default=None,
        help="run the portfolio router's top ELL members per question (as `ask --portfolio` "
        "does) instead of every member; needs --portfolio",
    )
    ap.add_argument("--out", type=Path, default=default_out("portfolio_parallel"))
    args = ap.parse_args(argv)
    if args.home:
        os.environ["FATHOM_HOME"] = args.home

    from fathom.core.config import load_config
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for
    from fathom.router.portfolio.pool import PoolSearcher, pool_for

    cfg = load_config()
    names = (
        json.loads(Path(args.portfolio).read_text())["members"]
        if args.portfolio
        else args.members.split(",")
    )
    coll = Collection.open(cfg, args.collection, expect_embedder=embedder_id_for(cfg.embedder))
    pool = {m.name: m for m in pool_for(coll)}
    members = [pool[n] for n in names]
    embedder = query_embedder_for(cfg, coll)
    qfile = Path(args.questions) if args.questions else (
        data_dir(args.data) / "hotpotqa_dev500" / "questions.jsonl"
    )  # fmt: skip
    questions = [q["question"] for q in read_jsonl(qfile)][: args.limit]
    qvecs = embedder.embed(questions)
    searcher = PoolSearcher(coll)
    # Per question, the members to run: all of them, or the router's top ℓ (chosen before
    # timing; the router's decision is not part of the members' cost).
    chosen = [members] * len(questions)
    if args.ell:
        from fathom.router.portfolio.runtime import PortfolioRuntime
        from fathom.stages.pipeline import Engine

        if not args.portfolio:
            ap.error("--ell needs --portfolio")
        info = json.loads(Path(args.portfolio).read_text())
        runtime = PortfolioRuntime(
            info, coll, embedder_id_for(cfg.embedder), coll.manifest.embedder_dim, args.ell, "fuse"
        )
        engine = Engine(cfg, args.collection)
        chosen = []
        for q, v in zip(questions, qvecs, strict=True):
            prepared = engine.prepare(q)
            picked = runtime.choose(q, v, prepared.probe, prepared.type_probs)
            chosen.append([pool[n] for n in picked])
    for q, v in zip(questions[:10], qvecs[:10], strict=True):  # warm-up: caches
        searcher.run_many(members, q, v, args.n)
        for m in members:
            searcher.rows(m, q, v, args.n)
    log(f"{len(questions)} questions × members {', '.join(names)}")
    alone: dict[str, list[float]] = {m.name: [] for m in members}
    slowest, together, ratio, threads = [], [], [], []
    for q, v, run in zip(questions, qvecs, chosen, strict=True):
        times = []
        for m in run:
            t = time.perf_counter()
            searcher.rows(m, q, v, args.n)
            times.append((time.perf_counter() - t) * 1000)
            alone[m.name].append(times[-1])
        t = time.perf_counter()
        searcher.run_many(run, q, v, args.n)
        together.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        searcher.run_many(run, q, v, args.n, parallel=True)
        threads.append((time.perf_counter() - t) * 1000)
        slowest.append(max(times))
        ratio.append(together[-1] / slowest[-1])
    what = f"router's top {args.ell}" if args.ell else f"all {len(members)}"
    rows = [[f"{name} alone", *percentiles(ts).values()] for name, ts in alone.items() if ts]
    rows += [
        ["slowest member alone", *percentiles(slowest).values()],
        [f"{what} together", *percentiles(together).values()],
        [f"{what} together, in threads", *percentiles(threads).values()],
        ["together / slowest (per question)", *percentiles(ratio).values()],
    ]
    keys = list(percentiles(slowest).keys())
    print_table("portfolio members, ms (ratio unitless)", ["what", *keys], rows, digits=2)
    p50 = percentiles(together)["p50"] / percentiles(slowest)["p50"]
    p95 = percentiles(together)["p95"] / percentiles(slowest)["p95"]
    verdict = "met" if p50 <= TARGET else "MISSED"
    print(f"target: together ≤ {TARGET} × slowest → P50 ratio {p50:.2f}, P95 ratio {p95:.2f} "
          f"({verdict} at P50)")  # fmt: skip
    write_json(
        args.out,
        {
            "bench": "portfolio_parallel",
            "members": names,
            "ell": args.ell,
            "n_questions": len(questions),
            "alone_ms": {k: percentiles(v) for k, v in alone.items()},
            "slowest_ms": percentiles(slowest),
            "together_ms": percentiles(together),
            "together_threads_ms": percentiles(threads),
            "ratio_per_question": percentiles(ratio),
            "ratio_p50": p50,
            "ratio_p95": p95,
            "target": TARGET,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
