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


def test_squad_training_articles_skip_the_sets_titles_and_the_calibration_articles(
    squad_file: Path, tmp_path: Path
) -> None:
    from fathom.learn.reader import _parser, squad_folder, squad_train_folder, squad_train_records

    # a training file: the eight towns again, and four more towns none of the sets holds
    more = json.loads(squad_file.read_text(encoding="utf-8"))["data"]
    for i in range(8, 12):
        article = json.loads(json.dumps(more[i % 8]).replace(f"Town {i % 8}", f"Town {i}"))
        article["title"] = f"Harbour_Town_{i}"
        for qa in article["paragraphs"][0]["qas"]:
            qa["id"] = f"{qa['id']}-{i}"
        more.append(article)
    train_file = tmp_path / "train-v1.1.json"
    train_file.write_text(json.dumps({"version": "1.1", "data": more}), encoding="utf-8")
    data = tmp_path / "data"
    (data / "one").mkdir(parents=True)
    row = {"doc_id": "h-9", "title": "Harbour Town 9", "text": "x"}  # a set's document, by title
    (data / "one" / "docs.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    argv = ["--data", str(data), "--work", str(tmp_path / "work"), "--squad", str(squad_file)]
    extra = ["--squad-train", str(train_file), "--squad-train-articles", "2"]
    args = _parser().parse_args([*argv, "--squad-articles", "8", *extra])
    squad = squad_folder(args, ["one"])
    folder = squad_train_folder(args, ["one"], squad)
    assert folder.name == "train-v1.1-train-2"
    records = squad_train_records(folder, args.work)
    # the calibration file's eight towns and the set's town 9 are skipped: towns 8 and 10
    assert _docs(args.work / "train-v1.1-train-2-all.jsonl") == {
        "Harbour_Town_8",
        "Harbour_Town_10",
    }
    assert {r["qid"] for r in records} == {"q0-8", "u0-8", "q2-10", "u2-10"}
    assert all(r["negatives"] == 1 and r["set"] == folder.name for r in records)


def _lighthouse_record() -> dict:
    """A training record: one passage answers (its span marked), the others are negatives."""
    towns = [f"Port {c.title()} lies on the coast and its lighthouse is {c}." for c in COLOURS]
    answer = {"text": towns[0], "spans": [(towns[0].index("red"), towns[0].index("red") + 3)]}
    return {
        "qid": "q",
        "set": "s",
        "question": "What colour is the lighthouse of Port Red?",
        "answers": ["red"],
        "unanswerable": False,
        "passages": [answer, *({"text": t, "spans": []} for t in towns[1:])],
    }


def test_a_record_may_ask_for_fewer_negatives() -> None:
    import random

    from fathom.index.embed import packaged_minilm_dir
    from fathom.index.reader import load_tokenizer
    from fathom.learn.reader_examples import NEGATIVES, epoch_examples

    tok = load_tokenizer(packaged_minilm_dir() / "tokenizer.json")
    record = _lighthouse_record()
    rng = random.Random(0)
    assert len(epoch_examples(tok, [record], rng, {})) == 1 + NEGATIVES
    fewer = epoch_examples(tok, [{**record, "qid": "r", "negatives": 1}], rng, {})
    assert len(fewer) == 2 and sorted(e.relevant for e in fewer) == [0.0, 1.0]


def test_a_run_from_another_runs_checkpoint_starts_from_its_weights(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch
    from fathom.learn.reader import CHECKPOINT, _parser, _save, build_model, train

    first = build_model(1)
    with torch.no_grad():
        first.relevance.bias.fill_(3.0)
    opt = torch.optim.AdamW(first.parameters())
    ckpt = tmp_path / "first" / CHECKPOINT
    ckpt.parent.mkdir()
    _save(ckpt, first, opt, 7, {"seconds": 1.5, "examples": 112, "epochs": 1})
    args = _parser().parse_args(
        ["--layers", "1", "--steps", "0", "--work", str(tmp_path / "work"), "--init", str(ckpt)]
    )
    model, state = train(args, [])
    assert model.relevance.bias.item() == 3.0
    assert state["init"] == {
        "checkpoint": CHECKPOINT,
        "steps": 7,
        "seconds": 1.5,
        "examples": 112,
        "epochs": 1,
    }
    again = ["--layers", "1", "--steps", "0", "--work", str(tmp_path / "again")]
    fresh, _ = train(_parser().parse_args(again), [])
    assert fresh.relevance.bias.item() != 3.0


def test_a_chain_of_runs_is_recorded_and_init_may_not_be_the_runs_own_checkpoint(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch")
    import torch
    from fathom.learn.reader import CHECKPOINT, CONTINUED, _parser, _save, build_model, train

    first = build_model(1)
    opt = torch.optim.AdamW(first.parameters())
    ckpt = tmp_path / "first" / CHECKPOINT
    ckpt.parent.mkdir()
    _save(ckpt, first, opt, 7, {"seconds": 1.5, "examples": 112, "epochs": 1})
    record = _lighthouse_record()
    work = tmp_path / "work"
    work.mkdir()
    second = ["--layers", "1", "--steps", "2", "--batch", "2", "--work", str(work)]
    train(_parser().parse_args([*second, "--init", str(ckpt)]), [record])
    # the second run's own checkpoint carries the record of the run it started from
    third_init = tmp_path / "second.pt"
    third_init.write_bytes((work / CONTINUED).read_bytes())
    third = ["--layers", "1", "--steps", "0", "--work", str(tmp_path / "third")]
    _, state = train(_parser().parse_args([*third, "--init", str(third_init)]), [])
    assert state["init"]["checkpoint"] == "second.pt" and state["init"]["steps"] == 2
    assert state["init"]["init"]["checkpoint"] == CHECKPOINT
    assert state["init"]["init"]["steps"] == 7
    # a run from the checkpoint it would overwrite is refused before it starts
    with pytest.raises(SystemExit, match="copy it elsewhere"):
        train(_parser().parse_args([*second, "--init", str(work / CONTINUED)]), [])


def test_a_run_from_a_reader_folder_starts_from_its_dequantized_weights(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import numpy as np
    import torch
    from fathom.learn.reader import _parser, build_model, export, train
    from fathom.learn.reader_onnx import dequantized_weights

    shipped = build_model(1)
    with torch.no_grad():
        shipped.relevance.bias.fill_(3.0)
        shipped.span.weight.mul_(5.0)
    record = {"layers": 1, "training": {"steps": 9, "seed": 4}}
    folder = export(shipped, tmp_path / "shipped", record)
    weights = dequantized_weights(folder / "model.int8.onnx")
    state = shipped.state_dict()
    assert set(weights) == set(state)
    for name, value in weights.items():  # int8 per channel: within a step of the original
        original = state[name].numpy()
        step = np.abs(original).max() / 100
        assert value.shape == original.shape and np.abs(value - original).max() <= step, name
    args = _parser().parse_args(
        ["--layers", "1", "--steps", "0", "--work", str(tmp_path / "work"), "--init", str(folder)]
    )
    model, run = train(args, [])
    assert model.relevance.bias.item() == 3.0
    got = model.span.weight.detach().numpy()
    assert np.allclose(got, shipped.span.weight.detach().numpy(), atol=np.abs(got).max() / 100)
    assert run["init"]["reader"] == "shipped" and run["init"]["dequantized"] is True
    assert run["init"]["steps"] == 9 and len(run["init"]["sha256"]) == 64
    # a folder holding another network's graph is refused with the names that do not match
    deeper = _parser().parse_args(
        ["--layers", "2", "--steps", "0", "--work", str(tmp_path / "w2"), "--init", str(folder)]
    )
    with pytest.raises(SystemExit, match="does not match the reader network"):
        train(deeper, [])


def test_squad_articles_may_be_named_by_title(squad_file: Path, tmp_path: Path) -> None:
    from fathom.learn.reader import _parser, squad_folder

    titles = "Harbour_Town_5,Harbour Town 2"
    argv = ["--work", str(tmp_path / "work"), "--squad", str(squad_file), "--squad-titles", titles]
    folder = squad_folder(_parser().parse_args(argv), [])
    assert folder.name == "train-v2.0-titles-2"
    with open(folder / "docs.jsonl", encoding="utf-8") as f:
        assert [json.loads(line)["doc_id"] for line in f] == ["Harbour_Town_5", "Harbour_Town_2"]
    missing = [*argv[:-1], "Harbour_Town_5,Harbour_Town_77"]
    with pytest.raises(SystemExit, match="Harbour_Town_77"):
        squad_folder(_parser().parse_args(missing), [])


def test_squad_training_articles_may_skip_only_the_test_halves_titles(
    squad_file: Path, tmp_path: Path
) -> None:
    from fathom.learn.reader import _parser, squad_train_folder

    towns = {document_half(f"Harbour_Town_{i}", 0): i for i in range(8)}
    data = tmp_path / "data"
    (data / "one").mkdir(parents=True)
    rows = [
        {"doc_id": f"Harbour_Town_{i}", "title": f"Harbour Town {i}", "text": "x"}
        for i in towns.values()
    ]
    (data / "one" / "docs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    question = {"qid": "q", "question": "Which town?", "answers": ["x"]}
    question["doc_ids"] = [f"Harbour_Town_{towns['train']}"]
    (data / "one" / "questions.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    argv = ["--data", str(data), "--work", str(tmp_path / "work"), "--squad-train", str(squad_file)]
    argv += ["--squad-train-articles", "8"]

    def trained(*extra: str) -> set[str]:
        folder = squad_train_folder(_parser().parse_args([*argv, *extra]), ["one"], None)
        with open(folder / "docs.jsonl", encoding="utf-8") as f:
            return {json.loads(line)["doc_id"] for line in f}

    every = trained()
    assert f"Harbour_Town_{towns['train']}" not in every
    assert f"Harbour_Town_{towns['test']}" not in every and len(every) == 6
    test_only = trained("--squad-train-skip", "test-documents")
    assert f"Harbour_Town_{towns['train']}" in test_only
    assert f"Harbour_Town_{towns['test']}" not in test_only and len(test_only) == 7


def test_grouped_examples_keep_each_questions_windows_together() -> None:
    import random

    import numpy as np
    from fathom.index.embed import packaged_minilm_dir
    from fathom.index.reader import load_tokenizer
    from fathom.learn.reader_examples import NEGATIVES, batch, epoch_examples, take

    tok = load_tokenizer(packaged_minilm_dir() / "tokenizer.json")
    records = [{**_lighthouse_record(), "qid": f"q{i}"} for i in range(5)]
    flat = epoch_examples(tok, records, random.Random(3), {})
    grouped = epoch_examples(tok, records, random.Random(3), {}, grouped=True)
    # the same draws, in the question's order: each question's positive first, then negatives
    assert sorted(e.ids.tobytes() for e in flat) == sorted(e.ids.tobytes() for e in grouped)
    size = 1 + NEGATIVES
    for g in range(5):
        mine = grouped[g * size : (g + 1) * size]
        assert {e.group for e in mine} == {g}
        assert [e.relevant for e in mine] == [1.0] + [0.0] * NEGATIVES
    # a batch of 4 is cut at the end of the question the fourth window belongs to
    first, rest = take(grouped, 4)
    assert len(first) == 2 * size and first[-1].group != rest[0].group
    assert take(grouped, len(grouped) + 5) == (grouped, [])
    assert len(take(grouped, 4, whole=False)[0]) == 4  # ungrouped batches cut anywhere
    # the group term decodes over passage text only, as the runtime marks it: no question, no [SEP]
    b = batch(grouped[:size])
    last = b["attention_mask"].sum(axis=1) - 1
    assert b["passage"].any(axis=1).all() and not (b["passage"] & (b["token_type_ids"] == 0)).any()
    assert not b["passage"][np.arange(size), last].any()


def test_the_group_loss_puts_the_gold_span_over_the_other_windows_best() -> None:
    pytest.importorskip("torch")
    import numpy as np
    import torch
    from fathom.index.reader import best_spans
    from fathom.learn.reader_loss import best_margins, group_loss

    torch.manual_seed(0)
    start = torch.randn(4, 12, requires_grad=True)
    end = torch.randn(4, 12, requires_grad=True)
    passage = torch.zeros(4, 12, dtype=torch.bool)
    passage[:, 3:11] = True
    want = best_spans(start.detach().numpy(), end.detach().numpy(), passage.numpy())[2]
    assert np.allclose(best_margins(start, end, passage).detach().numpy(), want, atol=1e-5)
    t = {
        "start": torch.tensor([4, 0, 0, 0]),
        "end": torch.tensor([6, 0, 0, 0]),
        "relevant": torch.tensor([1.0, 0.0, 0.0, 0.0]),
        "group": torch.tensor([0, 0, 0, 1]),  # question 1 has no positive: no term
        "passage": passage,
    }
    loss = group_loss(start, end, t)
    gold = start[0, 4] + end[0, 6] - start[0, 0] - end[0, 0]
    best = best_margins(start, end, passage)
    expect = torch.logsumexp(torch.stack([gold, best[1], best[2]]), 0) - gold
    assert torch.isclose(loss, expect)
    loss.backward()
    assert start.grad[0, 4] < 0 and end.grad[0, 6] < 0  # the gold span rises
    assert start.grad[0, 0] > 0  # and its window's no-answer falls
    assert start.grad[3].abs().sum() == 0  # the question without a positive teaches nothing
    flat = {k: v[3:] for k, v in t.items()}
    assert group_loss(start[3:], end[3:], flat).item() == 0.0


def test_a_run_with_the_group_loss_trains_on_whole_questions(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from fathom.learn.reader import _parser, train

    records = [{**_lighthouse_record(), "qid": f"q{i}"} for i in range(4)]
    argv = ["--layers", "1", "--steps", "2", "--batch", "4", "--work", str(tmp_path)]
    args = _parser().parse_args([*argv, "--group-loss", "0.5"])
    _, state = train(args, records)
    assert state["examples"] == 2 * 6  # two questions' three windows a step, none split
