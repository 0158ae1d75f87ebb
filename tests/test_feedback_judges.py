"""Answer judges against hand-worked values: SQuAD normalisation, EM, F1, containment, answer
recall, abstention, and the ranking judges (Recall@k, MRR, nDCG@k)."""

from __future__ import annotations

import math

import pytest
from fathom.feedback.judges import (
    answer_recall,
    contains,
    exact_match,
    f1,
    is_abstention,
    mrr,
    ndcg_at_k,
    normalize_answer,
    recall_at_k,
)

# --- answers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat!", "cat"),
        ("  An   apple, a pear and THE plum. ", "apple pear and plum"),
        ("The anthem of Theodore", "anthem of theodore"),  # articles only as whole words
        ("Eiffel-Tower (Paris)", "eiffeltower paris"),  # punctuation dropped, not spaced
        ("a.the", "athe"),  # punctuation goes before articles, as in the official script
        ("Don’t", "don’t"),  # typographic quotes are not in string.punctuation
        ("the a an", ""),
    ],
)
def test_normalize_answer_matches_squad(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_hand_cases() -> None:
    assert exact_match("The Cat!", ["cat"]) == 1.0
    assert exact_match("a cat", ["cats"]) == 0.0
    assert exact_match("red dog", ["cat", "Red  dog."]) == 1.0
    assert exact_match("the", ["a"]) == 1.0  # both normalise to empty


def test_f1_hand_cases() -> None:
    # pred [big, red, dog], gold [red, dog, barks]: 2 shared; P = R = 2/3.
    assert f1("the big red dog", ["red dog barks"]) == pytest.approx(2 / 3)
    # pred [dog], gold [big, red, dog]: P = 1, R = 1/3, F1 = 2·(1/3) / (4/3) = 1/2.
    assert f1("dog", ["big red dog"]) == pytest.approx(0.5)
    # Counter intersection: pred [red, red, dog], gold [red, dog, dog] share one red, one dog.
    assert f1("red red dog", ["red dog dog"]) == pytest.approx(2 / 3)
    assert f1("cat", ["red dog"]) == 0.0


def test_f1_takes_the_best_gold() -> None:
    # vs "big red dog": P = 1, R = 2/3, F1 = 0.8; vs "cat": 0.
    assert f1("red dog", ["cat", "big red dog"]) == pytest.approx(0.8)
    assert f1("red dog", ["cat", "big red dog", "Red dog!"]) == 1.0


def test_f1_empty_sides() -> None:
    assert f1("The", ["an"]) == 1.0  # both empty after normalisation
    assert f1("the", ["cat"]) == 0.0
    assert f1("cat", ["the"]) == 0.0


def test_no_gold_scores_abstention() -> None:
    assert exact_match("I don't know.", []) == 1.0
    assert f1("I don't know.", []) == 1.0
    assert exact_match("Paris", []) == 0.0
    assert f1("Paris", []) == 0.0
    # An explicit flag wins over the text.
    assert f1("Paris", [], abstained=True) == 1.0
    assert exact_match("I don't know.", [], abstained=False) == 0.0


def test_contains_on_token_boundaries() -> None:
    assert contains("The crisis began in October 1973. [1]", ["October 1973"]) == 1.0
    assert contains("Cat", ["the cat"]) == 1.0
    assert contains("concatenate", ["cat"]) == 0.0
    assert contains("a scattered cat", ["cat"]) == 1.0
    assert contains("The 1973 crisis", ["October 1973", "1974"]) == 0.0
    assert contains("anything", ["the"]) == 0.0  # a gold that normalises to nothing never matches
    assert contains("anything", []) is None


def test_answer_recall_uses_the_context() -> None:
    context = "[1] Oil crisis\nThe embargo started in October 1973 and ended in March 1974."
    assert answer_recall(context, ["october 1973"]) == 1.0
    assert answer_recall(context, ["April"]) == 0.0
    assert answer_recall("", ["April"]) == 0.0
    assert answer_recall(context, []) is None


def test_is_abstention_recognises_the_generators_texts() -> None:
    from fathom.stages.generate.extractive import NO_ANSWER

    for text in [
        NO_ANSWER,
        "I don't know.",
        "I do not know [1].",
        "I DON’T KNOW",
        "This question cannot be answered from the sources.",
        "The answer is not mentioned in the sources.",
        "The sources do not contain the answer.",
        "There is no information about the treaty.",
        "The provided context contains no information on this.",
        "There is no information in the provided sources about this.",
        "I am unable to answer that from the sources.",
        "The question is unanswerable from the given text.",
        "This is not found in the provided context.",
        "",
    ]:
        assert is_abstention(text), text
    for text in [
        "October 1973 [1].",
        "Not in 1973; it began in 1974 [2].",
        "The cause of the fire could not be determined [1].",
        "The government released no information about the crash [1].",
        "The treaty did not mention Paris [2].",
        "I don't think the sources agree: one says 1973 [1], the other 1974 [2].",
        "The report gives no information about side effects, but the dose is 5 mg.",
    ]:
        assert not is_abstention(text), text


# --- ranking -------------------------------------------------------------------------------------


def test_recall_at_k_counts_distinct_gold() -> None:
    assert recall_at_k(["a", "a", "b"], ["a", "c", "c"]) == 0.5
    assert recall_at_k(["a", "c"], ["c", "a"]) == 1.0
    assert recall_at_k([], ["a"]) == 0.0
    assert recall_at_k(["a"], []) is None


def test_mrr() -> None:
    assert mrr(["x", "y", "g"], ["g"]) == pytest.approx(1 / 3)
    assert mrr(["g2", "x", "g1"], ["g1", "g2"]) == 1.0
    assert mrr(["x", "y"], ["g"]) == 0.0
    assert mrr(["x"], []) is None


def test_ndcg_binary() -> None:
    # ranks 2 and 3 hold the two gold documents: DCG = 1/log2(3) + 1/log2(4) = 1.1309297535714575
    # ideal: ranks 1 and 2: IDCG = 1 + 1/log2(3) = 1.6309297535714575
    assert ndcg_at_k(["x", "g1", "g2"], ["g1", "g2"]) == pytest.approx(0.6934264036172708)
    assert ndcg_at_k(["g2", "g1", "x"], ["g1", "g2"]) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], ["g"]) == 0.0
    assert ndcg_at_k(["x"], []) is None


