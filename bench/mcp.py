"""What the Model Context Protocol adds to a search: ``search`` through ``fathom mcp`` (a server
subprocess, the SDK's stdio client) against the same search in process (the server's own
``FathomTools.search``, which the tool wraps), on an ingested collection, in the same run.

Each query runs in process and through MCP, one right after the other (every other query
through MCP first), so both see the same load; the overhead is each query's MCP latency minus
its in-process one, at P50 and P95. The client validates each result against the tool's
output schema, as a client does. Target: overhead at P95 ≤ 20 ms.

    python bench/mcp.py [--data DIR] [--dataset squad_v1.1_dev] [--queries 200] [--k 10]
                        [--seed 0] [--home DIR] [--out DIR]

Writes ``mcp.json`` and ``mcp.md`` to ``--out`` (default ``docs/results/mcp``). ``--home``
keeps the built collection for later runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as `python bench/mcp.py`, this folder comes first on sys.path, and this file's name
    # would shadow the `mcp` SDK.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from fathom.bench.common import (
    REPO,
    bench_config,
    command_line,
    data_dir,
    log,
    machine_info,
    percentiles,
    print_table,
    read_jsonl,
    temp_home,
    write_json,
)

COLLECTION = "bench"
WARMUP = 20


def build(cfg: Any, home: Path, docs: Path) -> int:
    """The collection, ingested once (reused when it exists) by `fathom ingest` in a child
    process, so this process never loads torch; its number of chunks."""
    from fathom.core.errors import CollectionNotFound
    from fathom.index.collection import Collection

    try:
        coll = Collection.open(cfg, COLLECTION)
    except CollectionNotFound:
        log(f"ingesting {docs.parent.name}/{docs.name}")
        done = subprocess.run(
            [sys.executable, "-m", "fathom", "ingest", str(docs), "-c", COLLECTION],
            env=server_env(home),
            cwd=str(home),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"ingest failed: {done.stderr[-2000:]}") from None
        log(done.stdout.strip())
        coll = Collection.open(cfg, COLLECTION)
    n = len(coll)
    coll.close()
    return n


def server_env(home: Path) -> dict[str, str]:
    """The server's environment: this FATHOM_HOME, no FATHOM_SECTION__KEY overrides (the
    in-process side runs the defaults too)."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("FATHOM_") and "__" in k)}
    env["FATHOM_HOME"] = str(home)
    return env


async def measure(home: Path, cfg: Any, queries: list[str], k: int) -> dict[str, Any]:
    """Per query: the in-process search, then the same through MCP (ms each)."""
    from fathom.mcp_server.tools import FathomTools
    from mcp import ClientSession, StdioServerParameters, stdio_client

    tools = FathomTools(cfg, [COLLECTION])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fathom", "mcp", "--collection", COLLECTION, "--generator", "extractive"],
        env=server_env(home),
        cwd=str(home),  # no fathom.toml of the working directory
    )
    local: list[float] = []
    remote: list[float] = []
    same = 0
    with open(home / "server.log", "w", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=120) as session,
        ):
            t = time.perf_counter()
            await session.initialize()
            await session.list_tools()
            connect_ms = (time.perf_counter() - t) * 1000
            for i, q in enumerate(queries[:WARMUP] + queries):
                args = {"query": q, "collection": COLLECTION, "k": k}
                if i % 2:  # every other query goes through MCP first: neither side goes first
                    t = time.perf_counter()
                    res = await session.call_tool("search", args)
                    t_remote = (time.perf_counter() - t) * 1000
                t = time.perf_counter()
                mine = tools.search(q, COLLECTION, k)
                t_local = (time.perf_counter() - t) * 1000
                if not i % 2:
                    t = time.perf_counter()
                    res = await session.call_tool("search", args)
                    t_remote = (time.perf_counter() - t) * 1000
                if res.is_error:
                    raise SystemExit(f"search failed through MCP: {res.content[0].text}")
                if i < WARMUP:  # loads the models and indexes on both sides
                    continue
                local.append(t_local)
                remote.append(t_remote)
                theirs = res.structured_content["hits"]
                same += [h["chunk_id"] for h in theirs] == [h["chunk_id"] for h in mine["hits"]]
    tools.close()
    over = [r - lo for r, lo in zip(remote, local, strict=True)]
    return {
        "in_process_ms": percentiles(local),
        "mcp_ms": percentiles(remote),
        # The headline: each query's MCP latency minus its in-process one, P50 and P95 (the
        # difference of the two P95s is also kept; under load it is the noisier of the two).
        "overhead_ms": {"p50": percentiles(over)["p50"], "p95": percentiles(over)["p95"]},
        "p95_difference_ms": percentiles(remote)["p95"] - percentiles(local)["p95"],
        "per_query_overhead_ms": percentiles(over),
        "same_hits": same,
        "connect_ms": connect_ms,
    }


