"""The extractive answerer on held-out halves: as shipped (Fathom's reader: an exact span, then
its sentence) against a previous checkout (``--previous``), and what reranking buys it.

For every set and variant, one ``fathom eval`` run (``--split test``, ``--strategy``, by default
``fixed:4``, judge ``contains``, generator ``extractive``) over the same questions, then paired
differences against the shipped default with bootstrap intervals. Exact match and F1 score the
answer's span when it has one (``fathom eval`` does), ``contains`` the whole answer; on a set with
unanswerable questions (SQuAD 2.0) the abstentions are split by kind. Variants are
configurations a user can set:

* ``default`` — as shipped (the reranker as ``rerank.enabled`` and ``rerank.candidates`` say);
* ``rerank-off`` — ``FATHOM_RERANK__ENABLED=false``;
* ``rerank-8`` — ``FATHOM_RERANK__CANDIDATES=8`` (the fallback reranker reads 8 candidates);
* ``rerank-20`` — ``FATHOM_RERANK__ENABLED=true FATHOM_RERANK__CANDIDATES=20``;
* ``abstain`` — ``FATHOM_GENERATOR__UNSURE=abstain`` (no answer where the span is under the
  reader's bar, instead of the span marked unsure);
* ``previous`` — another checkout of Fathom (``--previous DIR``, e.g. a ``git worktree`` of the
  revision before the scorer), run with that checkout's own code and defaults.

Per variant: contains, F1, EM, answer recall (the gold answer in the context: what the reranker can
change), abstentions and the answers whose span is marked unsure (under the reader's bar), each
split by kind on a set with unanswerable questions, generate and rerank P50/P95 ms. Writes
results.json and results.md.

An eval remembers sentence vectors across its questions (``Engine.sentence_vectors``), as a
``chat`` session does, so its rerank times are those of a warm session. ``--cold N`` measures
what a one-shot ``fathom ask`` pays instead: N held-out questions of the first set, asked in one
process with the remembered vectors cleared before each, with the default configuration and
the fallback reranker reading 8 and 20 candidates and none, interleaved question by question so
load changes hit all alike (cold.json).

    python bench/extractive.py [--data DIR] [--sets squad_v1.1_dev:500,covidqa_200423:300]
        [--variants default,rerank-off,rerank-8] [--previous DIR] [--strategy fixed:4]
        [--cold N] [--work DIR] [--reuse] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    command_line,
    data_dir,
    eval_rows_by_qid,
    format_ci,
    log,
    machine_info,
    paired_metrics,
    write_json,
)

METRICS = ("contains", "f1", "em", "answer_recall")
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "rerank-off": {"FATHOM_RERANK__ENABLED": "false"},
    "rerank-8": {"FATHOM_RERANK__ENABLED": "true", "FATHOM_RERANK__CANDIDATES": "8"},
    "rerank-20": {"FATHOM_RERANK__ENABLED": "true", "FATHOM_RERANK__CANDIDATES": "20"},
    "abstain": {"FATHOM_GENERATOR__UNSURE": "abstain"},
    "previous": {},
}


def run_eval(data: Path, name: str, limit: int, variant: str, args, home: Path) -> Path:
    out = Path(args.work).resolve() / f"{name}-{variant}"
    if args.reuse and (out / "summary.json").is_file():
        log(f"{name}: {variant} → {out} (reused)")
        return out
    tree = Path(args.previous).resolve() if variant == "previous" else REPO
    cmd = [
        sys.executable, str(tree / "cli.py"), "eval",
        "--docs", str(data / name / "docs.jsonl"),
        "--questions", str(data / name / "questions.jsonl"),
        "--split", "test", "--limit", str(limit),
        "--strategies", args.strategy, "--judge", "contains",
        "--generator", "extractive", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "FATHOM_HOME": str(home), **VARIANTS[variant]}
    if variant == "previous":
        # the other checkout's cli.py registers itself as ``fathom``; keep this one off the path
        env.pop("PYTHONPATH", None)
    log(f"{name}: {variant} → {out}")
    subprocess.run(cmd, check=True, env=env, cwd=tree)
    return out


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, round(q * (len(v) - 1)))]


def compare(runs: dict[str, Path], baseline: str, strategy: str = "fixed:4") -> dict[str, Any]:
    """Each variant's means and intervals, and its paired differences against ``baseline``."""
    from fathom.evaluation.metrics import document_of

    rows = {label: eval_rows_by_qid(out, strategy) for label, out in runs.items()}
    shared, entries = paired_metrics(rows, METRICS, baseline)
    documents = len({document_of(rows[baseline][q]) for q in shared})
    result: dict[str, Any] = {"n": len(shared), "documents": documents, "variants": {}}
    for label, by_qid in rows.items():
        entry = entries[label]
        entry["abstained"] = sum(bool(by_qid[q]["abstained"]) for q in shared) / max(1, len(shared))
        entry["unsure"] = sum(_unsure(by_qid[q]) for q in shared) / max(1, len(shared))
        for kind, want in (("unanswerable", True), ("answerable", False)):
            qs = [q for q in shared if bool(by_qid[q].get("unanswerable")) == want]
            if qs and any(by_qid[q].get("unanswerable") for q in shared):
                entry[f"abstained_{kind}"] = sum(bool(by_qid[q]["abstained"]) for q in qs) / len(qs)
                entry[f"unsure_{kind}"] = sum(_unsure(by_qid[q]) for q in qs) / len(qs)
                entry[f"n_{kind}"] = len(qs)
        for stage in ("generate", "rerank"):
            ms = [float(by_qid[q]["stages_ms"].get(stage, 0.0)) for q in shared]
            entry[f"{stage}_ms_p50"] = _pct(ms, 0.5)
            entry[f"{stage}_ms_p95"] = _pct(ms, 0.95)
        total = [float(by_qid[q]["total_ms"]) for q in shared]
        entry["total_ms_p50"] = _pct(total, 0.5)
        result["variants"][label] = entry
    return result


