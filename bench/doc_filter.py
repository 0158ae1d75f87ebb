"""Searching one document of many: ``fathom search --doc`` against the same search over the
whole collection, in the same run.

A collection is built from a dataset's ``docs.jsonl`` (by default SQuAD v1.1 dev, one
document per Wikipedia article). One article is the filter's target (``--doc``, a pattern as
``fathom search --doc`` takes it; default: the article with the most questions), and its
questions are the queries. Each query is searched twice, one right after the other (every
other query filtered first, after warm-up queries): filtered, that is the pattern matched
against the manifest (``index.doc_filter.select_documents``) and the probe restricted to the
documents it selects, the work ``search --doc`` does per query; and unfiltered. Reported: each
side's latency P50/P95/P99 and their ratio (filtered / unfiltered), the median of the
per-query ratios, each retriever step's P50, and what the filter buys: how many hits each side
returns, their share from the target article (1 when filtered, checked) and answer recall@k
(a gold answer in one of the hits).

    python bench/doc_filter.py [--data DIR] [--dataset squad_v1.1_dev] [--doc PATTERN]
                               [--queries 200] [--k 10] [--mode hybrid] [--embedder NAME]
                               [--home DIR] [--out FILE]
    python bench/doc_filter.py --smoke   # 3 articles, 10 queries, hashing embedder: runs?

Writes ``docs/results/doc-filter/doc_filter.json`` (with ``--smoke``,
``bench/results/doc_filter_smoke.json``). ``--home`` keeps the built collection for later
runs. The JSON names no path of this machine: documents by title and id, the data by name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    bench_config,
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    ratio,
    read_jsonl,
    temp_home,
    write_json,
)

COLLECTION = "bench-doc-filter"
WARMUP = 20
SMOKE = {"articles": 3, "queries": 10, "warmup": 2, "embedder": "hashing:384"}


def build(cfg: Any, home: Path, docs: Path, embedder: str | None) -> None:
    """The collection, ingested once (reused when it exists) by `fathom ingest` in a child
    process, so this process loads only the query path."""
    import os

    from fathom.core.errors import CollectionNotFound
    from fathom.index.collection import Collection

    try:
        Collection.open(cfg, COLLECTION).close()
        log(f"reusing collection {COLLECTION}")
        return
    except CollectionNotFound:
        pass
    log(f"ingesting {docs.parent.name}/{docs.name}")
    env = {k: v for k, v in os.environ.items() if not (k.startswith("FATHOM_") and "__" in k)}
    env["FATHOM_HOME"] = str(home)
    command = [sys.executable, "-m", "fathom", "ingest", str(docs), "-c", COLLECTION]
    command += ["--embedder", embedder] if embedder else []
    done = subprocess.run(command, env=env, cwd=str(home), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ingest failed: {done.stderr[-2000:]}")
    log(done.stdout.strip())


def smoke_docs(data: Path, home: Path, n: int) -> Path:
    """The dataset's first ``n`` articles, as a ``docs.jsonl`` of their own."""
    lines = (data / "docs.jsonl").read_text(encoding="utf-8").splitlines()
    out = home / "smoke" / "docs.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(line for line in lines[:n] if line.strip()) + "\n", "utf-8")
    return out


def pick_target(manifest: Any, questions: list[dict], pattern: str | None) -> str:
    """``pattern``, else the source id of the article with the most questions."""
    if pattern:
        return pattern
    held = {d.source_id for d in manifest.documents if d.status == "ok"}
    counts: dict[str, int] = {}
    for q in questions:
        for doc_id in q.get("doc_ids") or ():
            if doc_id in held:
                counts[doc_id] = counts.get(doc_id, 0) + 1
    if not counts:
        raise SystemExit("no question names a document of the collection: give --doc")
    return max(sorted(counts), key=lambda d: counts[d])


