"""Which source sentence answers a question: the extractive answerer's learned scorer.

Every sentence of the sources is a candidate, described by the features in ``FEATURES``:

* **overlap** — the IDF-weighted share of the question's terms (Snowball stems, question
  stopwords dropped; ``w(t) = ln(1 + (|S| + 1) / (df(t) + 0.5))`` over the candidate sentences
  S) that the sentence holds (``own``), relative to the best candidate (``own_rel``); the share
  its context holds instead (the sentence before it and the section title, ``borrowed``); the
  question's names and numbers as written (``keys``); the question's consecutive term pairs
  (``bigram``); the best overlap of the sentence before or after it (``neighbour``);
* **shape** — the share of the sentence's terms the question does not have (an answer adds
  something, ``novelty``), its length, whether it is very short or very long;
* **answer-type cues** — a date for "when", a number for "how many", a quantity for "how
  much", a name for "who", a place for "where", a cause for "why", the noun a what/which
  question asks for;
* **position** — the source's rank and the sentence's place in its chunk;
* **meaning** (the ``dense`` model only) — the cosine between the sentence's and the question's
  embeddings, relative to the best candidate, and the best cosine of its neighbours. These are
  the vectors the embedding reranker already made (``index.embed.SentenceVectors``).

Two linear models score the candidates (``dense`` when every candidate's vector is known, else
``lexical``); a softmax over a question's candidates gives each one's share. They are trained by
``learn/train_extractive.py`` on the training halves of SQuAD 1.1 and COVID-QA, where
the gold answer's character offsets mark the sentence that holds it, and shipped as arrays
(``data/extractive_scorer.npz``, no pickle) and JSON metadata. A logistic ``support`` model on
the best candidate (its score, share and overlap, and the share of the question no candidate
mentions) gives the probability that the quote holds the answer: the answerer's stated
confidence, below ``min_confidence`` an abstention. It is calibrated with SQuAD 2.0's
unanswerable questions too, so that a question about something the sources never mention is
told apart. Numpy only.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.words import ANSWER_WORD, QUESTION_STOPWORDS, normalise

if TYPE_CHECKING:
    import numpy as np

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_SCORER = DATA / "extractive_scorer.json"
SCHEMA_VERSION = 1

LEXICAL_FEATURES = (
    "own",
    "own_rel",
    "borrowed",
    "keys",
    "bigram",
    "neighbour",
    "novelty",
    "length",
    "short",
    "long",
    "inv_rank",
    "first_source",
    "first_sentence",
    "position",
    "when_date",
    "how_many_number",
    "how_much_quantity",
    "who_name",
    "where_place",
    "why_cause",
    "type_term",
    "has_number",
    "new_name",
)
DENSE_FEATURES = ("cos", "cos_rel", "neighbour_cos")
FEATURES = LEXICAL_FEATURES + DENSE_FEATURES
TYPE_WEIGHT = 0.25  # weight kept by an answer-type term no candidate contains

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][\w-]*")
_WH_HEAD = re.compile(
    r"\b(?:what|which|whose)\s+(?:(?:kind|type|sort|form)\s+of\s+)?([A-Za-z][A-Za-z-]+)",
    re.IGNORECASE,
)
_ASKS = {
    "when": re.compile(
        r"\bwhen\b|\b(?:what|which)\s+(?:year|date|day|month|time|century|decade|period|era)\b"
        r"|\bhow long ago\b|\bsince when\b",
        re.I,
    ),
    "how_many": re.compile(r"\bhow many\b|\bnumber of\b|\bhow often\b", re.I),
    "how_much": re.compile(
        r"\bhow (?:much|large|big|long|far|old|tall|high|fast|wide|deep|heavy|small)\b"
        r"|\bwhat (?:percentage|percent|proportion|amount|size|rate|fraction|dose)\b",
        re.I,
    ),
    "who": re.compile(
        r"\bwho(?:m|se)?\b|\b(?:what|which)\s+(?:person|people|company|team|group|organi[sz]ation"
        r"|agency|university|author|president|king|queen)\b",
        re.I,
    ),
    "where": re.compile(
        r"\bwhere\b|\b(?:what|which|in what)\s+(?:city|country|state|place|region|location|area"
        r"|continent|town|county|province|site)\b",
        re.I,
    ),
    "why": re.compile(r"\bwhy\b|\bwhat (?:caused|causes|cause|reason|led to)\b", re.I),
}
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    rf"\b(?:1[0-9]{{3}}|20[0-9]{{2}})s?\b|\b(?:{_MONTHS})\b|\bcentur(?:y|ies)\b|\bdecades?\b"
    r"|\b(?:bc|ad|bce|ce)\b",
    re.I,
)
_NUMBER_WORD = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
    r"|forty|fifty|hundred|thousand|million|billion|trillion|dozen|several|half)\b",
    re.I,
)
_QUANTITY = re.compile(
    r"[$€£¥%]|\d\s*(?:%|percent|per cent|km|kg|mg|ml|m|cm|mm|mi|ft|lb|g|l|h|hours?|days?|years?"
    r"|weeks?|months?|minutes?|seconds?|miles?|metres?|meters?|tons?|tonnes?|dollars?|euros?"
    r"|pounds?|acres?|hectares?|°)\b|\b(?:million|billion|trillion|thousand|hundred)\b",
    re.I,
)
_PLACE = re.compile(r"\b(?:in|at|from|near|of|to)\s+(?:the\s+)?[A-Z][\w-]+")
_CAUSE = re.compile(
    r"\b(?:because|due to|since|as a result|result(?:ed|s)? (?:in|from)|led to|lead to|caus(?:e|ed"
    r"|es|ing)|so that|in order to|reason|thus|therefore|owing to|thanks to)\b",
    re.I,
)


@dataclass(frozen=True)
class Candidate:
    """One sentence of the sources as the scorer sees it."""

    n: int  # the source's number (1-based, as cited)
    pos: int  # the sentence's index among its chunk's sentences
    count: int  # sentences in its chunk
    text: str
    terms: frozenset[str]
    written: frozenset[str]  # words and numbers as written
    quotable: bool
    context: frozenset[str]  # terms of the sentence before it and of the section title
    span: tuple[int, int] = (0, 0)  # where it sits in its chunk's text
    lead: int = 0  # its place in its paragraph (0: the paragraph's first sentence)


def answer_type_terms(question: str) -> frozenset[str]:
    """The noun a what/which question asks for (``animal`` in "What animal did …"), as terms."""
    return frozenset(
        normalise(m.group(1))
        for m in _WH_HEAD.finditer(question)
        if m.group(1).lower() not in QUESTION_STOPWORDS
    )


def key_terms(question: str) -> frozenset[str]:
    """The question's capitalised non-stopwords and its numbers, as written."""
    keys = {m.group() for m in _NUMBER.finditer(question)}
    keys |= {w for w in _CAPITALISED.findall(question) if w.lower() not in QUESTION_STOPWORDS}
    return frozenset(keys)


