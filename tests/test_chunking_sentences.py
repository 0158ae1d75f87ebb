"""Sentence splitting: Punkt trained on the document plus built-in abbreviations, no downloads."""

from __future__ import annotations

import re

import pytest
from fathom.chunking.sentences import (
    MIN_TRAIN_CHARS,
    TRAIN_CHARS,
    SentenceSplitter,
    _trained_params,
    split_sentences,
)
from hypothesis import given, settings
from hypothesis import strategies as st

FILLER = (
    "The committee met on a rainy morning to discuss the budget. Several members raised "
    "concerns about the schedule. Results were mixed, and the chair asked for more data. "
    "In the afternoon the group visited the new laboratory. It was larger than expected. "
)


def sentences(text: str, splitter: SentenceSplitter | None = None) -> list[str]:
    spans = splitter.spans(text) if splitter else split_sentences(text)
    return [text[a:b] for a, b in spans]


@pytest.fixture(scope="module")
def trained() -> SentenceSplitter:
    """A splitter trained on a document long enough for Punkt to learn from."""
    return SentenceSplitter.trained_on(FILLER * (MIN_TRAIN_CHARS // len(FILLER) + 2))


ABBREVIATION_CASES = [
    (
        "Use a small model, e.g. a MiniLM encoder, for speed. Then index.",
        ["Use a small model, e.g. a MiniLM encoder, for speed.", "Then index."],
    ),
    (
        "Fig. 3 shows the results. They are good.",
        ["Fig. 3 shows the results.", "They are good."],
    ),
    (
        "We studied the U.S. economy in detail. It grew.",
        ["We studied the U.S. economy in detail.", "It grew."],
    ),
    (
        "Dr. Smith examined the patient. She was fine.",
        ["Dr. Smith examined the patient.", "She was fine."],
    ),
    (
        "Results (i.e. the scores) improved, cf. Table 2 and Eq. 4 on pp. 3-4. Done.",
        ["Results (i.e. the scores) improved, cf. Table 2 and Eq. 4 on pp. 3-4.", "Done."],
    ),
    (
        "Smith et al. reported it in Jan. 2020 at the U.K. office. Prof. Lee agreed.",
        ["Smith et al. reported it in Jan. 2020 at the U.K. office.", "Prof. Lee agreed."],
    ),
]


@pytest.mark.parametrize(("text", "expected"), ABBREVIATION_CASES)
def test_abbreviations_do_not_end_sentences(text: str, expected: list[str], trained) -> None:
    assert sentences(text) == expected  # short text: built-in abbreviations only
    assert sentences(text, trained) == expected  # learned parameters merged with built-ins


def test_plain_sentence_boundaries_split() -> None:
    text = "It rained all day. The game was cancelled! Was anyone surprised? No."
    assert sentences(text) == [
        "It rained all day.",
        "The game was cancelled!",
        "Was anyone surprised?",
        "No.",
    ]


def test_spans_are_offsets_into_the_original_text_with_start_and_end() -> None:
    text = "Intro. " + "  Alpha beta. Gamma delta.  \n  Epsilon.  "
    splitter = SentenceSplitter()
    spans = splitter.spans(text, 7, len(text))
    assert [text[a:b] for a, b in spans] == ["Alpha beta.", "Gamma delta.", "Epsilon."]


def test_table_rows_are_units_and_never_split_inside() -> None:
    text = "Name | Note\nAlice | Arrived late. Left early.\nBob | Fine.\nTotal rows: two. End."
    assert sentences(text) == [
        "Name | Note",
        "Alice | Arrived late. Left early.",
        "Bob | Fine.",
        "Total rows: two.",
        "End.",
    ]


def test_list_items_start_new_units() -> None:
    text = "Steps to follow\n- install the package\n- run the tests\n2) read the report"
    assert sentences(text) == [
        "Steps to follow",
        "- install the package",
        "- run the tests",
        "2) read the report",
    ]


def test_wrapped_prose_lines_are_joined_by_punkt() -> None:
    text = "This sentence was wrapped\nacross two lines. A second one."
    assert sentences(text) == ["This sentence was wrapped\nacross two lines.", "A second one."]


def test_training_is_cached_per_document_and_capped() -> None:
    doc = FILLER * (400_000 // len(FILLER))  # longer than the training cap
    before = _trained_params.cache_info()
    first = SentenceSplitter.trained_on(doc)
    second = SentenceSplitter.trained_on(doc)
    after = _trained_params.cache_info()
    assert after.misses == before.misses + 1 and after.hits == before.hits + 1
    # Only the first TRAIN_CHARS characters are learned from: a different tail reuses the cache.
    SentenceSplitter.trained_on(doc[:TRAIN_CHARS] + " A different ending. Entirely new.")
    assert _trained_params.cache_info().misses == after.misses
    assert first.spans(FILLER) == second.spans(FILLER)
    assert len(first.spans(doc[:2000])) > 10


def test_short_documents_use_the_builtin_parameters_without_training() -> None:
    before = _trained_params.cache_info()
    SentenceSplitter.trained_on("Short text. Two sentences.")
    assert _trained_params.cache_info().misses == before.misses


def test_empty_and_blank_text() -> None:
    assert split_sentences("") == []
    assert split_sentences("  \n\n ") == []


_NON_SPACE = re.compile(r"\S")

words = st.text(alphabet="abcdefghij.ABC,", min_size=1, max_size=8)
sentence_text = st.lists(words, min_size=1, max_size=12).map(lambda ws: " ".join(ws))
ends = st.sampled_from([".", "!", "?", "", " e.g.", " | x"])
sep = st.sampled_from([" ", "  ", "\n", " \n ", "\n- "])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(sentence_text, ends, sep), min_size=1, max_size=15))
def test_spans_cover_all_non_whitespace_in_order(parts) -> None:
    text = "".join(s + e + g for s, e, g in parts)
    spans = split_sentences(text)
    pos = 0
    for a, b in spans:
        assert pos <= a < b <= len(text)
        assert not text[a].isspace() and not text[b - 1].isspace()
        assert not _NON_SPACE.search(text, pos, a)  # nothing skipped between spans
        pos = b
    assert not _NON_SPACE.search(text, pos)
