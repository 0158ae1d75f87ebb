"""The reader's abstention bar: the calibration set read from SQuAD's JSON, the check that it
shares no document with the training data, and the bar fitted on answerable and unanswerable
questions (a stand-in reader with chosen logits)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from fathom.learn.reader_calibrate import (
    ANSWERABLE_ABSTAIN,
    fit_abstain,
    shared_documents,
    squad_set,
)
from fathom.tests.support.fake_reader import FakeReader

SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Alder_Reach",
            "paragraphs": [
                {
                    "context": "Alder Reach is a port town. Its harbour opened in 1871.",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "When did the harbour open?",
                            "answers": [{"text": "1871", "answer_start": 50}],
                            "is_impossible": False,
                        }
                    ],
                },
                {
                    "context": "The town's lighthouse is painted red.",
                    "qas": [
                        {
                            "id": "q2",
                            "question": "What colour is the lighthouse?",
                            "answers": [{"text": "red", "answer_start": 33}],
                            "is_impossible": False,
                        },
                        {
                            "id": "q3",
                            "question": "Who painted the harbour?",
                            "answers": [],
                            "is_impossible": True,
                        },
                    ],
                },
            ],
        },
        {"title": "Bramble_Moor", "paragraphs": [{"context": "Heath.", "qas": []}]},
    ],
}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_squad_file_becomes_a_question_set_with_offsets_in_the_document(tmp_path: Path) -> None:
    source = tmp_path / "train-v2.0.json"
    source.write_text(json.dumps(SQUAD), encoding="utf-8")
    folder = squad_set(source, 1, tmp_path / "set")
    docs = _rows(folder / "docs.jsonl")
    questions = _rows(folder / "questions.jsonl")
    assert [d["doc_id"] for d in docs] == ["Alder_Reach"]  # the first article only
    text = docs[0]["text"]
    assert docs[0]["title"] == "Alder Reach" and docs[0]["n_paragraphs"] == 2
    assert "\n\nThe town's lighthouse" in text
    by_id = {q["qid"]: q for q in questions}
    for qid in ("q1", "q2"):
        q = by_id[qid]
        (answer,), (start,) = q["answers"], q["answer_starts"]
        assert text[start : start + len(answer)] == answer
        assert q["para_char_start"] <= start < q["para_char_end"]
    assert by_id["q3"]["is_impossible"] and by_id["q3"]["answers"] == []
    assert not by_id["q1"]["is_impossible"]


def test_a_calibration_set_sharing_a_training_document_is_found(tmp_path: Path) -> None:
    source = tmp_path / "train.json"
    source.write_text(json.dumps(SQUAD), encoding="utf-8")
    folder = squad_set(source, 2, tmp_path / "cal")
    data = tmp_path / "data"
    for name, ids in (("one", ["Other"]), ("two", ["Bramble_Moor", "Else"])):
        (data / name).mkdir(parents=True)
        lines = [json.dumps({"doc_id": d, "title": d, "text": "x"}) for d in ids]
        (data / name / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert shared_documents(folder, data, ["one", "two", "absent"]) == ["Bramble_Moor"]
    assert shared_documents(folder, data, ["one"]) == []


def test_the_bar_withholds_the_asked_share_of_answerable_questions() -> None:
    """Answerable questions' passages hold their answer (margins 1.5 to 11), unanswerable ones
    do not (margin −1): the bar sits among the answerable margins and withholds about 10 % of
    them, and every unanswerable question."""
    names = [f"Keeper{chr(65 + i)}son" for i in range(20)]
    reader = FakeReader(names, score=12.0, null=1.0)  # margins 11, 10.5, …, 1.5: no ties
    records = []
    for i, name in enumerate(names):
        kept = f"The keeper of lighthouse {i} was {name}. It stands on the cliff."
        bare = f"Lighthouse {i} stands on the cliff."
        for question, passage, none in (
            (f"Who kept lighthouse {i}?", kept, False),
            (f"Who built lighthouse {i}?", bare, True),
        ):
            records.append(
                {"question": question, "unanswerable": none, "passages": [{"text": passage}]}
            )
    fitted = fit_abstain(reader, records, seed=0, data={"source": "test"})
    fit = fitted["fit"]
    assert fit["answerable"] == 20 and fit["unanswerable"] == 20
    assert fit["data"] == {"source": "test"}
    assert 0.0 < fit["abstain_answerable"] <= ANSWERABLE_ABSTAIN + 0.05
    assert fit["abstain_unanswerable"] == 1.0
    assert np.isfinite(fitted["abstain_below"])
    assert reader.meta.get("abstain_below") is None  # the reader's own bar is left as it was


def test_read_set_gives_texts_records_and_the_asked_half(tmp_path: Path) -> None:
    from fathom.learn.questions import document_half, read_set

    source = tmp_path / "train.json"
    source.write_text(json.dumps(SQUAD), encoding="utf-8")
    folder = squad_set(source, 2, tmp_path / "set")
    docs, raw, every = read_set(folder, "all")
    assert set(docs) == {"Alder_Reach", "Bramble_Moor"} and set(raw) == {"q1", "q2", "q3"}
    assert [q.qid for q in every] == ["q1", "q2", "q3"]
    half = document_half("Alder_Reach", 0)
    other = "test" if half == "train" else "train"
    assert [q.qid for q in read_set(folder, half)[2]] == ["q1", "q2", "q3"]
    assert read_set(folder, other)[2] == []


def test_the_bar_reads_what_retrieval_found_not_the_gold_passage_added_for_training() -> None:
    """A record whose retrieval missed the answer carries the gold passage first, marked
    inserted, so that it still teaches the span; the answerer never reads it, so neither does
    the bar: such a question's margin is the one its retrieved passages give."""
    from fathom.learn.reader_calibrate import best_margins

    reader = FakeReader(["Keeperson"], score=12.0, null=1.0)
    gold = {"text": "The keeper of the lighthouse was Keeperson.", "inserted": True}
    found = {"text": "The lighthouse stands on the cliff above the harbour."}
    missed = {"question": "Who kept the lighthouse?", "passages": [gold, found]}
    hit = {"question": "Who kept the lighthouse?", "passages": [{**gold, "inserted": False}]}
    alone = {"question": "Who kept the lighthouse?", "passages": [gold]}
    margins = best_margins(reader, [missed, hit, alone])
    assert margins[1] == 11.0  # read, the gold passage gives its span's margin
    assert margins[0] < margins[1]  # the missed question is read over what was found
    assert margins[2] == float("-inf")  # nothing retrieved, nothing to read


