"""Fathom against LlamaIndex and txtai on MMLongBench-Doc's PDFs: the share of answerable
questions whose context holds an evidence page, at equal context tokens.

Questions: MMLongBench-Doc's text-only, answerable ones (``answer_format`` not "None") on one
half of the documents, selected as bench/mmlongbench.py selects them (``--split test``, seed 0).
A context holds an evidence page when one of its chunks comes from one of the question's
(1-based) ``evidence_pages``. Context tokens are MiniLM tokens of the chunks' texts. Systems:

- Fathom as ``ask`` reads it: the sources (every passage given to the answerer, reranked, at
  the depth ``ask`` picked) of a finished bench/mmlongbench.py run (``--mmlb-work DIR``, the
  variant folder: ``DIR/answers.jsonl``, collections in ``DIR/home``).
- Fathom at fixed k: the same collections searched with Fathom's hybrid retrieval (no
  reranking), default k 10 (``retrieval.k``).
- LlamaIndex as it ingests PDFs by default: ``SimpleDirectoryReader`` (pypdf, one Document per
  page), ``VectorStoreIndex`` with the default ``SentenceSplitter`` and the packaged MiniLM,
  one index per document, retriever top 2 (its default).
- txtai: its ``Textractor`` pipeline has no backend that runs offline (``TEXTRACTOR_NOTE``),
  so it is given the per-page text LlamaIndex's reader extracts (read again for it), then
  ``Segmentation(paragraphs=True)`` and ``Embeddings(path=MODEL, content=True, hybrid=True)``
  as txtai-default in bench/peers.py, search limit 3 (its setting there), each segment keeping
  its page.

Comparisons, per question: a peer at Fathom-``ask``'s tokens (the peer's ranked chunks in order
until their tokens reach Fathom's, the crossing chunk included: the peer never gets fewer), and
Fathom's fixed-k search at each peer's default context (Fathom's ranked chunks while they stay
within the peer's tokens: Fathom never gets more). Differences Fathom − peer with 95 %
bootstrap intervals over questions and over documents (resampled with their questions); Fathom
is "ahead" when the lower bound over documents is above zero. Each system's ingest (wall
seconds: reading the PDF, then building the index) is a side table. Indexes are kept under
``--work`` (a rerun reuses them, with the timings of the run that built them). Every system runs
in a child process with ``--threads`` threads; HF_HUB_OFFLINE=1, nothing is downloaded.

    FATHOM_DATA=… python bench/peers_pdf.py --mmlb-work WORK/default [--split test]
        [--systems fathom,llamaindex,txtai] [--threads 2] [--work runs/peers-pdf] [--out DIR]

``WORK/default`` is made by ``python bench/mmlongbench.py --split test --variants default
--work WORK``. Needs ``pip install -e ".[bench]"`` and llama-index-readers-file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    command_line,
    data_dir,
    log,
    machine_info,
    read_jsonl,
    write_results,
)
from fathom.bench.mmlongbench import DATASET, load_questions, pages_of, select_questions
from fathom.bench.support.peers_pdf_match import (
    by_type,
    holds_page,
    paired,
    share,
    take_until,
    take_within,
    tokens_of,
)

SYSTEMS = ("fathom", "llamaindex", "txtai")
DEFAULT_K = {"fathom": 10, "llamaindex": 2, "txtai": 3}
# How deep each system's ranking is read: past the largest context a comparison gives it.
DEPTH = {"fathom": 100, "llamaindex": 60, "txtai": 200}
TEXTRACTOR_NOTE = (
    "txtai's Textractor picks its first available backend: Tika when Java and the tika package "
    "are there (tika-python then downloads the Tika server jar on first use), else Docling "
    "(downloads its layout models from the Hugging Face Hub on first use), else LiteParse; "
    "with none installed (txtai as `fathom[bench]` installs it) it reads the PDF's raw bytes "
    "as text. Offline, neither Tika nor Docling can run (tried with the tika package "
    "installed: Textractor chose Tika, and the jar's download failed), so txtai is given the "
    "per-page text LlamaIndex's default reader extracts."
)


# ---------------------------------------------------------------------------------------------
# Contexts
# ---------------------------------------------------------------------------------------------


def ask_context(answer: dict[str, Any], counter) -> list[list[Any]]:
    """Fathom-``ask``'s context: each source given to the answerer as ``[pages, tokens]``."""
    sources = answer.get("sources") or []
    counts = counter.count([s.get("text") or "" for s in sources]) if sources else []
    return [[sorted(pages_of(s.get("pages", ""))), c] for s, c in zip(sources, counts, strict=True)]


