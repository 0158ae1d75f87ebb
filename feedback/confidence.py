"""Answer confidence: how well each answer sentence is supported by the context it cites.

For every answer sentence s (citation markers removed) and its evidence chunks E (the chunks it
cites, or all context chunks when it cites none; none at all when it cites only numbers that are
not sources, so such a sentence has support 0):

    support(s) = max over e in E of  w_emb · cos(emb(s), emb(e)) + (1 − w_emb) · overlap(s, e)

where ``overlap`` is the share of s's content words (lower-cased, stopwords removed, light
suffix stripping) that occur in e. The answer's support is the mean over its sentences. An
abstention ("I don't know", "the sources do not …") has confidence 0 and is flagged, so the
feedback loop deepens retrieval. When the backend gives token log-probabilities, the confidence
blends in their mean probability:

    confidence = (1 − w_lp) · support + w_lp · exp(mean logprob)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fathom.core.citations import CITATION, cited_numbers, strip_citations
from fathom.core.words import content_words

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Draft, Embedder, Hit

# An answer that hedges: the feedback loop deepens on it. Wider on purpose than the judges'
# ``feedback.judges.is_abstention`` (which decides whether an eval row abstained): a draft saying
# it "cannot find" something or has "no information about" it is worth another round, but an
# answer merely containing those words must not be scored as an abstention.
ABSTAIN = re.compile(
    r"\b(i\s+(?:do\s+not|don['’]t)\s+know|cannot\s+(?:be\s+)?(?:answer|determine|find)|"
    r"can['’]t\s+(?:answer|determine|find)|(?:sources?|context|documents?)\s+(?:do(?:es)?\s+not|"
    r"don['’]t)\s+(?:contain|mention|say|answer|provide|include)|no\s+information\s+(?:about|on)|"
    r"not\s+(?:mentioned|stated|specified)\s+in\s+the\s+(?:sources?|context|documents?))",
    re.IGNORECASE,
)
_TRAILING_CITES = re.compile(rf"([.!?])((?:\s*{CITATION.pattern})+)")
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def answer_sentences(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Sentences of an answer with the source numbers each cites."""
    out = []
    # "Claim. [1] Next" → "Claim [1]. Next": a citation after the full stop belongs to the
    # sentence before it, not to the next one.
    text = _TRAILING_CITES.sub(lambda m: m.group(2) + m.group(1), text.strip())
    for raw in _SENT.split(text):
        cites = tuple(cited_numbers(raw))
        clean = re.sub(r"\s+([.!?])", r"\1", strip_citations(raw)).strip()
        if len(content_words(clean)) >= 1:
            out.append((clean, cites))
    return out


@dataclass
class Confidence:
    score: float
    support: float
    abstained: bool
    mean_token_prob: float | None = None
    sentences: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "support": round(self.support, 4),
            "abstained": self.abstained,
            "mean_token_prob": (
                None if self.mean_token_prob is None else round(self.mean_token_prob, 4)
            ),
            "sentences": self.sentences,
        }


QUOTE_MIN_WORDS = 4  # a shorter "quote" ("No.", "1968") proves nothing


def _quotes(sentence: str, flat_chunk: str) -> bool:
    """Whether ``sentence`` (at least ``QUOTE_MIN_WORDS`` content words) occurs word for word
    in ``flat_chunk`` (whitespace already collapsed), on word boundaries."""
    flat = " ".join(sentence.split())
    if len(content_words(flat)) < QUOTE_MIN_WORDS:
        return False
    return re.search(rf"(?<!\w){re.escape(flat)}(?!\w)", flat_chunk) is not None


