"""The reader's training passages: a half's questions are searched within that half's documents
only, and ``--squad``'s articles join training by their training half while their other half
fits the abstention bar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.learn.questions import document_half

COLOURS = ["red", "blue", "green", "white", "black", "yellow", "grey", "amber"]


def _articles() -> list[dict]:
    """Eight port towns, alike enough that a search for one finds the others too."""
    out = []
    for i, colour in enumerate(COLOURS):
        name = f"Harbour Town {i}"
        context = (
            f"{name} is a port town on the coast. Its harbour opened in 18{i}1. "
            f"The lighthouse of {name} is painted {colour}."
        )
        start = context.index(colour)
        qas = [
            {
                "id": f"q{i}",
                "question": f"What colour is the lighthouse of {name}?",
                "answers": [{"text": colour, "answer_start": start}],
                "is_impossible": False,
            },
            {
                "id": f"u{i}",
                "question": f"Who painted the lighthouse of {name}?",
                "answers": [],
                "is_impossible": True,
            },
        ]
        out.append({"title": f"Harbour_Town_{i}", "paragraphs": [{"context": context, "qas": qas}]})
    return out


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    halves = {document_half(a["title"], 0) for a in _articles()}
    assert halves == {"train", "test"}  # the fixture needs documents on both halves
    path = tmp_path / "train-v2.0.json"
    path.write_text(json.dumps({"version": "v2.0", "data": _articles()}), encoding="utf-8")
    return path


def _docs(path: Path) -> set[str]:
    with open(path, encoding="utf-8") as f:
        return {p["doc"] for line in f for p in json.loads(line)["passages"]}


def test_a_half_is_searched_within_its_own_documents(squad_file: Path, tmp_path: Path) -> None:
    from fathom.learn.reader_calibrate import squad_set
    from fathom.learn.reader_data import collect

    folder = squad_set(squad_file, 8, tmp_path / "towns")
    work = tmp_path / "work"
    titles = {a["title"] for a in _articles()}
    for half in ("train", "test"):
        mine = {t for t in titles if document_half(t, 0) == half}
        seen = _docs(collect(folder.parent, folder.name, half, work))
        assert seen and seen <= mine, half  # not one passage of the other half
    # over every document, a question's candidates reach other towns, of both halves
    every = _docs(collect(folder.parent, folder.name, "all", work))
    assert every == titles


def test_squad_articles_train_on_one_half_and_fit_the_bar_on_the_other(
    squad_file: Path, tmp_path: Path
) -> None:
    from fathom.learn.reader import _parser, load_records, squad_folder, squad_half_records

    data = tmp_path / "data"
    argv = ["--data", str(data), "--work", str(tmp_path / "work"), "--squad", str(squad_file)]
    args = _parser().parse_args([*argv, "--squad-articles", "8"])
    folder = squad_folder(args, [])
    assert folder.name == "train-v2.0-8"
    trained = load_records([folder], "train", args.work)
    held, about = squad_half_records(args, folder)
    train_docs = {t["title"] for t in _articles() if document_half(t["title"], 0) == "train"}
    assert {r["set"] for r in trained + held} == {"train-v2.0-8"}
    assert _docs(args.work / "train-v2.0-8-train.jsonl") <= train_docs
    assert not _docs(args.work / "train-v2.0-8-test.jsonl") & train_docs
    assert len(trained) + len(held) == 16  # every question, on one side only
    assert not {r["qid"] for r in trained} & {r["qid"] for r in held}
    assert any(r["unanswerable"] for r in held) and any(not r["unanswerable"] for r in held)
    assert about["source"] == "train-v2.0.json" and about["half"] == "test"
    assert about["articles"] == 8 and about["questions"] == len(held)
    assert not set(about["documents"]) & train_docs and about["documents"]

    # articles a training set holds too are refused, as calibration questions or as --squad
    from fathom.learn.reader import calibration_records

    again = _parser().parse_args([*argv, "--calibration", str(squad_file)])
    with pytest.raises(SystemExit, match="--calibration shares documents"):
        calibration_records(again, [], folder)
    (data / "one").mkdir(parents=True)
    row = {"doc_id": "Harbour_Town_3", "title": "Harbour Town 3", "text": "x"}
    (data / "one" / "docs.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="Harbour_Town_3"):
        squad_folder(args, ["one"])
