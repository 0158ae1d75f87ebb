"""The reader's abstention bar: the margin over no-answer under which the answerer marks its
span unsure (``Unsure:``; it abstains there only when no sentence supports an answer either).

Fitted on questions about documents the reader never trained on, with unanswerable questions
among them (the shipped reader: the first ten articles of SQuAD 2.0's training set,
``train-v2.0.json``, none of them an article of the dev subsets its training and test halves
come from; ``squad_set`` reads them). A model's margins on the articles it trained on run
higher than on unseen ones, so a bar fitted there withholds far more answers on new documents
than it was fitted to. Each question's first ``CONTEXT`` retrieved passages (``reader_data``
records, without the gold passage a record adds when retrieval missed the answer: the answerer
would not have it) are read as the extractive answerer reads its sources
(``stages.generate.span.read_span``, its margin whatever the bar), and the bar is the
``ANSWERABLE_ABSTAIN`` quantile of the answerable questions' best margins — about that share of
answerable questions then fall under it — reported with the share of unanswerable questions
under it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np

CONTEXT = 4
ANSWERABLE_ABSTAIN = 0.10
SAMPLE = 400  # questions of each kind


def title_key(title: str) -> str:
    """A document title as the sets spell it either way (``New_York_City``, ``New York City``)."""
    return " ".join(title.replace("_", " ").casefold().split())


def squad_set(
    path: Path,
    articles: int,
    folder: Path,
    exclude: frozenset[str] = frozenset(),
    titles: list[str] | None = None,
) -> Path:
    """The first ``articles`` articles of a SQuAD-format file (``train-v2.0.json``) whose titles
    (``title_key``) are not in ``exclude`` — or, given ``titles``, those articles in that order
    (refused if one is missing) — as a question set in ``folder``: ``docs.jsonl`` (an article a
    document, its paragraphs joined by a blank line, as the dev subsets are) and
    ``questions.jsonl`` (answers with their offsets in the document, ``is_impossible`` kept).
    Returns ``folder``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    if titles is not None:
        by_title = {title_key(a["title"]): a for a in data}
        absent = [t for t in titles if title_key(t) not in by_title]
        if absent:
            raise SystemExit(f"{Path(path).name} has no article titled {absent[:3]}")
        data = [by_title[title_key(t)] for t in titles]
    data = [a for a in data if title_key(a["title"]) not in exclude][:articles]
    docs, questions = [], []
    for article in data:
        doc_id = article["title"]
        text, spans = "", []
        for para in article["paragraphs"]:
            text += "\n\n" if text else ""
            spans.append((len(text), len(text) + len(para["context"])))
            text += para["context"]
        for index, para in enumerate(article["paragraphs"]):
            lo, hi = spans[index]
            for qa in para["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                starts = [lo + a["answer_start"] for a in qa["answers"]]
                questions.append(
                    {
                        "qid": qa["id"],
                        "question": qa["question"],
                        "answers": answers,
                        "answer_starts": starts,
                        "doc_ids": [doc_id],
                        "para_index": index,
                        "para_char_start": lo,
                        "para_char_end": hi,
                        "is_impossible": bool(qa.get("is_impossible")),
                    }
                )
        title = doc_id.replace("_", " ")
        docs.append({"doc_id": doc_id, "title": title, "text": text, "n_paragraphs": len(spans)})
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("docs.jsonl", docs), ("questions.jsonl", questions)):
        with open(folder / name, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    return folder


def shared_documents(folder: Path, data: Path, sets: list[str]) -> list[str]:
    """The documents of the set in ``folder`` that one of ``sets`` (under ``data``) holds too:
    a calibration set must share none with the data the reader is trained and tested on."""

    def ids(path: Path) -> set[str]:
        if not path.is_file():
            return set()
        with open(path, encoding="utf-8") as f:
            return {str(json.loads(line)["doc_id"]) for line in f if line.strip()}

    mine = ids(folder / "docs.jsonl")
    return sorted(mine & set().union(*(ids(data / name / "docs.jsonl") for name in sets)))


def set_titles(data: Path, sets: list[str], half: str | None = None) -> frozenset[str]:
    """Every document title (and id) of ``sets`` under ``data``, as ``title_key`` spells it;
    given ``half``, only those of the documents in that half (split by document, seed 0, as
    ``fathom eval --split`` splits them)."""
    from fathom.learn.questions import half_documents, load_questions

    out: set[str] = set()
    for name in sets:
        path = data / name / "docs.jsonl"
        if not path.is_file():
            continue
        with open(path, encoding="utf-8") as f:
            docs = [json.loads(line) for line in f if line.strip()]
        if half is not None:
            questions = load_questions(data / name / "questions.jsonl")
            keep = half_documents(questions, [str(d["doc_id"]) for d in docs], half, 0)
            docs = [d for d in docs if str(d["doc_id"]) in keep]
        for doc in docs:
            out |= {title_key(str(doc["doc_id"])), title_key(str(doc.get("title", "")))}
    return frozenset(out - {""})


def _hit(n: int, text: str) -> Any:
    from fathom.core.base import Chunk, Hit

    chunk = Chunk(f"c{n}", f"d{n}", text, 0, len(text), 1, 1, "", 0, 0)
    return Hit(chunk=chunk, score=1.0 / n)


def best_margins(reader: Any, records: list[dict[str, Any]]) -> np.ndarray:
    """Each record's best acceptable margin over its first ``CONTEXT`` passages."""
    from fathom.stages.generate.extractive import candidates
    from fathom.stages.generate.span import read_span

    out = []
    for rec in records:
        texts = [p["text"] for p in rec["passages"] if not p.get("inserted")][:CONTEXT]
        if not texts:
            out.append(float("-inf"))
            continue
        hits = [_hit(i, t) for i, t in enumerate(texts, 1)]
        _, margin = read_span(reader, rec["question"], hits, candidates(hits))  # any bar
        out.append(margin)
    return np.asarray(out, dtype=np.float64)


def fit_abstain(
    reader: Any, records: list[dict[str, Any]], seed: int = 0, data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The bar and what it does on the records' answerable and unanswerable questions;
    ``data`` describes where the records come from (kept in the fit's record)."""
    rng = random.Random(seed)
    answerable = [r for r in records if not r["unanswerable"]]
    unanswerable = [r for r in records if r["unanswerable"]]
    answerable = rng.sample(answerable, min(SAMPLE, len(answerable)))
    unanswerable = rng.sample(unanswerable, min(SAMPLE, len(unanswerable)))
    pos = best_margins(reader, answerable)
    neg = best_margins(reader, unanswerable)
    finite = pos[np.isfinite(pos)]
    bar = float(np.quantile(finite, ANSWERABLE_ABSTAIN)) if len(finite) else 0.0
    return {
        "abstain_below": round(bar, 4),
        "fit": {
            "answerable": len(pos),
            "unanswerable": len(neg),
            "abstain_answerable": round(float(np.mean(pos < bar)), 4) if len(pos) else None,
            "abstain_unanswerable": round(float(np.mean(neg < bar)), 4) if len(neg) else None,
            "quantile": ANSWERABLE_ABSTAIN,
            "context": CONTEXT,
            "seed": seed,
            **({"data": data} if data else {}),
        },
    }
