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


def test_importing_the_splitter_does_not_import_nltk() -> None:
    """NLTK's package init costs seconds; it loads on the first real split, not on import."""
    import json
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from fathom.chunking.sentences import chunk_sentences, split_sentences\n"
        "before = 'nltk' in sys.modules\n"
        "split_sentences('One. Two.')\n"
        "print(json.dumps([before, 'nltk' in sys.modules]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == [False, True]


def test_chunk_sentences_reads_the_stored_spans_and_splits_only_without_them() -> None:
    from fathom.chunking.sentences import chunk_sentences
    from fathom.core.base import Chunk

    text = "First point here. Second point there."
    bare = Chunk("c", "d", text, 0, len(text), 1, 1, "", 8, 0)
    assert chunk_sentences(bare) == split_sentences(text) == [(0, 17), (18, 37)]
    stored = Chunk("c", "d", text, 0, len(text), 1, 1, "", 8, 0, sentences=((0, 37),))
    assert chunk_sentences(stored) == [(0, 37)]  # what was stored, not a fresh split
    assert stored == bare  # the spans are derived data: equality is the chunk's
    assert Chunk.from_dict(stored.to_dict()).sentences == ((0, 37),)
    assert "sentences" not in bare.to_dict() and Chunk.from_dict(bare.to_dict()).sentences is None


def test_word_pattern_is_nltks_own() -> None:
    """``chunking.punkt`` matches NLTK's English word pattern with the stdlib ``re``; if NLTK
    changes the pattern, this fails and the copy must follow."""
    from fathom.chunking.punkt import WORD_TOKENIZER
    from nltk.tokenize.punkt import PunktLanguageVars

    def normalised(pattern: str) -> str:
        # NLTK builds its non-word class from set(sent_end_chars): "?!" or "!?" by process.
        return pattern.replace(r"!\?]", r"\?!]")

    nltk_pattern = PunktLanguageVars()._word_tokenizer_re().pattern
    assert normalised(WORD_TOKENIZER) == normalised(nltk_pattern)
    assert r"\?!]" in normalised(nltk_pattern)


SAMPLE = (
    'Dr. Smith arrived at 3 p.m. on Jan. 5. He said: "It works!" Then he left... '
    "The U.S. team (led by Prof. Jones) won 3.5 to 2. Why? Nobody knew. "
    "See Fig. 2 and Sect. 4.1 for details; e.g. the 2nd trial -- which failed -- is "
    "described there. Items: a. one. b. two. 'Quoted.' Done."
)


@pytest.mark.parametrize("train", [False, True])
def test_splits_like_stock_nltk_punkt(train: bool) -> None:
    """The stdlib-``re`` language variables and tokens give NLTK's own sentence boundaries."""
    from fathom.chunking import punkt
    from fathom.chunking.sentences import BUILTIN_ABBREVIATIONS
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    text = " ".join([SAMPLE, FILLER] * 40)
    if train:
        stock_trainer = PunktTrainer()
        stock_trainer.train(text, finalize=True)
        stock_params = stock_trainer.get_params()
        stock_params.abbrev_types.update(BUILTIN_ABBREVIATIONS)
        ours = punkt.trained_params(text, BUILTIN_ABBREVIATIONS)
        assert ours.abbrev_types == stock_params.abbrev_types
        assert ours.collocations == stock_params.collocations
        assert ours.sent_starters == stock_params.sent_starters
    else:
        stock_params = punkt.builtin_params(BUILTIN_ABBREVIATIONS)
        ours = punkt.builtin_params(BUILTIN_ABBREVIATIONS)
    stock = list(PunktSentenceTokenizer(stock_params).span_tokenize(text))
    assert list(punkt.tokenizer(ours).span_tokenize(text)) == stock
    assert len(stock) > 40


def test_token_types_are_nltks() -> None:
    from fathom.chunking.punkt import Token
    from nltk.tokenize.punkt import PunktToken

    for tok in ["3.5", "-2,000.", "Fig.", "U.S.", "...", "e.g.", "x", "42nd", ".5", "Über", "1-2"]:
        ours, stock = Token(tok), PunktToken(tok)
        assert ours.type == stock.type
        for prop in ("is_ellipsis", "is_number", "is_initial", "is_alpha", "is_non_punct"):
            assert bool(getattr(ours, prop)) == bool(getattr(stock, prop)), (tok, prop)