@lru_cache(maxsize=16384)
def _stems(text: str) -> tuple[str, ...]:
    """The content stems of ``text`` in order (for term pairs)."""
    return tuple(
        normalise(w)
        for w in ANSWER_WORD.findall(text)
        if w.lower() not in QUESTION_STOPWORDS and (len(w) > 1 or w.isdigit())
    )


def _pairs(text: str) -> frozenset[tuple[str, str]]:
    stems = _stems(text)
    return frozenset(itertools.pairwise(stems))


@lru_cache(maxsize=16384)
def _cues(text: str) -> tuple[bool, bool, bool, bool, bool, frozenset[str]]:
    """(date, number, quantity, place, cause, capitalised words after the first) of a sentence."""
    caps = _CAPITALISED.findall(text)
    return (
        bool(_DATE.search(text)),
        bool(_NUMBER_WORD.search(text)),
        bool(_QUANTITY.search(text)),
        bool(_PLACE.search(text)),
        bool(_CAUSE.search(text)),
        frozenset(w.lower() for w in caps[1:]),
    )


def asks(question: str) -> frozenset[str]:
    """What kinds of answer the question asks for (``when``, ``how_many``, …)."""
    return frozenset(kind for kind, pattern in _ASKS.items() if pattern.search(question))


def term_weights(question_terms: frozenset[str], cands: list[Candidate], question: str):
    """IDF weight of each question term over the candidates (see the module docstring)."""
    df = dict.fromkeys(question_terms, 0)
    for c in cands:
        for t in question_terms & c.terms:
            df[t] += 1
    total = len(cands)
    weight = {t: math.log(1 + (total + 1) / (df[t] + 0.5)) for t in question_terms}
    for t in answer_type_terms(question):
        if df.get(t) == 0:  # "what animal …": the type asked for, rarely written out
            weight[t] *= TYPE_WEIGHT
    return weight