def cold_asks(data: Path, name: str, n: int, home: Path) -> dict[str, Any]:
    """Per-ask latency (ms) of ``n`` held-out questions with no remembered sentence vectors,
    reranker off / reading 8 / reading 20 candidates, interleaved."""
    from fathom.bench.common import bench_config, percentiles
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import load_questions, split_by_document
    from fathom.stages.pipeline import Engine

    cfg = bench_config(home, {"generator.backend": "extractive"})
    questions = split_by_document(load_questions(data / name / "questions.jsonl"), "test", 0)
    questions = [q for q in questions if q.answers][:n]
    collection = resolve_target(cfg, str(data / name / "docs.jsonl"))
    engine = Engine(cfg, collection)
    settings = {"off": (False, 8), "rerank-8": (True, 8), "rerank-20": (True, 20)}
    totals: dict[str, list[float]] = {k: [] for k in settings}
    reranks: dict[str, list[float]] = {k: [] for k in settings}
    for i, q in enumerate([questions[0], *questions]):  # the first is a warm-up
        for label, (on, head) in settings.items():
            engine.cfg.rerank.embedding_candidates = head
            engine.parts.sentence_vectors.clear()
            answer = engine.ask(q.question, rerank=on)
            if i:
                totals[label].append(answer.trace.total_ms)
                reranks[label].append(answer.trace.stages_ms.get("rerank", 0.0))
    reranker = engine.parts.reranker().name
    engine.close()
    return {
        "set": name,
        "n": len(questions),
        "reranker": reranker,
        "ask_total_ms": {k: percentiles(v) for k, v in totals.items()},
        "rerank_ms": {k: percentiles(v) for k, v in reranks.items()},
    }


