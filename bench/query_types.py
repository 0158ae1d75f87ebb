"""The query types the shipped classifier gives the questions of real QA sets.

None of these sets asks for a summary: SQuAD, COVID-QA, HotpotQA and MuSiQue ask about a passage.
For every question of each set (both halves: the classifier was trained on Fathom's own 377
questions, none of these) it counts the type ``QueryClassifier`` gives, the type the logistic
regression alone puts first (``argmax``), and the questions the summary rule moved: put first as
summaries by the model, though they ask for none (``router.classify.asks_for_summary``), and so
given their next most probable type. A question typed a summary is summarised by the extractive
answerer and read without reranking, so each such question is a wrong answer waiting.

    python bench/query_types.py [--data DIR] [--sets squad_v1.1_dev,covidqa_200423,...]
        [--examples N] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    command_line,
    data_dir,
    default_out,
    log,
    machine_info,
    print_table,
    write_json,
)
from fathom.learn.reader import SETS  # the QA sets the reader is trained and tested on


def run_set(clf: Any, path: Path, examples: int) -> dict[str, Any]:
    """Counts of each type, as given and as the model alone ranks them, for ``path``'s
    questions, and up to ``examples`` of the questions the summary rule moved."""
    from fathom.router.classify import CLASSES

    with open(path, encoding="utf-8") as f:
        questions = [str(json.loads(line)["question"]) for line in f if line.strip()]
    typed = clf.classify_batch(questions)
    given = Counter(t for t, _ in typed)
    model = Counter(max(p, key=p.get) for _, p in typed)
    moved = [
        (q, t)
        for q, (t, p) in zip(questions, typed, strict=True)
        if t != "summarization" and max(p, key=p.get) == "summarization"
    ]
    return {
        "questions": len(questions),
        "types": {c: given.get(c, 0) for c in CLASSES},
        "model_types": {c: model.get(c, 0) for c in CLASSES},
        "summaries_not_asked_for": len(moved),
        "moved_to": dict(Counter(t for _, t in moved)),
        "examples": [{"question": q, "type": t} for q, t in moved[:examples]],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--examples", type=int, default=5)
    p.add_argument("--out", type=Path, default=default_out("query_types"))
    args = p.parse_args(argv)
    from fathom.core.config import load_config
    from fathom.router.classify import QueryClassifier

    data = data_dir(args.data)
    clf = QueryClassifier.from_config(load_config())
    command = f"FATHOM_DATA=… {command_line(argv, __file__)}"  # --data is left out
    results: dict[str, Any] = {"command": command, "machine": machine_info()}
    results["sets"] = {}
    for name in [s for s in args.sets.split(",") if s]:
        log(f"{name}: typing its questions")
        results["sets"][name] = run_set(clf, data / name / "questions.jsonl", args.examples)
    write_json(args.out, results)
    rows = []
    for name, r in results["sets"].items():
        n = max(1, r["questions"])
        model, given = r["model_types"]["summarization"], r["types"]["summarization"]
        rows.append(
            [
                name,
                str(r["questions"]),
                " ".join(f"{c} {v}" for c, v in r["types"].items()),
                f"{model} ({model / n:.1%})",
                f"{given} ({given / n:.1%})",
            ]
        )
    print_table(
        "query types (summaries: by the model alone, and as given)",
        ["set", "questions", "types as given", "model's summaries", "summaries given"],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