def contexts(ask: list, ranked: dict[str, list]) -> dict[str, list]:
    """One question's contexts: each system at its default k, and the token-matched ones."""
    f, li, tx = ranked["fathom"], ranked["llamaindex"], ranked["txtai"]
    own = {
        "fathom-ask": ask,
        "fathom@10": f[: DEFAULT_K["fathom"]],
        "llamaindex@2": li[: DEFAULT_K["llamaindex"]],
        "txtai@3": tx[: DEFAULT_K["txtai"]],
    }
    return own | {
        "llamaindex@ask-tokens": take_until(li, tokens_of(ask)),
        "txtai@ask-tokens": take_until(tx, tokens_of(ask)),
        "fathom@llamaindex-tokens": take_within(f, tokens_of(own["llamaindex@2"])),
        "fathom@txtai-tokens": take_within(f, tokens_of(own["txtai@3"])),
    }


# (name, Fathom's context, the peer's context, what the tokens are matched to)
COMPARISONS = (
    ("Fathom ask vs LlamaIndex", "fathom-ask", "llamaindex@ask-tokens", "peer at Fathom's tokens"),
    ("Fathom ask vs txtai", "fathom-ask", "txtai@ask-tokens", "peer at Fathom's tokens"),
    (
        "Fathom search vs LlamaIndex top 2",
        "fathom@llamaindex-tokens",
        "llamaindex@2",
        "Fathom within the peer's tokens",
    ),
    (
        "Fathom search vs txtai top 3",
        "fathom@txtai-tokens",
        "txtai@3",
        "Fathom within the peer's tokens",
    ),
)


def score_rows(questions: list[dict], asks: dict[str, list], ranked: dict[str, dict]) -> list:
    """Each answerable question's row: its document and type, for every context whether it
    holds an evidence page and its tokens, and which systems read any text of the document."""
    rows = []
    for q in questions:
        mine = {s: ranked[s][q["qid"]] for s in SYSTEMS}
        ctx = contexts(asks[q["qid"]], mine)
        evidence = q.get("evidence_pages") or []
        rows.append(
            {
                "qid": q["qid"],
                "doc_id": q["doc_id"],
                "doc_type": q.get("doc_type") or "",
                "hit": {k: float(holds_page(c, evidence)) for k, c in ctx.items()},
                "tokens": {k: tokens_of(c) for k, c in ctx.items()},
                "chunks": {k: len(c) for k, c in ctx.items()},
                "has_text": {s: tokens_of(r) > 0 for s, r in mine.items()},
            }
        )
    return rows


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pair_on(rows: list[dict], mine: str, theirs: str) -> dict[str, Any]:
    """``paired`` of two contexts' hits on ``rows``."""
    return paired(
        [r["hit"][mine] for r in rows],
        [r["hit"][theirs] for r in rows],
        [r["doc_id"] for r in rows],
    )


