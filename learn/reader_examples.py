"""The reader's training windows, made from ``reader_data`` records with the runtime's encoder.

Each passage is cut into the windows ``fathom.index.reader.encode`` makes at query time. A
window that holds a whole gold span is a positive: relevance 1, the span's first and last
token as targets (an answer longer than ``MAX_ANSWER_TOKENS`` teaches relevance only). A
window with no gold span and no answer string is a negative: relevance 0, the answer at
``[CLS]`` (no answer). A window that cuts an answer in two teaches nothing. Per question and
epoch: one positive and ``NEGATIVES`` negatives (a record's ``negatives`` where it says)
drawn from the windows of the best-ranked passages (the hard ones); an unanswerable question
gives ``NEGATIVES`` negatives. Half the
questions (by a hash of their id) are cut into the reranker's shorter windows
(``RERANK_LENGTH``), the others into the answer reader's (``MAX_LENGTH``). For the loss over a
question's windows (``reader_loss.group_loss``) an epoch keeps each question's windows
together and ``take`` cuts batches between questions.
"""

from __future__ import annotations

import dataclasses
import random
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from fathom.index.reader import MAX_ANSWER_TOKENS, MAX_LENGTH, RERANK_LENGTH, Windows, encode

NEGATIVES = 2
HARD_POOL = 8  # negatives are drawn from the first this many negative windows, by rank
IGNORE = -100


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


@dataclass(slots=True)
class Example:
    """One window and its targets."""

    ids: np.ndarray
    types: np.ndarray
    passage: np.ndarray  # bool: the token is passage text (``Windows.passage``)
    start: int  # token index (0: no answer; IGNORE: relevance only)
    end: int
    relevant: float
    group: int = 0  # which question of the epoch it belongs to


def _targets(w: Windows, r: int, spans: list[tuple[int, int]]) -> tuple[str, int, int]:
    """``("pos", start, end)``, ``("neg", 0, 0)`` or ``("cut", …)`` for window ``r``."""
    tokens = np.flatnonzero(w.passage[r])
    if not len(tokens):
        return "cut", 0, 0
    lo, hi = int(w.starts[r, tokens[0]]), int(w.ends[r, tokens[-1]])
    for s, e in spans:
        if lo <= s and e <= hi:
            first = tokens[w.ends[r, tokens] > s][0]
            last = tokens[w.starts[r, tokens] < e][-1]
            if last - first >= MAX_ANSWER_TOKENS:
                return "pos", IGNORE, IGNORE
            return "pos", int(first), int(last)
    if any(s < hi and lo < e for s, e in spans):
        return "cut", 0, 0
    return "neg", 0, 0


def question_windows(tok: Any, record: dict[str, Any]) -> tuple[list[Example], list[Example]]:
    """A record's positive and negative windows, negatives in rank order."""
    passages = record["passages"]
    length = (MAX_LENGTH, RERANK_LENGTH)[zlib.crc32(record["qid"].encode()) % 2]
    w = encode(tok, record["question"], [p["text"] for p in passages], max_length=length)
    answers = [_norm(a) for a in record.get("answers") or [] if _norm(a)]
    pos: list[Example] = []
    neg: list[Example] = []
    for r in range(len(w)):
        p = passages[int(w.owner[r])]
        kind, s, e = _targets(w, r, [tuple(x) for x in p["spans"]])
        m = int(w.attention_mask[r].sum())
        ex = Example(
            w.input_ids[r, :m],
            w.token_type_ids[r, :m],
            w.passage[r, :m],
            s,
            e,
            1.0 if kind == "pos" else 0.0,
        )
        if kind == "pos":
            pos.append(ex)
        elif kind == "neg":
            tokens = np.flatnonzero(w.passage[r])
            text = _norm(p["text"][int(w.starts[r, tokens[0]]) : int(w.ends[r, tokens[-1]])])
            if not any(a in text for a in answers):  # an unlabelled answer is no negative
                neg.append(ex)
    return pos, neg


def epoch_examples(
    tok: Any,
    records: list[dict[str, Any]],
    rng: random.Random,
    cache: dict[str, Any],
    grouped: bool = False,
) -> list[Example]:
    """One epoch's examples: a positive and hard negatives per question, shuffled — or, when
    ``grouped``, each question's together (its positive first), the questions shuffled."""
    out: list[Example] = []
    groups: list[list[Example]] = []
    for rec in records:
        key = f"{rec['set']}/{rec['qid']}"
        if key not in cache:  # only the hard pool is ever drawn from: keep no more
            pos, neg = question_windows(tok, rec)
            cache[key] = pos, neg[:HARD_POOL]
        pos, neg = cache[key]
        if not pos and not rec["unanswerable"]:
            continue
        mine = [rng.choice(pos)] if pos else []
        mine += rng.sample(neg, min(rec.get("negatives", NEGATIVES), len(neg)))
        groups.append(mine)
    if grouped:
        rng.shuffle(groups)
    for g, mine in enumerate(groups):
        out.extend(dataclasses.replace(e, group=g) for e in mine)
    if not grouped:
        rng.shuffle(out)
    return out


def take(queue: list[Example], n: int, whole: bool = True) -> tuple[list[Example], list[Example]]:
    """The first ``n`` examples of ``queue`` and the rest; when ``whole``, the cut moved on
    past the end of the question it falls in, so that no question's windows are split
    between two batches."""
    cut = min(n, len(queue))
    while whole and 0 < cut < len(queue) and queue[cut].group == queue[cut - 1].group:
        cut += 1
    return queue[:cut], queue[cut:]


def batch(examples: list[Example]) -> dict[str, np.ndarray]:
    """Examples padded to the longest: ids, mask, types, start, end, relevant."""
    width = max(len(e.ids) for e in examples)
    n = len(examples)
    ids = np.zeros((n, width), dtype=np.int64)
    types = np.zeros((n, width), dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.int64)
    passage = np.zeros((n, width), dtype=bool)
    for i, e in enumerate(examples):
        m = len(e.ids)
        ids[i, :m], types[i, :m], mask[i, :m], passage[i, :m] = e.ids, e.types, 1, e.passage
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "passage": passage,
        "start": np.array([e.start for e in examples], dtype=np.int64),
        "end": np.array([e.end for e in examples], dtype=np.int64),
        "relevant": np.array([e.relevant for e in examples], dtype=np.float32),
        "group": np.array([e.group for e in examples], dtype=np.int64),
    }
