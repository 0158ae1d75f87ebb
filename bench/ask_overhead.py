"""What `fathom ask` costs around the generator, and how fast it starts.

1. Per-stage latency of ``Engine.ask`` with the extractive generator on a ~10k-chunk collection
   (SciFact), over many questions, with the reranker off, with the default reranker (Fathom's
   reader) and with the embedding reranker (``rerank.model = "embedding"``, the reranker
   before the reader). Generation is reported but excluded from the total: the question is
   what Fathom adds to a model call. Each ask starts with no remembered sentence vectors
   (``Engine.sentence_vectors``), as a new process would. Target: P95 ≤ 30 ms without the
   reranker.
2. Cold start: a new process running ``python cli.py ask COLLECTION "question" --generator
   extractive`` until it exits, 10 runs each without the reranker, as shipped (the reader) and
   with the embedding reranker — and, with ``--previous DIR``, another checkout's ``cli.py``
   with its own defaults — beside the baseline of ``python -c pass`` and of ``python cli.py
   --help``, interleaved run by run so load changes hit all alike. Target: median ≤ 1.5 s.

    python bench/ask_overhead.py [--data DIR] [--queries 200] [--rerank-queries N] [--runs 10]
        [--previous DIR] [--home DIR] [--out FILE]

``--home`` keeps the built collection (and the ONNX export) for later runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fathom.bench.common import (
    REPO,
    bench_config,
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    progress_printer,
    read_jsonl,
    temp_home,
    write_json,
)

COLLECTION = "scifact"
EXCLUDED = ("generate",)
# the embedding reranker, the default before the reader
EMBEDDING_RERANKER = "embedding"


def build(cfg, data: Path) -> None:
    from fathom.core.errors import CollectionNotFound
    from fathom.index.collection import Collection
    from fathom.index.ingest import ingest_paths

    try:
        coll = Collection.open(cfg, COLLECTION)
        log(f"reusing collection {COLLECTION} ({len(coll)} chunks)")
        return
    except CollectionNotFound:
        pass
    log("building the SciFact collection (embeds every chunk once)")
    ingest_paths(
        cfg, [data / "scifact" / "docs.jsonl"], COLLECTION, progress=progress_printer("scifact")
    )


def run_asks(cfg, questions: list[str], rerank: bool) -> dict:
    from fathom.stages.pipeline import Engine

    engine = Engine(cfg, COLLECTION)
    for q in questions[:5]:  # warm-up: sessions, caches, first-use imports
        engine.ask(q, rerank=rerank)
    per_stage: dict[str, list[float]] = {}
    totals, gen = [], []
    ks = []
    for q in questions:
        # Each ask starts with no remembered sentence vectors, as a `fathom ask` process does
        # (a `chat` session keeps them, and pays less).
        engine.parts.sentence_vectors.clear()
        answer = engine.ask(q, rerank=rerank)
        stages = answer.trace.stages_ms
        for name, ms in stages.items():
            per_stage.setdefault(name, []).append(ms)
        totals.append(sum(ms for name, ms in stages.items() if name not in EXCLUDED))
        gen.append(stages.get("generate", 0.0))
        ks.append(answer.trace.decision.k if answer.trace.decision else 0)
    engine.close()
    return {
        "rerank": rerank,
        "reranker": answer.trace.reranker,
        "n": len(questions),
        "chunks": len(engine.collection),
        "total_excluding_generation_ms": percentiles(totals),
        "generate_ms": percentiles(gen),
        "stages_ms": {name: percentiles(v) for name, v in per_stage.items()},
        "mean_k": sum(ks) / len(ks),
    }


def cold_start(home: Path, question: str, runs: int, previous: Path | None = None) -> dict:
    """Median, min and max seconds of each command, run ``runs`` times in turn."""
    env = {**os.environ, "FATHOM_HOME": str(home)}
    cli = [sys.executable, str(REPO / "cli.py")]
    ask = [*cli, "ask", COLLECTION, question, "--generator", "extractive"]
    embedding = {**env, "FATHOM_RERANK__MODEL": EMBEDDING_RERANKER}
    commands: dict[str, tuple[list[str], dict[str, str], Path]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env, REPO),
        "cli.py --help": ([*cli, "--help"], env, REPO),
        "cli.py ask (extractive)": ([*ask, "--no-rerank"], env, REPO),
        "cli.py ask (extractive, reader)": (ask, env, REPO),
        "cli.py ask (extractive, embedding reranker)": (ask, embedding, REPO),
    }
    if previous is not None:
        # the other checkout's cli.py registers itself as ``fathom``; keep this one off the path
        old = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        cmd = [sys.executable, str(previous / "cli.py"), *ask[2:]]
        commands["previous checkout: cli.py ask (extractive)"] = (cmd, old, previous)
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, (cmd, cmd_env, cwd) in commands.items():
            t = time.perf_counter()
            proc = subprocess.run(cmd, env=cmd_env, capture_output=True, text=True, cwd=cwd)
            times[label].append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise SystemExit(f"{label} failed: {proc.stderr[-2000:]}")
    out = {}
    for label, values in times.items():
        out[label] = {
            "median_s": statistics.median(values),
            "min_s": min(values),
            "max_s": max(values),
            "runs": runs,
        }
        log(f"cold start {label}: median {out[label]['median_s']:.3f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=10, help="cold-start runs per command")
    ap.add_argument("--home", default=None, help="FATHOM_HOME to build in and keep")
    ap.add_argument(
        "--rerank-queries",
        type=int,
        default=None,
        help="questions for the reranker run (default: --queries)",
    )
    ap.add_argument(
        "--previous", type=Path, default=None, help="another checkout to cold-start beside"
    )
    ap.add_argument("--out", type=Path, default=default_out("ask_overhead"))
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    questions = [q["question"] for q in read_jsonl(data / "scifact" / "queries.jsonl")]
    questions = questions[: args.queries]

    def run(home: Path) -> dict:
        cfg = bench_config(home, {"generator.backend": "extractive"})
        build(cfg, data)
        n_rerank = args.queries if args.rerank_queries is None else args.rerank_queries
        fallback = bench_config(
            home, {"generator.backend": "extractive", "rerank.model": EMBEDDING_RERANKER}
        )
        results = {
            "without_rerank": run_asks(cfg, questions, rerank=False),
            "with_rerank": run_asks(cfg, questions[:n_rerank], rerank=True),
            "with_embedding_rerank": run_asks(fallback, questions[:n_rerank], rerank=True),
        }
        previous = args.previous.resolve() if args.previous else None
        results["cold_start"] = cold_start(home, questions[0], args.runs, previous)
        return results

    if args.home:
        Path(args.home).mkdir(parents=True, exist_ok=True)
        results = run(Path(args.home))
    else:
        with temp_home("ask") as home:
            results = run(home)

    rows = []
    for key in ("without_rerank", "with_rerank", "with_embedding_rerank"):
        r = results[key]
        t = r["total_excluding_generation_ms"]
        rows.append(
            [
                f"{key} ({r['reranker']})",
                t["p50"],
                t["p95"],
                t["p99"],
                r["generate_ms"]["p50"],
                r["mean_k"],
            ]
        )
    print_table(
        f"ask overhead on {results['without_rerank']['chunks']} chunks, "
        f"{len(questions)} questions (ms, generation excluded; target P95 ≤ 30 without rerank)",
        ["run", "P50", "P95", "P99", "generate P50", "mean k"],
        rows,
        digits=2,
    )
    stage_rows = []
    for name in results["without_rerank"]["stages_ms"]:
        a = results["without_rerank"]["stages_ms"][name]
        row = [name, a["p50"], a["p95"]]
        for key in ("with_rerank", "with_embedding_rerank"):
            b = results[key]["stages_ms"].get(name, {"p50": float("nan"), "p95": float("nan")})
            row += [b["p50"], b["p95"]]
        stage_rows.append(row)
    reranked = [
        results[k]["stages_ms"].get("rerank") for k in ("with_rerank", "with_embedding_rerank")
    ]
    if all(reranked):
        nan = float("nan")
        stage_rows.append(
            ["rerank", nan, nan, *(v for r in reranked for v in (r["p50"], r["p95"]))]
        )
    print_table(
        "per stage (ms)",
        [
            "stage",
            "P50 no rerank",
            "P95 no rerank",
            "P50 reader",
            "P95 reader",
            "P50 embedding",
            "P95 embedding",
        ],
        stage_rows,
        digits=2,
    )
    cs = results["cold_start"]
    base = cs["python -c pass"]["median_s"]
    print_table(
        "cold start, process start to exit (s; target: ask median ≤ 1.5)",
        ["command", "median", "min", "max", "× python -c pass"],
        [[k, v["median_s"], v["min_s"], v["max_s"], v["median_s"] / base] for k, v in cs.items()],
    )
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