def compare(rows: list[dict], mine: str, theirs: str) -> dict[str, Any]:
    """Fathom's context ``mine`` against the peer's ``theirs`` on ``rows``: ``paired``, mean
    tokens of both sides, shares by document type, and the same pairing on the questions
    whose PDF the peer read any text of."""
    peer = theirs.split("@")[0]
    f = [r["hit"][mine] for r in rows]
    p = [r["hit"][theirs] for r in rows]
    types = [r["doc_type"] for r in rows]
    read = [r for r in rows if r["has_text"][peer]]
    return pair_on(rows, mine, theirs) | {
        "fathom_context": mine,
        "peer_context": theirs,
        "fathom_mean_tokens": mean([r["tokens"][mine] for r in rows]),
        "peer_mean_tokens": mean([r["tokens"][theirs] for r in rows]),
        "fathom_by_doc_type": by_type(f, types),
        "peer_by_doc_type": by_type(p, types),
        "peer_read_text": pair_on(read, mine, theirs) if read else None,
    }


def summarise(rows: list[dict]) -> dict[str, Any]:
    """Every context's share and mean tokens (overall and by type), the questions whose PDF
    each system read no text of, and the comparisons."""
    types = [r["doc_type"] for r in rows]
    out: dict[str, Any] = {"contexts": {}, "comparisons": {}}
    for key in rows[0]["hit"] if rows else ():
        hits = [r["hit"][key] for r in rows]
        out["contexts"][key] = {
            "evidence": share(hits),
            "by_doc_type": by_type(hits, types),
            "mean_tokens": mean([r["tokens"][key] for r in rows]),
            "mean_chunks": mean([r["chunks"][key] for r in rows]),
        }
    out["no_text"] = {}
    for s in SYSTEMS:
        unread = [r for r in rows if not r["has_text"][s]]
        names = sorted({r["doc_id"] for r in unread})
        out["no_text"][s] = {"questions": len(unread), "documents": len(names), "doc_ids": names}
    for name, mine, theirs, matched in COMPARISONS:
        out["comparisons"][name] = compare(rows, mine, theirs) | {"matched": matched}
    return out


# ---------------------------------------------------------------------------------------------
# Running the systems
# ---------------------------------------------------------------------------------------------


def run_system(system: str, jobs: dict[str, Any], work: Path, threads: int) -> dict[str, Any]:
    """One system's child process over every document: its output and the process's wall,
    CPU seconds and peak RSS."""
    from fathom.bench.peers import child_env, run_measured

    spec = work / "logs" / f"{system}.spec.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps(jobs | {"depth": DEPTH[system]}))
    log(f"{system}: indexing and searching")
    out = work / "logs" / f"{system}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "_run", system, str(spec), str(out)]
    env = child_env(threads, work / "fathom-home")
    process = run_measured(cmd, env, work, work / "logs" / system)
    return json.loads(out.read_text()) | {"process": process}


