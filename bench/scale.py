"""Fathom at 10k → 1M chunks: ingest, disk, a query process's memory and cold open, query
latency, answer recall on needle questions, ANN recall, and adding one PDF, per size.

The haystack (``bench/support/scale_haystack.py``): gold passages of SQuAD 1.1 dev's and
COVID-QA's test halves (the needles, with their questions) inside real text — SQuAD 1.1's
training paragraphs, HotpotQA, SciFact, MuSiQue, the needle sets' training halves — and, past
what exists, distractors recombining real sentences of other documents; deterministic by seed,
and no haystack record holds a needle's sentence. Each size is built from scratch by Fathom's
own ``ingest`` (chunk store, FAISS, BM25, manifest), with the configuration's index settings
(``index.hnsw_threshold`` and the rest; ``--set`` changes them), so the bench measures
whatever the index does.

``--vectors real`` embeds every chunk with the packaged embedder. ``--vectors random`` stands
in random unit vectors for the haystack's chunks, to measure the index's costs without the
embedding time (those rows say so); the needles and every question are always embedded for
real. With random vectors, ingest time leaves out embedding, answer recall's dense side finds
the needles too easily (nothing else is near a question) and HNSW meets vectors without
structure, so ANN recall there is a pessimistic bound.

Per size, in a fresh process (``bench/support/scale_query.py``): open time and resident memory,
dense / BM25 / hybrid P50/P95/P99 from the stages' timings (the query embedding excluded),
answer recall@5 and ANN recall@10 against an exact scan of the same vectors, and ``ask``
without generation (its depth decisions too). Then one generated 20-page PDF is added to the
collection and removed again, each timed end to end. A size already measured (its row in
``--work``) is not measured again; rows of other sizes and modes already in the results file
are kept.

    python bench/scale.py [--sizes 10000,100000,300000,1000000] [--vectors real|random]
        [--data DIR] [--work DIR] [--out DIR] [--needles 100] [--ask 30] [--set KEY=VALUE]
        [--no-remove]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import (
    REPO,
    Stopwatch,
    bench_config,
    command_line,
    data_dir,
    log,
    parse_sets,
    print_table,
    progress_printer,
    write_json,
)
from fathom.bench.search import CachingEmbedder

SIZES = (10_000, 100_000, 300_000, 1_000_000)
ROW_KEYS = (
    "chunks",
    "ingest_s",
    "chunks_per_s",
    "disk_gib",
    "rss_gib",
    "open_s",
    "hybrid_p50_ms",
    "hybrid_p95_ms",
    "ann_recall_at_10",
    "answer_recall_at_5",
    "add_pdf_s",
    "vectors",
)
PDF_PAGES = 20


class ScaleEmbedder(CachingEmbedder):
    """Wraps a Fathom embedder for the build (as ``bench/search.py``'s does): real vectors for
    the texts in ``real`` (the needles' chunks, text → vector, embedded once before the build
    so that a random-vector build times the index alone) or for everything (``all_real``),
    random unit vectors for the rest, drawn in call order from ``seed``. Keeps every vector it
    returns, in order (the exact scan's input), and the first and last text (to check the
    collection's rows follow them). Queries are embedded by the model."""

    def __init__(
        self,
        inner: Any,
        real: dict[str, Any],
        all_real: bool,
        seed: int,
        pool: np.ndarray | None = None,
    ) -> None:
        super().__init__(inner)
        self.real, self.all_real = real, all_real
        self.rng = np.random.default_rng(seed)
        self.pool = pool  # real vectors that ``--vectors mixed`` mixes (``mixed_vectors``)
        self.parts: list[np.ndarray] = []
        self.first_text: str | None = None
        self.last_text: str | None = None

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        if self.all_real:
            out = np.asarray(self.inner.embed(texts), dtype=np.float32)
        else:
            if self.pool is not None:
                out = mixed_vectors(self.pool, len(texts), self.rng)
            else:
                out = self.rng.standard_normal((len(texts), self.dim), dtype=np.float32)
                out /= np.linalg.norm(out, axis=1, keepdims=True)
            for i, t in enumerate(texts):
                if t in self.real:
                    out[i] = self.real[t]
        if texts:
            self.first_text = self.first_text if self.first_text is not None else texts[0]
            self.last_text = texts[-1]
        self.parts.append(out)
        return out

    def vectors(self) -> np.ndarray:
        """Every vector returned so far, ``(n, dim) float32``."""
        if not self.parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(self.parts, axis=0)


def mixed_vectors(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit vectors shaped like real embeddings without embedding anything: each a
    random convex mix of three real chunk vectors of ``pool`` plus Gaussian noise of half
    their norm, normalised, so the haystack has real embeddings' clusters and spread (what an
    approximate index's recall depends on) where random vectors have none."""
    picks = rng.integers(0, len(pool), size=(n, 3))
    weights = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    out = np.einsum("nk,nkd->nd", weights, pool[picks]).astype(np.float32)
    noise = rng.standard_normal(out.shape, dtype=np.float32)
    noise *= (0.5 * np.linalg.norm(out, axis=1, keepdims=True)) / np.linalg.norm(
        noise, axis=1, keepdims=True
    )
    out += noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def exact_top10(vectors: np.ndarray, queries: np.ndarray, block: int = 131_072) -> np.ndarray:
    """Each query's 10 best rows of ``vectors`` ``(n, dim)`` by inner product, an exact scan
    in blocks: ``(len(queries), 10) int64``."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_r = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(vectors), block):
        scores = queries @ vectors[start : start + block].T
        rows = np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)
        s = np.concatenate([best_s, scores], axis=1)
        r = np.concatenate([best_r, rows], axis=1)
        keep = np.argsort(-s, axis=1, kind="stable")[:, :10]
        best_s, best_r = np.take_along_axis(s, keep, 1), np.take_along_axis(r, keep, 1)
    return best_r.astype(np.int64)


def ann_recall(
    vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray, found: list[list[int]]
) -> float:
    """Mean share of each query's exact top 10 that the index found: a found row counts when
    its true score reaches the exact 10th's (so rows tied with it, duplicate chunks, count)."""
    shares = []
    for q, best, rows in zip(queries, exact, found, strict=True):
        kth = float(vectors[best[-1]] @ q)
        scores = vectors[np.asarray(rows, dtype=np.int64)] @ q if rows else np.zeros(0)
        shares.append(min(int(np.sum(scores >= kth - 1e-6)), 10) / 10)
    return float(np.mean(shares)) if shares else float("nan")


def make_row(size: int, vectors: str, build: dict[str, Any], query: dict[str, Any]) -> dict:
    """One size's row of the results: ``ROW_KEYS`` first, then the rest measured."""
    ask = query.get("ask") or {}
    row: dict[str, Any] = {
        "chunks": query["chunks"],
        "ingest_s": build["ingest_s"],
        "chunks_per_s": query["chunks"] / build["ingest_s"] if build["ingest_s"] else None,
        "disk_gib": build["disk_gib"],
        "rss_gib": query["rss_after_gib"],
        "open_s": query["open_s"],
        "hybrid_p50_ms": query["hybrid_ms"]["p50"],
        "hybrid_p95_ms": query["hybrid_ms"]["p95"],
        "ann_recall_at_10": query["ann_recall_at_10"],
        "answer_recall_at_5": query["answer_recall_at_5_hybrid"],
        "add_pdf_s": build["add_pdf_s"],
        "vectors": vectors,
        "size": size,
        "dense_kind": query["dense_kind"],
        "hybrid_p99_ms": query["hybrid_ms"]["p99"],
        "dense_ms": query["dense_ms"],
        "bm25_ms": query["bm25_ms"],
        "hybrid_ms": query["hybrid_ms"],
        "hybrid_wall_ms": query["hybrid_wall_ms"],
        "hybrid_stages_ms": query.get("hybrid_stages_ms"),
        "answer_recall_at_5_dense": query["answer_recall_at_5_dense"],
        "answer_recall_at_5_bm25": query["answer_recall_at_5_bm25"],
        "rss_open_gib": query["rss_open_gib"],
        "open_parts_s": query.get("open_parts_s"),
        "rss_peak_gib": query["rss_peak_gib"],
        "ann_recall_at_10_rows": query.get("ann_recall_at_10_rows"),
        "memory_after_gib": query.get("memory_after_gib"),
        "questions": query["queries"],
        "ask_excluding_generation_ms": ask.get("excluding_generation_ms"),
        "ask_mean_k": ask.get("mean_k"),
        "ask_k_counts": ask.get("k_counts"),
        "ask_policies": ask.get("policies"),
        "nprobe_sweep": query.get("nprobe_sweep"),
    }
    row.update({k: v for k, v in build.items() if k not in row})
    return row


def check_row(row: dict[str, Any]) -> list[str]:
    """What a row lacks or holds wrongly (empty when it is sound)."""
    problems = [f"missing {k}" for k in ROW_KEYS if k not in row]
    if row.get("vectors") not in ("real", "random", "mixed"):
        problems.append(f"vectors {row.get('vectors')!r}: must be real, random or mixed")
    for key in ("ann_recall_at_10", "answer_recall_at_5"):
        value = row.get(key)
        if value is not None and not 0.0 <= value <= 1.0:
            problems.append(f"{key} {value} is not within 0–1")
    return problems


def merge_rows(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` rows with those of ``new`` replacing the same (vectors, size); by size, then
    vectors."""
    by_key = {(r["vectors"], r["size"]): r for r in old}
    by_key.update({(r["vectors"], r["size"]): r for r in new})
    return sorted(by_key.values(), key=lambda r: (r["size"], r["vectors"]))


def disk_gib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**30


# ---------------------------------------------------------------------------------------------
# Building and measuring one size
# ---------------------------------------------------------------------------------------------


class Haystack:
    """The needles, the real records with their chunk counts, the sentence pool; prepared once
    per run (the chunk counts cached under ``work``)."""

    def __init__(self, root: Path, work: Path, chunker: Any, cfg: Any, seed: int, per_set: int):
        from fathom.bench.support import scale_haystack as hs
        from fathom.index.collection import embed_input

        self.seed = seed
        self.doc_chunks = 1  # distractors per distractor document (``--doc-chunks``)
        self.passages, self.needles = hs.load_needles(root, per_set, seed)
        keys = hs.needle_keys(self.passages)
        real = hs.without_needles(hs.real_records(root, seed), keys)
        self.pool = hs.sentence_pool(real, keys)
        counts = _chunk_counts(work / f"real-counts-{seed}.json", real, chunker)
        self.real = list(zip(real, counts, strict=True))
        needle_chunks = _chunks_of(self.passages, chunker)
        self.needle_chunks = len(needle_chunks)
        self.needle_texts = [embed_input(c, cfg.embedder.title_prefix) for c in needle_chunks]
        self._needle_vectors: dict[str, Any] | None = None
        log(
            f"haystack: {len(self.needles)} needle questions on {len(self.passages)} passages "
            f"({self.needle_chunks} chunks); {len(real)} real records ({sum(counts)} chunks); "
            f"{len(self.pool)} documents' sentences to recombine"
        )

    def needle_vectors(self, embedder: Any) -> dict[str, Any]:
        """Each needle chunk's real vector, by its embedded text (embedded once)."""
        if self._needle_vectors is None:
            vecs = embedder.embed(self.needle_texts)
            self._needle_vectors = dict(zip(self.needle_texts, vecs, strict=True))
        return self._needle_vectors

    def pool_vectors(self, embedder: Any, work: Path, n: int = 2000) -> np.ndarray:
        """Real vectors of the first ``n`` real records (their first 1,000 characters, as
        chunks are embedded: title, then text), embedded once and kept under ``work``."""
        import hashlib

        texts = [f"{r['title']}\n{r['text'][:1000]}" for r, _ in self.real[:n]]
        key = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:12]
        path = work / f"pool-{key}.npy"
        if path.is_file():
            return np.load(path, allow_pickle=False)
        vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
        np.save(path, vecs, allow_pickle=False)
        return vecs

    def records(self, size: int) -> tuple[list[dict[str, Any]], dict[str, str], int]:
        from fathom.bench.support.scale_haystack import compose

        return compose(
            self.passages,
            self.real,
            self.pool,
            self.seed,
            size,
            self.needle_chunks,
            self.doc_chunks,
        )


def _chunks_of(records: list[dict[str, Any]], chunker: Any) -> list[Any]:
    import tempfile

    from fathom.bench.support.scale_haystack import write_records
    from fathom.ingestion import load_records

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl"
        write_records(path, records)
        return [c for d in load_records(path) for c in chunker.split(d)]


def _chunk_counts(cache: Path, records: list[dict[str, Any]], chunker: Any) -> list[int]:
    """Each record's chunk count (Fathom's chunker), cached in ``cache`` by the records' hash."""
    import hashlib

    digest = hashlib.sha256(
        json.dumps([[r["title"], r["text"]] for r in records]).encode()
    ).hexdigest()
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get("sha256") == digest:
            return saved["counts"]
    from fathom.bench.support.scale_haystack import write_records
    from fathom.ingestion import load_records

    log(f"counting the chunks of {len(records)} real records")
    path = cache.with_suffix(".jsonl")
    write_records(path, ({"doc_id": f"{i:07d}", **r} for i, r in enumerate(records)))
    counts = [len(chunker.split(d)) for d in load_records(path)]
    path.unlink()
    cache.write_text(json.dumps({"sha256": digest, "counts": counts}))
    return counts


def make_pdf(path: Path, pool: list[list[str]], seed: int) -> Path:
    """A 20-page PDF of real sentences (a heading and three paragraphs a page), fixed by seed."""
    import random

    from fathom.bench.support.docgen import make_pdf as write_pdf

    rng = random.Random(f"scale-pdf:{seed}")
    pages = []
    for n in range(1, PDF_PAGES + 1):
        items: list[tuple[str, str]] = [("h1", f"Section {n}")]
        for _ in range(3):
            doc = pool[rng.randrange(len(pool))]
            para, words = [], 0
            for s in doc:
                if words + len(s.split()) > 90:
                    break
                para.append(s)
                words += len(s.split())
            items.append(("p", " ".join(para) or doc[0][:400]))
        pages.append(items)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_pdf(path, pages, title="Scale bench report")


def build_size(cfg, name: str, records: list[dict], wrapper: ScaleEmbedder, chunker, work: Path):
    """Ingest ``records`` as collection ``name`` from scratch; what it took."""
    from fathom.bench.support.scale_haystack import write_records
    from fathom.index.collection import collections_root
    from fathom.index.ingest import ingest

    path = work / f"{name}.jsonl"
    write_records(path, records)
    log(f"{name}: ingesting {len(records)} records")
    with Stopwatch() as sw:
        report = ingest(
            cfg, [path], name, wrapper, chunker, rebuild=True, progress=progress_printer(name, 30)
        )
    log(f"{name}: {report.total_chunks} chunks in {sw.seconds:.0f} s {report.seconds}")
    return {
        "ingest_s": sw.seconds,
        "ingest_cpu_s": sw.cpu,
        "ingest_phases_s": report.seconds,
        "documents": report.count("ok"),
        "skipped": report.count("skipped"),
        "disk_gib": disk_gib(collections_root(cfg) / name),
    }


def check_order(cfg, name: str, wrapper: ScaleEmbedder) -> None:
    """The collection's first and last rows are the first and last texts embedded, so row i
    holds the i-th vector the exact scan reads."""
    from fathom.index.collection import Collection

    coll = Collection.open(cfg, name)
    first, last = coll.store.rows([0, len(coll) - 1])
    texts = (coll.embed_text(first), coll.embed_text(last))
    coll.close()
    if texts != (wrapper.first_text, wrapper.last_text) or len(wrapper.vectors()) != len(coll):
        raise SystemExit(f"{name}: rows do not follow the embedding order; ANN recall unusable")


def add_and_remove_pdf(
    cfg, name: str, wrapper: ScaleEmbedder, chunker, pdf: Path, remove: bool
) -> dict:
    """Time adding ``pdf`` (its folder) to the collection, end to end, and (``remove``)
    removing it again; what the add wrote."""
    from fathom.index.collection import collections_root
    from fathom.index.ingest import ingest
    from fathom.index.manifest import read_manifest

    wrapper.all_real = True  # the PDF is embedded for real in both modes
    directory = collections_root(cfg) / name
    before = _inodes(directory)
    chars = _written_chars()
    with Stopwatch() as add:
        report = ingest(cfg, [pdf.parent], name, wrapper, chunker)
    add_chars = _written_chars() - chars
    manifest = read_manifest(directory)
    assert manifest is not None
    new_files = _new_bytes(directory / manifest.data_dir_name, before) / 2**30
    pdf_chunks = report.embedded_chunks
    pdf.unlink()
    removed = remove_chars = None
    if remove:
        chars = _written_chars()
        with Stopwatch() as sw:
            ingest(cfg, [pdf.parent], name, wrapper, chunker)
        removed, remove_chars = sw.seconds, _written_chars() - chars
    log(f"{name}: add PDF {add.seconds:.1f} s ({pdf_chunks} chunks), remove {removed} s")
    return {
        "add_pdf_s": add.seconds,
        "add_pdf_chunks": pdf_chunks,
        "add_pdf_written_gib": add_chars / 2**30,
        "add_pdf_new_files_gib": new_files,
        "add_pdf_phases_s": report.seconds,
        "remove_pdf_s": removed,
        "remove_pdf_written_gib": None if remove_chars is None else remove_chars / 2**30,
    }


def _written_chars() -> int:
    """Bytes this process has written through ``write`` calls so far (``wchar`` of
    ``/proc/self/io``: every file an ingest writes, before the page cache)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def _inodes(directory: Path) -> set[int]:
    return {f.stat().st_ino for f in directory.rglob("*") if f.is_file()}


def _new_bytes(folder: Path, before: set[int]) -> int:
    """Bytes of the files in ``folder`` that are not hard links to files of ``before``."""
    return sum(
        f.stat().st_size for f in folder.rglob("*") if f.is_file() and f.stat().st_ino not in before
    )


def query_process(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    path = work / "query-spec.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "fathom.bench.support.scale_query", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO.parent,
    )
    if proc.returncode != 0:
        raise SystemExit(f"query process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_size(ctx: dict[str, Any], size: int) -> dict[str, Any]:
    """Build, measure and drop the ``size`` collection; its row."""
    cfg, hay, work, args = ctx["cfg"], ctx["haystack"], ctx["work"], ctx["args"]
    from fathom.index.collection import collections_root

    name = f"scale-{args.vectors}-{size}"
    records, ids, expected = hay.records(size)
    real = args.vectors == "real"
    needles = {} if real else hay.needle_vectors(ctx["embedder"])
    pool = hay.pool_vectors(ctx["embedder"], work) if args.vectors == "mixed" else None
    wrapper = ScaleEmbedder(ctx["embedder"], needles, real, args.seed, pool)
    build = build_size(cfg, name, records, wrapper, ctx["chunker"], work)
    build["expected_chunks"] = expected
    check_order(cfg, name, wrapper)
    qvecs = ctx["qvecs"]
    vectors = wrapper.vectors()
    wrapper.parts = []
    exact = exact_top10(vectors, qvecs)
    np.save(work / "exact.npy", exact, allow_pickle=False)
    spec = {
        "home": cfg.home,
        "collection": name,
        "overrides": ctx["overrides"],
        "questions": [n.question for n in hay.needles],
        "answers": [list(n.answers) for n in hay.needles],
        "vectors": str(work / "questions.npy"),
        "exact": str(work / "exact.npy"),
        "warmup": 10,
        "ask": args.ask,
    }
    log(f"{name}: measuring in a fresh query process")
    query = query_process(spec, work)
    query["ann_recall_at_10_rows"] = query["ann_recall_at_10"]
    query["ann_recall_at_10"] = ann_recall(vectors, qvecs, exact, query.pop("ann_rows"))
    del vectors
    pdf = make_pdf(work / "pdf" / "report.pdf", hay.pool, args.seed)
    build |= add_and_remove_pdf(cfg, name, wrapper, ctx["chunker"], pdf, args.remove)
    build["needle_passages"] = len(ids)
    build["documents"] = len(records)
    build["distractor_doc_chunks"] = args.doc_chunks
    row = make_row(size, args.vectors, build, query)
    row["command"] = command_line(leave_out=("--out",))
    if not args.keep:
        shutil.rmtree(collections_root(cfg) / name, ignore_errors=True)
        (work / f"{name}.jsonl").unlink(missing_ok=True)
    return row


# ---------------------------------------------------------------------------------------------
# Output: the JSON, the plot, the page
# ---------------------------------------------------------------------------------------------


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    panels = [
        ("hybrid_p95_ms", "hybrid P95 (ms, no query embedding)"),
        ("chunks_per_s", "ingest chunks/s"),
        ("rss_gib", "query process RSS (GiB)"),
        ("disk_gib", "disk (GiB)"),
        ("open_s", "cold open (s)"),
        ("add_pdf_s", "add one 20-page PDF (s)"),
        ("answer_recall_at_5", "answer recall@5, needle questions"),
        ("ann_recall_at_10", "ANN recall@10 against exact"),
    ]
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        for vectors, marker in (("real", "o"), ("mixed", "^"), ("random", "s")):
            pts = [
                (r["chunks"], r[key])
                for r in rows
                if r["vectors"] == vectors and r.get(key) is not None
            ]
            if pts:
                x, y = zip(*pts, strict=True)
                ax.plot(x, y, marker=marker, label=f"{vectors} vectors")
        ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("chunks")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Fathom by collection size (2 shared cores)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def markdown(results: dict[str, Any]) -> str:
    """results.md: the rows as a table, the commands, the machine."""
    m = results["machine"]
    machine = f"{m.get('cpu')}, {m.get('cpus')} CPUs (shared), {m.get('memory_gb')} GB"
    lines = [
        "# Fathom by collection size",
        "",
        f"Machine: {machine}. Latencies exclude the query embedding; `random` rows stand "
        "random unit vectors in for the haystack's embeddings (needles and questions embedded "
        "for real), so their ingest leaves out embedding. docs/scale.md says what the numbers "
        "mean.",
        "",
        "![curve](scale.png)",
        "",
        "| chunks | vectors | dense index | ingest s | chunks/s | disk GiB "
        "| RSS GiB (open → after) | open s | hybrid P50 / P95 / P99 ms | dense P95 | BM25 P95 "
        "| answer R@5 (hybrid / dense / BM25) | ANN R@10 | `ask` P50 / P95 ms, mean k "
        "| add PDF s | remove PDF s |",
        "| " + " | ".join(["---"] * 16) + " |",
    ]
    rows = results["rows"]
    for r in rows:
        ask = r.get("ask_excluding_generation_ms") or {}
        lines.append(
            "| "
            + " | ".join(
                [
                    _f(r["chunks"]),
                    r["vectors"],
                    r.get("dense_kind", "–"),
                    _f(r["ingest_s"], 0),
                    _f(r["chunks_per_s"], 0),
                    _f(r["disk_gib"], 3),
                    f"{_f(r.get('rss_open_gib'))} → {_f(r['rss_gib'])}",
                    _f(r["open_s"]),
                    f"{_f(r['hybrid_p50_ms'])} / {_f(r['hybrid_p95_ms'])} / "
                    f"{_f(r.get('hybrid_p99_ms'))}",
                    _f((r.get("dense_ms") or {}).get("p95")),
                    _f((r.get("bm25_ms") or {}).get("p95")),
                    f"{_f(r['answer_recall_at_5'], 3)} / {_f(r.get('answer_recall_at_5_dense'), 3)}"
                    f" / {_f(r.get('answer_recall_at_5_bm25'), 3)}",
                    _f(r["ann_recall_at_10"], 3),
                    f"{_f(ask.get('p50'), 0)} / {_f(ask.get('p95'), 0)}, "
                    f"{_f(r.get('ask_mean_k'), 1)}",
                    _f(r["add_pdf_s"], 1),
                    _f(r.get("remove_pdf_s"), 1),
                ]
            )
            + " |"
        )
    lines += ["", "Commands (each row names its own in `scale.json`):", ""]
    for command in dict.fromkeys(r["command"] for r in rows):
        lines.append(f"    FATHOM_DATA=… {command}")
    lines.append("")
    return "\n".join(lines)


def write_outputs(out: Path, new_rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    path = out / "scale.json"
    old = json.loads(path.read_text())["rows"] if path.is_file() else []
    rows = merge_rows(old, new_rows)
    results = {"bench": "scale", **meta, "rows": rows}
    results["command"] = "see each row's command"
    write_json(path, results)
    plot(rows, out / "scale.png")
    (out / "results.md").write_text(markdown(results), encoding="utf-8")
    print_table(
        "Fathom by collection size",
        ["chunks", "vectors", "ingest s", "disk GiB", "RSS GiB", "open s", "hybrid P95 ms",
         "answer R@5", "ANN R@10", "add PDF s"],
        [
            [r["chunks"], r["vectors"], r["ingest_s"], r["disk_gib"], r["rss_gib"], r["open_s"],
             r["hybrid_p95_ms"], r["answer_recall_at_5"], r["ann_recall_at_10"], r["add_pdf_s"]]
            for r in rows
        ],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--vectors", choices=("real", "random", "mixed"), default="real")
    parser.add_argument("--data", help="data folder (default: $FATHOM_DATA)")
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "scale")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "scale")
    parser.add_argument("--needles", type=int, default=100, help="questions per needle set")
    parser.add_argument("--ask", type=int, default=30, help="questions to `ask` (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--doc-chunks",
        type=int,
        default=20,
        help="distractor paragraphs (chunks) per distractor document (1: a record each)",
    )
    parser.add_argument("--set", action="append", default=[], help="config KEY=VALUE")
    parser.add_argument("--keep", action="store_true", help="keep each collection afterwards")
    parser.add_argument(
        "--write-haystack",
        type=Path,
        help="write the first size's haystack (a docs.jsonl) to this file and stop "
        "(the input of `bench/ingest.py --executor ray --records`)",
    )
    parser.add_argument(
        "--remove",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time removing the PDF again (another full ingest)",
    )
    args = parser.parse_args(argv)
    root = data_dir(args.data)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    overrides = parse_sets(args.set)

    from fathom.chunking import make_chunker
    from fathom.index.embed import ensure_onnx_export, make_embedder

    home = work / "home"
    cfg = bench_config(home, overrides)
    embedder = make_embedder(cfg.embedder, cfg.models_path())
    embedder.embed(["warm-up"])
    if args.ask:
        ensure_onnx_export(embedder, cfg.models_path())
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    hay = Haystack(root, work, chunker, cfg, args.seed, args.needles)
    hay.doc_chunks = args.doc_chunks
    if args.write_haystack:
        from fathom.bench.support.scale_haystack import write_records

        records, _, expected = hay.records(sizes[0])
        write_records(args.write_haystack, records)
        log(f"wrote {len(records)} records (about {expected} chunks) to {args.write_haystack}")
        return 0
    qvecs = np.stack([embedder.embed_query(n.question) for n in hay.needles]).astype(np.float32)
    np.save(work / "questions.npy", qvecs, allow_pickle=False)
    ctx = {"cfg": cfg, "haystack": hay, "work": work, "args": args, "embedder": embedder}
    ctx |= {"chunker": chunker, "qvecs": qvecs, "overrides": overrides}
    meta = {
        "haystack": "needles: SQuAD 1.1 dev and COVID-QA test halves' gold passages; real text: "
        "SQuAD 1.1 train paragraphs, HotpotQA, SciFact, MuSiQue, the needle sets' training "
        "halves; then distractors of real sentences recombined",
        "needle_questions": len(hay.needles),
        "config": {
            "index": {k: getattr(cfg.index, k) for k in cfg.index.__dataclass_fields__},
            "retrieval_k": cfg.retrieval.k,
            "candidates": cfg.retrieval.candidates,
        },
    }
    rows_dir = work / "rows"
    rows_dir.mkdir(exist_ok=True)
    done: list[dict[str, Any]] = []
    for size in sizes:
        checkpoint = rows_dir / f"{args.vectors}-{size}.json"
        if checkpoint.is_file():
            log(f"{args.vectors} {size}: measured before ({checkpoint.name}); not run again")
            row = json.loads(checkpoint.read_text())
            side = work / f"nprobe-scale-{args.vectors}-{size}.json"
            if row.get("nprobe_sweep") is None and side.is_file():  # the query process's own
                row["nprobe_sweep"] = json.loads(side.read_text())
                checkpoint.write_text(json.dumps(row, indent=2, default=float))
            done.append(row)
            continue
        with Stopwatch() as sw:
            row = measure_size(ctx, size)
        row["end_to_end_s"] = sw.seconds
        row["loadavg"] = os.getloadavg()
        checkpoint.write_text(json.dumps(row, indent=2, default=float))
        done.append(row)
        write_outputs(args.out, done, meta)
        log(f"{args.vectors} {size}: done in {sw.seconds:.0f} s end to end")
    write_outputs(args.out, done, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
