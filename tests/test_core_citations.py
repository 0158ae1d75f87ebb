"""Citation markers: every form a model writes ("[1, 2]", "[1;2]", "[1-3]", "[1][3]") is read the
same way by the generators (``parse_citations``), the confidence scorer and
``renumber_citations``."""

from __future__ import annotations

import pytest
from fathom.bench.support.hits import eiffel_hits
from fathom.core.base import Draft
from fathom.core.citations import (
    cited_numbers,
    parse_citations,
    renumber_citations,
    strip_citations,
)
from fathom.feedback.confidence import SupportScorer, answer_sentences, attribute


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris [1, 2].", (1, 2)),
        ("Paris [1,2].", (1, 2)),
        ("Paris [1;2].", (1, 2)),
        ("Paris [ 2 , 1 ].", (2, 1)),
        ("Paris [1-3].", (1, 2, 3)),
        ("Paris [1–3].", (1, 2, 3)),
        ("Paris [1 - 3].", (1, 2, 3)),
        ("Paris [1][3].", (1, 3)),
        ("Paris [1, 3-4]. Lyon [2].", (1, 3, 4, 2)),
        ("Paris [3] and [1, 3].", (3, 1)),
    ],
)
def test_parse_citations_reads_every_marker_form(text: str, expected: tuple[int, ...]) -> None:
    assert parse_citations(text, 4) == expected


def test_parse_citations_drops_out_of_range_numbers_and_non_markers() -> None:
    assert parse_citations("Paris [9]. Lyon [0, 2]. Nice [3-5].", 3) == (2, 3)
    assert parse_citations("In [2021] the [a] list[x] (1, 2) [Source 3].", 3) == ()
    assert cited_numbers("Paris [9]. Lyon [0, 2] [2].") == [9, 0, 2, 2]


def test_answer_sentences_reads_multi_number_markers() -> None:
    got = answer_sentences("Alloy 71 is used [1, 2]. It weighs 7 kg. [1,3] Both hold [1–2][4].")
    assert got == [
        ("Alloy 71 is used.", (1, 2)),
        ("It weighs 7 kg.", (1, 3)),
        ("Both hold.", (1, 2, 4)),
    ]
    assert answer_sentences("Paris [3] and [7] too.") == [("Paris and too.", (3, 7))]


def test_multi_number_citation_is_scored_and_not_attributed_again() -> None:
    text = "The Eiffel Tower is in Paris [3, 1]."
    draft = Draft(text, parse_citations(text, 3), 0, 0, "test", "test")
    assert draft.citations == (3, 1)
    conf = SupportScorer(None).score(draft, eiffel_hits())
    (sentence,) = conf.sentences
    assert sentence["sentence"] == "The Eiffel Tower is in Paris."
    assert sentence["cites"] == [3, 1] and sentence["best_source"] == 3
    assert conf.support == 1.0
    assert attribute(draft, conf) is None  # the model cited: its text stays as written


def test_renumber_citations_maps_every_form() -> None:
    text = "Alloy 71 [1, 2]. Weighs 7 kg [1,2]. Cast [1-3]; see [1–3], [2;3] and [2][3]."
    got = renumber_citations(text, {1: 4, 2: 1, 3: 2})
    assert got == (
        "Alloy 71 [4, 1]. Weighs 7 kg [4, 1]. Cast [4, 1, 2]; see [4, 1, 2], [1, 2] and [1][2]."
    )
    assert parse_citations(got, 4) == (4, 1, 2)


def test_renumber_citations_drops_unmapped_numbers_and_empty_markers() -> None:
    mapping = {2: 1, 3: 1}
    assert renumber_citations("Paris [9].", mapping) == "Paris."
    assert renumber_citations("Lyon [2, 9] and Nice [9, 3].", mapping) == "Lyon [1] and Nice [1]."
    assert renumber_citations("Lyon [2-3].", mapping) == "Lyon [1]."  # one source twice: once
    assert renumber_citations("Lyon [9][2] [9] x [9] [9].", mapping) == "Lyon [1] x."
    assert renumber_citations("Lyon [2] [9] [3].", mapping) == "Lyon [1] [1]."
    assert renumber_citations("[9] Paris", mapping) == " Paris"
    # Text that is not a citation marker is left alone.
    assert (
        renumber_citations("In [2021] the [a] list (2).", mapping) == "In [2021] the [a] list (2)."
    )
    assert renumber_citations("Paris [2].", {}) == strip_citations("Paris [2].") == "Paris."


def test_cited_text_is_bounded_at_a_word_and_marked() -> None:
    from fathom.core.base import cited_text

    assert cited_text("  short text \n") == "short text"
    long = " ".join(f"word{i}" for i in range(1000))
    cut = cited_text(long, limit=100)
    assert len(cut) <= 100 and cut.endswith("…") and long.startswith(cut[:-1])
    assert cut[:-1].split()[-1] in long.split()  # a whole word before the mark
    assert cited_text("x" * 300, limit=100) == "x" * 99 + "…"  # no space: a hard cut