def answered(hits: Any, answers: list[str]) -> bool:
    """Whether one of ``hits`` holds one of the gold ``answers`` (case-insensitively)."""
    texts = [h.chunk.text.casefold() for h in hits]
    return any(a.casefold() in t for a in answers if a.strip() for t in texts)


def measure(
    cfg: Any,
    questions: list[dict],
    pattern: str,
    k: int,
    mode: str | None,
    limit: int,
    warmup: int,
) -> dict[str, Any]:
    """Each of the target's first ``limit`` questions searched filtered and unfiltered, one
    right after the other: latencies and hit quality."""
    from fathom.index.doc_filter import select_documents
    from fathom.index.retrieve import open_retriever

    retriever = open_retriever(cfg, COLLECTION, mode)  # type: ignore[arg-type]
    manifest = retriever.collection.manifest
    target = select_documents(manifest, [pattern])
    assert target is not None
    ids = {d.doc_id for d in target.documents}
    sources = {d.source_id for d in manifest.documents if d.doc_id in ids}
    asked = [q for q in questions if sources & set(q.get("doc_ids") or ())] or questions
    asked = asked[:limit]
    sides: dict[str, dict[str, list]] = {
        s: {"ms": [], "hits": [], "share": [], "recall": [], "steps": []}
        for s in ("filtered", "unfiltered")
    }

    def run(side: str, q: dict) -> tuple[float, Any]:
        t = time.perf_counter()
        if side == "filtered":
            within = select_documents(manifest, [pattern])
            probe = retriever.probe(q["question"], k, within=within)
        else:
            probe = retriever.probe(q["question"], k)
        return (time.perf_counter() - t) * 1000, probe

    for i, q in enumerate(asked[:warmup] + asked):
        order = ("filtered", "unfiltered") if i % 2 else ("unfiltered", "filtered")
        for side in order:
            ms, probe = run(side, q)
            if i < warmup:  # loads the indexes and the query model on both sides
                continue
            got = sides[side]
            got["ms"].append(ms)
            got["hits"].append(len(probe.hits))
            inside = sum(h.chunk.doc_id in ids for h in probe.hits)
            got["share"].append(inside / len(probe.hits) if probe.hits else 1.0)
            got["recall"].append(answered(probe.hits, q.get("answers") or []))
            got["steps"].append(dict(probe.timings_ms))
    n_asked = len(sides["filtered"]["ms"])
    if min(sides["filtered"]["share"], default=1.0) < 1.0:
        raise SystemExit("a filtered search returned a chunk of another document")
    return {
        "mode": retriever.mode,
        "dense_index": retriever.collection.dense.kind if retriever.mode != "bm25" else None,
        "collection": {
            "documents": manifest.counts()["documents"],
            "chunks": manifest.n_chunks,
        },
        "target": {
            "pattern": pattern,
            "documents": [{"doc_id": d.doc_id, "title": d.title} for d in target.documents],
            "chunks": len(target),
        },
        "queries": n_asked,
        "sides": sides,
    }


def summarise(raw: dict[str, Any], k: int) -> dict[str, Any]:
    """Percentiles, ratios and means of what ``measure`` collected."""
    sides = raw.pop("sides")
    out: dict[str, Any] = {**raw, "k": k}
    for side, got in sides.items():
        steps = sorted({s for d in got["steps"] for s in d})
        out[side] = {
            "latency_ms": percentiles(got["ms"]),
            "steps_p50_ms": {
                s: statistics.median(d.get(s, 0.0) for d in got["steps"]) for s in steps
            },
            "mean_hits": statistics.fmean(got["hits"]),
            "share_in_target": statistics.fmean(got["share"]),
            "answer_recall_at_k": statistics.fmean(got["recall"]),
        }
    f, u = sides["filtered"]["ms"], sides["unfiltered"]["ms"]
    out["ratio_filtered_over_unfiltered"] = {
        p: ratio(out["filtered"]["latency_ms"][p], out["unfiltered"]["latency_ms"][p])
        for p in ("p50", "p95", "p99")
    }
    out["per_query_ratio_median"] = statistics.median(a / b for a, b in zip(f, u, strict=True))
    return out


