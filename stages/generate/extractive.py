"""An answerer without a language model: it quotes the source sentences that best match the
question, each followed by its ``[n]`` citation.

Scoring, over the sentences S of all hits (split with ``chunking.sentences``):

* terms are the Snowball stems (PyStemmer) of the lower-cased words that are not stopwords;
  Q is the question's set of terms, T(s) a sentence's;
* ``w(t) = ln(1 + (|S| + 1) / (df(t) + 0.5))`` where ``df(t)`` counts the sentences containing
  t: rare terms weigh more, and a question term found in no sentence weighs most, so a question
  the sources do not cover scores low;
* ``coverage(s) = (Σ_{t ∈ Q ∩ T(s)} w(t) + ½ Σ_{t ∈ Q ∩ C(s) − T(s)} w(t)) / Σ_{t ∈ Q} w(t)``,
  in [0, 1], where C(s) is the sentence's context inside its chunk — the sentence before it and
  the chunk's section title — so that "No extractable text. The PDF is a scan …" answers a
  question about PDFs without extractable text; the sentence itself must still carry at least
  ``MIN_OWN`` of the weight; the noun a what/which question asks for ("what **animal**")
  keeps only ``TYPE_WEIGHT`` of its weight when no sentence contains it;
* ``bonus(s) = 0.2 · |K ∩ s| / |K|`` for K the question's capitalised words and numbers,
  matched exactly (names and figures are what a factual answer turns on);
* ``score(s) = coverage(s) + bonus(s)``.

The answer is the best sentence and up to two more scoring at least 0.75 × the best, in score
order (ties: retrieval rank, then position); only sentences with ``coverage ≥ 0.6`` qualify
(two of three question terms are not enough when the third is as rare), and when none does the
answer is "I don't know". Headings and questions are context, never quoted. Sentences that
read as instructions to a model ("ignore previous instructions", "system prompt", …) are never
quoted. Deterministic.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fathom.chunking.tokens import WordCounter
from fathom.core.base import Chunk, Draft, Hit
from fathom.core.config import GeneratorConfig
from fathom.core.words import ANSWER_WORD, QUESTION_STOPWORDS, answer_terms, normalise
from fathom.stages.generate.base import BaseGenerator

_WORDS = WordCounter()
NO_ANSWER = "I don't know — the sources do not answer this."
MIN_COVERAGE = 0.6
MIN_OWN = 0.3
TYPE_WEIGHT = 0.25  # weight kept by an answer-type term no source sentence contains
CONTEXT_WEIGHT = 0.5
KEEP_RATIO = 0.75
MAX_SENTENCES = 3
BONUS = 0.2

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][\w-]*")
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b.{0,40}?"
    r"\b(?:instructions?|prompts?|rules|above|previous|prior|sources?|context|documents?)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions?\b|\bact as\b",
    re.IGNORECASE,
)


_PARAGRAPH = re.compile(r"\S(?:.*\S)?(?:\n(?!\s*\n).*\S)*")


def _sentences(chunk: Chunk) -> tuple[tuple[str, frozenset[str], frozenset[str], bool], ...]:
    """``(sentence, terms, words and numbers as written, quotable)`` for each sentence of a
    chunk, paragraph by paragraph, minus those that read as instructions to a model. A short
    paragraph without final punctuation is a heading: context for what follows, never quoted."""
    from fathom.chunking.sentences import chunk_sentences

    return _parsed(chunk.text, tuple(chunk_sentences(chunk)))


@lru_cache(maxsize=4096)
def _parsed(
    text: str, spans: tuple[tuple[int, int], ...]
) -> tuple[tuple[str, frozenset[str], frozenset[str], bool], ...]:
    """``_sentences`` of ``text`` with sentence ``spans``, each cut at paragraph breaks."""
    out = []
    for para in _PARAGRAPH.finditer(text):
        body = para.group()
        heading = len(body.split()) <= 12 and not body.rstrip().endswith((".", "!", "?", ":"))
        for a, b in _clipped(spans, para.start(), para.end()):
            # Compression marks dropped sentences with "…"; it is not part of a quote.
            sentence = " ".join(text[a:b].split()).strip(" …")
            if sentence and not _INJECTION.search(sentence):
                written = frozenset(ANSWER_WORD.findall(sentence)) | frozenset(
                    _NUMBER.findall(sentence)
                )
                # A question (an FAQ entry, a heading) is context, never an answer.
                quotable = not heading and not sentence.endswith("?")
                out.append((sentence, answer_terms(sentence), written, quotable))
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


_WH_HEAD = re.compile(
    r"\b(?:what|which|whose)\s+(?:(?:kind|type|sort|form)\s+of\s+)?([A-Za-z][A-Za-z-]+)",
    re.IGNORECASE,
)


def answer_type_terms(question: str) -> frozenset[str]:
    """The noun a what/which question asks for (``animal`` in "What animal did …"), as terms."""
    return frozenset(
        normalise(m.group(1))
        for m in _WH_HEAD.finditer(question)
        if m.group(1).lower() not in QUESTION_STOPWORDS
    )


def _key_terms(question: str) -> set[str]:
    """The question's capitalised non-stopwords and its numbers, as written."""
    keys = {m.group() for m in _NUMBER.finditer(question)}
    keys |= {w for w in _CAPITALISED.findall(question) if w.lower() not in QUESTION_STOPWORDS}
    return keys


