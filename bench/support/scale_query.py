"""The scale bench's query process: opens one collection in a fresh process and measures what a
user's query process would pay, printing one JSON object on stdout.

    python -m fathom.bench.support.scale_query SPEC.json

``SPEC.json``: ``home``, ``collection``, ``overrides`` (config keys), ``questions`` (texts),
``answers`` (lists of strings), ``vectors`` (an ``.npy`` of the questions' real embeddings,
``(n, dim) float32``), ``exact`` (an ``.npy`` of each question's exact top-10 rows over the
vectors the collection was built from, ``(n, 10) int64``), ``warmup``, ``ask`` (how many
questions to ``ask`` without generation; 0: none).

Measured: the time to open the collection and load its indexes (imports of FAISS and bm25s
included), resident memory after opening and after the queries, dense / BM25 / hybrid latency
from the stages' own timings (the query embedding excluded: vectors are given), answer
recall@5 (a gold answer in the top 5 chunks' text), ANN recall@10 of the dense index against
the exact rows (and the rows it found), and ``ask``'s stages without ``generate`` with the
depth it chose. Only the standard library, numpy and Fathom's query path are imported, so the
memory is the query path's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import percentiles

STAGES = ("dense", "bm25", "fuse", "fetch")


def memory() -> dict[str, float]:
    """This process's resident memory, GiB (``/proc/self/status``): ``VmRSS`` (all of it),
    ``VmHWM`` (its peak), ``RssAnon`` (its own) and ``RssFile`` (mapped files' pages, such as a
    memory-mapped index's, shared with the page cache)."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                found[key] = int(value.split()[0]) / 2**20
    return found


def rss_gib() -> tuple[float, float]:
    """This process's resident memory and its peak, GiB."""
    found = memory()
    return found.get("VmRSS", float("nan")), found.get("VmHWM", float("nan"))


def found(texts: list[str], answers: list[str]) -> bool:
    """Whether any gold answer is in any of ``texts`` (case folded)."""
    low = [t.lower() for t in texts]
    return any(a.lower() in t for a in answers for t in low)


class _NoEmbedder:
    """Stands in for the query embedder: every query comes with its vector."""

    def embed_query(self, text: str):
        raise AssertionError("the scale bench passes every query vector")


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from fathom.core.config import Config, apply_overrides
    from fathom.index.collection import Collection
    from fathom.index.retrieve import retriever_for

    cfg = Config()
    cfg.home = spec["home"]
    if spec.get("overrides"):
        apply_overrides(cfg, spec["overrides"], source="bench")
    qvecs = np.load(spec["vectors"], allow_pickle=False)
    exact = np.load(spec["exact"], allow_pickle=False)
    questions, answers = spec["questions"], spec["answers"]
    out: dict[str, Any] = {"rss_start_gib": rss_gib()[0]}

    parts: dict[str, float] = {}
    t = start = time.perf_counter()
    coll = Collection.open(cfg, spec["collection"])
    for part, load in (
        ("manifest", lambda: None),
        ("dense", lambda: coll.dense.size),
        ("bm25", lambda: coll.bm25.n),
        ("store", lambda: coll.store.rows([0])),
    ):
        load()
        parts[part], t = time.perf_counter() - t, time.perf_counter()
    out["open_s"] = time.perf_counter() - start
    out["open_parts_s"] = parts
    out["rss_open_gib"] = rss_gib()[0]
    out["dense_kind"] = coll.dense.kind
    out["chunks"] = len(coll)

    stub = _NoEmbedder()
    modes = {m: retriever_for(cfg, coll, stub, m) for m in ("hybrid", "dense", "bm25")}
    times: dict[str, list[float]] = {m: [] for m in modes}
    wall: list[float] = []
    stages: dict[str, list[float]] = {}  # hybrid's own steps
    hits5: dict[str, list[bool]] = {m: [] for m in modes}
    k = cfg.retrieval.k
    warm = min(spec.get("warmup", 10), len(questions))
    order = list(range(len(questions)))
    for j, i in enumerate([*order[:warm], *order]):
        for mode, retriever in modes.items():
            t = time.perf_counter()
            probe = retriever.probe(questions[i], max(k, 5), qvec=qvecs[i])
            elapsed = (time.perf_counter() - t) * 1000
            if j < warm:
                continue
            times[mode].append(sum(probe.timings_ms.get(s, 0.0) for s in STAGES))
            if mode == "hybrid":
                wall.append(elapsed)
                for s in STAGES:
                    stages.setdefault(s, []).append(probe.timings_ms.get(s, 0.0))
            hits5[mode].append(found([h.chunk.text for h in probe.hits[:5]], answers[i]))
    out["queries"] = len(questions)
    for mode in modes:
        out[f"{mode}_ms"] = percentiles(times[mode])
        out[f"answer_recall_at_5_{mode}"] = float(np.mean(hits5[mode])) if hits5[mode] else None
    out["hybrid_wall_ms"] = percentiles(wall)
    out["hybrid_stages_ms"] = {s: percentiles(v) for s, v in stages.items()}
    out["rss_after_gib"], out["rss_peak_gib"] = rss_gib()
    out["memory_after_gib"] = memory()

    recall, found_rows = [], []
    for i in range(len(questions)):
        _, rows = coll.dense.search(qvecs[i], 10)
        recall.append(len(set(rows.tolist()) & set(exact[i].tolist())) / 10)
        found_rows.append(rows.tolist())
    # Rows for rows; the caller, which holds the vectors, also counts a row tied with the
    # exact 10th as found.
    out["ann_recall_at_10"] = float(np.mean(recall)) if recall else None
    out["ann_rows"] = found_rows
    out["nprobe_sweep"] = nprobe_sweep(coll, modes["hybrid"], spec, qvecs, exact)
    if out["nprobe_sweep"] is not None:  # also beside the other files of the run
        side = Path(spec["exact"]).parent / f"nprobe-{spec['collection']}.json"
        side.write_text(json.dumps(out["nprobe_sweep"]), encoding="utf-8")
    coll.close()
    if spec.get("ask"):
        out["ask"] = ask_stats(cfg, spec["collection"], questions[: spec["ask"]])
    return out


def _ivf_indexes(dense: Any) -> list[Any]:
    """The FAISS IVF indexes behind a collection's dense index (one per IVF segment)."""
    import faiss

    parts = getattr(dense, "parts", [dense])
    return [faiss.extract_index_ivf(p.index) for p in parts if p.kind == "ivf"]


def nprobe_sweep(
    coll: Any, hybrid: Any, spec: dict[str, Any], qvecs: Any, exact: Any
) -> list[dict[str, Any]] | None:
    """For an IVF collection, at each number of lists scanned (the last, every list: an exact
    search): ANN recall@10 against the exact scan (by row), the dense search's P50/P95 at
    hybrid's depth, and hybrid's answer recall@5 — what ``index.ivf_nprobe`` trades."""
    import numpy as np

    ivfs = _ivf_indexes(coll.dense)
    if not ivfs:
        return None
    nlist = max(int(ix.nlist) for ix in ivfs)
    default = int(ivfs[0].nprobe)
    depth = max(hybrid.candidates, 10)
    out = []
    for nprobe in sorted({32, 64, 128, 256, 512, default, nlist}):
        if nprobe > nlist:
            continue
        for ix in ivfs:
            ix.nprobe = min(nprobe, int(ix.nlist))
        times, recall, hits = [], [], []
        for i, q in enumerate(spec["questions"]):
            t = time.perf_counter()
            coll.dense.search(qvecs[i], depth)
            times.append((time.perf_counter() - t) * 1000)
            rows = coll.dense.search(qvecs[i], 10)[1]
            recall.append(len(set(rows.tolist()) & set(exact[i].tolist())) / 10)
            probe = hybrid.probe(q, 10, qvec=qvecs[i])
            hits.append(found([h.chunk.text for h in probe.hits[:5]], spec["answers"][i]))
        out.append(
            {
                "nprobe": nprobe,
                "exact": nprobe >= nlist,
                "default": nprobe == default,
                "ann_recall_at_10": float(np.mean(recall)),
                "dense_ms": percentiles(times),
                "answer_recall_at_5": float(np.mean(hits)),
            }
        )
    for ix in ivfs:
        ix.nprobe = default
    return out


def ask_stats(cfg: Any, name: str, questions: list[str]) -> dict[str, Any]:
    """``Engine.ask`` with the extractive generator: every stage but ``generate``, and the depth
    each question got (its ``Decision``)."""
    from fathom.core.config import apply_overrides
    from fathom.stages.pipeline import Engine

    apply_overrides(cfg, {"generator.backend": "extractive"}, source="bench")
    engine = Engine(cfg, name)
    for q in questions[:3]:  # first-use loads: sessions, caches
        engine.ask(q)
    totals, ks, policies = [], [], {}
    for q in questions:
        engine.parts.sentence_vectors.clear()  # as a new `fathom ask` process starts
        answer = engine.ask(q)
        stages = answer.trace.stages_ms
        totals.append(sum(ms for s, ms in stages.items() if s != "generate"))
        decision = answer.trace.decision
        ks.append(decision.k if decision else 0)
        if decision:
            policies[decision.policy] = policies.get(decision.policy, 0) + 1
    engine.close()
    counts: dict[str, int] = {}
    for value in ks:
        counts[str(value)] = counts.get(str(value), 0) + 1
    return {
        "n": len(questions),
        "excluding_generation_ms": percentiles(totals),
        "mean_k": sum(ks) / len(ks) if ks else None,
        "k_counts": counts,
        "policies": policies,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    print(json.dumps(measure(spec)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
