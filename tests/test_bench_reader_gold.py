"""bench/reader_gold.py on a generated SQuAD-shaped set: the test half's answerable questions
are read on their own paragraph (never another), and the span is scored."""

from __future__ import annotations

import json
from pathlib import Path

from fathom.bench import reader_gold
from fathom.index.reader import shared_reader
from fathom.tests.support.squadish import make_squadish


def test_gold_questions_are_the_test_halfs_answerable_ones_on_their_paragraph(
    tmp_path: Path,
) -> None:
    test_docs = make_squadish(tmp_path / "squadish")
    items = reader_gold.gold_questions(tmp_path, "squadish", None)
    assert test_docs and sorted(r["doc_ids"][0] for _, _, r in items) == sorted(test_docs)
    for q, paragraph, _ in items:
        assert not q.unanswerable
        assert paragraph.startswith("The bridge of article") and q.answers[0] in paragraph


def test_the_bench_scores_the_span_and_writes_its_record(tmp_path: Path) -> None:
    test_docs = make_squadish(tmp_path / "squadish")
    out = tmp_path / "gold.json"
    assert reader_gold.main(["--data", str(tmp_path), "--set", "squadish", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["n"] == len(test_docs) and result["documents"] == len(test_docs)
    assert result["f1"]["mean"] >= 0.5  # the town is there to be read
    for key in ("f1", "em", "under_bar"):
        lo, hi = result[key]["ci_documents"]
        assert 0.0 <= lo <= result[key]["mean"] <= hi <= 1.0
    assert result["command"] == "FATHOM_DATA=… python bench/reader_gold.py --set squadish"
    assert "machine" in result and str(tmp_path) not in out.read_text()
    # the process's shared reader keeps its bar (later answers in this process abstain as before)
    assert shared_reader().load().meta["abstain_below"] == result["abstain_below"]
