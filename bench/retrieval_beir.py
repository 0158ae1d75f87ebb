"""SciFact (BEIR test split): Fathom retrieval quality vs plain bm25s / MiniLM / RRF on whole docs.

Fathom: a collection of ``scifact/docs.jsonl`` built with the default config (packaged
all-MiniLM-L6-v2, semantic chunker, title prefix), searched in bm25, dense and hybrid mode
(the configured fusion, convex by default, and RRF beside it) for ``--k-candidates`` chunks
per query. A document scores by its best chunk: the chunk ranking is
collapsed to documents by keeping each document's first occurrence.

Baseline, same run, same model object: whole documents (``title + " " + text``, no chunking);
bm25s with PyStemmer English stems and English stopwords; MiniLM ``encode`` normalised, exact
inner product in numpy; RRF (k=60) of the two top-1000 lists.

Metrics (ours, below): nDCG@10 with graded qrels, linear gain and log2 discount (trec_eval's
definition, as BEIR/pytrec_eval use), and Recall@100.

    python bench/retrieval_beir.py [--data DIR] [--out FILE.json] [--k-candidates 300]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from fathom.bench.common import (
    Stopwatch,
    bench_config,
    data_dir,
    default_out,
    log,
    parse_sets,
    print_table,
    progress_printer,
    ratio,
    read_jsonl,
    st_model,
    temp_home,
    write_json,
)

MODES = ("bm25", "dense", "hybrid")
# Published reference numbers for the baseline (nDCG@10, Recall@100).
REFERENCE = {
    "bm25": (0.686, 0.913),
    "dense": (0.645, 0.925),
    "hybrid": (0.717, 0.948),
}
TARGET_HYBRID_NDCG = 0.72


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def ndcg_at_k(ranked: list[str], qrels: dict[str, int], k: int = 10) -> float:
    """nDCG@k graded by ``qrels`` (linear gain, log2 discount): ``evaluation.metrics``'s, 0 when
    nothing is relevant."""
    from fathom.feedback.judges import ndcg_at_k as graded

    value = graded(ranked, [d for d, r in qrels.items() if r > 0], qrels, k)
    return 0.0 if value is None else value


def recall_at_k(ranked: list[str], qrels: dict[str, int], k: int = 100) -> float:
    """Share of the relevant documents (qrels score > 0) found in the top ``k``."""
    relevant = np.array([d for d, r in qrels.items() if r > 0])
    if relevant.size == 0:
        return 0.0
    return float(np.isin(relevant, np.array(ranked[:k], dtype=object)).mean())


def first_occurrences(source_ids: list[str]) -> list[str]:
    """Collapse a chunk ranking to a document ranking: each document at its best chunk's place."""
    return list(dict.fromkeys(source_ids))


