"""Fathom's reader: windows, span decoding, the shipped model, and a missing or broken model."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from fathom.core.errors import BackendUnavailable
from fathom.index.embed import packaged_minilm_dir
from fathom.index.reader import (
    MAX_ANSWER_TOKENS,
    MAX_LENGTH,
    META_FILE,
    MODEL_DIR,
    MODEL_FILE,
    QUESTION_TOKENS,
    STRIDE,
    TOKENIZER_FILE,
    Reader,
    best_spans,
    encode,
    load_tokenizer,
)
from fathom.tests.support.int8_pins import pinned_file

LONG = " ".join(f"Station {i} opened in {1900 + i} beside the river." for i in range(60))


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(packaged_minilm_dir() / "tokenizer.json")


def test_windows_cover_the_passage_with_overlap_and_map_back_to_its_text(tok) -> None:
    w = encode(tok, "When did station 7 open?", [LONG, "A short one."])
    assert w.input_ids.shape[1] <= MAX_LENGTH
    first = np.flatnonzero(w.owner == 0)
    assert len(first) > 3 and list(np.flatnonzero(w.owner == 1)) == [len(first)]
    covered = []
    for r in first:
        toks = np.flatnonzero(w.passage[r])
        for t in toks:  # each token's characters are the token (uncased WordPiece)
            piece = tok.id_to_token(int(w.input_ids[r, t])).removeprefix("##")
            assert LONG[w.starts[r, t] : w.ends[r, t]].lower() == piece
        covered.append((int(w.starts[r, toks[0]]), int(w.ends[r, toks[-1]])))
    assert covered[0][0] == 0 and covered[-1][1] == len(LONG)
    for (_, b0), (a1, _) in itertools.pairwise(covered):
        assert a1 < b0  # neighbours overlap ...
    r0, r1 = first[0], first[1]
    tail = w.input_ids[r0][w.passage[r0]][-STRIDE:].tolist()
    head = w.input_ids[r1][w.passage[r1]][:STRIDE].tolist()
    assert tail == head  # ... by STRIDE tokens


def test_a_long_question_is_cut_and_the_passage_still_gets_room(tok) -> None:
    question = "Which " + " ".join(["very"] * 100) + " long question is this?"
    w = encode(tok, question, ["The answer is here."])
    q_tokens = int((w.token_type_ids[0] == 0).sum() - 2)  # minus [CLS] and [SEP]
    assert q_tokens <= QUESTION_TOKENS
    assert w.passage[0].sum() == len(
        tok.encode("The answer is here.", add_special_tokens=False).ids
    )


def test_best_spans_takes_the_best_pair_inside_the_passage_and_the_band() -> None:
    width = 50
    start = np.zeros((2, width), dtype=np.float32)
    end = np.zeros((2, width), dtype=np.float32)
    passage = np.zeros((2, width), dtype=bool)
    passage[:, 10:45] = True
    start[0, 12], end[0, 15] = 3.0, 2.0  # the answer: 12..15, score 5
    start[0, 5], end[0, 6] = 9.0, 9.0  # outside the passage: never chosen
    start[0, 40], end[0, 11] = 4.5, 4.5  # alone, each scores 4.5; together end < start
    start[0, 0], end[0, 0] = 1.0, 0.5  # no-answer scores 1.5
    start[1, 11], end[1, 11 + MAX_ANSWER_TOKENS] = 9.0, 9.0  # too long: not a span
    first, last, margin = best_spans(start, end, passage)
    assert (first[0], last[0]) == (12, 15)
    assert margin[0] == pytest.approx(5.0 - 1.5)
    assert last[1] - first[1] < MAX_ANSWER_TOKENS


def test_a_missing_model_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable) as err:
        Reader(tmp_path).load()
    assert "reader model" in str(err.value) and "missing" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_corrupt_model_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / MODEL_FILE).write_bytes(b"\x00not an onnx graph" * 100)
    (tmp_path / TOKENIZER_FILE).write_bytes((packaged_minilm_dir() / "tokenizer.json").read_bytes())
    (tmp_path / META_FILE).write_text("{}")
    reader = Reader(tmp_path)
    with pytest.raises(BackendUnavailable) as err:
        reader.load()
    assert "cannot be loaded" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / MODEL_FILE).write_bytes((MODEL_DIR / MODEL_FILE).read_bytes())
    with pytest.raises(BackendUnavailable) as again:  # a failed open is not retried per call
        reader.load()
    assert again.value is err.value


# ---------------------------------------------------------------------------------------------
# The shipped model
# ---------------------------------------------------------------------------------------------


def test_the_shipped_model_is_small_and_matches_its_checksums() -> None:
    from fathom.index.manifest import file_sha256

    meta = json.loads((MODEL_DIR / META_FILE).read_text())
    size = sum((MODEL_DIR / f).stat().st_size for f in (MODEL_FILE, TOKENIZER_FILE, META_FILE))
    assert size <= 30 * 2**20
    for name, digest in meta["sha256"].items():
        assert file_sha256(MODEL_DIR / name) == digest, name
    assert meta["training"]["split"] == "train"


PASSAGES = [
    "The Eiffel Tower was completed on 31 March 1889 for the World's Fair in Paris.",
    "Bananas are rich in potassium and grow in tropical climates.",
]


# one file per int8 kernel family of the CPU (tests/support/int8_pins.py)
PINS = pinned_file(Path(__file__).parent / "support" / "reader_pins.json")
QUESTION = "When was the Eiffel Tower completed?"


def _read_fixed() -> list[dict]:
    out = Reader().load().read(QUESTION, PASSAGES)
    return [
        {
            "relevance": round(r.relevance, 2),
            "answer": round(r.answer, 2),
            "span": PASSAGES[i][r.start : r.end],
        }
        for i, r in enumerate(out)
    ]


def test_the_shipped_model_reads_a_fixed_input_as_pinned() -> None:
    """The shipped model's scores on a fixed input (a retrained model rewrites them:
    ``python -m fathom.tests.test_index_reader``)."""
    pinned = json.loads(PINS.read_text())
    got = _read_fixed()
    out = Reader().load().read(QUESTION, PASSAGES)
    for g, p in zip(got, pinned, strict=True):
        assert g["span"] == p["span"]
        assert g["relevance"] == pytest.approx(p["relevance"], abs=0.05)
        assert g["answer"] == pytest.approx(p["answer"], abs=0.05)
    assert out[0].relevance > out[1].relevance
    assert PASSAGES[0][out[0].start : out[0].end] == "31 March 1889"


if __name__ == "__main__":  # rewrite the pins from the shipped model
    PINS.write_text(json.dumps(_read_fixed(), indent=1) + "\n")
