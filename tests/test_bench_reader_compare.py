"""bench/reader_compare.py: two readers read the same questions, and the second's paired
difference to the first is reported (a reader against a copy of itself differs by nothing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

from fathom.bench import reader_compare
from fathom.index.reader import META_FILE, MODEL_DIR
from fathom.tests.support.squadish import TOWNS as SIX
from fathom.tests.support.squadish import make_squadish

TOWNS = [*SIX, "Tamsby"]


def test_a_reader_against_a_copy_of_itself_differs_by_nothing(tmp_path: Path) -> None:
    n = len(make_squadish(tmp_path / "data" / "towns", TOWNS, unanswerable=False))
    make_squadish(tmp_path / "data" / "towns2", TOWNS)
    copy = tmp_path / "copy"
    shutil.copytree(MODEL_DIR, copy)
    out = tmp_path / "compare.json"
    argv = ["--data", str(tmp_path / "data"), "--sets", "towns,towns2", "--gold-set", "towns"]
    argv += ["--reader", str(MODEL_DIR), "--reader", str(copy), "--home", str(tmp_path / "h")]
    assert reader_compare.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    towns, towns2 = result["sets"]
    assert n and towns["questions"] == n and towns["documents"] == n
    for metric in ("recall@1", "recall@3", "span_f1", "span_em", "unsure_answerable"):
        assert towns[metric]["n"] == n
        assert towns[metric]["difference"]["mean"] == 0.0
        assert towns[metric]["difference"]["documents"]["hi"] == 0.0
    assert towns["recall@3"]["first"]["mean"] == 1.0  # seven short articles: the answer is read
    assert "unsure_unanswerable" in towns2 and "unsure_unanswerable" not in towns
    assert towns2["unsure_unanswerable"]["n"] + towns2["span_f1"]["n"] == towns2["questions"]
    gold = result["gold"]
    assert gold["questions"] == n and gold["f1"]["difference"]["mean"] == 0.0
    assert gold["f1"]["first"]["mean"] >= 0.5  # the town is there to be read
    first, second = result["readers"]["first"], result["readers"]["second"]
    assert first["sha256"] == second["sha256"] and first["counts"] == second["counts"]
    assert (
        first["abstain_below"] == json.loads((MODEL_DIR / META_FILE).read_text())["abstain_below"]
    )
    # rerun as a contributor would: no data, home or output path of this machine in it
    assert result["command"].startswith("FATHOM_DATA=… python bench/reader_compare.py --sets")
    assert str(tmp_path) not in result["command"].replace(str(copy), "")
    assert "--reader index/reader --reader" in result["command"]  # the shipped one, by its path


def test_the_difference_is_the_second_reader_minus_the_first() -> None:
    values = {"first": [1.0, 1.0, 0.0, 1.0], "second": [0.0, 1.0, 0.0, 0.0]}
    entry = reader_compare.paired(values, ["a", "a", "b", "b"])
    assert entry["first"]["mean"] == 0.75 and entry["second"]["mean"] == 0.25
    assert entry["difference"]["mean"] == -0.5
    assert entry["difference"]["documents"]["lo"] <= -0.5 <= entry["difference"]["documents"]["hi"]


def test_a_question_is_scored_by_its_kind() -> None:
    hit = SimpleNamespace(chunk=SimpleNamespace(text="The bridge was built in Rostfeld."))
    other = SimpleNamespace(chunk=SimpleNamespace(text="The valley has rivers."))
    answerable = SimpleNamespace(unanswerable=False, answers=("Rostfeld",))
    read = {"ranked": [other, hit], "span": "Rostfeld", "sure": True}
    scored = reader_compare.score_question(answerable, read)
    assert scored == {
        "unsure_answerable": 0.0,
        "recall@1": 0.0,
        "recall@3": 1.0,
        "span_f1": 1.0,
        "span_em": 1.0,
    }
    # under the bar the span is still the answer's, and scored; it counts as unsure
    unsure = reader_compare.score_question(answerable, {**read, "sure": False})
    assert unsure["unsure_answerable"] == 1.0 and unsure["span_f1"] == 1.0
    missing = reader_compare.score_question(
        answerable, {"ranked": [hit], "span": None, "sure": False}
    )
    assert missing["unsure_answerable"] == 1.0 and missing["span_f1"] == 0.0
    unanswerable = SimpleNamespace(unanswerable=True, answers=())
    read = {"ranked": [], "span": "Rostfeld", "sure": False}
    assert reader_compare.score_question(unanswerable, read) == {"unsure_unanswerable": 1.0}
    assert reader_compare.score_question(unanswerable, {**read, "sure": True}) == {
        "unsure_unanswerable": 0.0
    }
