"""Training the extractive sentence scorer: gold sentences from answer offsets, end to end on a
generated question set (hashing embedder, no model download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.learn import train_extractive as T
from fathom.stages.generate.extractive import NO_ANSWER, ExtractiveGenerator
from fathom.stages.generate.sentence_scorer import SentenceScorer

PEOPLE = ["Arlen", "Brisa", "Corvin", "Delia", "Emrys", "Fenna", "Gideon", "Halla"]
TOWNS = ["Ostrava", "Lisbon", "Tromso", "Kraków", "Porto", "Bergen", "Gdansk", "Turku"]


def _write_set(folder: Path) -> None:
    folder.mkdir(parents=True)
    docs, questions = [], []
    for i, (who, town) in enumerate(zip(PEOPLE * 3, TOWNS * 3, strict=True)):
        year = 1900 + 7 * i
        text = (
            f"The {town} workshop {i} is a small firm. It makes violins and cellos. "
            f"The workshop was founded in {year} by {who}. "
            f"Its instruments are sold across the region. The staff work six days a week."
        )
        doc_id = f"w{i}"
        docs.append({"doc_id": doc_id, "title": f"Workshop {i}", "text": text})
        for q, a in (
            (f"When was the {town} workshop {i} founded?", str(year)),
            (f"Who founded the {town} workshop {i}?", who),
        ):
            questions.append(
                {
                    "qid": f"{doc_id}-{len(questions)}",
                    "question": q,
                    "answers": [a],
                    "answer_starts": [text.index(a)],
                    "doc_ids": [doc_id],
                }
            )
    (folder / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))


def test_gold_spans_come_from_offsets_else_from_the_paragraph() -> None:
    doc = "Intro. The answer is 42 here. Later 42 again."
    at = doc.index("42")
    assert T._gold_spans({"answers": ["42"], "answer_starts": [at]}, doc) == [(at, at + 2)]
    later = doc.rindex("42")
    # a wrong offset is not trusted; the paragraph span finds the answer inside it
    rec = {"answers": ["42"], "answer_starts": [3], "para_char_start": 30, "para_char_end": 46}
    assert T._gold_spans(rec, doc) == [(later, later + 2)]


@pytest.mark.slow
def test_trained_on_a_generated_set_it_quotes_the_gold_sentence(
    fathom_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FATHOM_EMBEDDER__NAME", "hashing:64")
    data = tmp_path / "data"
    _write_set(data / "workshops")
    out = tmp_path / "scorer" / "extractive_scorer.json"
    code = T.main(
        [
            "--data", str(data), "--sets", "workshops", "--calibrate", "",
            "--work", str(tmp_path / "work"), "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    cache = json.loads((tmp_path / "work" / "workshops-train-k4.json").read_text())
    assert cache["questions"]  # the training half only: every qid's document is in it
    from fathom.learn.questions import document_half

    assert {document_half(q[0].split("-")[0], 0) for q in cache["questions"]} == {"train"}
    data_ = T.Data([tmp_path / "work" / "workshops-train-k4.npz"])
    with_gold = sum(bool(data_.gold[data_.rows(i)].any()) for i in range(len(data_)))
    assert with_gold >= 0.8 * len(data_)  # offsets mapped into the retrieved chunks
    scorer = SentenceScorer.load(out)
    assert scorer.meta["trained_on"]["split"] == "train"
    gen = ExtractiveGenerator(scorer=scorer)
    from fathom.bench.support.hits import make_hit

    hit = make_hit(
        1,
        "The Porto workshop 9 is a small firm. It makes violins and cellos. The workshop was "
        "founded in 1963 by Brisa. Its instruments are sold across the region.",
    )
    d = gen.generate("When was the Porto workshop 9 founded?", [hit])
    assert "1963" in d.text and d.text != NO_ANSWER
    assert 0 < d.confidence <= 1