class SupportScorer:
    """Scores a draft against its context; the embedder is optional (lexical only without it)."""

    def __init__(self, embedder: Embedder | None = None, w_emb: float = 0.5, w_lp: float = 0.2):
        self.embedder = embedder
        self.w_emb = w_emb if embedder is not None else 0.0
        self.w_lp = w_lp
        self._cache: dict[str, np.ndarray] = {}  # sentence → embedding, bounded below

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of ``texts`` ``(n, dim)``, each sentence embedded once: a feedback round
        often repeats the previous round's answer sentences."""
        import numpy as np

        assert self.embedder is not None
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache.update(zip(todo, self.embedder.embed(todo), strict=True))
        return np.stack([self._cache[t] for t in texts])

    def score(
        self, draft: Draft, hits: list[Hit], chunk_vectors: np.ndarray | None = None
    ) -> Confidence:
        """Support of ``draft`` by ``hits``; ``chunk_vectors`` ``(len(hits), dim)`` are the hits'
        stored embeddings when the caller has them (saves embedding the chunks again). A
        sentence citing only numbers outside ``1..len(hits)`` gets support 0."""
        text = draft.text.strip()
        mean_prob = None
        if draft.logprobs:
            mean_prob = math.exp(sum(draft.logprobs) / len(draft.logprobs))
        if not text or ABSTAIN.search(text) or not hits:
            return Confidence(
                0.0,
                0.0,
                abstained=bool(ABSTAIN.search(text)) or not text,
                mean_token_prob=mean_prob,
            )
        sentences = answer_sentences(text)
        if not sentences:
            return Confidence(0.0, 0.0, abstained=False, mean_token_prob=mean_prob)
        flat_chunks = [" ".join(h.chunk.text.split()) for h in hits]
        # A sentence that cites only sources that do not exist has no evidence (support 0): its
        # citation is false, and scoring it against every source would reward it like a
        # careful answer.
        evidences = [
            [n - 1 for n in cites if 1 <= n <= len(hits)] if cites else list(range(len(hits)))
            for _, cites in sentences
        ]
        # A sentence quoted word for word from its evidence is fully supported by it: no need
        # to embed it (an extractive answer is all quotes).
        quoted = [
            next((j for j in ev if _quotes(s, flat_chunks[j])), None)
            for (s, _), ev in zip(sentences, evidences, strict=True)
        ]
        todo = [i for i, q in enumerate(quoted) if q is None and evidences[i]]
        sims = self._similarities([s for s, _ in sentences], todo, hits, chunk_vectors)
        supports, details = self._supports(sentences, evidences, quoted, sims, hits)
        support = sum(supports) / len(supports)
        score = support
        if mean_prob is not None:
            score = (1 - self.w_lp) * support + self.w_lp * mean_prob
        return Confidence(
            score, support, abstained=False, mean_token_prob=mean_prob, sentences=details
        )

    def _similarities(
        self,
        sentences: list[str],
        todo: list[int],
        hits: list[Hit],
        chunk_vectors: np.ndarray | None,
    ) -> np.ndarray | None:
        """Similarities ``(len(sentences), len(hits))`` float32 (embedding dot products) of the
        sentences in ``todo`` to every hit (other rows 0); None without an embedder or anything
        to embed."""
        if self.embedder is None or not todo:
            return None
        import numpy as np

        texts = [sentences[i] for i in todo]
        if chunk_vectors is not None and len(chunk_vectors) == len(hits):
            part = self._embed(texts) @ chunk_vectors.T
        else:
            vecs = self.embedder.embed(texts + [h.chunk.text for h in hits])
            part = vecs[: len(texts)] @ vecs[len(texts) :].T
        sims = np.zeros((len(sentences), len(hits)), dtype=np.float32)
        sims[todo] = part
        return sims

    def _supports(
        self,
        sentences: list[tuple[str, tuple[int, ...]]],
        evidences: list[list[int]],
        quoted: list[int | None],
        sims: np.ndarray | None,
        hits: list[Hit],
    ) -> tuple[list[float], list[dict[str, Any]]]:
        """Each sentence's support (its best evidence: a quote is 1, else word overlap and
        embedding similarity weighed by ``w_emb``) and its detail record."""
        chunk_words = [content_words(h.chunk.text) for h in hits]
        details = []
        supports = []
        for i, (sentence, cites) in enumerate(sentences):
            evidence = evidences[i]
            words = content_words(sentence)
            best, best_j = 0.0, -1
            if quoted[i] is not None:
                best, best_j = 1.0, quoted[i]
                evidence = []
            for j in evidence:
                overlap = len(words & chunk_words[j]) / len(words) if words else 0.0
                emb = float(sims[i, j]) if sims is not None else 0.0
                value = self.w_emb * max(emb, 0.0) + (1 - self.w_emb) * overlap
                if value > best:
                    best, best_j = value, j
            supports.append(best)
            details.append(
                {
                    "sentence": sentence,
                    "cites": list(cites),
                    "support": round(best, 4),
                    "best_source": best_j + 1,
                }
            )
        return supports, details


def attribute(draft: Draft, conf: Confidence, min_support: float = 0.35) -> Draft | None:
    """Cite an uncited answer: each sentence gets ``[n]`` of its best-supporting source.

    For models too small to follow the citation instruction. Returns None when the draft
    already cites, abstained, or no sentence is supported well enough.
    """
    from dataclasses import replace

    if draft.citations or conf.abstained or not conf.sentences:
        return None
    pieces, cited = [], []
    for d in conf.sentences:
        n = d.get("best_source", 0)
        if n > 0 and d["support"] >= min_support:
            pieces.append(f"{d['sentence']} [{n}]")
            if n not in cited:
                cited.append(n)
        else:
            pieces.append(d["sentence"])
    if not cited:
        return None
    return replace(draft, text=" ".join(pieces), citations=tuple(cited))
