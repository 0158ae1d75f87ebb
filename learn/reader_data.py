"""The reader's training passages: each question of a set's training half with the passages
Fathom's own hybrid retrieval finds for it, the gold answer located in them.

For every question of ``--split`` (split by document, as ``fathom eval --split``) the set's
collection (``docs.jsonl``, ingested with the default configuration) is searched as ``ask``
searches it, within the documents of that half only (as ``ask --doc`` narrows a search), so no
passage of the other half's documents reaches training, not even as a negative; the top
``CANDIDATES`` chunks are kept with the gold answers' character spans
inside them: a chunk of a gold document whose range covers an answer's offsets (COVID-QA's
``answer_starts``; SQuAD's answer inside its ``para_char_start``–``para_char_end`` paragraph;
else, HotpotQA and MuSiQue, the answer text found in the gold document). When no retrieved
chunk holds the answer, the gold passage itself is added first, marked ``"inserted"``, so every
answerable question teaches the span (what the answerer would read is the retrieved chunks
alone: the abstention bar is fitted on those). The other chunks are the hard negatives. One
JSON line per question, cached under ``--work`` by set and split.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

CANDIDATES = 20
GOLD_CONTEXT = 600  # characters either side of an answer when its passage is cut from the document


def gold_spans(raw: dict[str, Any], docs: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """The gold answers' character spans, by gold document."""
    answers = [a for a in raw.get("answers") or [] if a and a.strip()]
    out: dict[str, list[tuple[int, int]]] = {}
    for doc in raw.get("doc_ids") or []:
        text = docs.get(str(doc))
        if text is None:
            continue
        spans: list[tuple[int, int]] = []
        starts = raw.get("answer_starts") or []
        for a, s in zip(answers, starts, strict=False):
            if s is not None and s >= 0 and text[s : s + len(a)] == a:
                spans.append((s, s + len(a)))
        lo, hi = raw.get("para_char_start"), raw.get("para_char_end")
        if not spans and lo is not None and hi is not None:
            spans = [(at, at + len(a)) for a in answers if (at := text.find(a, lo, hi)) >= 0]
        if not spans and lo is None:
            spans = [(at, at + len(a)) for a in answers if (at := text.find(a)) >= 0]
        if spans:
            out[str(doc)] = sorted(set(spans))
    return out


def _passage(chunk: Any, spans: dict[str, list[tuple[int, int]]], docs: dict[str, str]):
    """A retrieved chunk as ``{"text", "spans"}``, the spans in the chunk's own characters."""
    from fathom.core.base import source_id

    doc = source_id(chunk)
    inside: list[tuple[int, int]] = []
    text = docs.get(doc, "")
    if doc in spans and text[chunk.char_start : chunk.char_end] == chunk.text:
        inside = [
            (s - chunk.char_start, e - chunk.char_start)
            for s, e in spans[doc]
            if chunk.char_start <= s and e <= chunk.char_end
        ]
    return {"text": chunk.text, "spans": inside, "doc": doc}


def _gold_passage(raw: dict[str, Any], spans: dict[str, list[tuple[int, int]]], docs):
    """The gold paragraph (SQuAD) or the text around the first answer, with its spans."""
    doc, found = next(iter(spans.items()))
    text = docs[doc]
    lo, hi = raw.get("para_char_start"), raw.get("para_char_end")
    if lo is None or hi is None:
        s, e = found[0]
        lo, hi = max(0, s - GOLD_CONTEXT), min(len(text), e + GOLD_CONTEXT)
    inside = [(s - lo, e - lo) for s, e in found if lo <= s and e <= hi]
    return {"text": text[lo:hi], "spans": inside, "doc": doc, "inserted": True}


def collect(data: Path, name: str, split: str, work: Path, seed: int = 0) -> Path:
    """Search every ``split`` question of set ``name`` within that half's documents (``all``:
    every question over every document, for a set none of whose documents is in a training
    half); write ``work/<name>-<split>.jsonl``."""
    from fathom.core.config import load_config
    from fathom.index.doc_filter import select_sources
    from fathom.index.retrieve import open_retriever
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import half_documents, read_set, split_by_document

    out = work / f"{name}-{split}.jsonl"
    if out.is_file():
        return out
    work.mkdir(parents=True, exist_ok=True)
    cfg = load_config()
    docs, raw, questions = read_set(data / name, "all", seed)
    retriever = open_retriever(cfg, resolve_target(cfg, str(data / name / "docs.jsonl")))
    within = None
    if split != "all":
        half = half_documents(questions, docs, split, seed)
        within = select_sources(retriever.collection.manifest, half)
        questions = split_by_document(questions, split, seed)
    tmp = out.with_suffix(".tmp")
    t0 = time.perf_counter()
    with open(tmp, "w", encoding="utf-8") as f:
        for i, q in enumerate(questions, 1):
            hits = retriever.search(q.question, CANDIDATES, within=within)
            record = _record(q, raw[q.qid], docs, hits)
            if record is not None:
                f.write(json.dumps(record) + "\n")
            if i % 500 == 0:
                rate = i / (time.perf_counter() - t0)
                print(f"{name}: {i}/{len(questions)} ({rate:.1f}/s)", file=sys.stderr)
    tmp.replace(out)
    return out


def _record(q: Any, raw: dict[str, Any], docs: dict[str, str], hits: list[Any]):
    """One question's training record, or None when its answer cannot be located."""
    spans = {} if q.unanswerable else gold_spans(raw, docs)
    if not q.unanswerable and not spans:
        return None  # yes/no answers and answers not in the text teach no span
    passages = [_passage(h.chunk, spans, docs) for h in hits]
    if not q.unanswerable and not any(p["spans"] for p in passages):
        passages.insert(0, _gold_passage(raw, spans, docs))
    return {
        "qid": q.qid,
        "question": q.question,
        "answers": list(q.answers),
        "unanswerable": q.unanswerable,
        "passages": passages,
    }
