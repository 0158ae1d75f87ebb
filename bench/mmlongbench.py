"""MMLongBench-Doc: Fathom's offline answers over long real PDFs, scored by the benchmark's
published rules, on a held-out half of the documents.

The questions are the benchmark's text-only ones (``text_only``: the evidence is text, tables
or layout, or the question is unanswerable), from ``FATHOM_DATA/mmlongbench_doc``
(``questions.jsonl``, ``documents/*.pdf``). Each document is ingested into its own collection and
each question asked of its own document's collection with ``generator.backend = extractive``,
otherwise the default configuration (the depth ``ask`` picks, reranking as configured), in one
warm process per variant (bench/support/mmlongbench_worker.py). Variants:

* ``not-answerable`` — every question answered "Not answerable" (nothing runs);
* ``default`` — this checkout;
* ``previous`` — another checkout (``--previous DIR``, e.g. a ``git worktree``), its own code.

Scoring (bench/support/mmlongbench_scoring.py) is upstream's ``eval_score`` on Fathom's own short
answer (an abstention is "Not answerable"; else ``short_answer``, the span, or the answer text;
a number for Int and Float questions; a list for List questions). Reported per variant: strict
accuracy (a question is right when its score is at least 0.5: exact for Int, Float and
exact-match kinds, ANLS similarity for the rest), overall, on answerable questions, by answer
format and by document type; upstream's mean score and generalized F1; unanswerable questions
answered "Not answerable"; answerable questions abstained on; for answerable questions, the
share whose cited passages, and whose context read (every source given to the answerer), hold
an evidence page; answer latency; and paired differences against ``previous`` with bootstrap
intervals over questions and over documents.

The documents are split in two halves (``--split train|test|all``), stratified by document type
(``split_documents``). Writes ``--out``/results.json and results.md; a variant's collections and
answers stay under ``--work DIR/<variant>`` (collections are always reused; ``--reuse`` keeps the
answers too; ``--score-only`` asks nothing and scores the questions every variant answered).

    python bench/mmlongbench.py [--data DIR] [--split test] [--variants not-answerable,default]
        [--previous DIR] [--docs N] [--limit N] [--work DIR] [--reuse] [--score-only] [--out DIR]
        [--note TEXT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    check_tree,
    command_line,
    data_dir,
    format_ci,
    log,
    machine_info,
    paired_metrics,
    percentiles,
    read_jsonl,
    tree_env,
    write_results,
)
from fathom.bench.support.mmlongbench_scoring import (
    FORMATS,
    NOT_ANSWERABLE,
    anls_compute,
    eval_acc_and_f1,
    eval_score,
    get_clean_string,
    is_exact_match,
    is_float_equal,
    isfloat,
    levenshtein_distance,
    score_answer,
    short_answer,
    strict_right,
)

__all__ = [
    "anls_compute",
    "eval_score",
    "get_clean_string",
    "is_exact_match",
    "is_float_equal",
    "isfloat",
    "levenshtein_distance",
    "short_answer",
    "split_documents",
    "strict_right",
]

DATASET = "mmlongbench_doc"
VARIANTS = ("not-answerable", "default", "previous")
WORKER = Path(__file__).resolve().parent / "support" / "mmlongbench_worker.py"
# Paired against this variant when it runs (today's tree, or whichever ``--previous`` names).
BASELINE = "previous"
PAIRED = ("right", "score")
EVIDENCE = ("cited_evidence", "context_evidence")  # paired on the answerable questions

# ---------------------------------------------------------------------------------------------
# Questions and the split by document
# ---------------------------------------------------------------------------------------------


def load_questions(folder: Path) -> list[dict[str, Any]]:
    """The text-only questions of ``folder/questions.jsonl``, in file order."""
    return [q for q in read_jsonl(folder / "questions.jsonl") if q.get("text_only")]


def _rank(doc_id: str, seed: int) -> str:
    """A document's place in a seeded shuffle: a hash of ``seed`` and its id, the same on
    every machine and Python (as ``fathom.learn.questions.document_half`` hashes)."""
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def split_documents(questions: list[dict[str, Any]], seed: int = 0) -> dict[str, str]:
    """Each document's half, ``"train"`` or ``"test"``: within each document type (in name
    order) the documents in a seeded shuffle, dealt alternately to the two halves, the deal
    going on from one type to the next, so the halves differ by at most one document and each
    type is split as evenly as it can be.

    (``learn.questions.split_by_document`` flips a seeded coin per document instead: on 61
    documents its halves need not be even, nor each type split.)"""
    doc_type: dict[str, str] = {}
    for q in questions:
        doc_type.setdefault(q["doc_id"], q.get("doc_type") or "")
    by_type: dict[str, list[str]] = defaultdict(list)
    for doc, kind in doc_type.items():
        by_type[kind].append(doc)
    halves: dict[str, str] = {}
    turn = 0
    for kind in sorted(by_type):
        for doc in sorted(by_type[kind], key=lambda d: _rank(d, seed)):
            halves[doc] = ("test", "train")[turn % 2]
            turn += 1
    return halves


def select_questions(
    questions: list[dict[str, Any]], split: str, seed: int = 0
) -> list[dict[str, Any]]:
    """The questions whose documents fall in ``split`` (``train``, ``test`` or ``all``)."""
    if split == "all":
        return list(questions)
    halves = split_documents(questions, seed)
    return [q for q in questions if halves[q["doc_id"]] == split]


def documents_of(questions: list[dict[str, Any]]) -> list[str]:
    """The documents of ``questions`` in order of first appearance."""
    return list(dict.fromkeys(q["doc_id"] for q in questions))


# ---------------------------------------------------------------------------------------------
# Running a variant
# ---------------------------------------------------------------------------------------------


def run_variant(
    variant: str,
    tree: Path,
    questions: list[dict[str, Any]],
    documents: Path,
    work: Path,
    reuse: bool,
) -> Path:
    """Answer ``questions`` with ``tree``'s code in one worker process; the answers file
    (``work/answers.jsonl``). With ``reuse``, questions already answered there are kept."""
    work.mkdir(parents=True, exist_ok=True)
    answers = work / "answers.jsonl"
    done: set[str] = set()
    if reuse and answers.is_file():
        done = {r["qid"] for r in read_jsonl(answers)}
    elif answers.is_file():
        answers.unlink()
    todo = [q for q in questions if q["qid"] not in done]
    log(f"{variant}: {len(questions) - len(todo)} answers reused, {len(todo)} to ask ({tree})")
    if not todo:
        return answers
    env = tree_env(tree, work)
    check_tree(env, tree, work)
    by_doc: dict[str, list[dict[str, str]]] = defaultdict(list)
    for q in todo:
        by_doc[q["doc_id"]].append({"qid": q["qid"], "question": q["question"]})
    jobs = {
        "answers": str(answers),
        "ingest_log": str(work / "ingest.jsonl"),
        "documents": [
            {"doc_id": d, "path": str(documents / d), "questions": qs} for d, qs in by_doc.items()
        ],
    }
    (work / "jobs.json").write_text(json.dumps(jobs, indent=1), encoding="utf-8")
    # cwd: the work folder, so no fathom.toml of the caller's folder is read
    subprocess.run(
        [sys.executable, str(WORKER), str(work / "jobs.json")], env=env, cwd=work, check=True
    )
    return answers


def not_answerable_rows(questions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The answers of the baseline that says "Not answerable" to everything."""
    return {
        q["qid"]: {"qid": q["qid"], "answer": NOT_ANSWERABLE, "abstained": True, "citations": []}
        for q in questions
    }


