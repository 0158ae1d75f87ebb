"""bench/mmlongbench.py: upstream MMLongBench-Doc scoring on hand-checked cases, the short answer
taken from a Fathom answer, the split by document, and a tiny end-to-end run on a generated PDF."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fathom.bench import mmlongbench as mm
from fathom.bench.support import docgen
from fathom.bench.support.mmlongbench_scoring import (
    anls_compute,
    eval_acc_and_f1,
    eval_score,
    first_number,
    get_clean_string,
    is_exact_match,
    is_float_equal,
    levenshtein_distance,
    short_answer,
    strict_right,
)

# ---------------------------------------------------------------------------------------------
# Upstream scoring
# ---------------------------------------------------------------------------------------------


def test_levenshtein_and_anls() -> None:
    assert levenshtein_distance("kitten", "sitting") == 3
    assert levenshtein_distance("", "abc") == 3
    # 1 - 1/4 = 0.75 is kept; 1 - 2/4 = 0.5 is at the threshold and scores 0
    assert anls_compute("abcd", "abcx") == pytest.approx(0.75)
    assert anls_compute("abcd", "abxx") == 0.0
    assert anls_compute("", "") == 1.0


def test_int_is_exact_and_truncates_like_upstream() -> None:
    assert eval_score("8", "8", "Int") == 1.0
    assert eval_score("8", "8.0", "Int") == 1.0
    assert eval_score("8", "8.9", "Int") == 1.0  # upstream int(float("8.9")) == 8
    assert eval_score("8", "9", "Int") == 0.0
    assert eval_score("8", "eight", "Int") == 0.0
    assert eval_score("GPT-4", "GPT-4", "Int") == 0.0  # a non-integer gold never scores


def test_float_within_one_percent_and_the_percentage_rule() -> None:
    assert eval_score("12.5", "12.6", "Float") == 1.0  # 0.8 % off
    assert eval_score("12.5", "12.7", "Float") == 0.0  # 1.6 % off
    assert eval_score("12.5%", "12.5", "Float") == 1.0
    assert eval_score("12.5", "0.125", "Float") == 1.0  # gold / 100
    assert eval_score("0.125", "12.5", "Float") == 1.0  # gold * 100
    assert eval_score("$3.20", "3.2", "Float") == 1.0
    assert eval_score("3.2", "", "Float") == 0.0
    assert is_float_equal(1.0, 1.004) is True  # rounded to 2 decimals
    assert is_float_equal(1.0, 1.02) is False


def test_str_by_anls_threshold() -> None:
    gold = "Latinos interviewed by cellphone"
    assert eval_score(gold, "latinos interviewed by cell phone", "Str") == pytest.approx(32 / 33)
    assert eval_score(gold, "Latinos (cellphone)", "Str") == 0.0
    assert strict_right(eval_score("abcd", "abcx", "Str")) is True
    assert strict_right(eval_score("abcd", "abxx", "Str")) is False


def test_exact_match_kinds() -> None:
    for s in ("https://x.org", "run.py", "page 4", "555-1234", "10 a.m.", "2009-07-01",
              "2009-07", "a.b@c.org"):  # fmt: skip
        assert is_exact_match(s), s
    assert not is_exact_match("the fourth page")
    assert eval_score("https://x.org/a", "https://x.org/b", "Str") == 0.0  # ANLS would be 0.93
    assert eval_score("2009-07", "2009-07", "Str") == 1.0
    assert eval_score("2009-07", "2009-08", "Str") == 0.0
    assert eval_score("combs@unk.edu", "COMBS@unk.edu", "Str") == 1.0  # cleaned: lower-cased


def test_clean_string_keeps_upstream_quirks() -> None:
    assert get_clean_string(' "Paris" (France) ') == "paris"
    assert get_clean_string("$1,200%") == "1,200"
    assert get_clean_string("12 miles") == "12 miles"  # upstream's unit stripping is a no-op


def test_lists_by_length_then_sorted_items() -> None:
    gold = "['Circle', 'Rectangle']"
    assert eval_score(gold, ["rectangle", "circle"], "List") == 1.0
    assert eval_score(gold, ["circle"], "List") == 0.0
    assert eval_score(gold, ["circle", "rectangle", "square"], "List") == 0.0
    assert eval_score(gold, "['Rectangle', 'Circle']", "List") == 1.0  # a list string is parsed
    assert eval_score(gold, ["circles", "rectangle"], "List") == pytest.approx(1 - 1 / 7)
    # a number (or exact-match kind) first decides exact matching of the whole list
    assert eval_score("['1', '2']", ["2", "1"], "List") == 1.0
    assert eval_score("['1', '2']", ["2", "1.0"], "List") == 0.0
    # never evaluated as code
    assert eval_score("['a']", "[__import__('os').getcwd()]", "List") == 0.0


def test_none_and_the_published_aggregate() -> None:
    assert eval_score("Not answerable", "Not answerable", "None") == 1.0
    assert eval_score("Not answerable", "The report says 12", "None") == 0.0
    samples = [
        {"answer": "Not answerable", "pred": "Not answerable", "score": 1.0},
        {"answer": "8", "pred": "8", "score": 1.0},
        {"answer": "9", "pred": "Not answerable", "score": 0.0},
        {"answer": "x", "pred": "y", "score": 0.0},
    ]
    acc, f1 = eval_acc_and_f1(samples)
    assert acc == 0.5
    # recall 1/3, precision 1/2 (two answers not "Not answerable")
    assert f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


# ---------------------------------------------------------------------------------------------
# The short answer of a Fathom answer
# ---------------------------------------------------------------------------------------------


def test_abstentions_are_not_answerable() -> None:
    assert short_answer({"answer": "I don't know — the sources do not answer this."}, "Str") == (
        "Not answerable"
    )
    assert short_answer({"answer": "12 [1]", "abstained": True}, "Int") == "Not answerable"
    assert short_answer({"answer": "12 [1]", "abstained": False}, "Int") == "12"


def test_short_answer_field_then_span_then_text() -> None:
    a = {"answer": "It is Paris [1].", "span": {"text": "Paris, France"}, "short_answer": "Paris"}
    assert short_answer(a, "Str") == "Paris"
    assert short_answer({**a, "short_answer": None}, "Str") == "Paris, France"
    assert short_answer({"answer": "It is Paris [1][2]."}, "Str") == "It is Paris."
    assert short_answer({"answer": "x", "short_answer": ["a", "b"]}, "List") == ["a", "b"]
    assert short_answer({"answer": "x", "span": {"text": "Paris"}}, "List") == ["Paris"]
    assert short_answer({"answer": "x", "short_answer": ["a", "b"]}, "Str") == "a, b"


def test_numbers_out_of_text() -> None:
    assert short_answer({"answer": "About 45% of adults [1]."}, "Float") == "45"
    assert short_answer({"answer": "x", "span": {"text": "$1,234.5 million"}}, "Float") == "1234.5"
    assert short_answer({"answer": "x", "short_answer": "12"}, "Int") == "12"
    assert short_answer({"answer": "No figure is given."}, "Int") == "No figure is given."
    assert first_number("COVID-19 in 2020") == "19"
    assert first_number("-3 degrees") == "-3"
    assert first_number("none") is None
    assert eval_score("1234", short_answer({"answer": "It cost $1,234 [2]."}, "Int"), "Int") == 1.0


# ---------------------------------------------------------------------------------------------
# The split by document
# ---------------------------------------------------------------------------------------------


def _questions(n_docs: int) -> list[dict]:
    kinds = ("Academic paper", "Brochure", "Guidebook")
    return [
        {"qid": f"q{d}-{i}", "doc_id": f"doc{d}.pdf", "doc_type": kinds[d % 3]}
        for d in range(n_docs)
        for i in range(2)
    ]


def test_split_is_deterministic_disjoint_even_and_stratified() -> None:
    qs = _questions(61)
    halves = mm.split_documents(qs, seed=0)
    assert halves == mm.split_documents(list(reversed(qs)), seed=0)
    assert set(halves) == {q["doc_id"] for q in qs}
    test = {q["doc_id"] for q in mm.select_questions(qs, "test")}
    train = {q["doc_id"] for q in mm.select_questions(qs, "train")}
    assert not test & train and test | train == set(halves)
    assert abs(len(test) - len(train)) <= 1
    for kind in ("Academic paper", "Brochure", "Guidebook"):
        docs = {q["doc_id"] for q in qs if q["doc_type"] == kind}
        assert abs(len(docs & test) - len(docs & train)) <= 1
    assert mm.split_documents(qs, seed=1) != halves
    assert len(mm.select_questions(qs, "all")) == len(qs)


def test_citation_pages_hold_evidence() -> None:
    assert mm.pages_of("3-5") == {3, 4, 5}
    assert mm.pages_of("2, 7") == {2, 7}
    assert mm.pages_of("") == set()
    assert mm.holds_evidence([{"pages": "3-5"}], [5, 9])
    assert not mm.holds_evidence([{"pages": "3-5"}], [6])


def test_a_tree_runs_its_own_code(tmp_path: Path) -> None:
    tree = tmp_path / "other-checkout"
    tree.mkdir()
    (tree / "__init__.py").write_text("")
    env = mm.tree_env(tree, tmp_path / "work")
    assert mm.check_tree(env, tree, tmp_path) == tree.resolve()
    with pytest.raises(SystemExit):
        mm.check_tree(env, mm.REPO, tmp_path)


# ---------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------


def _make_set(data: Path) -> None:
    folder = data / "mmlongbench_doc"
    (folder / "documents").mkdir(parents=True)
    docgen.make_user_guide_pdf(folder / "documents" / "guide.pdf")
    rows = [
        ("q1", "How many chunks are retrieved per question by default (retrieval.k)?", "10",
         [4], "Int"),
        ("q2", "What is the default sentence embedding model?", "all-MiniLM-L6-v2", [4], "Str"),
        ("q3", "What is the price of a Fathom licence in euros?", "Not answerable", [], "None"),
        ("q4", "Which figure shows the chart?", "Chart", [2], "Str"),
    ]  # fmt: skip
    with open(folder / "questions.jsonl", "w", encoding="utf-8") as f:
        for qid, question, answer, pages, fmt in rows:
            rec = {
                "qid": qid, "doc_id": "guide.pdf", "doc_type": "Guidebook",
                "question": question, "answer": answer, "evidence_pages": pages,
                "evidence_sources": ["Pure-text (Plain-text)"], "answer_format": fmt,
                "text_only": qid != "q4",
            }  # fmt: skip
            f.write(json.dumps(rec) + "\n")


@pytest.mark.slow
def test_end_to_end_on_a_generated_pdf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    _make_set(data)
    out, work = tmp_path / "out", tmp_path / "work"
    monkeypatch.setenv("FATHOM_DATA", str(data))
    args = ["--split", "all", "--variants", "not-answerable,default", "--work", str(work)]
    assert mm.main([*args, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["n"] == 3 and results["documents"] == 1  # the figure question is left out
    na, default = results["variants"]["not-answerable"], results["variants"]["default"]
    assert na["strict_accuracy"]["n"] == 1 and na["by_format"]["None"]["n"] == 1
    assert na["published_score"] == pytest.approx(1 / 3)
    assert na["answerable_abstained"]["share"] == 1.0
    # The default answers from the guide: the settings table on page 4 is read and cited
    assert default["evidence_context"]["share"] == 1.0
    assert default["evidence_cited"]["n"] >= 1
    assert default["ask_ms"]["p50"] > 0
    answers = [json.loads(line) for line in (work / "default" / "answers.jsonl").open()]
    assert {a["qid"] for a in answers} == {"q1", "q2", "q3"}
    assert all("citations" in a and "trace" in a for a in answers)
    assert results["command"].startswith("FATHOM_DATA=… python bench/mmlongbench.py")
    assert str(work) not in results["command"] and "--work" not in results["command"]
    assert "| default |" in (out / "results.md").read_text()
    # --reuse answers nothing again
    before = (work / "default" / "answers.jsonl").stat().st_mtime_ns
    assert mm.main([*args, "--reuse", "--out", str(out)]) == 0
    assert (work / "default" / "answers.jsonl").stat().st_mtime_ns == before


def test_script_help_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(mm.REPO / "bench" / "mmlongbench.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "--previous" in done.stdout
