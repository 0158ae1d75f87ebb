"""bench/query_types.py: the types the shipped classifier gives a set's questions, and the plain
questions the summary rule keeps from being summarised."""

from __future__ import annotations

import json
from pathlib import Path

from fathom.bench import query_types
from fathom.tests.support.plain_questions import PLAIN_QUESTIONS


def test_plain_questions_are_counted_as_moved_and_a_summary_request_stays_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data" / "plain"
    folder.mkdir(parents=True)
    asked = [*PLAIN_QUESTIONS, "Summarize the findings of the study.", "Who built the mill?"]
    with open(folder / "questions.jsonl", "w", encoding="utf-8") as f:
        for i, q in enumerate(asked):
            f.write(json.dumps({"qid": str(i), "question": q, "answers": ["x"]}) + "\n")
    out = tmp_path / "types.json"
    argv = ["--data", str(tmp_path / "data"), "--sets", "plain", "--examples", "2"]
    assert query_types.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    plain = result["sets"]["plain"]
    assert plain["questions"] == len(asked)
    assert plain["model_types"]["summarization"] >= len(PLAIN_QUESTIONS) + 1
    assert plain["types"]["summarization"] == 1  # the one that asks for a summary
    assert plain["summaries_not_asked_for"] == len(PLAIN_QUESTIONS)
    assert sum(plain["moved_to"].values()) == len(PLAIN_QUESTIONS)
    assert len(plain["examples"]) == 2 and plain["examples"][0]["question"] == PLAIN_QUESTIONS[0]
    # the data folder is this machine's: the command reads the sets through FATHOM_DATA
    assert result["command"].startswith("FATHOM_DATA=… python bench/query_types.py --sets plain")
    assert str(tmp_path / "data") not in result["command"]
