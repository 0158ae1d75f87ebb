"""bench/doc_filter.py, in its smoke form, on a generated question set: both sides are measured
on the same queries, and the filtered side reads only the target document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench import doc_filter
from fathom.bench.support import docgen


@pytest.mark.slow
def test_the_smoke_run_measures_both_sides_and_keeps_to_the_target(tmp_path: Path) -> None:
    docgen.make_qa_set(tmp_path / "data" / "bios", n_docs=6)
    out = tmp_path / "doc_filter.json"
    args = ["--data", str(tmp_path / "data"), "--dataset", "bios", "--smoke", "--out", str(out)]
    assert doc_filter.main(args) == 0
    results = json.loads(out.read_text())
    assert results["collection"]["documents"] == 3  # the smoke run's first three articles
    assert results["target"]["pattern"] == "bio-000"  # the most questions; ties by id
    assert results["queries"] == 3  # the target's questions
    filtered, unfiltered = results["filtered"], results["unfiltered"]
    assert filtered["share_in_target"] == 1.0 and unfiltered["share_in_target"] < 1.0
    assert filtered["mean_hits"] == results["target"]["chunks"] < unfiltered["mean_hits"]
    for side in (filtered, unfiltered):
        assert side["latency_ms"]["p50"] > 0 and side["answer_recall_at_k"] == 1.0
    assert results["ratio_filtered_over_unfiltered"]["p95"] > 0
    assert results["command"].startswith("FATHOM_DATA=… python bench/doc_filter.py")
    assert "machine" in results and str(tmp_path) not in out.read_text()