@lru_cache(maxsize=16384)
def estimate_words(text: str) -> int:
    """Word-based token estimate (the extractive backend has no tokenizer)."""
    return _WORDS.count([text])[0]


class ExtractiveGenerator(BaseGenerator):
    """Quotes the best-matching source sentences with citations; no model, no randomness.

    Nothing is truncated, so no prompt is ever refused; ``prompt_tokens`` estimates the prompt
    a language model would get, so traces stay comparable across backends."""

    name = "extractive"
    language_model = False

    def __init__(self, cfg: GeneratorConfig | None = None) -> None:
        super().__init__(cfg or GeneratorConfig())
        self.model = "lexical-overlap"

    def __repr__(self) -> str:
        return "ExtractiveGenerator()"

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word-based estimate: words and punctuation marks × 1.3, rounded up."""
        return _WORDS.count(texts)

    def select(self, question: str, hits: list[Hit]) -> list[tuple[float, int, str]]:
        """The chosen ``(score, source number, sentence)``, best first; empty for no answer."""
        wanted = answer_terms(question)
        if not hits or not wanted:
            return []
        sentences = []  # (n, position, text, terms, written, quotable, context terms)
        for n, hit in enumerate(hits, start=1):
            heading = answer_terms(hit.chunk.section) if hit.chunk.section else frozenset()
            previous: frozenset[str] = frozenset()
            for pos, parts in enumerate(_sentences(hit.chunk)):
                sentences.append((n, pos, *parts, heading | previous))
                previous = parts[1]
        if not sentences:
            return []
        df = dict.fromkeys(wanted, 0)
        for _, _, _, found, _, _, _ in sentences:
            for t in wanted & found:
                df[t] += 1
        total = len(sentences)
        weight = {t: math.log(1 + (total + 1) / (df[t] + 0.5)) for t in wanted}
        for t in answer_type_terms(question):
            if df.get(t) == 0:  # "what animal …": the type asked for, rarely written out
                weight[t] *= TYPE_WEIGHT
        norm = sum(weight.values())
        keys = _key_terms(question)
        scored: list[tuple[float, float, int, int, str]] = []
        for n, pos, sentence, found, written, quotable, context in sentences:
            if not quotable:
                continue
            own = sum(weight[t] for t in wanted & found) / norm
            if own < MIN_OWN:
                continue
            borrowed = sum(weight[t] for t in (wanted & context) - found) / norm
            coverage = own + CONTEXT_WEIGHT * borrowed
            if coverage < MIN_COVERAGE:
                continue
            bonus = BONUS * len(keys & written) / len(keys) if keys else 0.0
            scored.append((coverage + bonus, coverage, n, pos, sentence))
        if not scored:
            return []
        scored.sort(key=lambda s: (-s[0], s[2], s[3]))
        best = scored[0][0]
        chosen: list[tuple[float, int, str]] = []
        seen: set[str] = set()
        for score, _, n, _, sentence in scored:
            if score < KEEP_RATIO * best or len(chosen) == MAX_SENTENCES:
                break
            if sentence.lower() not in seen:
                seen.add(sentence.lower())
                chosen.append((score, n, sentence))
        return chosen

    def summarize(
        self, hits: list[Hit], on_token: Callable[[str], Any] | None = None, per_source: int = 1
    ) -> Draft:
        """A lead summary: the first ``per_source`` quotable sentences of each source, cited.

        Used for whole-document summaries, where the sources are one per section (map-reduce
        without a model: the lead sentence of a section is its best extractive summary).
        """
        t0 = time.perf_counter()
        quoted: list[tuple[int, str]] = []
        for n, hit in enumerate(hits, start=1):
            lead = [s for s, _, _, quotable in _sentences(hit.chunk) if quotable]
            quoted += [(n, sentence) for sentence in lead[:per_source]]
        return self._quote("Summarize the sources.", hits, quoted, on_token, t0)

    def generate(
        self,
        question: str,
        hits: list[Hit],
        on_token: Callable[[str], Any] | None = None,
        time_budget_ms: float | None = None,
    ) -> Draft:
        """Quote the best 1–3 sentences with ``[n]`` citations, or say the sources do not
        answer; ``on_token`` receives each quoted sentence."""
        t0 = time.perf_counter()
        chosen = self.select(question, hits)
        return self._quote(question, hits, [(n, s) for _, n, s in chosen], on_token, t0)

    def _quote(
        self,
        question: str,
        hits: list[Hit],
        quoted: list[tuple[int, str]],
        on_token: Callable[[str], Any] | None,
        t0: float,
    ) -> Draft:
        """The answer that quotes ``(source number, sentence)`` pairs in order, each cited (or
        says the sources do not answer when there are none), streamed piece by piece."""
        pieces = [f"{sentence} [{n}]" for n, sentence in quoted] or [NO_ANSWER]
        if on_token is not None:
            for i, piece in enumerate(pieces):
                on_token(piece if i == 0 else " " + piece)
        text = " ".join(pieces)
        return Draft(
            text=text,
            # From the quotes, not parse_citations: a quoted sentence may contain "[2]".
            citations=tuple(dict.fromkeys(n for n, _ in quoted)),
            prompt_tokens=self.prompt_tokens(question, hits),
            completion_tokens=estimate_words(text),
            backend=self.name,
            model=self.model,
            finish_reason="stop",
            ms=(time.perf_counter() - t0) * 1000,
        )