def markdown(results: dict[str, Any], baseline: str) -> str:
    lines = [
        "# The extractive answerer on held-out halves",
        "",
        f"Command: `{results['command']}`. `fathom eval --split test --strategies "
        f"{results.get('strategy', 'fixed:4')} "
        "--judge contains --generator extractive`, the same questions for every variant of a "
        f"set; Δ is paired against `{baseline}` (bootstrap 95 % intervals). Machine: "
        f"{results['machine'].get('cpu')}, {results['machine'].get('cpus')} cores, "
        f"{results['machine'].get('memory_gb')} GiB.",
        "",
        'Each interval is given twice: over questions, then ("by document") over documents '
        "resampled with their questions kept together, the interval a claim rests on.",
        "",
        "| set | variant | n | documents | contains | by document | Δ contains | by document | F1 "
        "| by document | Δ F1 | by document | EM | by document "
        "| answer recall | by document | Δ answer recall | by document | abstained; unsure "
        "| generate P50 / P95 ms | rerank P50 ms | ask P50 ms |",
        "| --- | --- | ---: | ---: | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:.0f}" if v >= 10 else f"{v:.1f}"

    def both(e: dict[str, Any], key: str, signed: bool = False) -> str:
        by_doc = format_ci(e.get(f"{key}_documents"), signed, mean=False)
        return f"{format_ci(e.get(key), signed)} | {by_doc}"

    for name, res in results["sets"].items():
        for label, e in res["variants"].items():
            lines.append(
                f"| {name} | {label} | {res['n']} | {res.get('documents', '–')} | "
                f"{both(e, 'contains')} | {both(e, f'contains_minus_{baseline}', True)} | "
                f"{both(e, 'f1')} | {both(e, f'f1_minus_{baseline}', True)} | {both(e, 'em')} | "
                f"{both(e, 'answer_recall')} | "
                f"{both(e, f'answer_recall_minus_{baseline}', True)} | "
                f"{_abstained(e)} | {ms(e['generate_ms_p50'])} / {ms(e['generate_ms_p95'])} "
                f"| {ms(e['rerank_ms_p50'])} | {ms(e['total_ms_p50'])} |"
            )
    return "\n".join(lines) + "\n"


def _unsure(row: dict[str, Any]) -> bool:
    """Whether an answer gave its span marked unsure (under the reader's bar; an eval row
    without ``span_sure`` comes from an answerer that never marks one)."""
    return row.get("span_sure") is False


def _abstained(e: dict[str, Any]) -> str:
    """The abstention rate, split by kind when the set has unanswerable questions, then the
    share of answers marked unsure, by kind likewise (an answerer that never marks one: 0)."""
    unsure = ""
    if "abstained_unanswerable" in e:
        if "unsure_unanswerable" in e:
            unsure = (
                f"; unsure (unanswerable {e['unsure_unanswerable']:.1%}, "
                f"answerable {e.get('unsure_answerable', 0.0):.1%})"
            )
        return (
            f"{e['abstained']:.1%} (unanswerable {e['abstained_unanswerable']:.1%}, "
            f"answerable {e.get('abstained_answerable', 0.0):.1%}){unsure}"
        )
    if "unsure" in e:
        unsure = f"; unsure {e['unsure']:.1%}"
    return f"{e['abstained']:.1%}{unsure}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--sets", default="squad_v1.1_dev:500,covidqa_200423:300")
    ap.add_argument("--variants", default="default,rerank-off,rerank-8")
    ap.add_argument("--previous", default=None, help="another Fathom checkout (variant previous)")
    ap.add_argument("--cold", type=int, default=0, help="also time N one-shot asks")
    ap.add_argument("--strategy", default="fixed:4", help="the depth every variant answers at")
    ap.add_argument("--reuse", action="store_true", help="keep a variant's finished eval run")
    ap.add_argument("--work", default="runs/extractive")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "extractive")
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    variants = [v for v in args.variants.split(",") if v]
    if args.previous and variants:
        variants.append("previous")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    home = Path(args.work) / "home"
    home.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine_info(), "strategy": args.strategy, "sets": {}}
    results["command"] = "FATHOM_DATA=… " + command_line(argv, __file__)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cold:
        first = args.sets.split(",")[0].partition(":")[0]
        cold = {"machine": machine_info(), "command": results["command"]}
        cold.update(cold_asks(data, first, args.cold, home))
        write_json(args.out / "cold.json", cold)
        log(json.dumps(cold["ask_total_ms"]))
    if not variants:
        return 0
    for spec in args.sets.split(","):
        name, _, limit = spec.partition(":")
        runs = {v: run_eval(data, name, int(limit or 300), v, args, home) for v in variants}
        results["sets"][name] = compare(runs, variants[0], args.strategy)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "results.json", results)
    (args.out / "results.md").write_text(markdown(results, variants[0]))
    print(markdown(results, variants[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
