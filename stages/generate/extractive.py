"""An answerer without a language model: the exact answer span Fathom's reader finds, then the
sentence that holds it, quoted with its ``[n]`` citation (``span``), stating the reader's
probability of the span over no answer as its confidence.

After the span and its sentence, the lexical sentence scorer's supported quotes follow as
further evidence (it embeds nothing: the dense scorer would embed every sentence of every
source to add them). When the best span is under the reader's bar (often a question whose
answer is a statement rather than a name, date or number, or one the sources do not answer),
the answer starts "Unsure:", gives that span and its sentence all the same, and then the
source sentences the scorer supports, as below; its confidence is then the scorer's. It
abstains only when the span is under the bar and no sentence is supported either — or, with
``generator.unsure = "abstain"``, whenever the span is under the bar. Without the
reader (its model missing or broken) it quotes the supported sentences. Summaries quote
central sentences of the sections that state findings (``findings``).

Every sentence of the sources is a candidate (split with ``chunking.sentences``, cut at
paragraph breaks). The learned scorer (``sentence_scorer``: stemmed IDF-weighted overlap,
answer-type cues, position and neighbours, and their embeddings' similarity to the question:
the reranker's when it embedded them, else embedded here) ranks them; a softmax over a
question's candidates gives each one's share. The answer quotes the best sentence and up to
two more whose share is at least ``keep_ratio`` × the best's, in score order (ties: retrieval
rank, then position). It abstains ("I don't know") only when no sentence is supported: none
holds ``min_own`` of the question's term weight, or the scorer's calibrated probability that
the quote holds the answer is below ``min_confidence``. The draft carries that probability
(``Draft.confidence``).

Headings and questions are context, never quoted. Sentences that read as instructions to a
model ("ignore previous instructions", "system prompt", …) are never quoted. Summaries quote
the sentences ``findings.pick`` takes: central (TextRank over the sentences' term vectors), in a
summary, findings or conclusions section rather than references or an appendix, never a
heading, caption, prompt line or code.
Deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fathom.chunking.tokens import WordCounter
from fathom.core.base import Draft, Hit
from fathom.core.checks import Check
from fathom.core.config import GeneratorConfig
from fathom.core.words import answer_terms
from fathom.stages.generate.base import BaseGenerator
from fathom.stages.generate.candidates import candidates
from fathom.stages.generate.sentence_scorer import (
    Candidate,
    SentenceScorer,
    features,
    shipped_scorer,
    unmatched,
)

if TYPE_CHECKING:
    from fathom.core.config import Config

_WORDS = WordCounter()
NO_ANSWER = "I don't know — the sources do not answer this."
MAX_SENTENCES = 3
# sources whose sentences the answerer embeds itself for the dense scorer (the embedding
# reranker read 8 candidates; a deeper context is ranked lexically)
DENSE_SOURCES = 8


def estimate_words(text: str) -> int:
    """Word-based token estimate (the extractive backend has no tokenizer)."""
    return _WORDS.count([text])[0]


class ExtractiveGenerator(BaseGenerator):
    """Quotes the sentences that answer, with citations; no language model, no randomness.

    Nothing is truncated, so no prompt is ever refused; ``prompt_tokens`` estimates the prompt
    a language model would get, so traces stay comparable across backends."""

    name = "extractive"
    language_model = False

    def __init__(
        self,
        cfg: GeneratorConfig | None = None,
        scorer: SentenceScorer | None = None,
        learned: bool = True,
        reader: Any = "shared",
    ) -> None:
        """``scorer``: the sentence scorer (default: the shipped one); ``learned=False``
        answers by term overlap alone (what a training run of the scorer starts from);
        ``reader``: the span reader (default: the packaged one; None quotes sentences)."""
        super().__init__(cfg or GeneratorConfig())
        self.scorer = (scorer or shipped_scorer()) if learned else None
        self.sentence_model = "sentence-scorer" if self.scorer is not None else "lexical-overlap"
        if reader == "shared":
            from fathom.index.reader import shared_reader

            reader = shared_reader() if learned else None
        self.reader = reader
        self._vectors: Any = None

    def __repr__(self) -> str:
        return "ExtractiveGenerator()"

    def use_vectors(self, vectors: Any) -> None:
        """Read sentence and question vectors from ``vectors`` (``index.embed.SentenceVectors``):
        the reranker's, so the dense scorer costs no model call."""
        self._vectors = vectors

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word-based estimate: words and punctuation marks × 1.3, rounded up."""
        return _WORDS.count(texts)

    def cosines(self, question: str, cands: list[Candidate]):
        """Each candidate's cosine to the question, or None without sentence vectors (the
        lexical scorer answers then). The embedding reranker leaves the vectors of every
        sentence it read; after the reader (which embeds nothing) the sentences of up to
        ``DENSE_SOURCES`` sources are embedded here, once, and remembered for the session;
        a deeper context is ranked by the lexical scorer, as embedding every sentence of 12 or
        20 sources would take seconds on a small CPU."""
        import numpy as np

        vectors = self._vectors
        if vectors is None or not cands:
            return None
        texts = [c.text for c in cands]
        sv = vectors.lookup(texts)
        if sv is None and len({c.n for c in cands}) > DENSE_SOURCES:
            return None
        if sv is None:
            sv = np.asarray(vectors.embed(texts), dtype=np.float32)
        qv = np.asarray(vectors.embed_query(question), dtype=np.float32).reshape(-1)
        return (sv @ qv).astype(np.float64)

    def select(
        self, question: str, hits: list[Hit], dense: bool = True
    ) -> tuple[list[tuple[float, int, str]], float]:
        """``(chosen, confidence)``: the quoted ``(share, source number, sentence)``, best first
        (empty for no answer), and the probability that they hold the answer; ``dense=False``
        ranks by the lexical scorer, which embeds nothing."""
        wanted = answer_terms(question)
        if not hits or not wanted:
            return [], 0.0
        cands = candidates(hits)
        if not any(c.quotable for c in cands):
            return [], 0.0
        cos = self.cosines(question, cands) if self.scorer is not None and dense else None
        x, own = features(question, wanted, cands, cos)
        if self.scorer is None:
            return _overlap_choice(cands, own), 0.0
        keep = [i for i, c in enumerate(cands) if c.quotable]
        if not keep or max(own[i] for i in keep) < self.scorer.min_own:
            return [], 0.0  # no sentence holds enough of the question: nothing is supported
        scores, shares, name = self.scorer.rank(x[keep], dense=cos is not None)
        order = sorted(
            range(len(keep)), key=lambda j: (-scores[j], cands[keep[j]].n, cands[keep[j]].pos)
        )
        best = order[0]
        confidence = self.scorer.confidence(
            name,
            float(scores[best]),
            float(shares[best]),
            float(own[keep[best]]),
            unmatched(wanted, cands, question),
        )
        if confidence < self.scorer.min_confidence:
            return [], confidence
        chosen: list[tuple[float, int, str]] = []
        seen: set[str] = set()
        for j in order:
            c = cands[keep[j]]
            if shares[j] < self.scorer.keep_ratio * shares[best] or len(chosen) == MAX_SENTENCES:
                break
            if c.text.lower() not in seen:
                seen.add(c.text.lower())
                chosen.append((round(float(shares[j]), 6), c.n, c.text))
        return chosen, confidence

    def summarize(
        self,
        hits: list[Hit],
        on_token: Callable[[str], Any] | None = None,
        question: str | None = None,
    ) -> Draft:
        """An extractive summary of ``hits``: the sentences ``findings.pick`` takes for
        ``question`` (None: the key findings) — central, in a summary or findings section
        rather than references, an appendix or a prompt, never a heading, caption or code —
        in source order, each cited."""
        from fathom.stages.generate.findings import pick

        t0 = time.perf_counter()
        quoted = [(p.n, p.text) for p in pick(question, hits)]
        return self._quote(question or "Summarize the sources.", hits, quoted, on_token, t0)

    def generate(
        self,
        question: str,
        hits: list[Hit],
        on_token: Callable[[str], Any] | None = None,
        time_budget_ms: float | None = None,
    ) -> Draft:
        """The answer in the shape the question's kind wants (``router.answer_kind``;
        ``shapes``): a list's items, a count, a number, else the reader's span, its sentence and
        the supported quotes after it (``Unsure:`` first under the reader's bar, or no answer
        there with ``unsure = "abstain"``), else the best 1–3 sentences quoted, each with its
        ``[n]`` citation; or that the sources do not answer, with the closest passages as
        ``related``, when the sources read lack the question's own words or it asks what only
        a picture shows and no sure span answers it. ``on_token`` receives the text, or each
        quoted sentence."""
        from fathom.router.answer_kind import answer_kind
        from fathom.stages.generate.kinds import acronym_answer, not_answered, shaped, with_short

        t0 = time.perf_counter()
        expanded = acronym_answer(question, hits)
        if expanded is not None:
            return self._shaped_draft(question, hits, None, expanded, on_token, t0)
        kind = answer_kind(question)
        span = self._read_span(question, hits)
        if not_answered(question, kind, span, hits, reader=self._reader() is not None):
            return self._abstain(question, hits, on_token, t0)
        shape = shaped(question, kind, span, hits)
        if shape is not None:
            return self._shaped_draft(question, hits, span, shape, on_token, t0)
        draft = self._answer(question, hits, span, on_token, t0)
        return with_short(draft, kind.name, span)

    def _abstain(
        self, question: str, hits: list[Hit], on_token: Callable[[str], Any] | None, t0: float
    ) -> Draft:
        """That the sources do not answer, with the best-ranked sources as ``related``."""
        import dataclasses

        from fathom.stages.generate.kinds import related

        draft = self._quote(question, hits, [], on_token, t0)
        return dataclasses.replace(draft, abstained=True, related=related(hits), confidence=0.0)

    def _shaped_draft(
        self,
        question: str,
        hits: list[Hit],
        span: Any,
        shaped: Any,
        on_token: Callable[[str], Any] | None,
        t0: float,
    ) -> Draft:
        """The draft of an answer in its kind's shape (``kinds.Shaped``)."""
        if on_token is not None:
            on_token(shaped.text)
        return Draft(
            text=shaped.text,
            citations=shaped.citations,
            prompt_tokens=self.prompt_tokens(question, hits),
            completion_tokens=estimate_words(shaped.text),
            backend=self.name,
            model=self.model,
            finish_reason="stop",
            ms=(time.perf_counter() - t0) * 1000,
            confidence=shaped.confidence,
            span=None if span is None else span.to_dict(hits[span.n - 1]),
            short=shaped.short,
        )

    def _answer(
        self,
        question: str,
        hits: list[Hit],
        span: Any,
        on_token: Callable[[str], Any] | None,
        t0: float,
    ) -> Draft:
        """The reader's span, its sentence and the supported quotes after it, or the quotes."""
        if span is not None and span.sure:
            # The sentences the scorer would quote stand behind the span as further evidence.
            # The lexical scorer picks them: the dense one would embed every sentence of every
            # source (most of an answer's time at k = 8–20 on two cores) to add quotes.
            chosen, _ = (
                self.select(question, hits, dense=False) if self.scorer is not None else ([], 0.0)
            )
            return self._span_draft(question, hits, span, chosen, span.probability, on_token, t0)
        if span is not None and self.cfg.unsure == "abstain":
            return self._quote(question, hits, [], on_token, t0)  # under the bar: no answer
        chosen, confidence = self.select(question, hits)
        if span is not None and chosen:
            # under the bar: the span, marked unsure, and the quotes, as sure as they are
            stated = confidence if self.scorer is not None else None
            return self._span_draft(question, hits, span, chosen, stated, on_token, t0)
        draft = self._quote(question, hits, [(n, s) for _, n, s in chosen], on_token, t0)
        if self.scorer is None:
            return draft
        import dataclasses

        return dataclasses.replace(draft, confidence=round(confidence, 4))

    @property
    def model(self) -> str:  # type: ignore[override]
        """``fathom-reader`` when the reader answers, else the sentence scorer's name."""
        reader = self._reader()
        return reader.name if reader is not None else self.sentence_model

    def _reader(self) -> Any:
        """The span reader, loaded; None when there is none or it cannot be loaded."""
        from fathom.core.errors import BackendUnavailable

        if self.reader is None:
            return None
        try:
            return self.reader.load()
        except BackendUnavailable:
            return None

    def _read_span(self, question: str, hits: list[Hit]) -> Any:
        """The reader's best span (``span.Span``), or None without a reader or a span."""
        from fathom.stages.generate.span import read_span

        reader = self._reader()
        if reader is None or not hits:
            return None
        return read_span(reader, question, hits, candidates(hits))[0]

    def _span_draft(
        self,
        question: str,
        hits: list[Hit],
        span: Any,
        chosen: list[tuple[float, int, str]],
        confidence: float | None,
        on_token: Callable[[str], Any] | None,
        t0: float,
    ) -> Draft:
        """The answer that gives ``span``, its sentence and the ``chosen`` quotes after it."""
        from fathom.stages.generate.span import answer_text, quotes_after

        more = quotes_after(span, [(n, sentence) for _, n, sentence in chosen])
        text = answer_text(span, more)
        if on_token is not None:
            on_token(text)
        return Draft(
            text=text,
            citations=tuple(dict.fromkeys([span.n, *(n for n, _ in more)])),
            prompt_tokens=self.prompt_tokens(question, hits),
            completion_tokens=estimate_words(text),
            backend=self.name,
            model=self.model,
            finish_reason="stop",
            ms=(time.perf_counter() - t0) * 1000,
            confidence=None if confidence is None else round(confidence, 4),
            span=span.to_dict(hits[span.n - 1]),
        )

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
            model=self.sentence_model,
            finish_reason="stop",
            ms=(time.perf_counter() - t0) * 1000,
        )


def _overlap_choice(cands: list[Candidate], own) -> list[tuple[float, int, str]]:
    """Without the shipped scorer (a training run makes it): the quotable sentence with the
    most of the question's term weight, if it holds half of it."""
    best = max((i for i, c in enumerate(cands) if c.quotable), key=lambda i: (own[i], -cands[i].n))
    if own[best] < 0.5:
        return []
    return [(float(own[best]), cands[best].n, cands[best].text)]


def doctor_check(cfg: Config, native_check: bool = True) -> list[Check]:
    """`fathom doctor`'s line: the extractive answerer needs nothing installed."""
    return [Check("generators", "extractive", "ok", "always available (no model)")]
