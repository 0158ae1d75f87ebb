"""Fathom's reader on the gold paragraph alone: how good its span is when the passage is right.

For each answerable question of SQuAD's test half (split by document, seed 0, as ``fathom
eval --split test``), the reader reads only the paragraph the question was written on, as the
extractive answerer reads a source (every 128-token window; the best span inside one quotable
sentence, widened to whole words; ``stages.generate.span.read_span``, sure or not), and
the span is scored with SQuAD's exact match and token F1 (``feedback.judges``). Also: the share
of questions whose best margin falls under the shipped abstention bar, where the answerer marks
its span ``Unsure:``. Set beside the extractive answerer's F1 at k = 4 (``bench/extractive.py``),
the difference is what choosing among retrieved passages costs (and the few answers that
abstain), rather than the span head. Intervals: over questions and over documents (articles
resampled with their questions).

    python bench/reader_gold.py [--data DIR] [--set squad_v1.1_dev] [--limit N] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from fathom.bench.common import data_dir, default_out, format_ci, log, print_table, read_jsonl
from fathom.bench.common import write_json as _write_json


def gold_questions(data: Path, name: str, limit: int | None) -> list[tuple[Any, str, dict]]:
    """``(question, gold paragraph, raw record)`` of the set's answerable test-half questions,
    ``limit`` of them drawn at random (seed 0)."""
    from fathom.learn.questions import load_questions, split_by_document

    docs = {str(d["doc_id"]): d["text"] for d in read_jsonl(data / name / "docs.jsonl")}
    raw = {str(r["qid"]): r for r in read_jsonl(data / name / "questions.jsonl")}
    test = split_by_document(load_questions(data / name / "questions.jsonl"), "test", 0)
    out = []
    for q in test:
        r = raw[q.qid]
        if q.unanswerable or not q.answers or r.get("para_char_start") is None:
            continue
        text = docs[str(r["doc_ids"][0])][r["para_char_start"] : r["para_char_end"]]
        out.append((q, text, r))
    if limit is not None and limit < len(out):
        out = random.Random(0).sample(out, limit)
    return out


def read_all(reader: Any, items: list[tuple[Any, str, dict]]) -> tuple[list[str], list[float]]:
    """Each item's span (``read_gold``: sure or not, as the answerer gives both) and margin."""
    read = [read_gold(reader, q.question, paragraph) for q, paragraph, _ in items]
    return [text for text, _ in read], [margin for _, margin in read]


def read_gold(reader: Any, question: str, paragraph: str) -> tuple[str, float]:
    """The answerer's span in ``paragraph``, under the bar or not, and its margin."""
    from fathom.core.base import Chunk, Hit
    from fathom.stages.generate.extractive import candidates
    from fathom.stages.generate.span import read_span

    chunk = Chunk("gold", "gold", paragraph, 0, len(paragraph), 1, 1, "", 0, 0)
    hits = [Hit(chunk=chunk, score=1.0)]
    span, margin = read_span(reader, question, hits, candidates(hits))
    return (span.text if span is not None else ""), margin


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data")
    p.add_argument("--set", default="squad_v1.1_dev")
    p.add_argument("--limit", type=int)
    p.add_argument("--out", type=Path, default=default_out("reader_gold"))
    args = p.parse_args(argv)
    from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci
    from fathom.feedback.judges import exact_match, f1
    from fathom.index.reader import Reader

    reader = Reader().load()
    bar = float(reader.meta.get("abstain_below", 0.0))
    items = gold_questions(data_dir(args.data), args.set, args.limit)
    log(f"{args.set}: {len(items)} answerable test-half questions on their gold paragraphs")
    texts, margins = read_all(reader, items)
    golds = [list(q.answers) for q, _, _ in items]
    scores: dict[str, list[float]] = {
        "f1": [f1(t, g) for t, g in zip(texts, golds, strict=True)],
        "em": [exact_match(t, g) for t, g in zip(texts, golds, strict=True)],
        "under_bar": [float(m < bar) for m in margins],
    }
    docs = [str(raw["doc_ids"][0]) for _, _, raw in items]
    result: dict[str, Any] = {
        "set": args.set,
        "split": "test",
        "n": len(items),
        "documents": len(set(docs)),
        "abstain_below": bar,
    }
    rows = []
    for name, values in scores.items():
        by_q = bootstrap_ci(values)
        by_doc = cluster_bootstrap_ci(values, docs)
        result[name] = {
            "mean": by_q["mean"],
            "ci": [by_q["lo"], by_q["hi"]],
            "ci_documents": [by_doc["lo"], by_doc["hi"]],
        }
        rows.append([name, format_ci(by_q), format_ci(by_doc, mean=False)])
    print_table(
        f"the reader on the gold paragraph, {args.set} test half, {len(items)} questions "
        f"({result['documents']} documents)",
        ["", "mean [95% CI]", "by document"],
        rows,
    )
    limit = f" --limit {args.limit}" if args.limit else ""
    result["command"] = f"FATHOM_DATA=… python bench/reader_gold.py --set {args.set}{limit}"
    _write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