# ---------------------------------------------------------------------------------------------
# Scoring and the summary
# ---------------------------------------------------------------------------------------------


def pages_of(label: str) -> set[int]:
    """The pages of a citation's page label (``"3"``, ``"3-5"``, ``"3, 7"``); none for ``""``."""
    pages: set[int] = set()
    for part in str(label or "").replace(";", ",").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.strip().isdigit():
            start = int(lo)
            end = int(hi) if hi.strip().isdigit() else start
            pages.update(range(start, end + 1))
    return pages


def holds_evidence(citations: list[dict[str, Any]], evidence_pages: list[int]) -> bool:
    """Whether any of ``citations`` covers one of the (1-based) ``evidence_pages``."""
    want = set(evidence_pages)
    return any(pages_of(c.get("pages", "")) & want for c in citations)


def score_rows(
    questions: list[dict[str, Any]], answers: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Each answered question's scored row: the question's fields, ``pred``, ``score``,
    ``right``, ``abstained``, evidence in the cited passages and in the context read,
    ``ask_ms``; and the ``metrics`` and ``gold_doc_ids`` ``paired_metrics`` reads."""
    rows: dict[str, dict[str, Any]] = {}
    for q in questions:
        a = answers.get(q["qid"])
        if a is None:
            continue
        s = score_answer(a, q["answer"], q["answer_format"])
        cited = holds_evidence(a.get("citations") or [], q.get("evidence_pages") or [])
        read = holds_evidence(a.get("sources") or [], q.get("evidence_pages") or [])
        row = {
            "qid": q["qid"],
            "doc_id": q["doc_id"],
            "doc_type": q.get("doc_type", ""),
            "answer_format": q["answer_format"],
            "answer": q["answer"],
            **s,
            "cited_evidence": cited,
            "context_evidence": read,
            "ask_ms": a.get("ask_ms"),
            "gold_doc_ids": [q["doc_id"]],
        }
        row["metrics"] = {
            "right": float(s["right"]),
            "score": s["score"],
            "cited_evidence": float(cited),
            "context_evidence": float(read),
        }
        rows[q["qid"]] = row
    return rows


def _share(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    n = sum(bool(r[key]) for r in rows)
    return {"n": n, "total": len(rows), "share": n / len(rows) if rows else None}


def summarise(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One variant's numbers over its scored ``rows``."""
    all_rows = list(rows.values())
    answerable = [r for r in all_rows if r["answer_format"] != "None"]
    unanswerable = [r for r in all_rows if r["answer_format"] == "None"]
    acc, f1 = eval_acc_and_f1(all_rows)
    by_format = {
        f: _share([r for r in all_rows if r["answer_format"] == f], "right") for f in FORMATS
    }
    types = sorted({r["doc_type"] for r in all_rows})
    by_type = {t: _share([r for r in all_rows if r["doc_type"] == t], "right") for t in types}
    evidence_by_type = {
        t: {
            "cited": _share([r for r in answerable if r["doc_type"] == t], "cited_evidence"),
            "context": _share([r for r in answerable if r["doc_type"] == t], "context_evidence"),
        }
        for t in types
    }
    for r in unanswerable:
        r["said_not_answerable"] = r["pred"] == NOT_ANSWERABLE
    latency = [float(r["ask_ms"]) for r in all_rows if r.get("ask_ms") is not None]
    return {
        "n": len(all_rows),
        "documents": len({r["doc_id"] for r in all_rows}),
        "strict_accuracy": _share(all_rows, "right"),
        "strict_accuracy_answerable": _share(answerable, "right"),
        "published_score": acc,
        "published_f1": f1,
        "by_format": by_format,
        "by_doc_type": by_type,
        "unanswerable_said_not_answerable": _share(unanswerable, "said_not_answerable"),
        "answerable_abstained": _share(answerable, "abstained"),
        "evidence_cited": _share(answerable, "cited_evidence"),
        "evidence_context": _share(answerable, "context_evidence"),
        "evidence_by_doc_type": evidence_by_type,
        "ask_ms": percentiles(latency, (50, 95)) if latency else None,
    }


def compare(
    questions: list[dict[str, Any]], answers: dict[str, dict[str, dict[str, Any]]]
) -> dict[str, Any]:
    """Every variant's summary over ``questions``, and (with ``previous``) the paired
    differences against it, on the questions every variant answered."""
    scored = {v: score_rows(questions, a) for v, a in answers.items()}
    out: dict[str, Any] = {"variants": {v: summarise(rows) for v, rows in scored.items()}}
    baseline = BASELINE if BASELINE in scored else next(iter(scored))
    shared, entries = paired_metrics(scored, PAIRED, baseline)
    answerable = {
        v: {q: r for q, r in rows.items() if r["answer_format"] != "None"}
        for v, rows in scored.items()
    }
    shared_answerable, evidence = paired_metrics(answerable, EVIDENCE, baseline)
    for v, entry in evidence.items():
        entries[v].update(entry)
    out["paired"] = {
        "baseline": baseline,
        "n": len(shared),
        "n_answerable": len(shared_answerable),
        "variants": entries,
    }
    out["per_question"] = {
        v: [
            {k: r[k] for k in ("qid", "doc_id", "answer_format", "answer", "pred", "score")}
            for r in rows.values()
        ]
        for v, rows in scored.items()
    }
    return out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def _pct(s: dict[str, Any] | None) -> str:
    if not s or s.get("share") is None:
        return "–"
    return f"{s['share']:.1%} ({s['n']}/{s['total']})"


def markdown(results: dict[str, Any]) -> str:
    """results.md: the tables of ``results``."""
    m = results["machine"]
    variants = results["variants"]
    paired = results["paired"]
    base = paired["baseline"]
    lines = [
        "# MMLongBench-Doc (text-only questions), scored by the benchmark's published rules",
        "",
        f"Command: `{results['command']}`. Split: `{results['split']}` half of the documents "
        f"({results['documents']} documents, {results['n']} questions; seed {results['seed']}, "
        "stratified by document type). Answers: `--generator extractive`, otherwise the default "
        "configuration, one collection per document. Machine: "
        f"{m.get('cpu')}, {m.get('cpus')} cores, {m.get('memory_gb')} GiB.",
        "",
        *([results["note"], ""] if results.get("note") else []),
        "Strict accuracy: a question is right when upstream's score is at least 0.5 (exact for "
        "Int, Float and exact-match kinds, ANLS similarity for the rest). Published score: "
        "upstream's mean score (its accuracy) and generalized F1.",
        "",
        "| variant | strict accuracy | answerable | published score | published F1 "
        "| unanswerable said not answerable | answerable abstained | evidence cited "
        "| evidence in context | ask P50 / P95 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, s in variants.items():
        lat = s["ask_ms"]
        ms = f"{lat['p50']:.0f} / {lat['p95']:.0f}" if lat else "–"
        lines.append(
            f"| {label} | {_pct(s['strict_accuracy'])} | {_pct(s['strict_accuracy_answerable'])} "
            f"| {s['published_score']:.3f} | {s['published_f1']:.3f} "
            f"| {_pct(s['unanswerable_said_not_answerable'])} | {_pct(s['answerable_abstained'])} "
            f"| {_pct(s['evidence_cited'])} | {_pct(s['evidence_context'])} | {ms} |"
        )
    lines += ["", "## Strict accuracy by answer format", ""]
    lines += ["| variant | " + " | ".join(FORMATS) + " |", "| --- |" + " ---: |" * len(FORMATS)]
    for label, s in variants.items():
        cells = [
            f"{v['n']}/{v['total']}" if v["total"] else "–"
            for v in (s["by_format"][f] for f in FORMATS)
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    types = sorted({t for s in variants.values() for t in s["by_doc_type"]})
    lines += ["", "## By document type", ""]
    lines += [
        "Strict accuracy; then, for answerable questions, evidence pages among the cited "
        "passages / in the context read.",
        "",
        "| document type | " + " | ".join(variants) + " |",
        "| --- |" + " ---: |" * len(variants),
    ]
    for t in types:
        cells = []
        for s in variants.values():
            acc = s["by_doc_type"].get(t)
            ev = s["evidence_by_doc_type"].get(t, {})
            cited, ctx = ev.get("cited"), ev.get("context")
            evidence = (
                f"; {cited['n']}/{ctx['n']} of {cited['total']}" if cited and cited["total"] else ""
            )
            cells.append(f"{acc['n']}/{acc['total']}{evidence}" if acc else "–")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Paired against `{base}` ({paired['n']} questions)",
        "",
        "Mean with a bootstrap 95 % interval over questions, then over documents (resampled "
        "with their questions kept together); Δ is the paired difference. The evidence "
        f"metrics are over the {paired.get('n_answerable', '–')} answerable questions.",
        "",
        "| variant | metric | mean | by document | Δ | Δ by document |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, e in paired["variants"].items():
        for metric in (*PAIRED, *EVIDENCE):
            d = f"{metric}_minus_{base}"
            lines.append(
                f"| {label} | {metric} | {format_ci(e.get(metric))} "
                f"| {format_ci(e.get(f'{metric}_documents'), mean=False)} "
                f"| {format_ci(e.get(d), signed=True)} "
                f"| {format_ci(e.get(f'{d}_documents'), signed=True, mean=False)} |"
            )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def _without(argv: list[str] | None, flag: str) -> list[str]:
    return [a for a in (sys.argv[1:] if argv is None else argv) if a != flag]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the data folder (default: FATHOM_DATA)")
    ap.add_argument("--split", choices=("train", "test", "all"), default="test")
    ap.add_argument("--seed", type=int, default=0, help="the split's seed")
    ap.add_argument("--variants", default="not-answerable,default", help=f"of {VARIANTS}")
    ap.add_argument("--previous", default=None, help="another Fathom checkout (adds previous)")
    ap.add_argument("--docs", type=int, default=None, help="only the split's first N documents")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--work", default="runs/mmlongbench", help="collections and answers")
    ap.add_argument("--reuse", action="store_true", help="keep answers already in --work")
    ap.add_argument(
        "--score-only",
        action="store_true",
        help="ask nothing: score the answers in --work, on the questions every variant answered",
    )
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "mmlongbench")
    ap.add_argument("--note", default="", help="a line for results.md: how the run went")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if args.previous and "previous" not in variants:
        variants.append("previous")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    if "previous" in variants and not args.previous:
        ap.error("variant previous needs --previous DIR")
    folder = data_dir(args.data) / DATASET
    questions = select_questions(load_questions(folder), args.split, args.seed)
    docs = documents_of(questions)[: args.docs] if args.docs else documents_of(questions)
    questions = [q for q in questions if q["doc_id"] in set(docs)][: args.limit]
    log(f"{args.split}: {len(questions)} questions over {len(documents_of(questions))} documents")
    work = Path(args.work).resolve()
    answers: dict[str, dict[str, dict[str, Any]]] = {}
    for v in variants:
        if v == "not-answerable":
            answers[v] = not_answerable_rows(questions)
            continue
        tree = Path(args.previous).resolve() if v == "previous" else REPO
        path = work / v / "answers.jsonl"
        if not args.score_only:
            path = run_variant(v, tree, questions, folder / "documents", work / v, args.reuse)
        answers[v] = {r["qid"]: r for r in read_jsonl(path)} if path.is_file() else {}
    if args.score_only:
        ran = [a for v, a in answers.items() if v != "not-answerable"]
        questions = [q for q in questions if all(q["qid"] in a for a in ran)]
        log(f"scoring the {len(questions)} questions every variant answered")
    results: dict[str, Any] = {
        "machine": machine_info(),
        # the command that makes these answers: --score-only (like --reuse) only reads them
        "command": "FATHOM_DATA=… "
        + command_line(_without(argv, "--score-only"), __file__, leave_out=("--note",)),
        "dataset": DATASET,
        "split": args.split,
        "seed": args.seed,
        "n": len(questions),
        "documents": len(documents_of(questions)),
        "note": args.note,
    }
    results.update(compare(questions, answers))
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(args.out, results, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