def unmatched(question_terms: frozenset[str], cands: list[Candidate], question: str) -> float:
    """The share of the question's term weight that no candidate holds: high when it asks
    about something the sources never mention."""
    weight = term_weights(question_terms, cands, question)
    norm = sum(weight.values())
    if not norm:
        return 1.0
    held = frozenset().union(*(c.terms for c in cands)) if cands else frozenset()
    return sum(w for t, w in weight.items() if t not in held) / norm


def features(
    question: str,
    question_terms: frozenset[str],
    cands: list[Candidate],
    cos: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(X, own)``: the ``(len(cands), len(FEATURES))`` feature matrix (the dense columns are
    zero when ``cos`` — each candidate's cosine to the question — is None) and each
    candidate's own overlap."""
    import numpy as np

    m = len(cands)
    x = np.zeros((m, len(FEATURES)), dtype=np.float64)
    if m == 0:
        return x, np.zeros(0)
    weight = term_weights(question_terms, cands, question)
    norm = sum(weight.values()) or 1.0
    own = np.array([sum(weight[t] for t in question_terms & c.terms) / norm for c in cands])
    asked = _Asked(
        terms=question_terms,
        keys=key_terms(question),
        kinds=asks(question),
        wanted_type=answer_type_terms(question),
        pairs=_pairs(question),
        lower=frozenset(w.lower() for w in ANSWER_WORD.findall(question)),
    )
    same_prev, same_next = _neighbours(cands)
    prev_own, next_own = _from_neighbours(own, same_prev, same_next)
    for i, c in enumerate(cands):
        near = max(prev_own[i], next_own[i])
        x[i, :23] = _lexical_row(c, asked, weight, norm, own[i], near)
    x[:, 1] = own - own.max()
    if cos is not None and len(cos) == m:
        x[:, 23] = cos
        x[:, 24] = cos - cos.max()
        prev_cos, next_cos = _from_neighbours(cos, same_prev, same_next)
        x[:, 25] = np.maximum(prev_cos, next_cos)
    return x, own


@dataclass(frozen=True, slots=True)
class _Asked:
    """What ``features`` reads of the question once, for all its candidates."""

    terms: frozenset[str]  # the question's terms
    keys: frozenset[str]  # its capitalised words and numbers, as written
    kinds: frozenset[str]  # the kinds of answer it asks for (``asks``)
    wanted_type: frozenset[str]  # the noun a what/which question asks for
    pairs: frozenset[tuple[str, str]]  # its adjacent content stems
    lower: frozenset[str]  # its words, lower-cased


def _lexical_row(
    c: Candidate, asked: _Asked, weight: dict[str, float], norm: float, own: float, near: float
) -> tuple[Any, ...]:
    """The first 23 feature columns of candidate ``c`` (``own_rel`` 0, set by the caller):
    ``own`` is its own overlap, ``near`` its neighbouring sentences' best."""
    date, number, quantity, place, cause, caps = _cues(c.text)
    n_words = max(1, len(c.text.split()))
    new_terms = len(c.terms - asked.terms)
    borrowed = sum(weight[t] for t in (asked.terms & c.context) - c.terms) / norm
    pairs = len(asked.pairs & _pairs(c.text)) / len(asked.pairs) if asked.pairs else 0.0
    kinds = asked.kinds
    return (
        own,
        0.0,  # own_rel, set by the caller
        borrowed,
        len(asked.keys & c.written) / len(asked.keys) if asked.keys else 0.0,
        pairs,
        near,
        new_terms / (len(c.terms) + 1),
        math.log1p(n_words) / 4,
        n_words < 6,
        n_words > 50,
        1.0 / c.n,
        c.n == 1,
        c.pos == 0,
        c.pos / max(1, c.count),
        "when" in kinds and date,
        "how_many" in kinds and number,
        "how_much" in kinds and (quantity or number),
        "who" in kinds and bool(caps - asked.lower),
        "where" in kinds and place,
        "why" in kinds and cause,
        bool(asked.wanted_type & c.terms),
        number,
        min(3, len(caps - asked.lower)) / 3,
    )


def _neighbours(cands: list[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """``(same_prev, same_next)`` ``(len(cands),)`` bool: whether the candidate before (after)
    each is the sentence before (after) it in the same source (the candidates are in source
    order, sentence by sentence)."""
    import numpy as np

    same_prev = np.array(
        [
            i > 0 and cands[i - 1].n == c.n and cands[i - 1].pos == c.pos - 1
            for i, c in enumerate(cands)
        ]
    )
    same_next = np.zeros(len(cands), dtype=bool)
    same_next[:-1] = same_prev[1:]
    return same_prev, same_next


def _from_neighbours(
    values: np.ndarray, same_prev: np.ndarray, same_next: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The previous and the next sentence's ``values`` for each candidate (0 where none)."""
    import numpy as np

    return np.where(same_prev, np.roll(values, 1), 0.0), np.where(
        same_next, np.roll(values, -1), 0.0
    )


@dataclass(frozen=True)
class LinearModel:
    """``score = ((x − mean) / scale) · weights`` over ``columns`` of the feature matrix."""

    columns: tuple[int, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def scores(self, x: np.ndarray) -> np.ndarray:
        z = (x[:, list(self.columns)] - self.mean) / self.scale
        return z @ self.weights


@dataclass(frozen=True)
class SentenceScorer:
    """The shipped models: ``lexical`` and ``dense`` rankers, and the ``support`` calibration
    (``P(quote holds the answer) = σ(support · (1, best score, best share, best own,
    unmatched))``)."""

    models: dict[str, LinearModel]
    support: dict[str, np.ndarray]
    keep_ratio: float  # further sentences are quoted when their share ≥ keep_ratio × the best's
    min_own: float  # when no sentence holds this much of the question, nothing is supported
    min_confidence: float  # below this probability the answerer abstains
    meta: dict[str, Any]

    def rank(self, x: np.ndarray, dense: bool) -> tuple[np.ndarray, np.ndarray, str]:
        """``(scores, shares, model name)`` of a question's candidates."""
        import numpy as np

        name = "dense" if dense else "lexical"
        s = self.models[name].scores(x)
        e = np.exp(s - s.max())
        return s, e / e.sum(), name

    def confidence(
        self, name: str, score: float, share: float, own: float, unmatched_share: float
    ) -> float:
        """The probability that the quote led by the best candidate holds the answer."""
        c = self.support[name]
        z = float(c[0] + c[1] * score + c[2] * share + c[3] * own + c[4] * unmatched_share)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    @classmethod
    def load(cls, path: str | Path = DEFAULT_SCORER) -> SentenceScorer:
        import numpy as np

        path = Path(path)
        meta = json.loads(path.read_text(encoding="utf-8"))
        if meta.get("schema_version") != SCHEMA_VERSION or tuple(meta["features"]) != FEATURES:
            raise ValueError(
                f"{path}: sentence scorer schema {meta.get('schema_version')} with features "
                f"{meta.get('features')} does not match this Fathom's ({SCHEMA_VERSION})"
            )
        with np.load(path.with_suffix(".npz"), allow_pickle=False) as arrays:
            models = {
                name: LinearModel(
                    columns=tuple(int(i) for i in arrays[f"{name}_columns"]),
                    mean=arrays[f"{name}_mean"],
                    scale=arrays[f"{name}_scale"],
                    weights=arrays[f"{name}_weights"],
                )
                for name in ("lexical", "dense")
            }
            support = {name: arrays[f"{name}_support"] for name in ("lexical", "dense")}
        return cls(
            models=models,
            support=support,
            keep_ratio=float(meta["keep_ratio"]),
            min_own=float(meta["min_own"]),
            min_confidence=float(meta["min_confidence"]),
            meta=meta,
        )

    def save(self, path: str | Path) -> None:
        import numpy as np

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for name, model in self.models.items():
            arrays[f"{name}_columns"] = np.asarray(model.columns, dtype=np.int64)
            arrays[f"{name}_mean"] = np.asarray(model.mean, dtype=np.float64)
            arrays[f"{name}_scale"] = np.asarray(model.scale, dtype=np.float64)
            arrays[f"{name}_weights"] = np.asarray(model.weights, dtype=np.float64)
            arrays[f"{name}_support"] = np.asarray(self.support[name], dtype=np.float64)
        np.savez(path.with_suffix(".npz"), **arrays)
        meta = {
            **self.meta,
            "schema_version": SCHEMA_VERSION,
            "features": list(FEATURES),
            "keep_ratio": self.keep_ratio,
            "min_own": self.min_own,
            "min_confidence": self.min_confidence,
        }
        path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@lru_cache(maxsize=4)
def shipped_scorer(path: str = str(DEFAULT_SCORER)) -> SentenceScorer | None:
    """The scorer shipped with Fathom (read once), or None when its files are missing."""
    p = Path(path)
    if not p.is_file() or not p.with_suffix(".npz").is_file():
        return None
    return SentenceScorer.load(p)
