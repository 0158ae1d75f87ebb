"""Two readers side by side on the same questions: does a retrained reader reproduce another?

``python -m fathom.learn.reader`` records its training next to the model. A retrain from the
same command on another CPU (another BLAS, fp32 where the other ran bf16) is another model;
this bench says whether it reads the same within noise. Each ``--reader FOLDER`` (two of them;
the first is the baseline) is read on the same questions:

* **reranking**: each set's test half (split by document, seed 0), its questions drawn as
  ``bench/reader.py`` draws them (answerable, HotpotQA's yes/no left out, ``--limit`` of them
  at random, seed 0): the hybrid top 20 (default configuration) reranked by the reader as
  ``ask`` reranks them; answer recall@1 and @3;
* **the span**: the reader's answer span over the first 4 reranked candidates
  (``stages.generate.span.read_span``), scored with SQuAD's EM and F1, sure or not (the
  answerer gives an unsure span too, marked so, when a sentence supports an answer), no span
  scoring 0. This is the extractive answer's span without the token-budget compression in
  front of it, so close to ``bench/extractive.py``'s, not the same. The shares of answerable
  questions and, on SQuAD 2.0 (``squad_v2.0_dev``, every test-half question), of unanswerable
  ones whose span is under the reader's own abstention bar (unsure) or missing;
* **the gold paragraph**: the span read on the paragraph a SQuAD question was written on, no
  bar (``bench/reader_gold.py``), F1 and EM;
* each ``reader.json``'s training record (data counts, steps, seed, time, machine) and its bar.

Every metric of the second reader comes with its paired difference against the first, 95 %
bootstrap intervals over questions and over documents (documents resampled with their
questions); a difference whose interval by document holds 0 is within noise.

    python bench/reader_compare.py --reader index/reader --reader RETRAINED \\
        [--data DIR] [--sets squad_v1.1_dev,covidqa_200423,hotpotqa_dev500,squad_v2.0_dev] \\
        [--limit 400] [--gold-set squad_v1.1_dev] [--gold-limit N] [--home DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
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
    print_table,
    temp_home,
    write_json,
)
from fathom.bench.reader import AT, CANDIDATES, drawn_questions

SETS = ("squad_v1.1_dev", "covidqa_200423", "hotpotqa_dev500", "squad_v2.0_dev")
CONTEXT = 4  # the candidates the span is read over: the answerer's default depth
RECORD_KEYS = ("steps", "batch", "lr", "seed", "examples", "epochs", "seconds", "bf16", "threads")


def read_question(reader: Any, reranker: Any, question: str, hits: list[Any]) -> dict[str, Any]:
    """What one reader makes of one question's candidates: its order and its span."""
    from fathom.stages.generate.extractive import candidates
    from fathom.stages.generate.span import read_span

    ranked = reranker.rerank(question, hits)
    head = ranked[:CONTEXT]
    span, _ = read_span(reader, question, head, candidates(head))
    text = span.text if span is not None else None
    return {"ranked": ranked, "span": text, "sure": span is not None and span.sure}


def score_question(q: Any, read: dict[str, Any]) -> dict[str, float]:
    """The metrics of one reading: recall@n and the span's F1 and EM for an answerable
    question, and whether the span was unsure (under the reader's bar) or missing."""
    from fathom.feedback.judges import answer_recall, exact_match, f1

    unsure = float(not read["sure"])
    if q.unanswerable:
        return {"unsure_unanswerable": unsure}
    golds = list(q.answers)
    out = {"unsure_answerable": unsure}
    for n in AT:
        text = "\n".join(h.chunk.text for h in read["ranked"][:n])
        out[f"recall@{n}"] = float(answer_recall(text, golds) or 0.0)
    span = read["span"] or ""
    out["span_f1"] = f1(span, golds) if span else 0.0
    out["span_em"] = exact_match(span, golds) if span else 0.0
    return out


def paired(values: dict[str, list[float]], docs: list[str]) -> dict[str, Any]:
    """Each reader's mean with intervals and the second's paired difference to the first."""
    from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci

    out: dict[str, Any] = {}
    for label, v in values.items():
        out[label] = bootstrap_ci(v) | {"documents": cluster_bootstrap_ci(v, docs)}
    first, second = values.values()
    d = np.subtract(second, first)
    out["difference"] = bootstrap_ci(d) | {"documents": cluster_bootstrap_ci(d, docs)}
    return out