def ingest_table(runs: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Per system: documents, chunks, and the seconds spent reading PDFs and building indexes
    (summed over documents), and how many indexes were kept from an earlier run."""
    out = {}
    for system, run in runs.items():
        docs = run["documents"].values()
        out[system] = {
            "documents": len(docs),
            "chunks": sum(d["units"] for d in docs),
            "read_s": sum(d["read_s"] for d in docs),
            "build_s": sum(d["build_s"] for d in docs),
            "kept": sum(bool(d.get("cached")) for d in docs),
            "process": run["process"],
        }
        if "textractor_backend" in run:
            out[system]["textractor_backend"] = run["textractor_backend"]
    return out


def jobs_for(questions: list[dict], folder: Path, work: Path, mmlb: Path, threads: int) -> dict:
    """The spec every system's child reads: each document with its questions."""
    by_doc: dict[str, list[dict[str, str]]] = {}
    for q in questions:
        by_doc.setdefault(q["doc_id"], []).append({"qid": q["qid"], "question": q["question"]})
    return {
        "documents": [
            {"doc_id": d, "pdf": str(folder / "documents" / d), "questions": qs}
            for d, qs in by_doc.items()
        ],
        "work": str(work),
        "mmlb_home": str(mmlb / "home"),
        "threads": threads,
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from fathom.bench.peers import versions as peer_versions

    out = peer_versions()
    for pkg in ("llama-index-readers-file", "pypdf", "fathom"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def rerun_command(argv: list[str]) -> str:
    """The command that made the results, the MMLongBench run's folder written ``WORK/default``."""
    kept, args = [], iter(argv)
    for a in args:
        if a == "--mmlb-work":
            next(args, None)
            kept += [a, "WORK/default"]
        elif a.startswith("--mmlb-work="):
            kept.append("--mmlb-work=WORK/default")
        else:
            kept.append(a)
    return "FATHOM_DATA=… " + command_line(kept, __file__, leave_out=("--note",))


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the data folder (default: FATHOM_DATA)")
    done = "a finished bench/mmlongbench.py variant folder (answers.jsonl, home/)"
    ap.add_argument("--mmlb-work", type=Path, required=True, help=done)
    ap.add_argument("--split", choices=("train", "test", "all"), default="test")
    ap.add_argument("--seed", type=int, default=0, help="the split's seed")
    ap.add_argument("--docs", type=int, default=None, help="only the first N documents")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "peers-pdf", help="indexes")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "peers-pdf")
    ap.add_argument("--note", default="", help="a line for results.md: how the run went")
    return ap.parse_args(argv)


def answerable(folder: Path, split: str, seed: int, docs: int | None) -> list[dict[str, Any]]:
    """The answerable text-only questions of ``split`` (of its first ``docs`` documents)."""
    questions = select_questions(load_questions(folder), split, seed)
    questions = [q for q in questions if q["answer_format"] != "None"]
    if docs:
        keep = list(dict.fromkeys(q["doc_id"] for q in questions))[:docs]
        questions = [q for q in questions if q["doc_id"] in keep]
    return questions


def read_answers(mmlb: Path, questions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The MMLongBench run's answers by qid; a SystemExit when one of ``questions`` has none."""
    answers = {r["qid"]: r for r in read_jsonl(mmlb / "answers.jsonl")}
    missing = [q["qid"] for q in questions if q["qid"] not in answers]
    if missing:
        raise SystemExit(f"{mmlb}/answers.jsonl has no answer for {len(missing)} questions")
    return answers


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_run":
        from fathom.bench.support.peers_pdf_systems import run

        system, spec, out = argv[1:]
        Path(out).write_text(json.dumps(run(system, json.loads(Path(spec).read_text()))))
        return 0
    args = parse_args(argv)
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    t0, machine = time.perf_counter(), machine_info() | {"threads": args.threads}
    folder = data_dir(args.data) / DATASET
    questions = answerable(folder, args.split, args.seed, args.docs)
    mmlb, work = args.mmlb_work.resolve(), args.work.resolve()
    answers = read_answers(mmlb, questions)
    n_docs = len({q["doc_id"] for q in questions})
    log(f"{args.split}: {len(questions)} answerable questions over {n_docs} documents")
    jobs = jobs_for(questions, folder, work, mmlb, args.threads)
    runs = {s: run_system(s, jobs, work, args.threads) for s in SYSTEMS}
    from fathom.bench.peers import model_path
    from fathom.chunking.tokens import token_counter_for

    counter = token_counter_for(model_path())
    asks = {q["qid"]: ask_context(answers[q["qid"]], counter) for q in questions}
    rows = score_rows(questions, asks, {s: r["ranked"] for s, r in runs.items()})
    results = {
        "machine": machine,
        "command": rerun_command(argv),
        "dataset": DATASET,
        "split": args.split,
        "seed": args.seed,
        "questions": len(questions),
        "documents": n_docs,
        "default_k": DEFAULT_K,
        "depth": DEPTH,
        "note": args.note,
        "textractor": TEXTRACTOR_NOTE,
        "ingest": ingest_table(runs),
        **summarise(rows),
        "per_question": rows,
        "versions": versions(),
        "total_s": time.perf_counter() - t0,
    }
    from fathom.bench.support.peers_pdf_report import markdown

    write_results(args.out, results, markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
