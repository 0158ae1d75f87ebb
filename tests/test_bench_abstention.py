"""bench/abstention.py: the out-of-document pairs and their question files, the replay of the
abstention rule and the grid search over its thresholds, and a tiny run end to end on
generated articles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench import abstention as ab
from fathom.bench.support import abstention_fit as fit

VOLCANO = (
    "Volcanoes form where magma rises through the crust of the Earth. Mount Etna in Sicily is "
    "the most active volcano in Europe. Lava from Etna reaches a temperature of about 1,100 "
    "degrees Celsius. Basalt is the rock that forms when this lava cools."
)
VIOLIN = (
    "The violin is a string instrument played with a bow. Antonio Stradivari made violins in "
    "Cremona in the seventeenth century. A violin has four strings tuned in fifths. Its body "
    "is made of spruce and maple, and the bow is strung with horsehair."
)


def _articles(folder: Path) -> Path:
    """A squad-like folder of two generated articles with three questions each."""
    folder.mkdir(parents=True)
    docs = [
        {"doc_id": "violin", "title": "Violin", "text": VIOLIN},
        {"doc_id": "volcano", "title": "Volcano", "text": VOLCANO},
    ]
    questions = [
        ("v1", "volcano", "Which volcano is the most active in Europe?", "Mount Etna"),
        ("v2", "volcano", "What temperature does the lava of Etna reach?", "1,100 degrees"),
        ("v3", "volcano", "Which rock forms when the lava of Etna cools?", "Basalt"),
        ("s1", "violin", "Where did Antonio Stradivari make violins?", "Cremona"),
        ("s2", "violin", "How many strings does a violin have?", "four"),
        ("s3", "violin", "What is the bow of a violin strung with?", "horsehair"),
    ]
    (folder / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "questions.jsonl").write_text(
        "".join(
            json.dumps({"qid": q, "question": t, "answers": [a], "doc_ids": [d]}) + "\n"
            for q, d, t, a in questions
        )
    )
    return folder


# ---------------------------------------------------------------------------------------------
# Pairs and question files
# ---------------------------------------------------------------------------------------------


def test_every_article_is_asked_of_the_next_one_wrapping() -> None:
    pairs = ab.article_pairs(["c", "a", "b"])
    assert pairs == [("a", "b"), ("b", "c"), ("c", "a")]
    assert sorted(a for a, _ in pairs) == sorted(b for _, b in pairs) == ["a", "b", "c"]
    assert ab.article_pairs(["a"]) == []


def test_pair_questions_mark_only_the_other_articles_questions_unanswerable() -> None:
    by_doc = {
        "a": [{"qid": f"a{i}", "question": f"qa{i}?", "answers": ["x"]} for i in range(5)],
        "b": [{"qid": f"b{i}", "question": f"qb{i}?", "answers": ["y"]} for i in range(5)],
    }
    qs = ab.pair_questions("a", "b", by_doc, n=3)
    own = [q for q in qs if not q["is_impossible"]]
    foreign = [q for q in qs if q["is_impossible"]]
    assert len(own) == len(foreign) == 3
    assert all(q["qid"].startswith("b") and q["answers"] == ["y"] for q in own)
    assert all(q["doc_ids"] == ["b"] for q in own)
    assert all(q["qid"].startswith("a") and q["qid"].endswith("|asked-of|b") for q in foreign)
    assert all(q["answers"] == [] and q["source_doc"] == "a" for q in foreign)
    assert len({q["qid"] for q in qs}) == len(qs)
    # the sample is seeded: the same questions again, in file order
    assert ab.pair_questions("a", "b", by_doc, n=3) == qs
    assert [q["qid"] for q in own] == sorted(q["qid"] for q in own)


def test_pair_files_read_back_as_fathom_eval_reads_them(tmp_path: Path) -> None:
    from fathom.learn.questions import load_questions

    folder = _articles(tmp_path / "squad_v1.1_dev")
    pairs = ab.write_pairs(folder, "all", tmp_path / "pairs", per_article=2)
    assert [b for b, _ in pairs] == ["volcano", "violin"]  # violin → volcano, volcano → violin
    for b, pair in pairs:
        docs = [json.loads(x) for x in (pair / "docs.jsonl").read_text().splitlines()]
        assert [d["doc_id"] for d in docs] == [b]
        questions = load_questions(pair / "questions.jsonl")
        own = [q for q in questions if not q.unanswerable]
        foreign = [q for q in questions if q.unanswerable]
        assert len(own) == len(foreign) == 2
        assert all(q.doc_ids == (b,) and q.answers for q in own)
        assert all(not q.answers for q in foreign)
        assert {q.qid[0] for q in foreign} == {"s" if b == "volcano" else "v"}


def test_half_articles_follow_the_eval_split(tmp_path: Path) -> None:
    from fathom.learn.questions import document_half

    folder = _articles(tmp_path / "squad_v1.1_dev")
    for half in ("train", "test"):
        want = sorted(d for d in ("violin", "volcano") if document_half(d, 0) == half)
        assert ab.half_articles(folder, half) == want
    assert ab.half_articles(folder, "all") == ["violin", "volcano"]


def test_train10_layout_becomes_docs_and_questions(tmp_path: Path) -> None:
    official = {
        "version": "v2.0",
        "data": [
            {
                "title": "Violin",
                "paragraphs": [
                    {
                        "context": VIOLIN,
                        "qas": [
                            {
                                "id": "q1",
                                "question": "Where?",
                                "answers": [{"text": "Cremona", "answer_start": 0}],
                                "is_impossible": False,
                            },
                            {"id": "q2", "question": "Who?", "answers": [], "is_impossible": True},
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "train.json"
    path.write_text(json.dumps(official))
    folder = ab.write_train10(path, tmp_path / "t10")
    from fathom.learn.questions import load_questions

    qs = {q.qid: q for q in load_questions(folder / "questions.jsonl")}
    assert qs["q1"].answers == ("Cremona",) and not qs["q1"].unanswerable
    assert qs["q2"].unanswerable and qs["q2"].doc_ids == ("Violin",)
    assert json.loads((folder / "docs.jsonl").read_text())["text"] == VIOLIN


# ---------------------------------------------------------------------------------------------
# The rule's replay and the grid search
# ---------------------------------------------------------------------------------------------


def _round(coverage: float, sure: bool, support: float = 0.9, abstained: bool = False, f1=1.0):
    return {
        "checked": True,
        "coverage": coverage,
        "sure": sure,
        "margin": 1.0,
        "kind": "factoid",
        "visual": False,
        "reader": True,
        "abstained": abstained,
        "support": support,
        "f1": f1,
        "k": 3,
    }


def test_a_stopped_round_deepens_and_the_next_one_answers() -> None:
    rounds = [_round(0.4, True, f1=0.2), _round(0.8, True, f1=0.9)]
    # rule off: the first round's support clears the loop's threshold and it answers
    assert fit.outcome(rounds, 0.0, 0.0, 0.45, False) == (False, 0.2)
    # the rule stops the first round (coverage 0.4 < 0.5); the loop deepens; the second answers
    assert fit.outcome(rounds, 0.5, 0.5, 0.45, False) == (False, 0.9)
    # both stopped: the last round abstains (F1 1 on an unanswerable question)
    assert fit.outcome(rounds, 0.9, 0.9, 0.45, True) == (True, 1.0)
    assert fit.outcome(rounds, 0.9, 0.9, 0.45, False) == (True, 0.0)
    # without a sure span the larger threshold applies
    unsure = [_round(0.6, False)]
    assert fit.outcome(unsure, 0.5, 0.75, 0.45, False)[0] is True
    assert fit.outcome(unsure, 0.5, 0.55, 0.45, False)[0] is False
    # a round the rule never read (a summary, no sources) is never stopped
    assert not fit.fires({"checked": False}, 1.0, 1.0)
    assert not fit.fires({**_round(0.0, False), "kind": "summary"}, 1.0, 1.0)


def test_grid_search_picks_the_pair_the_bound_allows() -> None:
    # unanswerable: coverage 0.45 (sure), 0.5 (unsure), 0.7 (unsure); answerable: 0.9 sure,
    # 0.6 sure, 0.45 sure, and ten at 1.0 sure.
    rows = [
        {"unanswerable": True, "rounds": [_round(0.45, True)]},
        {"unanswerable": True, "rounds": [_round(0.5, False)]},
        {"unanswerable": True, "rounds": [_round(0.7, False)]},
        {"unanswerable": False, "rounds": [_round(0.9, True)]},
        {"unanswerable": False, "rounds": [_round(0.6, True)]},
        {"unanswerable": False, "rounds": [_round(0.45, True)]},
        *({"unanswerable": False, "rounds": [_round(1.0, True)]} for _ in range(10)),
    ]
    chosen, points = fit.grid_search(rows, 0.45, (0.0, 0.4, 0.5, 0.65), (0.0, 0.6, 0.8))
    assert len(points) == 12
    # 0.65 would stop two of 13 answerable (15 %); 0.5 stops one (7.7 %) and, with 0.8 for an
    # unsure span, every unanswerable question (0.4 stops none of the answerable ones, but
    # misses the sure one at 0.45)
    assert chosen is not None
    assert (chosen.min_coverage, chosen.min_unsure) == (0.5, 0.8)
    assert chosen.unanswerable_abstained == 1.0
    assert chosen.answerable_abstained == pytest.approx(1 / 13)
    strict, _ = fit.grid_search(rows, 0.45, (0.5, 0.65), (0.8,), max_answerable=0.0)
    assert strict is None
    curve = fit.frontier(points)
    assert [p.min_coverage for p in curve] == [0.0, 0.4, 0.5]
    assert all(p.answerable_abstained <= 0.1 for p in curve)


# ---------------------------------------------------------------------------------------------
# End to end on generated articles
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tiny_run_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _articles(data / "squad_v1.1_dev")
    out = tmp_path / "out"
    argv = [
        "--data", str(data), "--split", "all", "--per-article", "3", "--squad2-limit", "0",
        "--work", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    assert ab.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    ood = results["sets"]["out-of-document"]
    un = ood["unanswerable"]["variants"]["default"]
    an = ood["answerable"]["variants"]["default"]
    assert ood["unanswerable"]["n"] == ood["answerable"]["n"] == 6
    assert ood["unanswerable"]["documents"] == 2
    # a question about violins asked of an article on volcanoes is not answered from it
    assert un["abstained"]["mean"] > an["abstained"]["mean"]
    assert an["f1"]["mean"] > 0.3
    assert "FATHOM_DATA=…" in results["command"] and "--work" not in results["command"]
    assert "| unanswerable | default | 6 | 2 | abstained |" in (out / "results.md").read_text()


@pytest.mark.slow
def test_replay_at_the_shipped_pair_matches_the_answer(tmp_path: Path, cfg) -> None:
    """The features recorded with the rule off, replayed at the shipped thresholds, give the
    abstention the answerer itself gives with them."""
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import load_questions
    from fathom.stages.pipeline import Engine

    before = fit.shipped_pair()
    folder = _articles(tmp_path / "squad_v1.1_dev")
    (_, pair), _ = ab.write_pairs(folder, "all", tmp_path / "pairs", per_article=3)
    cfg.generator.backend = "extractive"
    collection = resolve_target(cfg, str(pair / "docs.jsonl"))
    threshold = cfg.feedback.threshold
    plain = Engine(cfg, collection)
    questions = load_questions(pair / "questions.jsonl")
    answers = {q.qid: plain.ask(q.question).abstained for q in questions}
    plain.close()
    from fathom.core.config import load_config

    forced_cfg = load_config(overrides={"generator.backend": "extractive"})
    engine = fit.forced_engine(forced_cfg, collection)
    try:
        for q in questions:
            rounds = fit.record(engine, q.question, q.answers)
            assert rounds and all("support" in r and "f1" in r for r in rounds)
            assert any(r["checked"] and 0.0 <= r["coverage"] <= 1.0 for r in rounds)
            replayed, _ = fit.outcome(rounds, *fit.shipped_pair(), threshold, q.unanswerable)
            assert replayed == answers[q.qid], q.question
    finally:
        engine.close()
    # the rule's constants are back as shipped after recording
    rule = fit.rule_module()
    assert before == (rule.MIN_COVERAGE, rule.MIN_COVERAGE_UNSURE)
    assert rule.not_answered.__module__ == rule.__name__  # the rule itself is back
