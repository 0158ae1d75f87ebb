"""Probe features for the learned depth policies: one fixed-length vector per question.

Everything comes from what ``Engine.prepare`` already has — the probe's hits with their dense,
BM25 and fused scores and ranks, the question text and the router's class probabilities — so
computing the vector costs well under a millisecond (``bench/policy_latency.py``).

Groups (``FEATURE_NAMES`` lists them in order):

* per list (dense cosine, BM25, fused): top-1, top-2, top-5 scores, mean and std of the top
  ``N`` = 20, the gaps top1−top2 and top1−top5, the entropy of the softmax of the top ``N``
  (BM25 scores divided by their top-1 first so the temperature is comparable), and the slope of
  the score decay over the top ``N`` (least squares against log rank);
* agreement of the dense and BM25 rankings: overlap@1, @5, @10, and rank-biased overlap
  (p = 0.9) of their top 20;
* query: words, characters, a one-hot wh-word (what / who / when / where / which / why / how /
  other), digits, capitalised tokens after the first word, the share of the query's content
  terms found in the top chunk and in the top 5 chunks (a term is found when it occurs in the
  lower-cased text), the share of the query's capitalised tokens
  and numbers found verbatim in the top 5, and the number of distinct documents among the top 5;
* the router's class probabilities (factual, summarization, reasoning, multi_hop);
* coverage of the question by each of the top ``N`` chunks: the IDF-weighted share of the
  question's content terms in the chunk (IDF over those ``N`` chunks, so a term every chunk has
  counts little), for ranks 1, 2 and 3, its running maximum at each default budget (1 … 20:
  "has the best-covering chunk been seen by depth b?"), and the log rank of the best-covering
  chunk — an answer that sits deep usually shows as a deeper chunk covering the question better
  than the top ones;
* the shape of the fused score decay (score at ranks 3, 8, 12 and 20 over the top score), the
  dense and BM25 log ranks of the top fused chunk, and the expected answer type (a number or
  date: "how many", "when", "what year"; a person: "who").

A policy may also read the passages: ``READING_NAMES`` (``reading_features``) are what Fathom's
reader made of the probe's first candidates when it reranked them — the reading the reranker
pays for anyway, taken before the depth is decided instead of after.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import FathomError, IndexMismatchError

if TYPE_CHECKING:
    from fathom.core.base import Hit, Probe

TOP_N = 20
RBO_P = 0.9
WH_WORDS = ("what", "who", "when", "where", "which", "why", "how")
QUERY_TYPES = ("factual", "summarization", "reasoning", "multi_hop")
_LISTS = ("dense", "bm25", "fused")
_STATS = ("top1", "top2", "top5", "mean", "std", "gap12", "gap15", "entropy", "slope")
COVER_DEPTHS = (1, 2, 3, 5, 8, 12, 20)
DECAY_RANKS = (3, 8, 12, 20)

FEATURE_NAMES: tuple[str, ...] = (
    *(f"{lst}_{stat}" for lst in _LISTS for stat in _STATS),
    "overlap@1",
    "overlap@5",
    "overlap@10",
    "rbo",
    "q_words",
    "q_chars",
    *(f"wh_{w}" for w in (*WH_WORDS, "other")),
    "q_digits",
    "q_caps",
    "cover_top1",
    "cover_top5",
    "keys_top5",
    "docs_top5",
    *(f"p_{t}" for t in QUERY_TYPES),
    "wcover_r1",
    "wcover_r2",
    "wcover_r3",
    *(f"wcover_max@{b}" for b in COVER_DEPTHS),
    "wcover_argmax",
    *(f"fused_ratio@{r}" for r in DECAY_RANKS),
    "top_dense_rank",
    "top_bm25_rank",
    "expects_number",
    "expects_person",
)
# Bumped whenever a feature changes meaning: a policy trained on another schema is refused.
SCHEMA_VERSION = 3

# What Fathom's reader made of the probe's first candidates (``reading_features``): a policy
# trained with these reads the passages before it decides (``reads_passages``).
READ_RANKS = (1, 2, 3)
READING_NAMES: tuple[str, ...] = (
    *(f"read_r{r}" for r in READ_RANKS),
    "read_gap12",
    "read_mean",
    "read_std",
    "read_p1",
    "read_entropy",
    "margin_r1",
    "margin_max",
    "answers_read",
    "read_best_rank",
    "read_first_answer_rank",
    "read_overlap@3",
    "read_n",
)

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAP = re.compile(r"\b[A-Z][A-Za-z0-9'’-]*")
_NUM = re.compile(r"\b\d[\d.,]*\b")
_EXPECTS_NUMBER = re.compile(
    r"^(how (many|much|long|old|far|large|big|tall|high|often)|when)\b|"
    r"\b(what|which|in what) (year|years|percentage|percent|date|time|age|number|decade|"
    r"century|month|day)\b",
    re.IGNORECASE,
)
_EXPECTS_PERSON = re.compile(r"^(who|whom|whose)\b|\bwhich (person|man|woman)\b", re.IGNORECASE)


def _list_stats(scores: list[float], normalise: bool) -> list[float]:
    """The ``_STATS`` of a best-first score list (zeros when empty)."""
    if not scores:
        return [0.0] * len(_STATS)
    s = scores[:TOP_N]
    if normalise and s[0] > 0:
        s = [x / s[0] for x in s]
    n = len(s)
    top1 = s[0]
    top2 = s[1] if n > 1 else 0.0
    top5 = s[4] if n > 4 else s[-1]
    mean = sum(s) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / n)
    # Softmax entropy at temperature 0.05 (cosines and normalised BM25 both live in [0, 1]),
    # divided by log n so lists of different lengths compare.
    m = max(s)
    w = [math.exp((x - m) / 0.05) for x in s]
    z = sum(w)
    ent = -sum((x / z) * math.log(x / z) for x in w if x > 0)
    ent = ent / math.log(n) if n > 1 else 0.0
    if n > 2:
        xs = [math.log(i + 1) for i in range(n)]
        mx = sum(xs) / n
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - mean) for x, y in zip(xs, s, strict=True)) / var
    else:
        slope = 0.0
    return [top1, top2, top5, mean, std, top1 - top2, top1 - top5, ent, slope]


def _rbo(a: list[int], b: list[int], p: float = RBO_P) -> float:
    """Rank-biased overlap (Webber et al. 2010), truncated at the shorter depth, normalised by
    the weight mass to that depth so two identical lists score 1."""
    depth = min(len(a), len(b))
    if depth == 0:
        return 0.0
    seen_a: set[int] = set()
    seen_b: set[int] = set()
    total, mass = 0.0, 0.0
    overlap = 0
    for d in range(1, depth + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            overlap += 1
        else:
            overlap += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        weight = p ** (d - 1)
        total += weight * overlap / d
        mass += weight
    return total / mass


def probe_features(
    question: str, probe: Probe, type_probs: dict[str, float] | None = None
) -> list[float]:
    """The feature vector of ``question`` and its probe, in ``FEATURE_NAMES`` order."""
    hits = probe.hits
    out: list[float] = []
    dense = sorted((h.scores["dense"] for h in hits if "dense" in h.scores), reverse=True)
    bm25 = sorted((h.scores["bm25"] for h in hits if "bm25" in h.scores), reverse=True)
    fused = [h.score for h in hits]
    out += _list_stats(dense, normalise=False)
    out += _list_stats(bm25, normalise=True)
    out += _list_stats(fused, normalise=True)
    out += _agreement(hits)
    shape, caps = _query_shape(question)
    out += shape
    found, present = _found_in_top(question, caps, hits)
    out += found
    out.append(float(len({h.chunk.doc_id for h in hits[:5]})))
    probs = type_probs or {}
    out += [float(probs.get(t, 0.0)) for t in QUERY_TYPES]
    out += _coverage(present)
    top = fused[0] if fused and fused[0] > 0 else 1.0
    out += [fused[r - 1] / top if len(fused) >= r else 0.0 for r in DECAY_RANKS]
    first_ranks = hits[0].ranks if hits else {}
    out.append(math.log(first_ranks.get("dense", 2 * TOP_N)))
    out.append(math.log(first_ranks.get("bm25", 2 * TOP_N)))
    out.append(1.0 if _EXPECTS_NUMBER.search(question) else 0.0)
    out.append(1.0 if _EXPECTS_PERSON.search(question) else 0.0)
    return out


def reading_features(readings: tuple[Hit, ...] | list[Hit], probe: Probe) -> list[float]:
    """The ``READING_NAMES`` vector of the probe's candidates as the reader read them
    (``readings``: best reading first, each with ``scores["reading"]`` — relevance logit plus
    best span margin — and ``scores["margin"]`` — the best span over no-answer):

    * the readings at reranked ranks 1–3, the gap between the first two, their mean and
      deviation, the softmax share of the first and the softmax entropy (over log n): how sure
      the reader is of its first candidate;
    * the first candidate's span margin and the best margin, and how many candidates hold a
      span that beats no-answer (``answers_read``): one answer, several, or none;
    * the log probe rank of the best-read candidate and of the first candidate (in probe order)
      with a span beating no-answer, and the overlap of the reader's first three with the
      probe's: where in the probe's order the reading found the answer.
    """
    n = len(readings)
    if n == 0:
        return [0.0] * len(READING_NAMES)
    read = [float(h.scores.get("reading", 0.0)) for h in readings]
    margin = [float(h.scores.get("margin", 0.0)) for h in readings]
    out = [read[r - 1] if n >= r else read[-1] for r in READ_RANKS]
    out.append(read[0] - read[1] if n > 1 else 0.0)
    mean = sum(read) / n
    out.append(mean)
    out.append(math.sqrt(sum((x - mean) ** 2 for x in read) / n))
    top = max(read)
    w = [math.exp(x - top) for x in read]
    z = sum(w)
    out.append(w[0] / z)
    ent = -sum((x / z) * math.log(x / z) for x in w if x > 0)
    out.append(ent / math.log(n) if n > 1 else 0.0)
    out.append(margin[0])
    out.append(max(margin))
    out.append(float(sum(1 for m in margin if m > 0)))
    position = {h.chunk.chunk_id: i for i, h in enumerate(probe.hits)}
    ranks = [position.get(h.chunk.chunk_id, n) for h in readings]
    out.append(math.log1p(ranks[0]))
    answering = [r for r, m in zip(ranks, margin, strict=True) if m > 0]
    out.append(math.log1p(min(answering)) if answering else math.log1p(2 * TOP_N))
    out.append(len({r for r in ranks[:3] if r < 3}) / 3)
    out.append(float(n))
    return out


def typed_multi_hop(rows: Any, names: tuple[str, ...] | list[str]) -> Any:
    """``(n,) bool``: whether each row of ``rows`` (features in ``names`` order, one row or
    several) has its query-type probabilities (``p_<type>``) put multi-hop first, as the
    router types a question that needs a second passage."""
    import numpy as np

    x = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    cols = [list(names).index(f"p_{t}") for t in QUERY_TYPES]
    return np.argmax(x[:, cols], axis=1) == QUERY_TYPES.index("multi_hop")


def _agreement(hits: tuple[Hit, ...]) -> list[float]:
    """overlap@1, @5, @10 and the rank-biased overlap of the dense and BM25 rankings."""
    # Each retriever's ranking, as positions into ``hits``.
    by_dense = sorted(
        (i for i, h in enumerate(hits) if "dense" in h.ranks), key=lambda i: hits[i].ranks["dense"]
    )
    by_bm25 = sorted(
        (i for i, h in enumerate(hits) if "bm25" in h.ranks), key=lambda i: hits[i].ranks["bm25"]
    )
    out: list[float] = []
    for k in (1, 5, 10):
        a, b = set(by_dense[:k]), set(by_bm25[:k])
        out.append(len(a & b) / k if a and b else 0.0)
    out.append(_rbo(by_dense[:TOP_N], by_bm25[:TOP_N]))
    return out


def _query_shape(question: str) -> tuple[list[float], list[str]]:
    """The question's words, characters, one-hot wh-word, digits and capitalised tokens after
    the first word; and those capitalised tokens."""
    words = _WORD.findall(question)
    out = [float(len(words)), float(len(question))]
    first = words[0].lower() if words else ""
    wh = next((w for w in WH_WORDS if w == first), None)
    if wh is None:  # "In which year …", "For how long …"
        lowered = [w.lower() for w in words[:4]]
        wh = next((w for w in WH_WORDS if w in lowered), "other")
    out += [1.0 if wh == w else 0.0 for w in (*WH_WORDS, "other")]
    out.append(float(sum(ch.isdigit() for ch in question)))
    caps = [m.group() for m in _CAP.finditer(question)][1:] if words else []
    out.append(float(len(caps)))
    return out, caps


def _found_in_top(
    question: str, caps: list[str], hits: tuple[Hit, ...]
) -> tuple[list[float], list[list[bool]]]:
    """The share of the question's content terms found in the top chunk and in the top 5, and
    of its capitalised tokens and numbers found verbatim in the top 5; and ``present[r][j]``:
    content term j occurs in chunk r of the top ``TOP_N``."""
    from fathom.core.words import content_terms

    # Term presence is a substring test on the lower-cased chunk (query terms are lower-case,
    # plural "s" dropped, so "cell" finds "cells"): a tenth of the cost of tokenising twenty
    # chunks, which a cold ask would pay here.
    q_terms = sorted(content_terms(question))
    lowered = [h.chunk.text.lower() for h in hits[:TOP_N]]
    present = [[t in text for t in q_terms] for text in lowered]
    out: list[float] = []
    if q_terms and lowered:
        out.append(sum(present[0]) / len(q_terms))
        seen = [any(row[j] for row in present[:5]) for j in range(len(q_terms))]
        out.append(sum(seen) / len(q_terms))
    else:
        out += [0.0, 0.0]
    top_texts = [h.chunk.text for h in hits[:5]]
    keys = set(caps) | set(_NUM.findall(question))
    if keys and top_texts:
        joined = "\n".join(top_texts)
        out.append(sum(1 for k in keys if k in joined) / len(keys))
    else:
        out.append(0.0)
    return out, present


def _coverage(present: list[list[bool]]) -> list[float]:
    """The ``wcover_*`` features from ``present[r][j]``: query term j occurs in chunk r."""
    n_out = 3 + len(COVER_DEPTHS) + 1
    n = len(present)
    if not n or not present[0]:
        return [0.0] * n_out
    weights = []
    for j in range(len(present[0])):
        df = sum(1 for row in present if row[j])
        weights.append(math.log(1.0 + (n - df + 0.5) / (df + 0.5)))
    total = sum(weights) or 1.0
    cover = [sum(w for w, hit in zip(weights, row, strict=True) if hit) / total for row in present]
    cover += [0.0] * (TOP_N - n)
    out = cover[:3]
    best = 0.0
    running = []
    for c in cover:
        best = max(best, c)
        running.append(best)
    out += [running[min(b, TOP_N) - 1] for b in COVER_DEPTHS]
    out.append(math.log1p(cover.index(max(cover))))
    return out


def write_policy_meta(
    path: Path,
    kind: str,
    fmt: int,
    budgets: tuple[int, ...],
    extra: dict[str, Any],
    feature_names: tuple[str, ...] = FEATURE_NAMES,
) -> None:
    """A learned policy's JSON metadata beside its weights (``path`` with ``.json``), stamped
    with this feature schema (``feature_names``: the probe's, or the probe's then the
    reader's)."""
    meta = {
        "format": fmt,
        "kind": kind,
        "budgets": list(budgets),
        "feature_names": list(feature_names),
        "feature_schema": SCHEMA_VERSION,
        **extra,
    }
    path.with_suffix(".json").write_text(
        json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def read_policy_meta(
    path: Path,
    kind: str,
    fmt: int,
    weights_suffix: str,
    expect_embedder: str | None = None,
    may_read: bool = False,
) -> dict[str, Any]:
    """The metadata of a learned ``kind`` policy at ``path``, checked: the files exist, the
    format and kind match, the features are this Fathom's (``may_read``: the probe's then the
    reader's are this kind's too), the embedder is the collection's."""
    meta_path, weights = path.with_suffix(".json"), path.with_suffix(weights_suffix)
    if not meta_path.is_file() or not weights.is_file():
        raise FathomError(
            f"{path}: no {kind} policy here (need {meta_path.name} and {weights.name})"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("kind") != kind or meta.get("format") != fmt:
        raise FathomError(f"{meta_path}: not a format-{fmt} {kind} policy")
    if (
        tuple(meta.get("feature_names") or ())
        not in (FEATURE_NAMES, *((FEATURE_NAMES + READING_NAMES,) if may_read else ()))
        or meta.get("feature_schema", SCHEMA_VERSION) != SCHEMA_VERSION
    ):
        raise FathomError(
            f"{meta_path}: trained on another feature schema than this Fathom computes — "
            "retrain it with `fathom policy train`"
        )
    if expect_embedder and meta.get("embedder") and meta["embedder"] != expect_embedder:
        raise IndexMismatchError(
            f"{meta_path}: trained with embedder {meta['embedder']!r}, but the collection "
            f"uses {expect_embedder!r} — its features would not mean the same; retrain it"
        )
    return meta
