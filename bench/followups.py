"""Follow-up questions with and without memory: retrieval recall@5 of pronoun follow-ups made
standalone by the rule of ``stages.followup``, against the same questions asked standalone and
asked as they are (no memory), in the same run.

The multi-turn set (the documented rule). From the test half of SQuAD v1.1 dev (questions
split by document, ``learn.questions.split_by_document(..., "test", 0)``), each article's
subject is its title. A question *mentions* it when it holds the title or its plural as whole
words (case-insensitively, with a "the" before it taken along). A test article's mentioning
questions, in file order, make conversations of nine: the first asked as written (the
standalone opener), then the next eight (fewer at the article's end), each with the title
replaced by a pronoun ("TITLE's" → "its", "TITLE" → "it", "TITLEs" → "they", or "them" after
a word other than a question word or auxiliary, "TITLEs'" → "their"): "Who won Super Bowl
50?" becomes "Who won it?".

Each follow-up is retrieved three ways with the retrieval ``ask`` uses (``index.retrieve``'s
hybrid probe over the collection built from ``docs.jsonl`` with the default configuration),
top 5 chunks: *standalone* (the original question), *memory* (the pronoun question made
standalone by ``stages.followup.resolve`` from the conversation's earlier turns: each turn
remembers its standalone question, the subject it was resolved to and, as the document its
answer cited, the document of its top retrieved chunk) and *no memory* (the pronoun question
as it is). A follow-up is found when a gold answer string occurs in one of the five chunks'
text. Reported: recall@5 of each with a document-level (cluster) bootstrap interval, the
paired differences memory − standalone and memory − no memory with question- and
document-level intervals and win/tie/loss shares, and how often the rule resolved the subject
to the article's title.

    python bench/followups.py [--data DIR] [--home DIR] [--k 5] [--out FILE]
    python bench/followups.py --smoke   # 3 articles, hashing embedder: runs?

Writes ``docs/results/followups/followups.json`` (``--smoke``:
``bench/results/followups_smoke.json``). ``--home`` keeps the built collection for later runs.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    bench_config,
    data_dir,
    default_out,
    log,
    print_table,
    read_jsonl,
    temp_home,
    write_json,
)
from fathom.bench.doc_filter import answered, build, smoke_docs

COLLECTION = "bench-doc-filter"  # the same collection doc_filter.py builds: one per --home
DATASET = "squad_v1.1_dev"
TURNS = 9  # questions in one conversation: the opener and up to eight follow-ups
# A plural subject after these (or first) is "they"; after any other word, "them".
_SUBJECT_BEFORE = frozenset(
    "what which who when where why how do does did are were is was can could have has had will "
    "would that".split()
)


def mention(title: str) -> re.Pattern[str]:
    """A mention of ``title`` (whole words, case-insensitive, "the" before it taken along;
    groups ``plural`` and ``pos``: its plural, a possessive)."""
    return re.compile(rf"(?:\bthe\s+)?\b{re.escape(title)}(?P<plural>s)?\b(?P<pos>['’]s?)?", re.I)


def pronoun(question: str, title: str) -> str:
    """``question`` with every mention of ``title`` replaced by it, its, they or their."""

    def repl(m: re.Match[str]) -> str:
        if m.group("plural"):
            before = question[: m.start()].split()[-1:]
            subject = not before or before[0].lower() in _SUBJECT_BEFORE
            word = "their" if m.group("pos") else "they" if subject else "them"
        else:
            word = "its" if m.group("pos") else "it"
        return word.capitalize() if m.start() == 0 else word

    return mention(title).sub(repl, question)


SUFFIX = {"test": "", "train": "-train"}


def conversations(
    data: Path, articles: int | None = None, split: str = "test"
) -> list[dict[str, Any]]:
    """The multi-turn set (module docstring) of the ``split`` half: ``[{doc, title, opener,
    followups: [row]}]``, a row being the question's record with ``followup``, its pronoun
    form."""
    from fathom.learn.questions import load_questions, split_by_document

    folder = data / DATASET
    titles = {d["doc_id"]: d["title"] for d in read_jsonl(folder / "docs.jsonl")}
    half = {q.qid for q in split_by_document(load_questions(folder / "questions.jsonl"), split, 0)}
    rows = [r for r in read_jsonl(folder / "questions.jsonl") if r["qid"] in half]
    articles_rows: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        articles_rows.setdefault(r["doc_ids"][0], []).append(r)
    chains = []
    for doc, qs in list(articles_rows.items())[:articles]:
        title = titles[doc]
        named = [q for q in qs if mention(title).search(q["question"])]
        for at in range(0, len(named), TURNS):
            talk = named[at : at + TURNS]
            found = [{**q, "followup": pronoun(q["question"], title)} for q in talk[1:]]
            if found:
                chains.append({"doc": doc, "title": title, "opener": talk[0], "followups": found})
    return chains


def measure(cfg: Any, chains: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Each follow-up retrieved standalone, with memory and without: one row per follow-up."""
    from fathom.index.retrieve import open_retriever
    from fathom.stages.followup import Turn, resolve

    retriever = open_retriever(cfg, COLLECTION)
    titles = {d.doc_id: d.title for d in retriever.collection.manifest.documents}

    def top(question: str) -> list[Any]:
        return list(retriever.probe(question, k).hits[:k])

    def cited(hits: list[Any]) -> tuple[str, ...]:
        return (titles.get(hits[0].chunk.doc_id, ""),) if hits else ()

    out = []
    for n, chain in enumerate(chains, 1):
        opener = chain["opener"]["question"]
        turns = [Turn(opener, opener, cited=cited(top(opener)))]
        for q in chain["followups"]:
            answers = list(q["answers"])
            rewrite = resolve(q["followup"], turns)
            mem_hits = top(rewrite.question)
            out.append(
                {
                    "qid": q["qid"],
                    "doc": chain["doc"],
                    "question": q["question"],
                    "followup": q["followup"],
                    "rewritten": rewrite.question,
                    "method": rewrite.method,
                    "subject": rewrite.subject,
                    "subject_is_title": rewrite.subject.casefold() == chain["title"].casefold(),
                    "standalone": int(answered(top(q["question"]), answers)),
                    "memory": int(answered(mem_hits, answers)),
                    "no_memory": int(answered(top(q["followup"]), answers)),
                }
            )
            turns.append(Turn(q["followup"], rewrite.question, rewrite.subject, cited(mem_hits)))
        if n % 10 == 0:
            log(f"{n}/{len(chains)} conversations")
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall@k of each side with intervals, and the paired differences."""
    from fathom.evaluation.metrics import cluster_bootstrap_ci, paired_compare

    docs = [r["doc"] for r in rows]
    qids = [r["qid"] for r in rows]
    sides = ("standalone", "memory", "no_memory")
    recall = {s: cluster_bootstrap_ci([r[s] for r in rows], docs) for s in sides}
    diffs = {}
    for a, b in (("memory", "standalone"), ("memory", "no_memory")):
        d = [r[a] - r[b] for r in rows]
        diffs[f"{a}-{b}"] = {
            "by_question": cluster_bootstrap_ci(d, qids),
            "by_document": cluster_bootstrap_ci(d, docs),
            "paired": paired_compare([r[a] for r in rows], [r[b] for r in rows]),
        }
    return {
        "followups": len(rows),
        "articles": len(set(docs)),
        "rewritten": sum(r["method"] == "rule" for r in rows) / len(rows),
        "subject_is_title": sum(r["subject_is_title"] for r in rows) / len(rows),
        "recall": recall,
        "differences": diffs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="a tiny run that checks the script")
    ap.add_argument("--home", default=None, help="FATHOM_HOME to build in and keep")
    ap.add_argument(
        "--split", default="test", choices=["test", "train"], help="the half to build it from"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    out = args.out or (
        default_out("followups_smoke")
        if args.smoke
        else REPO / "docs" / "results" / "followups" / f"followups{SUFFIX[args.split]}.json"
    )
    chains = conversations(data, 3 if args.smoke else None, args.split)
    log(f"{len(chains)} conversations, {sum(len(c['followups']) for c in chains)} follow-ups")
    t0 = time.perf_counter()
    with temp_home("followups") as tmp:
        home = Path(args.home) if args.home else tmp
        home.mkdir(parents=True, exist_ok=True)
        cfg = bench_config(home)
        docs = data / DATASET / "docs.jsonl"
        embedder = None
        if args.smoke:
            docs, embedder = smoke_docs(data / DATASET, home, 32), "hashing:384"
            cfg = bench_config(home, {"embedder.model": embedder})
        build(cfg, home, docs, embedder)
        rows = measure(cfg, chains, args.k)
    summary = summarise(rows)
    rec, diffs = summary["recall"], summary["differences"]
    print_table(
        f"recall@{args.k} of {summary['followups']} follow-ups (95% document-level intervals)",
        ["asked", "recall", "lo", "hi"],
        [(s, rec[s]["mean"], rec[s]["lo"], rec[s]["hi"]) for s in rec],
    )
    print_table(
        "paired differences (95% intervals over questions / documents)",
        ["difference", "mean", "lo (q)", "hi (q)", "lo (doc)", "hi (doc)", "win", "loss"],
        [
            (
                name,
                d["by_question"]["mean"],
                d["by_question"]["lo"],
                d["by_question"]["hi"],
                d["by_document"]["lo"],
                d["by_document"]["hi"],
                d["paired"]["win"],
                d["paired"]["loss"],
            )
            for name, d in diffs.items()
        ],
    )
    write_json(
        out,
        {
            "benchmark": "followups",
            "dataset": f"{DATASET} ({args.split} half, split_by_document seed 0)",
            "k": args.k,
            "smoke": args.smoke,
            "seconds": round(time.perf_counter() - t0, 1),
            **summary,
            "examples": rows[:12],
            "rows": [{k: r[k] for k in ("qid", "standalone", "memory", "no_memory")} for r in rows],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
