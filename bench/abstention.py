"""Abstention: does the extractive answerer say that the sources do not answer when they do not,
and only then? Measured on held-out halves, in the configuration a user runs (default
configuration, ``--generator extractive``, the depth ``ask`` picks: strategy ``forest``).

Two sets, each on the ``--split`` half of its documents (split by document as ``fathom eval
--split`` splits, ``learn.questions.split_by_document``):

* **Out of document** (``FATHOM_DATA/squad_v1.1_dev``): the half's articles, sorted by id, each
  paired with the next one (wrapping). A collection holding article B alone is asked B's own
  questions (answerable) and A's questions (asked of the wrong document: unanswerable, written
  with no answers and ``is_impossible: true``), at most ``--per-article`` of each, a seeded
  sample. One ``fathom eval --split all --strategies forest --judge f1 --generator extractive``
  per pair, on the small docs.jsonl / questions.jsonl written under ``--work``.
* **SQuAD 2.0** (``FATHOM_DATA/squad_v2.0_dev``): its real unanswerable questions, ``fathom
  eval --split test --limit N`` (``--squad2-limit``) over the whole set's collection.

Reported per variant: the share of unanswerable questions abstained on (target ≥ 90 % out of
document), the share of answerable ones abstained on (target ≤ 10 %), and answerable F1, EM and
contains, each with bootstrap 95 % intervals over questions and over documents (a question's
document: the one its collection was asked about, out of document; its gold document in
SQuAD 2.0). ``--previous DIR`` adds another checkout (e.g. a ``git worktree`` of the tree
before abstention by coverage), run with its own code (a folder holding a link ``fathom`` to it,
alone on ``PYTHONPATH``), paired against this tree. Writes ``--out``/results.json and
results.md.

``--fit`` measures nothing on the test halves: it records, on the training halves (the
out-of-document pairs of squad_v1.1_dev's train half, squad_v2.0_dev's train half, the
official training layout of ``squad_v2.0_train10``, and MMLongBench-Doc's train-half answers
when ``--mmlongbench-work`` holds them), what the rule reads for every question and grid-searches
``MIN_COVERAGE`` × ``MIN_COVERAGE_UNSURE`` (bench/support/abstention_fit.py); writes
``--out``/fit.json and fit.md.

    python bench/abstention.py [--data DIR] [--split test] [--per-article 40]
        [--squad2-limit 500] [--previous DIR] [--work DIR] [--reuse] [--out DIR]
    python bench/abstention.py --fit [--per-article 40] [--squad2-limit 500]
        [--train10-limit 500] [--mmlongbench-work DIR] [--work DIR] [--out DIR]
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
    eval_rows_by_qid,
    format_ci,
    log,
    machine_info,
    paired_metrics,
    read_jsonl,
    tree_env,
    write_json,
    write_results,
)

SQUAD1 = "squad_v1.1_dev"
SQUAD2 = "squad_v2.0_dev"
TRAIN10 = "squad_v2.0_train10"
STRATEGY = "forest"  # the shipped depth policy: the depth ``ask`` picks
METRICS = ("abstained", "f1", "em", "contains")
BASELINE = "previous"
OOD_MARK = "|asked-of|"  # an out-of-document question's qid: "<qid>|asked-of|<doc>"

# ---------------------------------------------------------------------------------------------
# The out-of-document pairs
# ---------------------------------------------------------------------------------------------


def half_articles(folder: Path, split: str, seed: int = 0) -> list[str]:
    """The documents of ``folder`` (docs.jsonl, questions.jsonl) on the ``split`` half
    (``train``, ``test`` or ``all``) as ``fathom eval --split`` splits them, sorted by id."""
    from fathom.learn.questions import half_documents, load_questions

    docs = [d["doc_id"] for d in read_jsonl(folder / "docs.jsonl")]
    if split == "all":
        return sorted(docs)
    questions = load_questions(folder / "questions.jsonl")
    return sorted(half_documents(questions, docs, split, seed))


def article_pairs(doc_ids: list[str]) -> list[tuple[str, str]]:
    """``(a, b)`` for each article ``a`` of ``doc_ids`` sorted by id, ``b`` the next one
    (the last one's next is the first): ``b``'s collection is asked ``a``'s questions. None
    for fewer than two articles."""
    ids = sorted(set(doc_ids))
    if len(ids) < 2:
        return []
    return [(a, ids[(i + 1) % len(ids)]) for i, a in enumerate(ids)]


def _rank(key: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def sample(questions: list[dict[str, Any]], n: int | None, seed: int = 0) -> list[dict[str, Any]]:
    """At most ``n`` of ``questions`` (all for None), a seeded sample by qid, in file order."""
    if n is None or len(questions) <= n:
        return list(questions)
    keep = {q["qid"] for q in sorted(questions, key=lambda q: _rank(q["qid"], seed))[:n]}
    return [q for q in questions if q["qid"] in keep]


def pair_questions(
    a: str, b: str, by_doc: dict[str, list[dict[str, Any]]], n: int | None, seed: int = 0
) -> list[dict[str, Any]]:
    """The questions ``b``'s collection is asked: ``b``'s own (answerable, as written) and
    ``a``'s, asked of the wrong document (no answers, ``is_impossible``; qid
    ``<qid>|asked-of|<b>``, ``source_doc`` ``a``)."""
    own = [
        {**q, "doc_ids": [b], "is_impossible": False}
        for q in sample(by_doc.get(b, []), n, seed)
        if q.get("answers") and not q.get("is_impossible")
    ]
    foreign = [
        {
            "qid": f"{q['qid']}{OOD_MARK}{b}",
            "question": q["question"],
            "answers": [],
            "doc_ids": [],
            "is_impossible": True,
            "source_doc": a,
        }
        for q in sample(by_doc.get(a, []), n, seed)
    ]
    return own + foreign


def write_pair(folder: Path, doc: dict[str, Any], questions: list[dict[str, Any]]) -> Path:
    """``folder``/docs.jsonl (the one document ``doc``) and questions.jsonl; ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    lines = "".join(json.dumps(q) + "\n" for q in questions)
    (folder / "questions.jsonl").write_text(lines, encoding="utf-8")
    return folder


