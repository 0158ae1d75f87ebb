"""The extractive answerer's candidates: every sentence of the sources, as the sentence
scorer, the reader's span and the summary read them, and their centrality.

Each chunk's sentences (split at ingestion, ``chunking.sentences``) are cut at paragraph breaks;
a short paragraph without final punctuation (or a label ending in a colon) is a heading —
context, never quoted — and so are questions and table rows; sentences that read as
instructions to a model are left out. ``textrank`` ranks candidates by centrality (TextRank
over IDF-weighted term vectors) for summaries.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from fathom.core.base import Chunk, Hit
from fathom.core.words import ANSWER_WORD, answer_terms
from fathom.stages.generate.sentence_scorer import Candidate

SUMMARY_DAMPING = 0.85

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b.{0,40}?"
    r"\b(?:instructions?|prompts?|rules|above|previous|prior|sources?|context|documents?)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions?\b|\bact as\b",
    re.IGNORECASE,
)
_TABLE_ROW = re.compile(r"^\||\s\|\s.*\s\|\s|\|\s*$")  # "a | b | c", "| a |"
_PARAGRAPH = re.compile(r"\S(?:.*\S)?(?:\n(?!\s*\n).*\S)*")

Parsed = tuple[str, frozenset[str], frozenset[str], bool, tuple[int, int], int]


def _sentences(chunk: Chunk) -> tuple[Parsed, ...]:
    """``(sentence, terms, words and numbers as written, quotable, span, place in its
    paragraph)`` for each sentence of a chunk, paragraph by paragraph, minus those that read as
    instructions to a model. A short paragraph without final punctuation (or a label ending in
    a colon) is a heading: context for what follows, never quoted."""
    from fathom.chunking.sentences import chunk_sentences

    return _parsed(chunk.text, tuple(chunk_sentences(chunk)))


def _is_heading(body: str) -> bool:
    n = len(body.split())
    stripped = body.rstrip()
    if stripped.endswith(":"):
        return n <= 4  # "Paragraph 1:", "Results:" label what follows
    return n <= 12 and not stripped.endswith((".", "!", "?"))


@lru_cache(maxsize=4096)
def _parsed(text: str, spans: tuple[tuple[int, int], ...]) -> tuple[Parsed, ...]:
    """``_sentences`` of ``text`` with sentence ``spans``, each cut at paragraph breaks."""
    out = []
    for para in _PARAGRAPH.finditer(text):
        heading = _is_heading(para.group())
        for lead, (a, b) in enumerate(_clipped(spans, para.start(), para.end())):
            # Compression marks dropped sentences with "…"; it is not part of a quote.
            sentence = " ".join(text[a:b].split()).strip(" …")
            if sentence and not _INJECTION.search(sentence):
                written = frozenset(ANSWER_WORD.findall(sentence)) | frozenset(
                    _NUMBER.findall(sentence)
                )
                # A question (an FAQ entry, a heading) or a table row is context, never an
                # answer.
                quotable = not (heading or sentence.endswith("?") or _TABLE_ROW.search(sentence))
                out.append((sentence, answer_terms(sentence), written, quotable, (a, b), lead))
    return tuple(out)


def _clipped(spans: tuple[tuple[int, int], ...], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``spans`` inside ``[start, end)`` (a sentence that runs across a paragraph
    break is two there), in order."""
    out = []
    for a, b in spans:
        a, b = max(a, start), min(b, end)
        if a < b:
            out.append((a, b))
    return out


def candidates(hits: list[Hit]) -> list[Candidate]:
    """Every sentence of ``hits`` in source order, as the scorer reads them."""
    out: list[Candidate] = []
    for n, hit in enumerate(hits, start=1):
        heading = answer_terms(hit.chunk.section) if hit.chunk.section else frozenset()
        parsed = _sentences(hit.chunk)
        previous: frozenset[str] = frozenset()
        for pos, (sentence, terms, written, quotable, span, lead) in enumerate(parsed):
            context = heading | previous
            out.append(
                Candidate(
                    n, pos, len(parsed), sentence, terms, written, quotable, context, span, lead
                )
            )
            previous = terms
    return out


def central(cands: list[Candidate], n: int) -> list[Candidate]:
    """The ``n`` most central of ``cands`` by ``textrank``, most central first."""
    rank = textrank(cands)
    order = sorted(range(len(cands)), key=lambda i: (-rank[i], cands[i].n, cands[i].pos))
    return [cands[i] for i in order[:n]]


def textrank(cands: list[Candidate]) -> Any:
    """Each candidate's centrality (an array summing to 1): TextRank (PageRank with damping
    ``SUMMARY_DAMPING``) over the cosine similarities of their IDF-weighted term vectors, its
    random jumps weighted 1 / (1 + place in its paragraph), as a paragraph's lead sentence tends
    to state what it is about."""
    import numpy as np

    if not cands:
        return np.zeros(0)
    df: dict[str, int] = {}
    for c in cands:
        for t in c.terms:
            df[t] = df.get(t, 0) + 1
    n = len(cands)
    idf = {t: math.log((1 + n) / (1 + d)) + 1.0 for t, d in df.items()}
    # Only terms two sentences share add to a dot product; every term counts in the norms.
    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []
    norms = np.zeros(n)
    for i, c in enumerate(cands):
        for t in c.terms:
            norms[i] += idf[t] ** 2
            if df[t] > 1:
                rows.append(i)
                cols.append(vocab.setdefault(t, len(vocab)))
                weights.append(idf[t])
    if n == 1 or not vocab:
        return np.full(n, 1.0 / n)
    # The unit term vectors as a sparse matrix M (row, column, value): the similarities are
    # M Mᵀ less its diagonal, applied to a vector without ever being formed (a long report
    # has thousands of sentences).
    r, k = np.array(rows), np.array(cols)
    norms = np.sqrt(norms)
    v = np.array(weights) / np.where(norms > 0, norms, 1.0)[r]
    self_sim = np.bincount(r, weights=v * v, minlength=n)

    def sim(x: Any) -> Any:
        per_term = np.bincount(k, weights=v * x[r], minlength=len(vocab))
        return np.bincount(r, weights=v * per_term[k], minlength=n) - self_sim * x

    degree = sim(np.ones(n))
    linked = degree > 1e-12
    jump = np.array([1.0 / (1 + c.lead) for c in cands])
    jump /= jump.sum()
    rank = np.full(n, 1.0 / n)
    for _ in range(100):
        # a step of the walk: along similarities, or anywhere from a sentence with none
        spread = sim(np.where(linked, rank / np.where(linked, degree, 1.0), 0.0))
        nxt = (1 - SUMMARY_DAMPING) * jump + SUMMARY_DAMPING * (spread + rank[~linked].sum() / n)
        if np.abs(nxt - rank).sum() < 1e-9:
            rank = nxt
            break
        rank = nxt
    return rank