def test_a_record_whose_retrieval_missed_the_answer_adds_the_gold_passage_marked() -> None:
    from types import SimpleNamespace

    from fathom.core.base import Chunk, Hit
    from fathom.learn.reader_data import _record

    text = "Alder Reach is a port town.\n\nIts harbour opened in 1871."
    docs = {"Alder_Reach": text}
    raw = {
        "doc_ids": ["Alder_Reach"],
        "answers": ["1871"],
        "answer_starts": [text.index("1871")],
        "para_char_start": text.index("Its"),
        "para_char_end": len(text),
    }
    q = SimpleNamespace(qid="q1", question="When?", answers=("1871",), unanswerable=False)
    elsewhere = Chunk("c1", "Alder_Reach", text[:27], 0, 27, 1, 1, "", 0, 0)
    record = _record(q, raw, docs, [Hit(chunk=elsewhere, score=1.0)])
    first, second = record["passages"]
    assert first["inserted"] and first["text"] == text[raw["para_char_start"] :]
    at = first["text"].index("1871")
    assert first["spans"] == [(at, at + 4)]
    assert not second.get("inserted") and second["spans"] == []
    holding = Chunk("c2", "Alder_Reach", text, 0, len(text), 1, 1, "", 0, 0)
    (only,) = _record(q, raw, docs, [Hit(chunk=holding, score=1.0)])["passages"]
    assert not only.get("inserted") and only["spans"]
