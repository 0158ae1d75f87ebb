"""Word and stopword rules, in one place. Three vocabularies, each kept as it was measured:

* **retrieval terms** (``words``, ``content_terms``, ``term_weights``, ``lexical_overlap``):
  lower-cased ``\\w+`` words with a plural ``s`` dropped. The reranker, the compressor, BM25
  pseudo-relevance feedback and the depth policies' probe features read them; the shipped depth
  forest was trained on features computed with exactly these, so they change only with
  ``router.features.SCHEMA_VERSION``.
* **answer terms** (``normalise``, ``answer_terms``, ``QUESTION_STOPWORDS``): Snowball stems
  with irregular past forms mapped to their verb, and a stop list that also drops the words a
  question is phrased with ("tell", "explain", "according"): the extractive answerer matches a
  question's terms against source sentences with them.
* **support words** (``content_words``): a light suffix strip, ASCII words; the confidence
  scorer's overlap between an answer sentence and its evidence.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from functools import lru_cache

# ---------------------------------------------------------------------------------------------
# Retrieval terms
# ---------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)

_STOPWORDS = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves also may might must
    shall one many much
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS.split())


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` with a plural/possessive ``s`` dropped (cats → cat), so
    forms still match; stopwords are kept (shingles need them)."""
    return list(_words(text))


@functools.lru_cache(maxsize=16384)
def _words(text: str) -> tuple[str, ...]:
    # Cached: the same chunks are read again by each feedback round and by every strategy.
    return tuple(
        w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w
        for w in _WORD.findall(text.lower())
    )


@functools.lru_cache(maxsize=16384)
def content_terms(text: str) -> frozenset[str]:
    """Normalised words of ``text`` minus stopwords and single characters (cached)."""
    return frozenset(w for w in _words(text) if len(w) > 1 and w not in STOPWORDS)


def term_weights(query_terms: set[str], docs: list[set[str]]) -> dict[str, float]:
    """IDF of each query term over ``docs`` (BM25's form, always > 0)."""
    n = len(docs)
    out: dict[str, float] = {}
    for t in query_terms:
        df = sum(1 for d in docs if t in d)
        out[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return out


def lexical_overlap(weights: dict[str, float], terms: set[str]) -> float:
    """IDF-weighted share of the query terms present in ``terms``, in [0, 1]."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in terms) / total


# ---------------------------------------------------------------------------------------------
# Answer terms
# ---------------------------------------------------------------------------------------------

ANSWER_WORD = re.compile(r"\w+(?:['’]\w+)*")

QUESTION_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else ever
    few for from further get gets got had has have having he her here hers herself him himself his
    how i if in into is it its itself just let me more most much must my myself no nor not now of
    off on once only or other our ours ourselves out over own per please same shall she should so
    some such than that the their theirs them themselves then there these they this those through
    to too under until up upon us very via was we were what whatever when where whether which
    while who whom whose why will with within without would yes yet you your yours yourself
    yourselves tell give explain describe list name according source sources document documents
    happen happens happened mean means meant exactly really kind sort thing things something
    """.split()
)


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str] | None:
    try:
        import Stemmer  # PyStemmer, as the BM25 index uses
    except ImportError:
        return None
    return Stemmer.Stemmer("english").stemWord


# Irregular past forms Snowball leaves alone ("kept" is not stemmed to "keep"): a question
# asks "did X keep", the source says "X kept".
# fmt: off
_IRREGULAR = {
    "began": "begin", "begun": "begin", "bought": "buy", "brought": "bring", "built": "build",
    "chose": "choose", "chosen": "choose", "drew": "draw", "drawn": "draw", "fell": "fall",
    "fought": "fight", "found": "find", "gave": "give", "given": "give", "grew": "grow",
    "grown": "grow", "held": "hold", "kept": "keep", "knew": "know", "known": "know",
    "led": "lead", "left": "leave", "lost": "lose", "made": "make", "meant": "mean", "met": "meet",
    "paid": "pay", "ran": "run", "rose": "rise", "risen": "rise", "said": "say", "sang": "sing",
    "sung": "sing", "saw": "see", "seen": "see", "sold": "sell", "sent": "send", "spent": "spend",
    "spoke": "speak", "spoken": "speak", "stood": "stand", "struck": "strike", "taught": "teach",
    "thought": "think", "threw": "throw", "thrown": "throw", "told": "tell", "took": "take",
    "taken": "take", "won": "win", "wore": "wear", "worn": "wear", "wrote": "write",
    "written": "write", "became": "become", "came": "come", "went": "go", "gone": "go",
    "flew": "fly", "flown": "fly", "forgot": "forget", "forgotten": "forget",
}
# fmt: on


@lru_cache(maxsize=65536)
def normalise(word: str) -> str:
    """Lower-cased Snowball stem without a possessive (``started`` → ``start``), irregular
    past forms mapped to their verb (``kept`` → ``keep``); a plural strip when PyStemmer is
    missing."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = _IRREGULAR.get(w, w)
    stem = _stemmer()
    if stem is not None:
        return stem(w)
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def answer_terms(text: str) -> frozenset[str]:
    """Content terms of ``text``: normalised words that are not stopwords."""
    words = set(ANSWER_WORD.findall(text))
    return frozenset(
        normalise(w)
        for w in words
        if w.lower() not in QUESTION_STOPWORDS and (len(w) > 1 or w.isdigit())
    )


# ---------------------------------------------------------------------------------------------
# Support words
# ---------------------------------------------------------------------------------------------

_SUPPORT_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
SUPPORT_STOPWORDS = frozenset(
    """
    a an the and or but if of to in on at by for with from as is are was were be been being
    this that these those it its it's they them their there here what which who whom whose
    when where why how do does did done not no yes can could would should will shall may
    might must have has had having i you he she we our your his her than then so such into
    about over under also only just very more most other some any each all both
    """.split()
)


def light_stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=16384)
def content_words(text: str) -> frozenset[str]:
    """Stemmed non-stopwords of ``text`` (cached: feedback rounds re-read the same chunks)."""
    return frozenset(
        light_stem(w.lower())
        for w in _SUPPORT_WORD.findall(text)
        if w.lower() not in SUPPORT_STOPWORDS
    )


# ---------------------------------------------------------------------------------------------
# Questions and statements
# ---------------------------------------------------------------------------------------------

_WH = frozenset("what which who whom whose when where why how".split())
_OPENERS = _WH | frozenset(
    "is are was were do does did can could should would will has have had may might must shall "
    "name list give tell describe explain define compare".split()
)
_ASCII_WORD = re.compile(r"[a-z']+")


def is_statement(text: str) -> bool:
    """Whether ``text`` states rather than asks: no question mark, no question word or
    imperative first ("what", "does", "list"), and either a full stop at its end or no
    question word anywhere — a claim ("Vitamin D lowers the risk of fractures.") or a bare
    keyword query, not "Jellyfish belong to which group". Of the question sets in the data
    folder it takes 0.2 % for statements, and all of SciFact's claims."""
    t = text.strip()
    if not t or "?" in t:
        return False
    found = _ASCII_WORD.findall(t.lower())
    if not found or found[0] in _OPENERS:
        return False
    return t.endswith(".") or not _WH.intersection(found)