def command(args: argparse.Namespace) -> str:
    """The command line that made the results, the data folder by name only."""
    parts = ["python bench/doc_filter.py", f"--dataset {args.dataset}"]
    parts += [f"--doc {json.dumps(args.doc)}"] if args.doc else []
    parts += [f"--queries {args.queries}", f"--k {args.k}"]
    parts += [f"--mode {args.mode}"] if args.mode else []
    parts += [f"--embedder {args.embedder}"] if args.embedder else []
    parts += ["--smoke"] if args.smoke else []
    return "FATHOM_DATA=… " + " ".join(parts)


def report(results: dict[str, Any]) -> None:
    f, u = results["filtered"], results["unfiltered"]
    rows = [
        [
            side,
            r["latency_ms"]["p50"],
            r["latency_ms"]["p95"],
            r["latency_ms"]["p99"],
            r["mean_hits"],
            r["share_in_target"],
            r["answer_recall_at_k"],
        ]
        for side, r in (("filtered (--doc)", f), ("unfiltered", u))
    ]
    q = results["ratio_filtered_over_unfiltered"]
    rows.append(["filtered / unfiltered", q["p50"], q["p95"], q["p99"], None, None, None])
    t = results["target"]
    print_table(
        f"search --doc {t['pattern']!r} ({t['chunks']} of {results['collection']['chunks']:,} "
        f"chunks, {results['collection']['documents']} documents) against the whole "
        f"collection: {results['queries']} queries, k = {results['k']}, {results['mode']} (ms)",
        ["search", "P50", "P95", "P99", "hits", "share in target", "answer recall@k"],
        [[c if c is not None else "" for c in row] for row in rows],
        digits=2,
    )
    log(f"median per-query ratio (filtered / unfiltered): {results['per_query_ratio_median']:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--dataset", default="squad_v1.1_dev", help="a folder with docs.jsonl")
    ap.add_argument("--doc", default=None, help="the filter's pattern (default: see above)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--mode", choices=["hybrid", "dense", "bm25"], default=None)
    ap.add_argument("--embedder", default=None, help="embedder to build with (default MiniLM)")
    ap.add_argument("--smoke", action="store_true", help="a tiny run that checks the script")
    ap.add_argument("--home", default=None, help="FATHOM_HOME to build in and keep")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.smoke:
        args.queries = min(args.queries, SMOKE["queries"])
        args.embedder = args.embedder or SMOKE["embedder"]
    out = args.out or (
        default_out("doc_filter_smoke")
        if args.smoke
        else REPO / "docs" / "results" / "doc-filter" / "doc_filter.json"
    )
    data = data_dir(args.data) / args.dataset
    questions = read_jsonl(data / "questions.jsonl")

    def run(home: Path) -> dict[str, Any]:
        overrides = {"embedder.name": args.embedder} if args.embedder else None
        cfg = bench_config(home, overrides)
        docs = smoke_docs(data, home, SMOKE["articles"]) if args.smoke else data / "docs.jsonl"
        build(cfg, home, docs, args.embedder)
        from fathom.index.collection import Collection

        coll = Collection.open(cfg, COLLECTION)
        pattern = pick_target(coll.manifest, questions, args.doc)
        coll.close()
        warmup = SMOKE["warmup"] if args.smoke else WARMUP
        log(f"searching {args.queries} queries with and without --doc {pattern!r}")
        return measure(cfg, questions, pattern, args.k, args.mode, args.queries, warmup)

    if args.home:
        Path(args.home).mkdir(parents=True, exist_ok=True)
        raw = run(Path(args.home))
    else:
        with temp_home("doc-filter") as home:
            raw = run(home)
    results = {"dataset": args.dataset, **summarise(raw, args.k)}
    results["command"] = command(args)
    report(results)
    write_json(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