def command(argv: list[str] | None) -> str:
    """The command line that made the results, as ``bench.common.command_line`` writes it (the
    data folder, this machine's, left out: the sets are found through ``FATHOM_DATA``)."""
    return "FATHOM_DATA=… " + command_line(argv, __file__, leave_out=("--out",))


def markdown(results: dict[str, Any]) -> str:
    r, m = results, results["machine"]
    rows = [
        ("in process (`FathomTools.search`)", r["in_process_ms"]),
        ("through MCP (stdio, SDK client)", r["mcp_ms"]),
        ("overhead per query (MCP − in process)", r["per_query_overhead_ms"]),
    ]
    lines = [
        "# `search` through MCP against the same search in process",
        "",
        f"{r['queries']} questions of {r['dataset']} as queries, k = {r['k']}, on a collection "
        f"of {r['chunks']:,} chunks; each query in process and through `fathom mcp` (a "
        "subprocess, the SDK's stdio client, output schema validated), one right after the "
        f"other, after {WARMUP} warm-up queries. Command: `{r['command']}`.",
        "",
        "| search | P50 ms | P95 ms | P99 ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, p in rows:
        lines.append(f"| {label} | {p['p50']:.2f} | {p['p95']:.2f} | {p['p99']:.2f} |")
    o = r["overhead_ms"]
    lines += [
        "",
        f"Overhead, each query's MCP latency minus its in-process one: {o['p50']:.2f} ms at "
        f"P50 and {o['p95']:.2f} ms at P95 (target ≤ 20 ms at P95: "
        f"{'met' if o['p95'] <= 20 else 'not met'}); the two P95s differ by "
        f"{r['p95_difference_ms']:.2f} ms. Every other query went through MCP first. The "
        "same hits both ways for "
        f"{r['same_hits']} of {r['queries']} queries. Starting the server and listing its "
        f"tools took {r['connect_ms']:.0f} ms.",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cpus')} cores, {m.get('memory_gb')} GiB; load "
        f"average {m['loadavg_start'][0]:.2f} at the start and {m['loadavg_end'][0]:.2f} at "
        "the end (other jobs shared the cores).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--dataset", default="squad_v1.1_dev", help="a folder with docs.jsonl")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--home", default=None, help="FATHOM_HOME to build in and keep")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "mcp")
    args = ap.parse_args(argv)
    data = data_dir(args.data) / args.dataset
    rows = read_jsonl(data / "questions.jsonl")
    rng = random.Random(args.seed)
    queries = [r["question"] for r in rng.sample(rows, min(len(rows), args.queries + WARMUP))]
    queries = queries[WARMUP:] + queries[:WARMUP]  # the warm-up queries are measured last
    queries = queries[: args.queries]
    machine = machine_info()

    def run(home: Path) -> dict[str, Any]:
        cfg = bench_config(home)
        chunks = build(cfg, home, data / "docs.jsonl")
        log(f"{len(queries)} queries in process and through MCP, k = {args.k}")
        out = anyio.run(measure, home, cfg, queries, args.k)
        return {"chunks": chunks, **out}

    if args.home:
        Path(args.home).mkdir(parents=True, exist_ok=True)
        results = run(Path(args.home))
    else:
        with temp_home("mcp") as home:
            results = run(home)
    results = {
        "dataset": args.dataset,
        "queries": len(queries),
        "k": args.k,
        "command": command(argv),
        **results,
        "machine": machine,
    }
    print_table(
        f"search on {results['chunks']:,} chunks, {len(queries)} queries (ms; target: overhead "
        "P95 ≤ 20)",
        ["search", "P50", "P95", "P99"],
        [
            [name, results[key]["p50"], results[key]["p95"], results[key]["p99"]]
            for name, key in (
                ("in process", "in_process_ms"),
                ("through MCP", "mcp_ms"),
                ("overhead per query", "per_query_overhead_ms"),
            )
        ],
        digits=2,
    )
    o = results["overhead_ms"]
    log(f"overhead P50 {o['p50']:.2f} ms, P95 {o['p95']:.2f} ms")
    write_json(args.out / "mcp.json", results)
    (args.out / "mcp.md").write_text(markdown(json.loads((args.out / "mcp.json").read_text())))
    log(f"wrote {args.out / 'mcp.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
