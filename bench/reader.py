"""Fathom's reader as the reranker: answer recall after reranking the hybrid top 20, and time.

For each question of each set's ``--split`` half (split by document, as ``fathom eval``), the
collection's hybrid search (default configuration) gives 20 candidates, which are then ordered
three ways:

* ``none``: the hybrid order;
* ``embedding``: the embedding reranker as the default configuration ran it before the reader
  shipped (it reads the first ``rerank.embedding_candidates`` = 8 and keeps the rest behind);
* ``reader``: ``fathom-reader`` over all 20 (the default now).

Answer recall@n: a gold answer inside the first n candidates' text (``judges.answer_recall``);
HotpotQA's yes/no questions are left out (their answer is not a span); ``--limit N`` takes N
questions drawn at random (seed 0) from the half. Each difference has a
paired interval over questions and one over documents (documents resampled with their
questions). The reranking time of each question is taken in the same run (reader and
embedding reranker alternate), P50 and P95, as a one-shot ``fathom ask`` pays it: the sentence
vectors an Engine remembers across questions are cleared before each. ``--scifact`` adds BEIR
SciFact's nDCG@10 of the hybrid ranking against the same ranking with its first 20 chunks
reranked by the reader.

    python bench/reader.py [--data DIR] [--sets squad_v1.1_dev,covidqa_200423,hotpotqa_dev500] \\
        [--split test] [--limit N] [--scifact] [--home DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import (
    bench_config,
    command_line,
    data_dir,
    default_out,
    format_ci,
    log,
    percentiles,
    print_table,
    temp_home,
    write_json,
)

SETS = ("squad_v1.1_dev", "covidqa_200423", "hotpotqa_dev500")
CANDIDATES = 20
AT = (1, 3)
METHODS = ("none", "embedding", "reader")


def _rerankers(cfg: Any, collection: str) -> dict[str, Any]:
    """The embedding reranker (as the default configuration fell back to it) and the reader,
    each in its own ``Parts`` of the collection."""
    import copy

    from fathom.stages.parts import Parts

    fallback = copy.deepcopy(cfg)
    fallback.rerank.model = "cross-encoder/not-installed"
    os.environ["HF_HUB_OFFLINE"] = "1"  # the fallback's own notice: no download attempted
    parts = {"embedding": Parts(fallback, collection), "reader": Parts(cfg, collection)}
    for name, p in parts.items():
        want = "fathom-reader" if name == "reader" else "embedding"
        if p.reranker().name != want:
            raise SystemExit(f"{name}: got reranker {p.reranker.name} ({p.rerank_notice})")
    return parts


def _order(parts: Any, question: str, hits: list[Any]) -> tuple[list[Any], float]:
    from fathom.stages.rerank import rerank_behind, rerank_head

    t0 = time.perf_counter()
    n = rerank_head(parts.cfg.rerank, parts.reranker())
    out = rerank_behind(parts.reranker(), question, hits, n)
    return out, (time.perf_counter() - t0) * 1000


def _answerable(q: Any) -> bool:
    return bool(q.answers) and not all(a.strip().lower() in ("yes", "no") for a in q.answers)


def drawn_questions(
    data: Path, name: str, split: str, limit: int | None, unanswerable: bool = False
) -> list[Any]:
    """The half's questions a reader bench reads: those with a span for an answer (HotpotQA's
    yes/no left out), and the unanswerable ones too with ``unanswerable``; shuffled (seed 0)
    so that ``limit`` of them draw from every document."""
    from fathom.learn.questions import load_questions, split_by_document

    questions = split_by_document(load_questions(data / name / "questions.jsonl"), split, 0)
    questions = [
        q
        for q in questions
        if (unanswerable and q.unanswerable) or (_answerable(q) and not q.unanswerable)
    ]
    random.Random(0).shuffle(questions)
    return questions[: limit or None]


def run_set(cfg: Any, data: Path, name: str, split: str, limit: int | None) -> dict[str, Any]:
    from fathom.feedback.judges import answer_recall
    from fathom.index.retrieve import open_retriever
    from fathom.index.targets import resolve_target

    questions = drawn_questions(data, name, split, limit)
    collection = resolve_target(cfg, str(data / name / "docs.jsonl"))
    retriever = open_retriever(cfg, collection)
    parts = _rerankers(cfg, collection)
    for p in parts.values():  # load the models before the clock starts
        _order(p, "warm up", retriever.search("warm up", CANDIDATES))
    recall = {m: {n: [] for n in AT} for m in METHODS}
    ms: dict[str, list[float]] = {"embedding": [], "reader": []}
    docs = []
    for i, q in enumerate(questions):
        hits = retriever.search(q.question, CANDIDATES)
        ranked = {"none": hits}
        for m in ("embedding", "reader")[:: 1 if i % 2 else -1]:
            parts[m].sentence_vectors.clear()  # a one-shot ask's cost: nothing remembered
            ranked[m], took = _order(parts[m], q.question, hits)
            ms[m].append(took)
        for m in METHODS:
            for n in AT:
                text = "\n".join(h.chunk.text for h in ranked[m][:n])
                recall[m][n].append(answer_recall(text, list(q.answers)))
        docs.append(q.doc_ids[0] if q.doc_ids else q.qid)
    for p in parts.values():
        p.close()
    return _summary(name, recall, ms, docs)


def _summary(name: str, recall, ms, docs) -> dict[str, Any]:
    from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci

    out: dict[str, Any] = {"set": name, "questions": len(docs), "documents": len(set(docs))}
    for n in AT:
        for m in METHODS:
            v = recall[m][n]
            out[f"{m}@{n}"] = bootstrap_ci(v) | {"documents": cluster_bootstrap_ci(v, docs)}
        for base in ("none", "embedding"):
            d = np.subtract(recall["reader"][n], recall[base][n])
            out[f"reader_minus_{base}@{n}"] = bootstrap_ci(d) | {
                "documents": cluster_bootstrap_ci(d, docs)
            }
    out["rerank_ms"] = {m: percentiles(v) for m, v in ms.items()}
    out["rerank_ms_ratio_p50"] = out["rerank_ms"]["reader"]["p50"] / max(
        1e-9, out["rerank_ms"]["embedding"]["p50"]
    )
    return out


def run_scifact(cfg: Any, data: Path) -> dict[str, Any]:
    """SciFact test queries: nDCG@10 of hybrid documents, and with the reader first."""
    from fathom.bench.retrieval_beir import ndcg_at_k
    from fathom.core.base import source_id
    from fathom.index.retrieve import open_retriever
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import load_questions

    folder = data / "scifact"
    queries = [q for q in load_questions(folder) if q.qrels]
    collection = resolve_target(cfg, str(folder / "docs.jsonl"))
    retriever = open_retriever(cfg, collection)
    reader = _rerankers(cfg, collection)["reader"]
    scores: dict[str, list[float]] = {"hybrid": [], "hybrid+reader": []}
    for q in queries:
        hits = retriever.search(q.question, 100)
        reranked, _ = _order(reader, q.question, hits)
        for label, ranked in (("hybrid", hits), ("hybrid+reader", reranked)):
            docs = list(dict.fromkeys(source_id(h.chunk) for h in ranked))
            scores[label].append(ndcg_at_k(docs, q.qrels, 10))
    from fathom.evaluation.metrics import bootstrap_ci

    diff = np.subtract(scores["hybrid+reader"], scores["hybrid"])
    return {
        "queries": len(queries),
        "ndcg_at": 10,
        **{k: bootstrap_ci(v) for k, v in scores.items()},
        "reader_minus_hybrid": bootstrap_ci(diff),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--limit", type=int)
    p.add_argument("--scifact", action="store_true")
    p.add_argument("--home", type=Path, help="FATHOM_HOME to keep the collections in")
    p.add_argument("--out", type=Path, default=default_out("reader"))
    args = p.parse_args(argv)
    data = data_dir(args.data)
    results: dict[str, Any] = {"candidates": CANDIDATES, "split": args.split, "sets": []}
    results["command"] = "FATHOM_DATA=… " + command_line(argv, __file__)
    with temp_home("reader") as tmp:
        cfg = bench_config(args.home or tmp)
        for name in [s for s in args.sets.split(",") if s]:
            log(f"{name}: reranking the {args.split} half")
            results["sets"].append(run_set(cfg, data, name, args.split, args.limit))
            _print(results["sets"][-1])
            write_json(args.out, dict(results))  # each set kept as it finishes
        if args.scifact:
            log("scifact: nDCG@10")
            results["scifact"] = run_scifact(cfg, data)
    write_json(args.out, results)
    return 0


def _print(entry: dict[str, Any]) -> None:
    rows = []
    for n in AT:
        for m in METHODS:
            c = entry[f"{m}@{n}"]
            rows.append([f"recall@{n}", m, format_ci(c), format_ci(c["documents"], mean=False)])
        for base in ("none", "embedding"):
            c = entry[f"reader_minus_{base}@{n}"]
            rows.append(
                [
                    f"recall@{n}",
                    f"reader − {base}",
                    format_ci(c, signed=True),
                    format_ci(c["documents"], signed=True, mean=False),
                ]
            )
    for m, v in entry["rerank_ms"].items():
        rows.append(["rerank ms", m, f"P50 {v['p50']:.1f}  P95 {v['p95']:.1f}", ""])
    title = f"{entry['set']}: {entry['questions']} questions, {entry['documents']} documents"
    print_table(title, ["metric", "method", "mean [questions]", "[documents]"], rows)


if __name__ == "__main__":
    raise SystemExit(main())
