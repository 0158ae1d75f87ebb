"""What answering by kind adds to an extractive answer's own time, on real documents.

For each MMLongBench-Doc text-only question of a split (``FATHOM_DATA/mmlongbench_doc``), in one
warm process over the collections bench/mmlongbench.py built (``--home``: its
``WORK/default/home``), the context ``ask`` would read (``Engine.context``: the depth the shipped
policy picks, reranked and compressed) is read by the reader once, then the work the answer's
kind adds is timed alone: the kind (``router.answer_kind``), the abstention rule
(``stages.generate.kinds.not_answered``: the question's word coverage), the shape (a table
cell, a list's items, a count: ``kinds.shaped``) and the short answer. Reported: P50 and P95 of
that added time in ms, overall and by kind, beside the reader's own time on the same context
(what every extractive answer pays). Writes ``--out``/results.json and results.md.

    python bench/answer_kinds.py --home WORK/default/home [--data DIR] [--split test] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    command_line,
    data_dir,
    log,
    machine_info,
    percentiles,
    write_results,
)


def measure(data: Path, home: Path, split: str, seed: int = 0) -> dict[str, Any]:
    """The added time of each question's kind work, in ms, with the reader's time beside it."""
    import os

    os.environ["FATHOM_HOME"] = str(home)
    from fathom.bench.mmlongbench import load_questions, select_questions
    from fathom.core.base import Draft
    from fathom.core.config import load_config
    from fathom.index.targets import resolve_target
    from fathom.router.answer_kind import answer_kind
    from fathom.stages.generate.kinds import not_answered, shaped, with_short
    from fathom.stages.pipeline import Engine

    folder = data / "mmlongbench_doc"
    questions = select_questions(load_questions(folder), split, seed)
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by_doc[q["doc_id"]].append(q)
    cfg = load_config(overrides={"generator.backend": "extractive"})
    draft = Draft("", (1,), 0, 0, "extractive", "")  # what ``with_short`` copies
    rows = []
    for i, (doc, qs) in enumerate(sorted(by_doc.items()), 1):
        collection = resolve_target(cfg, str(folder / "documents" / doc))
        engine = Engine(cfg, collection)
        gen = engine.generator
        try:
            for q in qs:
                hits = list(engine.context(q["question"]).used)
                t = time.perf_counter()
                span = gen._read_span(q["question"], hits)
                reader_ms = (time.perf_counter() - t) * 1000
                t = time.perf_counter()
                kind = answer_kind(q["question"])
                stop = not_answered(q["question"], kind, span, hits)
                shape = None if stop else shaped(q["question"], kind, span, hits)
                if not stop and shape is None and span is not None:
                    with_short(draft, kind.name, span)
                added_ms = (time.perf_counter() - t) * 1000
                rows.append({"kind": kind.name, "added_ms": added_ms, "reader_ms": reader_ms})
        finally:
            engine.close()
        log(f"[{i}/{len(by_doc)}] {doc}: {len(qs)} questions")
    return {"rows": rows, "summary": summarise(rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """P50/P95 of the added and the reader's ms, overall and by kind."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        groups[r["kind"]].append(r)
    out = {}
    for name, rs in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        added = percentiles([r["added_ms"] for r in rs])
        reader = percentiles([r["reader_ms"] for r in rs])
        out[name] = {"n": len(rs), "added_ms": added, "reader_ms": reader}
    return out


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# What answering by kind adds to an extractive answer",
        "",
        f"Command: `{results['command']}`. Machine: {m.get('cpu')}, {m.get('cpus')} cores, "
        f"{m.get('memory_gb')} GiB. "
        f"MMLongBench-Doc, {results['split']} half, {len(results['rows'])} text-only questions.",
        "",
        "| kind | n | added P50 ms | added P95 ms | reader P50 ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s in results["summary"].items():
        lines.append(
            f"| {name} | {s['n']} | {s['added_ms']['p50']:.2f} | {s['added_ms']['p95']:.2f} | "
            f"{s['reader_ms']['p50']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the data folder (default: FATHOM_DATA)")
    ap.add_argument("--home", required=True, help="bench/mmlongbench.py's WORK/default/home")
    ap.add_argument("--split", default="test", choices=("train", "test", "all"))
    ap.add_argument("--out", default="docs/results/answer-kinds")
    args = ap.parse_args(argv)
    results = measure(data_dir(args.data), Path(args.home).resolve(), args.split)
    results.update(
        command=command_line(argv),
        machine=machine_info(),
        split=args.split,
    )
    out = Path(args.out)
    write_results(out, results, markdown(results))
    log(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
