"""Judges of an answer against gold references: SQuAD answer scores (exact match, token F1),
answer containment and recall, abstention, and ranking scores (recall@k, MRR, nDCG@k).

Pure functions over strings and id lists. Every judge that needs a gold reference returns
``None`` when there is none, so that means can skip it. ``fathom eval`` scores with them, and the
depth policies and retriever portfolios are trained on their labels.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)

# Abstentions: the extractive generator's NO_ANSWER ("I don't know — the sources do not answer
# this."), what the prompt asks LLMs to say ("say that you don't know") and their usual
# paraphrases. Each alternative names the speaker or the sources, so that an answer merely
# containing "not" or "no information" does not count; the loop's hedge rule,
# ``feedback.confidence.ABSTAIN``, is wider on purpose (it deepens on any hedge).
_SOURCES = r"(?:sources?|context|documents?|passages?|(?:provided|given)\s+text)"
_ABSTAIN = re.compile(
    r"\bi\s+(?:do\s+not|don['’]?t)\s+know\b"
    r"|\b(?:cannot|can['’]?t|could\s+not|couldn['’]?t)\s+be\s+answered\b"
    r"|\bi\s+(?:cannot|can['’]?t|am\s+unable\s+to)\s+(?:answer|determine|find)\b"
    r"|\b(?:unanswerable|cannot\s+be\s+determined)\s+(?:from|with|based\s+on)\s+the\s+"
    rf"(?:provided\s+|given\s+)?{_SOURCES}"
    rf"|\b{_SOURCES}\s+(?:do(?:es)?\s+not|don['’]?t|doesn['’]?t)\s+"
    r"(?:contain|mention|answer|say|provide|include|specify|state)\b"
    r"|\bnot\s+(?:mentioned|stated|specified|provided|given|found)\s+in\s+the\s+"
    rf"(?:provided\s+|given\s+)?{_SOURCES}"
    rf"|\b{_SOURCES}\s+(?:provides?|contains?|gives?|ha(?:s|ve))\s+no\s+information\b"
    rf"|\bno\s+information\s+(?:\w+\s+){{0,6}}?in\s+the\s+(?:provided\s+|given\s+)?{_SOURCES}"
    r"|\b(?:there\s+is|i\s+have)\s+no\s+information\b",
    re.IGNORECASE,
)


# --- answers -------------------------------------------------------------------------------------


def normalize_answer(s: str) -> str:
    """SQuAD's normalisation: lower case, drop punctuation and articles, collapse whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def is_abstention(answer: str) -> bool:
    """True when ``answer`` says it does not know or that the sources lack the answer.

    An empty answer counts as abstaining too (nothing was asserted), as in the feedback stage.
    """
    return not answer.strip() or _ABSTAIN.search(answer) is not None


def _no_gold_score(pred: str, abstained: bool | None) -> float:
    if abstained is None:
        abstained = is_abstention(pred)
    return 1.0 if abstained else 0.0


def exact_match(pred: str, golds: Sequence[str], abstained: bool | None = None) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer, else 0.0.

    With no gold answer (an unanswerable question) the score is 1.0 when the prediction
    abstained and 0.0 otherwise; ``abstained=None`` decides that with ``is_abstention(pred)``.
    """
    if not golds:
        return _no_gold_score(pred, abstained)
    p = normalize_answer(pred)
    return max(1.0 if p == normalize_answer(g) else 0.0 for g in golds)


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    # As compute_f1 in the official SQuAD v2.0 script.
    if not pred_tokens or not gold_tokens:
        return 1.0 if pred_tokens == gold_tokens else 0.0
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(pred: str, golds: Sequence[str], abstained: bool | None = None) -> float:
    """SQuAD token F1 between the normalised prediction and the best gold answer.

    Both sides empty after normalisation score 1.0, one side empty 0.0. With no gold answer,
    1.0 when the prediction abstained and 0.0 otherwise, as in ``exact_match``.
    """
    if not golds:
        return _no_gold_score(pred, abstained)
    p = normalize_answer(pred).split()
    return max(_token_f1(p, normalize_answer(g).split()) for g in golds)


def _occurs(text: str, golds: Sequence[str]) -> float:
    haystack = f" {normalize_answer(text)} "
    for g in golds:
        needle = normalize_answer(g)
        if needle and f" {needle} " in haystack:
            return 1.0
    return 0.0


def contains(text: str, golds: Sequence[str]) -> float | None:
    """1.0 when a normalised, non-empty gold answer occurs in the normalised ``text``.

    Matches whole tokens only ("cat" is not found in "concatenate"). ``None`` without gold.
    """
    if not golds:
        return None
    return _occurs(text, golds)


def answer_recall(context: str, golds: Sequence[str]) -> float | None:
    """1.0 when a gold answer occurs in the generator's context (the ``contains`` rule)."""
    if not golds:
        return None
    return _occurs(context, golds)


# --- ranking -------------------------------------------------------------------------------------


def recall_at_k(context_doc_ids: Iterable[str], gold_doc_ids: Iterable[str]) -> float | None:
    """Share of the distinct gold documents present in the context; ``None`` without gold."""
    gold = set(gold_doc_ids)
    if not gold:
        return None
    return len(gold.intersection(context_doc_ids)) / len(gold)


def mrr(ranked_doc_ids: Sequence[str], gold_doc_ids: Iterable[str]) -> float | None:
    """1 / rank (from 1) of the first gold document in the ranking, 0.0 if absent.

    Ranks are positions in the list as given. ``None`` without gold.
    """
    gold = set(gold_doc_ids)
    if not gold:
        return None
    for rank, doc in enumerate(ranked_doc_ids, start=1):
        if doc in gold:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(
    ranked_doc_ids: Sequence[str],
    gold_doc_ids: Iterable[str],
    qrels: Mapping[str, float] | None = None,
    k: int = 10,
) -> float | None:
    """nDCG over the first ``k`` positions: linear gain, discount 1 / log2(rank + 1).

    Gains are the ``qrels`` grades when ``qrels`` is non-empty (grades ≤ 0 count as 0), else 1
    for each gold document. A document repeated in the ranking gains only at its first
    position; the repeats keep their places with no gain. ``None`` when nothing is relevant.
    """
    if qrels:
        gains = {doc: float(g) for doc, g in qrels.items() if g > 0}
    else:
        gains = dict.fromkeys(gold_doc_ids, 1.0)
    if not gains:
        return None
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    dcg = 0.0
    seen: set[str] = set()
    for i, doc in enumerate(ranked_doc_ids[:k], start=1):
        if doc in seen:
            continue
        seen.add(doc)
        dcg += gains.get(doc, 0.0) / math.log2(i + 1)
    return dcg / idcg