def write_pairs(
    folder: Path, split: str, work: Path, per_article: int | None, seed: int = 0
) -> list[tuple[str, Path]]:
    """Every pair of ``folder``'s ``split`` half written under ``work``: ``(b, its folder)``."""
    docs = {d["doc_id"]: d for d in read_jsonl(folder / "docs.jsonl")}
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in read_jsonl(folder / "questions.jsonl"):
        for d in q.get("doc_ids") or []:
            by_doc[d].append(q)
    out = []
    for a, b in article_pairs(half_articles(folder, split, seed)):
        qs = pair_questions(a, b, by_doc, per_article, seed)
        out.append((b, write_pair(work / _safe(b), docs[b], qs)))
    return out


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]


# ---------------------------------------------------------------------------------------------
# Running a tree's ``fathom eval``
# ---------------------------------------------------------------------------------------------


def tree_revision(tree: Path) -> str:
    """``tree``'s commit, with ``+changes`` when its working tree differs from it (what a
    results file measured); empty outside git."""

    def git(*a: str) -> str:
        out = subprocess.run(["git", "-C", str(tree), *a], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{head}+changes" if head and changed else head


def eval_command(
    tree: Path, docs: Path, questions: Path, out: Path, split: str, limit: int | None
) -> list[str]:
    """``tree``'s ``fathom eval`` of ``questions`` over ``docs`` into ``out``."""
    cmd = [
        sys.executable, str(tree / "cli.py"), "eval",
        "--docs", str(docs), "--questions", str(questions),
        "--generator", "extractive", "--strategies", STRATEGY, "--judge", "f1",
        "--split", split, "--out", str(out),
    ]  # fmt: skip
    return cmd + (["--limit", str(limit)] if limit else [])


def run_eval(cmd: list[str], out: Path, env: dict[str, str], cwd: Path, reuse: bool) -> Path:
    if reuse and (out / "summary.json").is_file():
        log(f"{out.parent.name}/{out.name}: reused")
        return out
    log(f"{out.parent.name}/{out.name}: fathom eval …")
    subprocess.run(cmd, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    return out


def run_variant(
    label: str, tree: Path, data: Path, args: argparse.Namespace
) -> dict[str, dict[str, dict[str, Any]]]:
    """``tree``'s eval rows by set (``out-of-document``, ``squad2``) and qid."""
    work = Path(args.work).resolve() / label
    work.mkdir(parents=True, exist_ok=True)
    env = tree_env(tree, work, overrides=False)
    check_tree(env, tree, work)
    pairs = write_pairs(data / SQUAD1, args.split, work / "pairs", args.per_article, args.seed)
    ood: dict[str, dict[str, Any]] = {}
    for b, folder in pairs:
        cmd = eval_command(
            tree, folder / "docs.jsonl", folder / "questions.jsonl", folder / "eval", "all", None
        )
        rows = eval_rows_by_qid(run_eval(cmd, folder / "eval", env, work, args.reuse), STRATEGY)
        for qid, row in rows.items():
            row["gold_doc_ids"] = [b]  # clustered by the document the collection holds
            ood[qid] = row
    out: dict[str, dict[str, dict[str, Any]]] = {"out-of-document": ood}
    if args.squad2_limit != 0:
        folder = data / SQUAD2
        cmd = eval_command(
            tree,
            folder / "docs.jsonl",
            folder / "questions.jsonl",
            work / "squad2",
            args.split,
            args.squad2_limit,
        )
        out["squad2"] = eval_rows_by_qid(
            run_eval(cmd, work / "squad2", env, work, args.reuse), STRATEGY
        )
    return out


# ---------------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------------


def with_abstained(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``rows`` with ``metrics["abstained"]`` (1.0 when the answer abstained)."""
    for row in rows.values():
        row["metrics"] = {**row["metrics"], "abstained": float(bool(row.get("abstained")))}
    return rows


def summarise(by_label: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """One set's numbers: for unanswerable and answerable questions apart, each variant's
    means with intervals (over questions and documents) and, with ``previous``, the paired
    differences, on the questions every variant answered."""
    baseline = BASELINE if BASELINE in by_label else next(iter(by_label))
    out: dict[str, Any] = {"baseline": baseline}
    for kind, want in (("unanswerable", True), ("answerable", False)):
        part = {
            label: {
                q: r for q, r in with_abstained(rows).items() if bool(r["unanswerable"]) == want
            }
            for label, rows in by_label.items()
        }
        if not all(part.values()):
            continue
        metrics = ("abstained",) if want else METRICS
        shared, entries = paired_metrics(part, metrics, baseline)
        docs = {str((part[baseline][q].get("gold_doc_ids") or [q])[0]) for q in shared}
        out[kind] = {"n": len(shared), "documents": len(docs), "variants": entries}
    return out


def _cell(e: dict[str, Any], key: str, signed: bool = False) -> str:
    by_doc = format_ci(e.get(f"{key}_documents"), signed, mean=False)
    return f"{format_ci(e.get(key), signed)}; by document {by_doc}"


def markdown(results: dict[str, Any]) -> str:
    """results.md: one table per set, a row per variant and kind of question."""
    m = results["machine"]
    lines = [
        "# Abstention: unanswerable questions abstained on, answerable ones answered",
        "",
        f"Command: `{results['command']}`. Split: the `{results['split']}` half of the "
        f"documents. Answers: `fathom eval --generator extractive --strategies {STRATEGY} "
        "--judge f1`, otherwise the default configuration. Machine: "
        f"{m.get('cpu')}, {m.get('cpus')} cores, {m.get('memory_gb')} GiB.",
        "",
        "Out of document: each article's collection is asked its own questions (answerable) and "
        "the previous article's (unanswerable), "
        f"{results['per_article']} of each at most. SQuAD 2.0: its real unanswerable "
        "questions. Means with bootstrap 95 % intervals over questions, then over documents "
        "(resampled with their questions kept together); Δ is paired against "
        f"`{results['sets'][next(iter(results['sets']))].get('baseline', '–')}`. Targets: "
        "unanswerable abstained ≥ 90 %, answerable abstained ≤ 10 %.",
    ]
    if results.get("trees"):
        trees = ", ".join(f"`{k}` {v or '–'}" for k, v in results["trees"].items())
        lines += ["", f"Trees measured: {trees}."]
    for name, res in results["sets"].items():
        base = res["baseline"]
        lines += [
            "",
            f"## {name}",
            "",
            "| questions | variant | n | documents | metric | mean [95 %] | Δ |",
            "| --- | --- | ---: | ---: | --- | --- | --- |",
        ]
        for kind in ("unanswerable", "answerable"):
            part = res.get(kind)
            if not part:
                continue
            for label, e in part["variants"].items():
                for metric in METRICS if kind == "answerable" else ("abstained",):
                    diff = f"{metric}_minus_{base}"
                    delta = _cell(e, diff, signed=True) if diff in e else "–"
                    lines.append(
                        f"| {kind} | {label} | {part['n']} | {part['documents']} | {metric} "
                        f"| {_cell(e, metric)} | {delta} |"
                    )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Fitting the thresholds on the training halves
# ---------------------------------------------------------------------------------------------


def write_train10(path: Path, folder: Path) -> Path:
    """SQuAD 2.0's official training layout (``data`` → articles → paragraphs → ``qas``) as
    ``folder``/docs.jsonl (an article a document, its paragraphs joined by blank lines) and
    questions.jsonl; ``folder``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    docs, questions = [], []
    for article in data["data"]:
        title = article["title"]
        docs.append(
            {
                "doc_id": title,
                "title": title.replace("_", " "),
                "text": "\n\n".join(p["context"] for p in article["paragraphs"]),
            }
        )
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                impossible = bool(qa.get("is_impossible"))
                questions.append(
                    {
                        "qid": qa["id"],
                        "question": qa["question"],
                        "answers": [] if impossible else [a["text"] for a in qa["answers"]],
                        "doc_ids": [title],
                        "is_impossible": impossible,
                    }
                )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), "utf-8")
    (folder / "questions.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions), "utf-8"
    )
    return folder


def record_set(
    name: str, docs: Path, questions: list[Any], home: Path, features: Path, doc: str = ""
) -> list[dict[str, Any]]:
    """What the rule reads, round by round, for ``questions`` (``learn.questions.Question``)
    asked of ``docs``'s collection; appended to ``features`` (JSONL), whose questions already
    recorded are kept."""
    from fathom.bench.common import bench_config
    from fathom.bench.support.abstention_fit import forced_engine, record
    from fathom.index.targets import resolve_target

    done = {r["qid"]: r for r in read_jsonl(features)} if features.is_file() else {}
    todo = [q for q in questions if q.qid not in done]
    if todo:
        cfg = bench_config(home, {"generator.backend": "extractive"})
        engine = forced_engine(cfg, resolve_target(cfg, str(docs)))
        try:
            with open(features, "a", encoding="utf-8") as fh:
                for q in todo:
                    row = {
                        "set": name,
                        "qid": q.qid,
                        "doc": doc or (q.doc_ids[0] if q.doc_ids else q.qid),
                        "unanswerable": q.unanswerable,
                        "rounds": record(engine, q.question, q.answers),
                    }
                    fh.write(json.dumps(row) + "\n")
                    done[q.qid] = row
        finally:
            engine.close()
    return [done[q.qid] for q in questions]


def mmlongbench_rows(data: Path, work: Path, seed: int = 0) -> list[dict[str, Any]]:
    """MMLongBench-Doc's train-half answers from bench/mmlongbench.py's ``work``
    (``default/answers.jsonl``), one round each, read from the answer as given: its sources'
    text (as ``--json`` shows it, at most 2,000 characters a source), its span, and whether it
    abstained when the rule as shipped did not stop it. Empty when there are none."""
    from types import SimpleNamespace

    from fathom.bench.support.abstention_fit import fires, shipped_pair
    from fathom.router.answer_kind import answer_kind
    from fathom.stages.generate.shapes import coverage

    path = work / "default" / "answers.jsonl"
    questions_path = data / "mmlongbench_doc" / "questions.jsonl"
    if not path.is_file() or not questions_path.is_file():
        return []
    from fathom.bench.mmlongbench import load_questions, select_questions

    train = {q["qid"]: q for q in select_questions(load_questions(data / "mmlongbench_doc"),
                                                   "train", seed)}  # fmt: skip
    rows = []
    for a in read_jsonl(path):
        q = train.get(a["qid"])
        if q is None:
            continue
        hits = [
            SimpleNamespace(chunk=SimpleNamespace(text=s.get("text", ""), section=s["section"]))
            for s in a.get("sources") or []
        ]
        kind = answer_kind(q["question"])
        span = a.get("span") or {}
        r = {
            "checked": bool(hits),
            "coverage": coverage(q["question"], hits) if hits else 1.0,
            "sure": bool(span.get("sure")),
            "margin": span.get("score"),
            "kind": kind.name,
            "visual": bool(kind.visual),
            "reader": True,
            "support": 1.0,
            "f1": None,
            "k": len(hits),
        }
        r["abstained"] = bool(a.get("abstained")) and not fires(r, *shipped_pair())
        rows.append(
            {
                "set": "mmlongbench_doc",
                "qid": q["qid"],
                "doc": q["doc_id"],
                "unanswerable": q["answer_format"] == "None",
                "rounds": [r],
            }
        )
    return rows


def fit_rows(data: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The features of every training set's questions (``record_set``)."""
    from fathom.learn.questions import load_questions, split_by_document

    work = Path(args.work).resolve() / "fit"
    home = work / "home"
    features = work / "features"
    features.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for b, folder in write_pairs(data / SQUAD1, "train", work / "pairs", args.per_article):
        log(f"fit: out-of-document, {b}")
        qs = load_questions(folder / "questions.jsonl")
        rows += record_set(
            "out-of-document", folder / "docs.jsonl", qs, home, features / f"{_safe(b)}.jsonl", b
        )
    sets = [(SQUAD2, data / SQUAD2, args.squad2_limit)]
    train10 = data / TRAIN10 / "train-v2.0-first10.json"
    if train10.is_file():
        sets.append((TRAIN10, write_train10(train10, work / TRAIN10), args.train10_limit))
    for name, folder, limit in sets:
        if limit == 0:
            continue
        qs = load_questions(folder / "questions.jsonl")
        if name == SQUAD2:
            qs = split_by_document(qs, "train", args.seed)
        keep = {q["qid"] for q in sample([{"qid": q.qid} for q in qs], limit, args.seed)}
        qs = [q for q in qs if q.qid in keep]
        log(f"fit: {name}, {len(qs)} questions")
        rows += record_set(name, folder / "docs.jsonl", qs, home, features / f"{name}.jsonl")
    mml = mmlongbench_rows(data, Path(args.mmlongbench_work).resolve(), args.seed)
    log(f"fit: mmlongbench_doc, {len(mml)} train-half answers")
    return rows + mml


def fit_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The grid search over ``rows``: the chosen pair, the shipped pair, the curve, and each
    set's rates at both."""
    from fathom.bench.support.abstention_fit import (
        MAX_ANSWERABLE,
        evaluate,
        frontier,
        grid_search,
        shipped_pair,
    )
    from fathom.core.config import Config

    threshold = Config().feedback.threshold
    chosen, points = grid_search(rows, threshold)
    shipped = evaluate(rows, *shipped_pair(), threshold)
    by_set: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["set"] for r in rows):
        part = [r for r in rows if r["set"] == name]
        by_set[name] = {
            "n": len(part),
            "unanswerable": sum(r["unanswerable"] for r in part),
            "shipped": evaluate(part, *shipped_pair(), threshold).to_dict(),
            "rule_off": evaluate(part, 0.0, 0.0, threshold).to_dict(),
        }
        if chosen is not None:
            by_set[name]["chosen"] = evaluate(
                part, chosen.min_coverage, chosen.min_unsure, threshold
            ).to_dict()
    deepened = sum(len(r["rounds"]) > 1 for r in rows)
    return {
        "n": len(rows),
        "unanswerable": sum(r["unanswerable"] for r in rows),
        "max_answerable_abstained": MAX_ANSWERABLE,
        "feedback_threshold": threshold,
        "rounds_recorded_beyond_the_first": deepened,
        "chosen": None if chosen is None else chosen.to_dict(),
        "shipped": shipped.to_dict(),
        "rule_off": evaluate(rows, 0.0, 0.0, threshold).to_dict(),
        "by_set": by_set,
        "curve": [p.to_dict() for p in frontier(points)],
        "grid": [p.to_dict() for p in points],
    }


def fit_markdown(fit: dict[str, Any]) -> str:
    """fit.md: the chosen pair, the curve and each set's rates."""

    def row(label: str, p: dict[str, Any] | None) -> str:
        if p is None:
            return f"| {label} | – | – | – | – | – |"
        return (
            f"| {label} | {p['min_coverage']:.2f} | {p['min_coverage_unsure']:.2f} "
            f"| {p['unanswerable_abstained']:.1%} | {p['answerable_abstained']:.1%} "
            f"| {p['answerable_f1']:.3f} |"
        )

    head = [
        "| pair | MIN_COVERAGE | MIN_COVERAGE_UNSURE | unanswerable abstained "
        "| answerable abstained | answerable F1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    m = fit["machine"]
    lines = [
        "# Abstention thresholds fitted on the training halves",
        "",
        f"Command: `{fit['command']}`. Machine: {m.get('cpu')}, {m.get('cpus')} cores, "
        f"{m.get('memory_gb')} GiB. {fit['n']} training questions "
        f"({fit['unanswerable']} unanswerable), pooled. Each question's rounds were recorded "
        "with the rule off and the feedback loop deepening as far as it may, then replayed for "
        f"each pair with the feedback threshold {fit['feedback_threshold']} "
        "(bench/support/abstention_fit.py). Chosen: the most unanswerable questions abstained on "
        f"with at most {fit['max_answerable_abstained']:.0%} of the answerable ones.",
        "",
        *head,
        row("chosen", fit["chosen"]),
        row("shipped", fit["shipped"]),
        row("rule off", fit["rule_off"]),
        "",
        "## The curve: for each MIN_COVERAGE, the best MIN_COVERAGE_UNSURE within the bound",
        "",
        *head,
        *(row("", p) for p in fit["curve"]),
        "",
        "## By training set",
        "",
        "| set | n | unanswerable | pair | unanswerable abstained | answerable abstained "
        "| answerable F1 |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, s in fit["by_set"].items():
        for label in ("chosen", "shipped", "rule_off"):
            p = s.get(label)
            if p:
                lines.append(
                    f"| {name} | {s['n']} | {s['unanswerable']} | {label} "
                    f"({p['min_coverage']:.2f}, {p['min_coverage_unsure']:.2f}) "
                    f"| {p['unanswerable_abstained']:.1%} | {p['answerable_abstained']:.1%} "
                    f"| {p['answerable_f1']:.3f} |"
                )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the data folder (default: FATHOM_DATA)")
    ap.add_argument("--split", choices=("train", "test", "all"), default="test")
    ap.add_argument("--seed", type=int, default=0, help="the split's and the samples' seed")
    ap.add_argument("--per-article", type=int, default=40, help="questions of each kind")
    ap.add_argument("--squad2-limit", type=int, default=500, help="SQuAD 2.0 questions (0: none)")
    ap.add_argument("--train10-limit", type=int, default=500, help="(--fit) squad_v2.0_train10")
    ap.add_argument("--previous", default=None, help="another Fathom checkout, paired")
    ap.add_argument("--fit", action="store_true", help="fit the thresholds on the train halves")
    ap.add_argument("--mmlongbench-work", default="runs/mmlongbench", help="(--fit) its answers")
    ap.add_argument("--work", default="runs/abstention", help="question files, runs, features")
    ap.add_argument("--reuse", action="store_true", help="keep finished eval runs")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "abstention")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    data = data_dir(args.data)
    command = "FATHOM_DATA=… " + command_line(argv, __file__, leave_out=("--mmlongbench-work",))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.fit:
        fit: dict[str, Any] = {"machine": machine_info(), "command": command}
        fit.update(fit_report(fit_rows(data, args)))
        write_json(args.out / "fit.json", fit)
        (args.out / "fit.md").write_text(fit_markdown(fit), encoding="utf-8")
        print(fit_markdown(fit))
        return 0
    variants = {"default": REPO}
    if args.previous:
        variants[BASELINE] = Path(args.previous).resolve()
    runs = {label: run_variant(label, tree, data, args) for label, tree in variants.items()}
    results: dict[str, Any] = {
        "machine": machine_info(),
        "command": command,
        "trees": {label: tree_revision(tree) for label, tree in variants.items()},
        "strategy": STRATEGY,
        "split": args.split,
        "seed": args.seed,
        "per_article": args.per_article,
        "sets": {
            name: summarise({label: rows[name] for label, rows in runs.items()})
            for name in runs["default"]
        },
    }
    write_results(args.out, results, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