def test_ndcg_graded_qrels() -> None:
    qrels = {"d1": 2, "d2": 1, "d3": 0}
    # DCG = 1/1 + 2/log2(3) = 2.2618595071429146; IDCG = 2/1 + 1/log2(3) = 2.6309297535714578
    assert ndcg_at_k(["d2", "d1", "dx"], [], qrels=qrels) == pytest.approx(0.8597186998521709)
    # qrels decide the gains even when gold_doc_ids say otherwise
    assert ndcg_at_k(["d1", "d2"], ["d3"], qrels=qrels) == pytest.approx(1.0)
    assert ndcg_at_k(["d3"], ["d3"], qrels={"d3": 0}) is None  # nothing relevant
    # an empty qrels dict falls back to the binary gold list
    assert ndcg_at_k(["g"], ["g"], qrels={}) == 1.0


def test_ndcg_counts_a_repeated_document_once() -> None:
    # g gains at rank 1 only; the repeat at rank 2 adds nothing. IDCG = 1 + 1/log2(3).
    expected = 1 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["g", "g", "x"], ["g", "h"]) == pytest.approx(expected)
    assert expected == pytest.approx(0.6131471927654584)
    # and the repeat still takes its place: h at rank 3
    assert ndcg_at_k(["g", "g", "h"], ["g", "h"]) == pytest.approx(
        (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )


def test_ndcg_cuts_at_k() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["g"]
    assert ndcg_at_k(ranked, ["g"]) == 0.0
    assert ndcg_at_k(ranked, ["g"], k=11) == pytest.approx(1 / math.log2(12))
    # the ideal list is cut at k too: 3 gold documents, k = 2
    assert ndcg_at_k(["a", "b"], ["a", "b", "c"], k=2) == pytest.approx(1.0)