def evaluate(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over the queries that have judgements."""
    qids = [q for q in qrels if q in runs]
    return {
        "ndcg@10": float(np.mean([ndcg_at_k(runs[q], qrels[q], 10) for q in qids])),
        "recall@100": float(np.mean([recall_at_k(runs[q], qrels[q], 100) for q in qids])),
        "queries": len(qids),
    }


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    from fathom.learn.questions import read_qrels

    return read_qrels(path)


def rrf(lists: list[list[str]], k: int = 60) -> list[str]:
    """Reciprocal rank fusion of ranked id lists; ties break by id."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for rank, d in enumerate(ranked, start=1):
            fused[d] = fused.get(d, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda d: (-fused[d], d))


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def run_fathom(cfg, docs_path: Path, queries: list[dict], depth: int) -> dict:
    from fathom.chunking import make_chunker
    from fathom.index.collection import Collection
    from fathom.index.embed import make_embedder
    from fathom.index.ingest import ingest
    from fathom.index.retrieve import CollectionRetriever

    embedder = make_embedder(cfg.embedder)
    with Stopwatch() as load:
        _ = embedder.dim  # model load, outside the ingest timing
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    log("fathom: ingesting scifact")
    with Stopwatch() as wall:
        report = ingest(
            cfg,
            [docs_path],
            "scifact",
            embedder,
            chunker,
            progress=progress_printer("fathom ingest"),
        )
    coll = Collection.open(cfg, "scifact")
    out: dict = {
        "model_load_s": load.seconds,
        "ingest_wall_s": wall.seconds,
        "ingest_seconds": report.seconds,
        "chunks": report.total_chunks,
        "documents_ok": report.count("ok"),
        "documents_skipped": report.count("skipped"),
        "documents_failed": report.count("failed"),
        "modes": {},
    }
    for mode in (*MODES, "hybrid-rrf"):
        retriever = CollectionRetriever(
            coll,
            embedder,
            mode="hybrid" if mode == "hybrid-rrf" else mode,
            rrf_k=cfg.retrieval.rrf_k,
            candidates=depth,
            fusion="rrf" if mode == "hybrid-rrf" else cfg.retrieval.fusion,
            dense_weight=cfg.retrieval.dense_weight,
        )
        runs: dict[str, list[str]] = {}
        stage_ms: dict[str, list[float]] = {}
        n_docs = []
        t0 = time.perf_counter()
        for q in queries:
            probe = retriever.probe(q["question"], depth)
            runs[q["qid"]] = first_occurrences([h.chunk.source_id for h in probe.hits])
            n_docs.append(len(runs[q["qid"]]))
            for key, ms in probe.timings_ms.items():
                stage_ms.setdefault(key, []).append(ms)
        seconds = time.perf_counter() - t0
        out["modes"][mode] = {
            "runs": runs,
            "query_ms_mean": 1000 * seconds / len(queries),
            "stage_ms_mean": {k: float(np.mean(v)) for k, v in stage_ms.items()},
            "distinct_docs_min": int(min(n_docs)),
            "distinct_docs_mean": float(np.mean(n_docs)),
        }
        log(
            f"fathom {mode}: {1000 * seconds / len(queries):.1f} ms/query, "
            f"≥{min(n_docs)} distinct docs per query"
        )
    coll.close()
    out["embedder"] = embedder
    return out


def run_baseline(model, docs: list[dict], queries: list[dict], depth: int = 1000) -> dict:
    import bm25s
    import Stemmer

    ids = [d["doc_id"] for d in docs]
    corpus = [(d.get("title") or "") + " " + d["text"] for d in docs]
    qtexts = [q["question"] for q in queries]
    qids = [q["qid"] for q in queries]
    depth = min(depth, len(ids))
    out: dict = {"modes": {}}

    stemmer = Stemmer.Stemmer("english")
    log("baseline: bm25s index")
    with Stopwatch() as bm_index:
        tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
        bm = bm25s.BM25()
        bm.index(tokens, show_progress=False)
    with Stopwatch() as bm_query:
        qtok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, show_progress=False)
        rows, _scores = bm.retrieve(qtok, k=depth, show_progress=False, n_threads=1)
    bm25_runs = {q: [ids[r] for r in rows[i]] for i, q in enumerate(qids)}

    log(f"baseline: encoding {len(corpus)} whole documents")
    with Stopwatch() as dense_index:
        dvec = model.encode(
            corpus,
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
    with Stopwatch() as dense_query:
        qvec = model.encode(
            qtexts,
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
        sims = qvec @ dvec.T  # exact inner product, (n_queries, n_docs)
        top = np.argpartition(-sims, depth - 1, axis=1)[:, :depth]
        order = np.take_along_axis(-sims, top, axis=1).argsort(axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
    dense_runs = {q: [ids[r] for r in top[i]] for i, q in enumerate(qids)}

    with Stopwatch() as fuse:
        hybrid_runs = {q: rrf([bm25_runs[q], dense_runs[q]], k=60) for q in qids}

    out["modes"] = {
        "bm25": {"runs": bm25_runs, "query_ms_mean": 1000 * bm_query.seconds / len(qids)},
        "dense": {"runs": dense_runs, "query_ms_mean": 1000 * dense_query.seconds / len(qids)},
        "hybrid": {
            "runs": hybrid_runs,
            "query_ms_mean": 1000
            * (bm_query.seconds + dense_query.seconds + fuse.seconds)
            / len(qids),
        },
    }
    out["index_s"] = {"bm25": bm_index.seconds, "dense_encode": dense_index.seconds}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", help="data folder (default: $FATHOM_DATA, else shared/data beside the checkout)"
    )
    parser.add_argument("--out", type=Path, default=default_out("retrieval_beir"))
    parser.add_argument(
        "--k-candidates",
        type=int,
        default=300,
        help="chunks retrieved per query (and each retriever's depth) before "
        "collapsing to documents (default 300)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="configuration override for Fathom's side, e.g. chunker.target_tokens=230 "
        "(repeatable; the value is parsed as in fathom.toml)",
    )
    args = parser.parse_args(argv)
    overrides = parse_sets(args.set)

    root = data_dir(args.data) / "scifact"
    queries = read_jsonl(root / "queries.jsonl")
    qrels = load_qrels(root / "qrels.tsv")
    queries = [q for q in queries if str(q["qid"]) in qrels]
    for q in queries:
        q["qid"] = str(q["qid"])
    docs = read_jsonl(root / "docs.jsonl")
    log(f"scifact: {len(docs)} docs, {len(queries)} test queries with qrels")

    with temp_home("beir") as home:
        cfg = bench_config(home, overrides)
        fathom = run_fathom(cfg, root / "docs.jsonl", queries, args.k_candidates)
        embedder = fathom.pop("embedder")
        baseline = run_baseline(st_model(embedder), docs, queries)

    rows, results = [], {}
    for mode in (*MODES, "hybrid-rrf"):
        base_mode = "hybrid" if mode == "hybrid-rrf" else mode
        f = evaluate(fathom["modes"][mode]["runs"], qrels)
        b = evaluate(baseline["modes"][base_mode]["runs"], qrels)
        ref_ndcg, ref_recall = REFERENCE[base_mode]
        results[mode] = {
            "fathom": f,
            "baseline": b,
            "ndcg_ratio": ratio(f["ndcg@10"], b["ndcg@10"]),
            "recall_ratio": ratio(f["recall@100"], b["recall@100"]),
            "reference_baseline": {"ndcg@10": ref_ndcg, "recall@100": ref_recall},
        }
        rows.append(
            [
                mode if mode != "hybrid" else f"hybrid ({cfg.retrieval.fusion})",
                f["ndcg@10"],
                b["ndcg@10"],
                ratio(f["ndcg@10"], b["ndcg@10"]),
                f["recall@100"],
                b["recall@100"],
                ratio(f["recall@100"], b["recall@100"]),
                f"{ref_ndcg:.3f} / {ref_recall:.3f}",
            ]
        )
    print_table(
        f"SciFact test ({len(queries)} queries): Fathom (chunks → best chunk per doc, "
        f"depth {args.k_candidates}) vs whole-document baseline",
        [
            "mode",
            "Fathom nDCG@10",
            "base nDCG@10",
            "ratio",
            "Fathom R@100",
            "base R@100",
            "ratio",
            "reference nDCG / R",
        ],
        rows,
    )
    hybrid = results["hybrid"]["fathom"]["ndcg@10"]
    print(
        f"target: Fathom hybrid nDCG@10 ≥ {TARGET_HYBRID_NDCG} → {hybrid:.3f} "
        f"({'met' if hybrid >= TARGET_HYBRID_NDCG else 'MISSED'})"
    )

    s = fathom["ingest_seconds"]
    timing_rows = [
        [
            "Fathom ingest (wall)",
            fathom["ingest_wall_s"],
            f"parse+chunk {s.get('parse_chunk', 0):.1f}s, embed {s.get('embed', 0):.1f}s, "
            f"write {s.get('write', 0):.1f}s; {fathom['chunks']} chunks",
        ],
        [
            "baseline index",
            baseline["index_s"]["bm25"] + baseline["index_s"]["dense_encode"],
            f"bm25 {baseline['index_s']['bm25']:.1f}s, "
            f"encode {baseline['index_s']['dense_encode']:.1f}s;"
            f" {len(docs)} whole docs (MiniLM truncates at 256 tokens)",
        ],
        ["model load (excluded)", fathom["model_load_s"], "shared by both sides"],
    ]
    print_table("Build time (s)", ["what", "seconds", "detail"], timing_rows, digits=1)
    print_table(
        "Query time, mean ms/query (Fathom one query at a time, baseline batched: not comparable)",
        ["mode", "Fathom ms", "baseline ms", "Fathom stages (mean ms)"],
        [
            [
                m,
                fathom["modes"][m]["query_ms_mean"],
                baseline["modes"][m]["query_ms_mean"],
                ", ".join(f"{k} {v:.1f}" for k, v in fathom["modes"][m]["stage_ms_mean"].items()),
            ]
            for m in MODES
        ],
        digits=1,
    )
    if fathom["documents_skipped"] or fathom["documents_failed"]:
        print(
            f"note: Fathom skipped {fathom['documents_skipped']} duplicate-content and failed "
            f"{fathom['documents_failed']} documents"
        )

    for side in (fathom, baseline):
        for entry in side["modes"].values():
            entry.pop("runs")
    write_json(
        args.out,
        {
            "bench": "retrieval_beir",
            "dataset": "scifact test",
            "k_candidates": args.k_candidates,
            "overrides": overrides,
            "results": results,
            "target": {"hybrid_ndcg@10": TARGET_HYBRID_NDCG, "met": hybrid >= TARGET_HYBRID_NDCG},
            "fathom": fathom,
            "baseline": baseline,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
