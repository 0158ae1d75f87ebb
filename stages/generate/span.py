"""The extractive answerer's span: the shortest exact answer Fathom's reader finds in the sources.

Every window of every source is read (``fathom.index.reader``); each window offers its best
span that starts and ends inside one quotable sentence — never in a heading, a question, a
table row, text that reads as instructions to a model, a title block, an author list or a
reference entry — and that span's logit margin over no-answer. The best margin wins. The span
is sure when its margin clears the model's bar, ``abstain_below`` (in ``reader.json``: fitted on
questions about articles the model never read, ``learn/reader_calibrate.py``, so that about a
tenth of answerable questions fall under it); under the bar it is unsure, and the answerer
marks it so (``extractive``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.core.base import Hit
    from fathom.stages.generate.sentence_scorer import Candidate

MAX_SPAN_CHARS = 200
UNSURE = "Unsure: "  # leads an answer whose span is under the reader's bar
WHOLE_SENTENCE = 0.8  # a span this much of its sentence is answered with the sentence alone

_YEAR = re.compile(r"(?:\(|\b)(?:19|20)\d\d[a-z]?(?:\)|\b)")
_REFERENCE = re.compile(
    r"\bet al\.|\bdoi\b|arXiv|\bIn Proceedings\b|\bpp\.\s*\d|\bvol\.\s*\d|\bJournal of\b",
    re.IGNORECASE,
)
_NUMBERED = re.compile(r"^\s*\[\d+\]\s")
# "Shunyu Yao∗*,1, Jeffrey Zhao2, Dian Yu2": names, each with a mark or number, in a row
_MARK = r"[\d∗*†‡§¶]"
_NAME = r"[A-Z][\w'-]+(?:\s+[A-Z]\.)*\s+[A-Z][\w'-]+"
_AUTHORS = re.compile(rf"(?:{_NAME}\W?{_MARK}*[\d∗*†‡§¶,]\s*){{3,}}")
_EMAIL = re.compile(r"\S+@\S+\.\w+")
# a reference entry's title line: "Distilling Knowledge from Reader to Retriever …, 2022."
_TITLE_YEAR = re.compile(r"[,.]\s*\(?(?:19|20)\d\d[a-z]?\)?\.?\s*$")
_SMALL_WORDS = frozenset("a an and as at by for from in into of on or the to with via vs".split())


def bibliographic(sentence: str) -> bool:
    """Whether a sentence reads as an author list, a title block or a reference entry."""
    if _NUMBERED.match(sentence) or _AUTHORS.search(sentence) or _EMAIL.search(sentence):
        return True
    if _TITLE_YEAR.search(sentence) and title_cased(sentence):
        return True
    return bool(_YEAR.search(sentence) and len(_REFERENCE.findall(sentence)) >= 2)


def title_cased(sentence: str) -> bool:
    """Whether a sentence's words are capitalised as a title's are (small words aside)."""
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", sentence) if w.lower() not in _SMALL_WORDS]
    return len(words) >= 3 and sum(w[0].isupper() for w in words) >= 0.8 * len(words)


@dataclass(frozen=True, slots=True)
class Span:
    """An answer span: source ``n`` (1-based), characters ``[start, end)`` of its chunk."""

    n: int
    start: int
    end: int
    text: str
    margin: float  # the reader's logit margin over no-answer
    probability: float  # its two-way probability over no-answer
    sentence: str  # the quotable sentence that holds it
    sure: bool = True  # its margin clears the reader's bar

    def to_dict(self, hit: Hit) -> dict[str, Any]:
        chunk = hit.chunk
        return {
            "text": self.text,
            "source": self.n,
            "chunk_id": chunk.chunk_id,
            "doc_id": chunk.doc_id,
            "start": self.start,
            "end": self.end,
            "doc_start": chunk.char_start + self.start,
            "doc_end": chunk.char_start + self.end,
            "score": round(self.margin, 4),
            "probability": round(self.probability, 4),
            "sentence": self.sentence,
            "sure": self.sure,
        }


def _whole_words(text: str, a: int, b: int) -> tuple[int, int]:
    """``[a, b)`` widened to whole words: a span decoded from word pieces may stop inside one."""
    while a > 0 and text[a - 1].isalnum() and text[a].isalnum():
        a -= 1
    while b < len(text) and text[b].isalnum() and text[b - 1].isalnum():
        b += 1
    return a, b


def _units(windows: Any, cands: list[Candidate]):
    """Each window token's quotable sentence (an index into ``cands``; -1: a heading, a
    question, a table row, an instruction to a model, a title block, an author list or a
    reference entry, where no answer may start or end)."""
    import numpy as np

    unit = np.full(windows.starts.shape, -1, dtype=np.int64)
    by_source: dict[int, list[tuple[int, int, int]]] = {}
    for idx, c in enumerate(cands):
        if c.quotable and not bibliographic(c.text):
            by_source.setdefault(c.n - 1, []).append((c.span[0], c.span[1], idx))
    for r in range(len(windows)):
        spans = by_source.get(int(windows.owner[r]), [])
        starts, ends = windows.starts[r], windows.ends[r]
        for a, b, idx in spans:
            inside = windows.passage[r] & (starts >= a) & (ends <= b + 1)
            unit[r, inside] = idx
    return unit


def read_span(reader: Any, question: str, hits: list[Hit], cands: list[Candidate]):
    """``(span, margin)``: the best span inside one quotable sentence (None when there is none;
    ``span.sure`` when its margin clears the reader's bar) and its margin (``-inf`` when there
    is none)."""
    import numpy as np
    from fathom.index.reader import answer_probability, best_spans

    texts = [h.chunk.text for h in hits]
    windows = reader.encode(question, texts)
    start, end, _ = reader.run(windows)
    unit = _units(windows, cands)
    first, last, margin = best_spans(start, end, windows.passage, unit)
    threshold = float(reader.meta.get("abstain_below", 0.0))
    for r in np.argsort(-margin, kind="stable"):
        if unit[r, first[r]] < 0 or margin[r] < -1e8:
            continue  # no quotable sentence in this window
        t = int(windows.owner[r])
        a, b = int(windows.starts[r, first[r]]), int(windows.ends[r, last[r]])
        a, b = _whole_words(texts[t], a, b)
        text = texts[t][a:b].strip()
        if not text or b - a > MAX_SPAN_CHARS:
            continue
        m = float(margin[r])
        sentence = cands[int(unit[r, first[r]])].text
        span = Span(t + 1, a, b, text, m, answer_probability(m), sentence, sure=m >= threshold)
        return span, m
    return None, float("-inf")


def quotes_after(span: Span, more: list[tuple[int, str]] = ()) -> list[tuple[int, str]]:
    """The ``(source, sentence)`` quotes of ``more`` an answer gives after ``span``'s sentence:
    each sentence once, the span's own not again."""
    said = {" ".join(span.sentence.lower().split())}
    kept = []
    for n, sentence in more:
        key = " ".join(sentence.lower().split())
        if key not in said:
            said.add(key)
            kept.append((n, sentence))
    return kept


def answer_text(span: Span, more: list[tuple[int, str]] = ()) -> str:
    """The span, then the sentence that holds it, quoted, with its citation; then the ``more``
    ``(source, sentence)`` quotes that support it, each cited (as ``quotes_after`` keeps them).
    An unsure span's answer starts with ``UNSURE``."""
    if len(span.text) >= WHOLE_SENTENCE * len(span.sentence):
        head = f"{span.sentence} [{span.n}]"
    else:
        # plain quotes: readers and judges that drop punctuation drop these too
        head = f'{span.text} — "{span.sentence}" [{span.n}]'
    tail = [f"{sentence} [{n}]" for n, sentence in more]
    return ("" if span.sure else UNSURE) + " ".join([head, *tail])
