"""Hybrid search latency at ~10k and ~100k chunks, split by stage, vs raw FAISS and raw bm25s.

Collections: records from SciFact + HotpotQA dev500 + MuSiQue docs (interleaved, duplicate
content dropped), taken in order until the chunk count reaches each size; past the distinct
records (or past ``--distinct`` chunks' worth) they repeat with ``#rN`` appended to doc_id and
title. Chunk counts are known up front by running Fathom's chunker over the records once.
``--distinct`` defaults to the smallest size: on a small shared CPU, MiniLM manages only a few
256-token chunks per second, so the 100k collection repeats the 10k collection's records rather
than all ~18k chunks of the three sets (``--distinct 0`` uses them all).

Building 100k chunks on 2 cores: the collections are built by Fathom's ``ingest`` with a small
wrapper embedder (``CachingEmbedder``) that embeds each distinct chunk text once with the
packaged MiniLM and reuses the vector for its ``#rN`` repeats (the key drops the ``#rN`` title
suffix). Legitimate here because only search latency is measured; query embedding is NOT cached.

Per query, interleaved so load changes hit all sides alike: Fathom ``CollectionRetriever.probe``
(hybrid, default k and candidates), raw ``faiss.IndexFlatIP.search`` over the same vectors at
the same depth, and raw bm25s (tokenize with stems+stopwords, ``get_scores``, top-k) over the same
chunk texts. Warm-up queries run first and are not counted.

    python bench/search.py [--data DIR] [--sizes 10000,100000] [--queries 300] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
from fathom.bench.common import (
    REPO,
    Stopwatch,
    bench_config,
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    progress_printer,
    ratio,
    read_jsonl,
    temp_home,
)
from fathom.bench.common import write_json as _write_json

SETS = ("scifact", "hotpotqa_dev500", "musique_train100_hipporag")
STAGES = ("embed_query", "dense", "bm25", "fuse", "fetch")
TARGET_P95_MS = 15.0
_REPEAT = re.compile(r" #r\d+(?= — |\n)")


class CachingEmbedder:
    """Wraps a Fathom embedder: ``embed`` computes each distinct text once (``#rN`` title suffix
    ignored); ``embed_query`` always runs the model."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.id = inner.id
        self.name = inner.name
        self._cache: dict[str, np.ndarray] = {}
        self.computed = 0
        self.reused = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def token_counter(self):
        return self.inner.token_counter()

    def model_dir(self):
        return self.inner.model_dir()

    def _key(self, text: str) -> str:
        """The original record's embed text: ``#rN`` dropped from the title; when the original
        text began with its title (so ``embed_input`` gave it no heading), the heading dropped."""
        key = _REPEAT.sub("", text, count=1)
        if key != text and key not in self._cache:
            body = key.partition("\n")[2]
            if body in self._cache:
                return body
        return key

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            vecs = self.inner.embed(missing)
            self._cache.update(zip(missing, vecs, strict=True))
        self.computed += len(missing)
        self.reused += len(keys) - len(missing)
        return np.stack([self._cache[k] for k in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def base_records(root: Path, chunker) -> list[tuple[dict, int]]:
    """Interleaved distinct records of the three sets, each with its Fathom chunk count."""
    from fathom import ingestion

    per_set = []
    for name in SETS:
        path = root / name / "docs.jsonl"
        raw = read_jsonl(path)
        docs = list(ingestion.load_records(path))
        per_set.append(
            [
                (
                    {
                        "doc_id": f"{name}:{r['doc_id']}",
                        "title": r.get("title") or "",
                        "text": r["text"],
                    },
                    len(chunker.split(d)),
                )
                for r, d in zip(raw, docs, strict=True)
            ]
        )
        log(f"{name}: {len(raw)} records, {sum(n for _, n in per_set[-1])} chunks")
    seen: set[tuple[str, str]] = set()
    out = []
    for i in range(max(map(len, per_set))):
        for recs in per_set:
            if i < len(recs):
                rec, n = recs[i]
                key = (rec["title"], rec["text"])
                if n and key not in seen:
                    seen.add(key)
                    out.append((rec, n))
    return out


def cap(records: list[tuple[dict, int]], chunks: int) -> list[tuple[dict, int]]:
    """The leading records holding at least ``chunks`` chunks (all when ``chunks`` is 0)."""
    total = 0
    for i, (_rec, n) in enumerate(records):
        if chunks and total >= chunks:
            return records[:i]
        total += n
    return records


def compose(records: list[tuple[dict, int]], size: int, path: Path) -> tuple[int, int]:
    """Write records (repeating with ``#rN``) until ``size`` chunks; returns (docs, chunks)."""
    docs = chunks = 0
    with open(path, "w", encoding="utf-8") as fh:
        r = 1
        while chunks < size:
            for rec, n in records:
                if chunks >= size:
                    break
                if r > 1:
                    rec = {
                        "doc_id": f"{rec['doc_id']}#r{r}",
                        "title": f"{rec['title']} #r{r}",
                        "text": rec["text"],
                    }
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                docs += 1
                chunks += n
            r += 1
    return docs, chunks


def load_queries(root: Path, n: int) -> list[str]:
    """SciFact test queries and HotpotQA questions, alternating, first ``n``."""
    a = [q["question"] for q in read_jsonl(root / "scifact" / "queries.jsonl")]
    b = [q["question"] for q in read_jsonl(root / "hotpotqa_dev500" / "questions.jsonl")]
    mixed = [q for pair in zip(a, b, strict=False) for q in pair]
    mixed += a[len(b) :] + b[len(a) :]
    return mixed[:n]


class RawBm25:
    """Plain bm25s over the same chunk texts: tokenize (stems + stopwords), get_scores, top-k."""

    def __init__(self, texts: list[str], k1: float, b: float) -> None:
        import bm25s
        import Stemmer

        self.bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.model = bm25s.BM25(k1=k1, b=b)
        self.model.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        terms = self.bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stemmer, return_ids=False, show_progress=False
        )[0]
        terms = [t for t in terms if t in self.model.vocab_dict]
        if not terms:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        scores = self.model.get_scores(terms)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return scores[top], top


def bench_size(
    cfg, root: Path, size: int, records, embedder, queries: list[str], warmup: int, work: Path
) -> dict:
    import faiss
    from fathom.chunking import make_chunker
    from fathom.index.collection import Collection, embed_input
    from fathom.index.ingest import ingest
    from fathom.index.retrieve import retriever_for

    name = f"search-{size}"
    path = work / f"{name}.jsonl"
    n_docs, n_chunks = compose(records, size, path)
    log(f"{name}: {n_docs} records → {n_chunks} chunks; ingesting")
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    with Stopwatch() as build:
        report = ingest(cfg, [path], name, embedder, chunker, progress=progress_printer(name, 15))
    log(
        f"{name}: built in {build.seconds:.0f}s ({report.seconds}); "
        f"embedder computed {embedder.computed}, reused {embedder.reused}"
    )

    coll = Collection.open(cfg, name)
    retriever = retriever_for(cfg, coll, embedder, "hybrid")
    k = cfg.retrieval.k
    depth = max(k, cfg.retrieval.candidates)
    with Stopwatch() as raw_build:
        flat = faiss.IndexFlatIP(coll.dense.dim)
        flat.add(np.ascontiguousarray(coll.dense.vectors(), dtype=np.float32))
        texts = [embed_input(c, coll.manifest.embed_title_prefix) for c in coll.store.all()]
        raw_bm25 = RawBm25(texts, cfg.index.bm25_k1, cfg.index.bm25_b)
        del texts
    log(
        f"{name}: raw references built in {raw_build.seconds:.0f}s; dense index kind "
        f"{coll.dense.kind}"
    )
    qvecs = embedder.inner.embed(queries)  # for the raw FAISS side only

    stage: dict[str, list[float]] = {s: [] for s in STAGES}
    total_ex, wall_ex, raw_dense, raw_sparse = [], [], [], []
    for i, q in enumerate([*queries[:warmup], *queries]):
        t = time.perf_counter()
        probe = retriever.probe(q, k)
        wall = (time.perf_counter() - t) * 1000
        qi = i - warmup if i >= warmup else i
        t = time.perf_counter()
        flat.search(qvecs[qi : qi + 1], depth)
        rd = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        raw_bm25.search(q, depth)
        rs = (time.perf_counter() - t) * 1000
        if i < warmup:
            continue
        tm = probe.timings_ms
        for s in STAGES:
            stage[s].append(tm.get(s, 0.0))
        total_ex.append(sum(tm.get(s, 0.0) for s in STAGES if s != "embed_query"))
        wall_ex.append(wall - tm.get("embed_query", 0.0))
        raw_dense.append(rd)
        raw_sparse.append(rs)
    raw_sum = [a + b for a, b in zip(raw_dense, raw_sparse, strict=True)]
    result = {
        "documents": report.count("ok"),
        "chunks": len(coll),
        "dense_kind": coll.dense.kind,
        "build_s": build.seconds,
        "build_phases_s": report.seconds,
        "vectors_computed": embedder.computed,
        "vectors_reused": embedder.reused,
        "queries": len(queries),
        "warmup": warmup,
        "k": k,
        "depth": depth,
        "fathom_ms": {s: percentiles(v) for s, v in stage.items()}
        | {"total_ex_embed": percentiles(total_ex), "wall_ex_embed": percentiles(wall_ex)},
        "raw_ms": {
            "faiss_flat_search": percentiles(raw_dense),
            "bm25s_tokenize_scores_topk": percentiles(raw_sparse),
            "sum": percentiles(raw_sum),
        },
    }
    coll.close()
    return result


def profile_probes(cfg, size: int, embedder, queries: list[str], out: Path) -> None:
    """cProfile of Fathom hybrid probes (query embedding included) on an existing collection."""
    from fathom.bench.common import profile_to
    from fathom.index.collection import Collection
    from fathom.index.retrieve import retriever_for

    coll = Collection.open(cfg, f"search-{size}")
    retriever = retriever_for(cfg, coll, embedder, "hybrid")
    retriever.probe(queries[0], cfg.retrieval.k)

    def run() -> None:
        for q in queries:
            retriever.probe(q, cfg.retrieval.k)

    profile_to(out, run)
    coll.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", help="data folder (default: $FATHOM_DATA, else shared/data beside the checkout)"
    )
    parser.add_argument("--sizes", default="10000,100000", help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--distinct",
        type=int,
        default=None,
        help="chunks of distinct records to use before repeating "
        "(default: the smallest size; 0: all records)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile Fathom's probes at the largest size "
        "(bench/results/search_<size>.prof, top entries on stderr)",
    )
    parser.add_argument("--out", type=Path, default=default_out("search"))
    args = parser.parse_args(argv)
    root = data_dir(args.data)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    queries = load_queries(root, args.queries)

    from fathom.chunking import make_chunker
    from fathom.index.embed import make_embedder

    results: dict[str, dict] = {}
    with temp_home("search") as home:
        cfg = bench_config(home)
        embedder = CachingEmbedder(make_embedder(cfg.embedder))
        embedder.inner.embed(["warm-up"])
        log("counting chunks per record")
        with Stopwatch() as count:
            records = base_records(root, make_chunker(cfg.chunker, embedder.token_counter()))
        distinct = min(sizes) if args.distinct is None else args.distinct
        records = cap(records, distinct)
        log(
            f"{len(records)} distinct records, {sum(n for _, n in records)} chunks "
            f"({count.seconds:.0f}s)"
        )
        for size in sizes:
            results[str(size)] = bench_size(
                cfg, root, size, records, embedder, queries, args.warmup, home
            )
        if args.profile:
            profile_probes(
                cfg,
                max(sizes),
                embedder,
                queries,
                REPO / "bench" / "results" / f"search_{max(sizes)}.prof",
            )

    for r in results.values():
        f, raw = r["fathom_ms"], r["raw_ms"]
        rows = [[s, f[s]["p50"], f[s]["p95"], f[s]["p99"], f[s]["mean"]] for s in STAGES]
        rows.append(
            [
                "total excl. embed_query",
                f["total_ex_embed"]["p50"],
                f["total_ex_embed"]["p95"],
                f["total_ex_embed"]["p99"],
                f["total_ex_embed"]["mean"],
            ]
        )
        rows.append(
            [
                "(wall clock − embed_query)",
                f["wall_ex_embed"]["p50"],
                f["wall_ex_embed"]["p95"],
                f["wall_ex_embed"]["p99"],
                f["wall_ex_embed"]["mean"],
            ]
        )
        print_table(
            f"Fathom hybrid latency (ms), {r['chunks']} chunks ({r['dense_kind']}), "
            f"{r['queries']} queries, k={r['k']}, depth {r['depth']}",
            ["stage", "P50", "P95", "P99", "mean"],
            rows,
            digits=2,
        )
        pairs = [
            ("dense vs FAISS IndexFlatIP.search", f["dense"], raw["faiss_flat_search"]),
            (
                "bm25 vs bm25s tokenize+get_scores+top-k",
                f["bm25"],
                raw["bm25s_tokenize_scores_topk"],
            ),
            ("total excl. embed vs raw dense+bm25", f["total_ex_embed"], raw["sum"]),
        ]
        print_table(
            f"Fathom / raw at {r['chunks']} chunks (ms)",
            ["pair", "Fathom P50", "raw P50", "ratio P50", "Fathom P95", "raw P95", "ratio P95"],
            [
                [
                    n,
                    a["p50"],
                    b["p50"],
                    ratio(a["p50"], b["p50"]),
                    a["p95"],
                    b["p95"],
                    ratio(a["p95"], b["p95"]),
                ]
                for n, a, b in pairs
            ],
            digits=2,
        )
    biggest = results[str(max(sizes))]
    p95 = biggest["fathom_ms"]["total_ex_embed"]["p95"]
    print(
        f"target: P95 ≤ {TARGET_P95_MS} ms excl. query embedding at {biggest['chunks']} chunks "
        f"→ {p95:.2f} ms ({'met' if p95 <= TARGET_P95_MS else 'MISSED'})"
    )
    _write_json(
        args.out,
        {
            "bench": "search",
            "distinct_chunks": sum(n for _, n in records),
            "note": "collections built with CachingEmbedder (one model call per distinct chunk "
            "text); query embedding not cached",
            "target_p95_ms_ex_embed": TARGET_P95_MS,
            "sizes": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