def run_set(cfg: Any, data: Path, name: str, limit: int | None, readers: dict) -> dict:
    from fathom.index.retrieve import open_retriever
    from fathom.index.targets import resolve_target

    questions = drawn_questions(data, name, "test", limit, unanswerable=True)
    retriever = open_retriever(cfg, resolve_target(cfg, str(data / name / "docs.jsonl")))
    scores: dict[str, dict[str, list[float]]] = {}
    docs: dict[str, list[str]] = {}
    for i, q in enumerate(questions, 1):
        hits = retriever.search(q.question, CANDIDATES)
        doc = q.doc_ids[0] if q.doc_ids else q.qid
        for label, (reader, reranker) in readers.items():
            read = read_question(reader, reranker, q.question, hits)
            for metric, v in score_question(q, read).items():
                scores.setdefault(metric, {}).setdefault(label, []).append(v)
                if label == "first":
                    docs.setdefault(metric, []).append(doc)
        if i % 100 == 0:
            log(f"{name}: {i}/{len(questions)}")
    entry: dict[str, Any] = {"set": name, "questions": len(questions)}
    entry["documents"] = len({q.doc_ids[0] if q.doc_ids else q.qid for q in questions})
    for metric, values in scores.items():
        entry[metric] = {"n": len(docs[metric]), **paired(values, docs[metric])}
    return entry


def run_gold(data: Path, name: str, limit: int | None, readers: dict) -> dict[str, Any]:
    """The span on the gold paragraph, no bar, each reader."""
    from fathom.bench.reader_gold import gold_questions, read_all
    from fathom.feedback.judges import exact_match, f1

    items = gold_questions(data, name, limit)
    golds = [list(q.answers) for q, _, _ in items]
    scores: dict[str, dict[str, list[float]]] = {"f1": {}, "em": {}}
    for label, (reader, _) in readers.items():
        texts, _ = read_all(reader, items)
        scores["f1"][label] = [f1(t, g) for t, g in zip(texts, golds, strict=True)]
        scores["em"][label] = [exact_match(t, g) for t, g in zip(texts, golds, strict=True)]
    docs = [str(raw["doc_ids"][0]) for _, _, raw in items]
    entry: dict[str, Any] = {"set": name, "questions": len(items), "documents": len(set(docs))}
    for metric, values in scores.items():
        entry[metric] = {"n": len(docs), **paired(values, docs)}
    return entry


def describe(folder: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """A reader's training record and bar, as its ``reader.json`` gives them."""
    training = meta.get("training", {})
    fit = meta.get("fit", {})
    return {
        "folder": folder.as_posix(),
        **{k: training.get(k) for k in RECORD_KEYS},
        "counts": training.get("counts"),
        "machine": meta.get("machine"),
        "abstain_below": meta.get("abstain_below"),
        "fit_abstain_unanswerable": fit.get("abstain_unanswerable"),
        "sha256": (meta.get("sha256") or {}).get("model.int8.onnx"),
    }


def _readers(folders: list[Path]) -> dict[str, tuple[Any, Any]]:
    from fathom.index.reader import Reader
    from fathom.stages.rerank import ReaderReranker

    labels = ["first", "second"]
    out = {}
    for label, folder in zip(labels, folders, strict=True):
        reader = Reader(folder).load()
        out[label] = (reader, ReaderReranker(reader))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reader", type=Path, action="append", required=True)
    p.add_argument("--data")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--limit", type=int, default=400)
    p.add_argument("--gold-set", default="squad_v1.1_dev")
    p.add_argument("--gold-limit", type=int)
    p.add_argument("--home", type=Path, help="FATHOM_HOME to keep the collections in")
    p.add_argument("--out", type=Path, default=default_out("reader_compare"))
    args = p.parse_args(argv)
    if len(args.reader) != 2:
        p.error("give --reader twice: the baseline, then the reader to compare with it")
    data = data_dir(args.data)
    readers = _readers(args.reader)
    results: dict[str, Any] = {
        "readers": {
            label: describe(folder, pair[0].meta)
            for (label, pair), folder in zip(readers.items(), args.reader, strict=True)
        },
        "candidates": CANDIDATES,
        "context": CONTEXT,
        "limit": args.limit,
        "sets": [],
        "command": "FATHOM_DATA=… " + command_line(argv, __file__, leave_out=("--out",)),
    }
    with temp_home("reader-compare") as tmp:
        cfg = bench_config(args.home or tmp)
        for name in [s for s in args.sets.split(",") if s]:
            log(f"{name}: both readers on the test half")
            results["sets"].append(run_set(cfg, data, name, args.limit, readers))
            _print(results["sets"][-1])
            write_json(args.out, dict(results))
    if args.gold_set:
        log(f"{args.gold_set}: both readers on the gold paragraph")
        results["gold"] = run_gold(data, args.gold_set, args.gold_limit, readers)
        _print(results["gold"])
    write_json(args.out, results)
    return 0


def _print(entry: dict[str, Any]) -> None:
    rows = []
    for metric, c in entry.items():
        if not isinstance(c, dict) or "difference" not in c:
            continue
        d = c["difference"]
        rows.append(
            [
                metric,
                f"{c['first']['mean']:.3f}",
                f"{c['second']['mean']:.3f}",
                format_ci(d, signed=True),
                format_ci(d["documents"], signed=True, mean=False),
            ]
        )
    title = f"{entry['set']}: {entry['questions']} questions, {entry['documents']} documents"
    print_table(title, ["metric", "first", "second", "second − first", "by document"], rows)


if __name__ == "__main__":
    raise SystemExit(main())
