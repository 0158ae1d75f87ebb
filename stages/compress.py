"""Fit ranked hits into the generator's context budget.

``ContextCompressor.fit`` runs four steps over hits given best first:

1. drop near-duplicates — cosine ≥ 0.97 of the chunk embeddings when there are vectors, else
   word 3-shingle Jaccard ≥ ``dedupe_threshold`` — keeping the one ranked higher;
2. order by maximal marginal relevance: ``λ·relevance − (1−λ)·max similarity to those already
   chosen``; relevance is the hit's score min-max scaled over the hits (rank-based when the
   scores are all equal or not finite), similarity is the cosine of chunk embeddings or, without
   an embedder, the Jaccard of content words;
3. condense chunks longer than ``sentence_select_over`` tokens (longer than the chunker makes
   them) to their query-relevant sentences (embedding similarity blended with term overlap, or
   term overlap alone), best first up to that many tokens, then put back in their original order
   with " … " between non-adjacent ones; when the sources still do not fit the budget whole,
   condense more of them the same way to about ``condense_to`` tokens, lowest-ranked first,
   until they fit (top-ranked chunks stay whole as long as there is room: condensing loses the
   answer sentence of about one chunk in twenty on SQuAD);
4. add sources in that order while the rendered sources (``render_block`` with the final
   numbering, joined by a blank line as ``render_user`` does) fit ``budget`` tokens of the
   generator's tokenizer; a source that does not fit is cut at a sentence boundary when at
   least ``MIN_TRUNCATED_TOKENS`` of its text fit, else skipped. A final exact count guarantees
   the bound.

Condensed or cut chunks are new ``Chunk`` records (``dataclasses.replace``) with the same
``chunk_id``, pages and section, so citations still map back to the document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from fathom.core.base import Chunk, Hit
from fathom.core.errors import FathomError
from fathom.core.words import content_terms, lexical_overlap, term_weights, words
from fathom.stages.generate.prompt import (
    DEFAULT_FRAMING,
    SYSTEM,
    SYSTEM_PLAIN,
    Framing,
    render_block,
    render_user,
)
from fathom.stages.rerank import EmbeddingReranker

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder

CountTokens = Callable[[list[str]], list[int]]

SOURCE_SEPARATOR = "\n\n"  # between rendered sources, as render_user joins them
ELLIPSIS = " … "


@dataclass
class CompressionStats:
    """What the last ``fit`` did; token counts are of the rendered sources joined."""

    hits_in: int = 0
    duplicates_dropped: int = 0
    chunks_condensed: int = 0
    sentences_removed: int = 0  # by condensing and by cutting
    truncated: int = 0
    skipped: int = 0  # did not fit the budget even when cut
    hits_out: int = 0
    tokens_before: int = 0  # all input hits in input order (sum of sources + separators)
    tokens_after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prompt_overhead(
    question: str,
    count_tokens: CountTokens,
    seam_slack: int = 2,
    framing: Framing = DEFAULT_FRAMING,
) -> int:
    """Tokens that ``build_messages(question, hits, framing)`` spends outside the sources.

    The system message plus the user message's text before and after the joined sources
    (contents only: add the chat template's own tokens). ``seam_slack`` tokens per seam cover
    tokenizers that merge characters across a seam differently.
    """
    probe = Hit(Chunk("x", "x", "", 0, 0, 1, 1, "", 0, 0), 0.0)
    user, source = render_user(question, [probe], framing), render_block(1, probe, framing)
    at = user.index(source)
    system = SYSTEM_PLAIN if framing == "plain" else SYSTEM
    parts = [system, user[:at], user[at + len(source) :]]
    return sum(count_tokens(parts)) + 2 * seam_slack


def _jaccard(sets: list[set]) -> np.ndarray:
    """Pairwise Jaccard of ``sets``: ``(n, n) float32``; two empty sets count as identical."""
    import numpy as np

    vocab: dict[Any, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, s in enumerate(sets):
        for item in s:
            rows.append(i)
            cols.append(vocab.setdefault(item, len(vocab)))
    m = np.zeros((len(sets), max(1, len(vocab))), dtype=np.float32)
    m[rows, cols] = 1.0
    inter = m @ m.T
    size = m.sum(axis=1)
    union = size[:, None] + size[None, :] - inter
    return np.divide(inter, union, out=np.ones_like(inter), where=union > 0)


@lru_cache(maxsize=8192)
def shingles(text: str, k: int = 3) -> frozenset[tuple[str, ...]]:
    """Word ``k``-shingles of ``text`` (the whole word sequence when it is shorter than ``k``);
    cached, since each feedback round compares the same chunks again."""
    return frozenset(_shingles_of(words(text), k))


def relevance(hits: list[Hit]) -> np.ndarray:
    """Hit scores min-max scaled to [0, 1]; rank-based (1 → 1/n) when scores can't tell apart.

    ``(n,) float32``.
    """
    import numpy as np

    n = len(hits)
    s = np.array([h.score for h in hits], dtype=np.float64)
    if n and np.isfinite(s).all() and np.isfinite(s.max() - s.min()) and s.max() > s.min():
        return ((s - s.min()) / (s.max() - s.min())).astype(np.float32)
    return (1.0 - np.arange(n, dtype=np.float32) / max(n, 1)).astype(np.float32)


def mmr_order(rel: np.ndarray, sim: np.ndarray, lam: float) -> list[int]:
    """Indices in maximal-marginal-relevance order; ties go to the lower index.

    ``rel``: ``(n,)`` relevance; ``sim``: ``(n, n)`` similarity.
    """
    import numpy as np

    n = len(rel)
    chosen: list[int] = []
    left = np.ones(n, dtype=bool)
    max_sim = np.zeros(n, dtype=np.float64)
    for _ in range(n):
        gain = lam * rel.astype(np.float64) - (1.0 - lam) * max_sim if chosen else rel
        gain = np.where(left, gain, -np.inf)
        i = int(np.argmax(gain))
        chosen.append(i)
        left[i] = False
        max_sim = np.maximum(max_sim, sim[i])
    return chosen


def join_sentences(text: str, spans: list[tuple[int, int]], keep: list[int]) -> str:
    """The kept sentences (indices into ``spans``) in order: runs of adjacent sentences keep
    the original text between them, gaps become " … "."""
    return joined_sentences(text, spans, keep)[0]


def joined_sentences(
    text: str, spans: list[tuple[int, int]], keep: list[int]
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``join_sentences`` with the kept sentences' spans into the joined text."""
    keep = sorted(keep)
    pieces: list[str] = []
    out: list[tuple[int, int]] = []
    at = 0  # length of the joined text so far
    run_start = prev = keep[0]
    for i in [*keep[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        if pieces:
            at += len(ELLIPSIS)
        base = spans[run_start][0]
        out += [(at + a - base, at + b - base) for a, b in spans[run_start : prev + 1]]
        pieces.append(text[base : spans[prev][1]])
        at += len(pieces[-1])
        if i is not None:
            run_start = prev = i
    return ELLIPSIS.join(pieces), tuple(out)


@dataclass(frozen=True)
class _Sizes:
    """Token counts of a list of hits as rendered sources (see ``ContextCompressor._measure``)."""

    full: list[int]  # each rendered source
    header: list[int]  # each source without its text
    text: list[int]  # each text, by difference
    sep: int  # the separator between two sources


class ContextCompressor:
    """Dedupe, MMR-order, condense and pack hits into a token budget (see the module doc)."""

    COSINE_DUPLICATE = 0.97
    MIN_TRUNCATED_TOKENS = 40
    DENSE_WEIGHT = EmbeddingReranker.DENSE_WEIGHT  # sentence relevance blend
    LEXICAL_WEIGHT = EmbeddingReranker.LEXICAL_WEIGHT

    def __init__(
        self,
        count_tokens: CountTokens,
        embedder: Embedder | None = None,
        dedupe_threshold: float = 0.9,
        mmr_lambda: float = 0.7,
        sentence_select_over: int = 300,
        condense_to: int = 120,
        vectors: Callable[[list[Hit]], np.ndarray | None] | None = None,
        embed_sentences: bool = True,
        framing: Framing = DEFAULT_FRAMING,
    ) -> None:
        """``vectors(hits)`` gives the hits' stored embeddings ``(n, dim)`` (or None), so chunks
        already in the index are not embedded again; ``embed_sentences=False`` scores sentences
        by term overlap alone (the light query path). ``framing`` is the generator's
        (``generator.framing``): sources are counted as that framing writes them."""
        self.count_tokens = count_tokens
        self.framing = framing
        self.embedder = embedder
        self.vectors = vectors
        self.embed_sentences = embed_sentences
        self.dedupe_threshold = dedupe_threshold
        self.mmr_lambda = mmr_lambda
        self.sentence_select_over = sentence_select_over
        self.condense_to = min(condense_to, sentence_select_over)
        self.last_stats = CompressionStats()
        self._query: tuple[str, np.ndarray] | None = None  # the last query and its vector
        # (query, chunk text, target tokens) → (condensed text, sentences removed, tokens kept)
        self._condensed: dict[tuple[str, str, int], tuple[str, int, int]] = {}

    # -- steps 1 and 2 -------------------------------------------------------------------------

    def dedupe(
        self,
        hits: list[Hit],
        vecs: np.ndarray | None = None,
        shingle_sets: list[set] | None = None,
    ) -> list[int]:
        """Indices of the hits kept after dropping near-duplicates of higher-ranked ones."""
        if vecs is not None:  # the stored vectors already tell near-duplicates apart
            dup = (vecs @ vecs.T) >= self.COSINE_DUPLICATE
        else:
            if shingle_sets is None:
                shingle_sets = [shingles(h.chunk.text) for h in hits]
            dup = _jaccard(shingle_sets) >= self.dedupe_threshold
        kept: list[int] = []
        seen_ids: set[str] = set()
        for i, h in enumerate(hits):
            if h.chunk.chunk_id in seen_ids or dup[i, kept].any():
                continue
            kept.append(i)
            seen_ids.add(h.chunk.chunk_id)
        return kept

    def order(
        self,
        hits: list[Hit],
        vecs: np.ndarray | None = None,
        term_sets: list[set[str]] | None = None,
    ) -> list[int]:
        """MMR order of ``hits`` (indices)."""
        import numpy as np

        if vecs is not None:
            sim = np.clip(vecs @ vecs.T, 0.0, 1.0)
        else:
            if term_sets is None:
                term_sets = [content_terms(h.chunk.text) for h in hits]
            sim = _jaccard(term_sets)
        return mmr_order(relevance(hits), sim, self.mmr_lambda)

    # -- step 3 --------------------------------------------------------------------------------

    def sentence_scores(self, query: str, sentences: list[list[str]]) -> list[np.ndarray]:
        """Relevance to ``query`` of each sentence of each text: term overlap, blended with
        embedding similarity when there is an embedder (all sentences in one batch)."""
        import numpy as np

        q_terms = content_terms(query)
        out: list[np.ndarray] = []
        for sents in sentences:
            terms = [content_terms(s) for s in sents]
            weights = term_weights(q_terms, terms)
            out.append(np.array([lexical_overlap(weights, t) for t in terms], dtype=np.float32))
        flat = [s for sents in sentences for s in sents]
        if self.embedder is None or not self.embed_sentences or not flat:
            return out
        if self._query is None or self._query[0] != query:
            vec = np.asarray(self.embedder.embed_query(query), dtype=np.float32).reshape(-1)
            self._query = (query, vec)
        qvec = self._query[1]
        sims = self.embedder.embed(flat) @ qvec
        at = 0
        for i, sents in enumerate(sentences):
            dense = sims[at : at + len(sents)]
            at += len(sents)
            out[i] = self.DENSE_WEIGHT * dense + self.LEXICAL_WEIGHT * out[i]
        return out

    def condense(
        self,
        text: str,
        spans: list[tuple[int, int]],
        scores: np.ndarray,
        counts: list[int],
        target: int | None = None,
    ) -> tuple[str, int, int, tuple[tuple[int, int], ...]]:
        """The best sentences of ``text`` (up to ``target`` tokens, default
        ``sentence_select_over``; at least one) in original order: ``(text, sentences removed,
        tokens kept, the kept sentences' spans into that text)``.

        ``spans``, ``scores`` and ``counts`` give each sentence's span, relevance and tokens.
        """
        import numpy as np

        limit = self.sentence_select_over if target is None else target
        keep: list[int] = []
        total = 0
        for i in np.argsort(-np.asarray(scores), kind="stable").tolist():
            if keep and total + counts[i] > limit:
                continue
            keep.append(i)
            total += counts[i]
        if len(keep) == len(spans):
            return text, 0, total, tuple(spans)
        joined, kept_spans = joined_sentences(text, spans, keep)
        return joined, len(spans) - len(keep), total, kept_spans

    def _condense_many(
        self,
        query: str,
        hits: list[Hit],
        which: list[int],
        stats: CompressionStats,
        target: int | None = None,
    ) -> dict[int, tuple[Hit, int]]:
        """``{i: (condensed hit, its text tokens)}`` for the ``hits[i]`` that changed.

        Condensing a chunk depends only on the query and the chunk's text, so results are kept
        for the next call: a feedback round re-fits the previous round's chunks and more.
        """
        from fathom.chunking.sentences import chunk_sentences

        memo = self._condensed
        if len(memo) > 4096:
            memo.clear()
        limit = self.sentence_select_over if target is None else target
        todo = [i for i in which if (query, hits[i].chunk.text, limit) not in memo]
        spans = {i: chunk_sentences(hits[i].chunk) for i in todo}
        multi = [i for i in todo if len(spans[i]) > 1]
        for i in todo:
            if i not in multi:
                memo[(query, hits[i].chunk.text, limit)] = ("", 0, 0, ())
        if multi:
            sentences = [[hits[i].chunk.text[s:e] for s, e in spans[i]] for i in multi]
            flat_counts = self.count_tokens([s for sents in sentences for s in sents])
            scores = self.sentence_scores(query, sentences)
            at = 0
            for i, sents, sc in zip(multi, sentences, scores, strict=True):
                counts = flat_counts[at : at + len(sents)]
                at += len(sents)
                memo[(query, hits[i].chunk.text, limit)] = self.condense(
                    hits[i].chunk.text, spans[i], sc, counts, limit
                )
        out: dict[int, tuple[Hit, int]] = {}
        for i in which:
            text, removed, tokens, kept = memo[(query, hits[i].chunk.text, limit)]
            if removed:
                out[i] = (_with_text(hits[i], text, kept), tokens)
                stats.chunks_condensed += 1
                stats.sentences_removed += removed
        return out

    # -- step 4 --------------------------------------------------------------------------------

    def _cut(self, n: int, hit: Hit, room: int, header: int) -> tuple[Hit, int] | None:
        """``hit`` cut at a sentence boundary so its rendered source (``header`` tokens without
        text) fits ``room`` tokens, with the number of sentences removed; ``None`` when fewer
        than ``MIN_TRUNCATED_TOKENS`` of text would fit."""
        from fathom.chunking.sentences import chunk_sentences

        if room - header < self.MIN_TRUNCATED_TOKENS:
            return None
        text = hit.chunk.text
        spans = chunk_sentences(hit.chunk)
        if len(spans) < 2:
            return None
        counts = self.count_tokens([text[s:e] for s, e in spans])
        # Start from the additive estimate, then step back until the exact count fits.
        k, total = 0, header + 1  # + the trailing ellipsis
        while k < len(spans) - 1 and total + counts[k] <= room:
            total += counts[k]
            k += 1
        while k > 0:
            cut = _with_text(hit, text[: spans[k - 1][1]] + " …", tuple(spans[:k]))
            if self.count_tokens([render_block(n, cut, self.framing)])[0] <= room:
                kept_tokens = sum(counts[:k])
                if kept_tokens < self.MIN_TRUNCATED_TOKENS:
                    return None
                return cut, len(spans) - k
            k -= 1
        return None

    # -- the whole thing -----------------------------------------------------------------------

    def fit(self, query: str, hits: list[Hit], budget: int, lead: Sequence[str] = ()) -> list[Hit]:
        """The hits to show, in order, condensed so their rendered sources fit ``budget``
        (``lead``'s chunk ids first, in its order: a cascade's previous rung)."""
        stats = CompressionStats(hits_in=len(hits))
        self.last_stats = stats
        if not hits:
            return []
        sizes = self._measure(hits)
        stats.tokens_before = sum(sizes.full) + sizes.sep * (len(hits) - 1)
        if budget <= 0:
            stats.skipped = len(hits)
            return []
        ordered = self._dedupe_and_order(hits, stats, lead)
        condensed, long_ones = self._condense_planned(query, hits, ordered, sizes, budget, stats)
        out, rendered = self._pack(query, hits, ordered, sizes, condensed, long_ones, budget, stats)
        # Token counts are additive only up to merges across the separators: check exactly.
        while out:
            stats.tokens_after = self.count_tokens([SOURCE_SEPARATOR.join(rendered)])[0]
            if stats.tokens_after <= budget:
                break
            out.pop()
            rendered.pop()
            stats.skipped += 1
            stats.tokens_after = 0
        stats.hits_out = len(out)
        return out

    def _measure(self, hits: list[Hit]) -> _Sizes:
        """Each hit's rendered tokens, its header's (the source without text), its text's,
        and the separator's."""
        n_in = len(hits)
        rendered_in = [render_block(i, h, self.framing) for i, h in enumerate(hits, 1)]
        headers_in = [
            render_block(i, _with_text(h, ""), self.framing) for i, h in enumerate(hits, 1)
        ]
        # The separator's cost in context ("</source>\n\n<source"): BPE tokenizers merge the
        # blank line with its neighbours differently than when it stands alone.
        probe = render_block(1, _with_text(hits[0], "x"), self.framing)
        pair = probe + SOURCE_SEPARATOR + probe
        counts = self.count_tokens([pair, probe, *rendered_in, *headers_in])
        sep = max(0, counts[0] - 2 * counts[1])
        full, header = counts[2 : n_in + 2], counts[n_in + 2 :]
        # Text tokens by difference: exact for word-piece, within a token or two for BPE.
        text = [max(0, f - h) for f, h in zip(full, header, strict=True)]
        return _Sizes(full, header, text, sep)

    def _dedupe_and_order(
        self, hits: list[Hit], stats: CompressionStats, lead: Sequence[str] = ()
    ) -> list[int]:
        """Indices of the hits that are not near-duplicates, ``lead``'s first, then MMR order."""
        vecs = self.vectors(hits) if self.vectors is not None else None
        if vecs is None and self.embedder is not None:
            vecs = self.embedder.embed([h.chunk.text for h in hits])
        kept = self.dedupe(hits, vecs)
        stats.duplicates_dropped = len(hits) - len(kept)
        pool = [hits[i] for i in kept]
        terms = [content_terms(h.chunk.text) for h in pool]
        chosen = self.order(pool, vecs[kept] if vecs is not None else None, terms)
        ordered = [kept[i] for i in chosen]
        at = {chunk_id: n for n, chunk_id in enumerate(lead)}
        rank = [at.get(hits[i].chunk.chunk_id, len(at)) for i in ordered]
        return [i for _, i in sorted(zip(rank, ordered, strict=True), key=lambda p: p[0])]

    def _condense_planned(
        self,
        query: str,
        hits: list[Hit],
        ordered: list[int],
        sizes: _Sizes,
        budget: int,
        stats: CompressionStats,
    ) -> tuple[dict[int, tuple[Hit, int]], list[int]]:
        """Condense the long chunks that could plausibly make it in, all their sentences in one
        batch, and, under budget pressure, more of them to about ``condense_to`` tokens:
        ``({i: (condensed hit, tokens)}, the long ones)``."""
        text_tokens, header, sep = sizes.text, sizes.header, sizes.sep
        # Walk the order with each chunk's size after condensing as the estimate.
        limit = self.sentence_select_over
        long_ones: list[int] = []
        estimate = 0
        for i in ordered:
            if estimate > budget:
                break
            if text_tokens[i] > limit:
                long_ones.append(i)
            estimate += min(text_tokens[i], limit) + header[i] + sep
        # Under budget pressure, condense more chunks to about ``condense_to`` tokens, the
        # lowest-ranked first, until the estimate fits (or none is left to condense).
        after = {i: min(text_tokens[i], limit) for i in ordered}
        estimate = sum(after[i] + header[i] for i in ordered) + sep * (len(ordered) - 1)
        pressed: list[int] = []
        for i in reversed(ordered):
            if estimate <= budget:
                break
            if after[i] > self.condense_to:
                pressed.append(i)
                estimate -= after[i] - self.condense_to
        condensed = self._condense_many(
            query, hits, [i for i in long_ones if i not in pressed], stats
        )
        if pressed:
            condensed.update(
                self._condense_many(query, hits, pressed, stats, target=self.condense_to)
            )
        return condensed, long_ones

    def _pack(
        self,
        query: str,
        hits: list[Hit],
        ordered: list[int],
        sizes: _Sizes,
        condensed: dict[int, tuple[Hit, int]],
        long_ones: list[int],
        budget: int,
        stats: CompressionStats,
    ) -> tuple[list[Hit], list[str]]:
        """Greedily, in order: each hit (condensed where it was) that fits the room left, else
        cut at a sentence boundary to fit, else skipped; the hits and their rendered sources."""
        limit = self.sentence_select_over
        out: list[Hit] = []
        rendered: list[str] = []
        used = 0
        for i in ordered:
            gap = sizes.sep if out else 0
            room = budget - used - gap
            hit, size = hits[i], sizes.text[i]
            if i in condensed:
                hit, size = condensed[i]
            # Neither whole nor cut can fit (2 tokens of slack for the source number's width).
            if room - sizes.header[i] + 2 < min(size, self.MIN_TRUNCATED_TOKENS):
                stats.skipped += 1
                continue
            if size > limit and i not in long_ones and i not in condensed:  # beyond the estimate
                hit, size = self._condense_many(query, hits, [i], stats).get(i, (hit, size))
            n = len(out) + 1
            source = render_block(n, hit, self.framing)
            same = hit is hits[i] and n == i + 1  # the very string counted above
            cost = sizes.full[i] if same else self.count_tokens([source])[0]
            if cost > room:
                cut = self._cut(n, hit, room, sizes.header[i])
                if cut is None:
                    stats.skipped += 1
                    continue
                hit, removed = cut
                stats.truncated += 1
                stats.sentences_removed += removed
                source = render_block(n, hit, self.framing)
                cost = self.count_tokens([source])[0]
            out.append(hit)
            rendered.append(source)
            used += gap + cost
        return out, rendered


def _shingles_of(w: list[str], k: int = 3) -> set[tuple[str, ...]]:
    if len(w) < k:
        return {tuple(w)} if w else set()
    return set(zip(*(w[j:] for j in range(k)), strict=False))


def _with_text(hit: Hit, text: str, sentences: tuple[tuple[int, int], ...] | None = None) -> Hit:
    """A new hit whose chunk carries ``text`` (same id, pages and section) and the sentence
    spans ``sentences`` into it (None: unknown)."""
    chunk = dataclasses.replace(hit.chunk, text=text, sentences=sentences)
    return dataclasses.replace(hit, chunk=chunk)


def context_budget(gen: Any, settings: Any, question: str, wanted: int) -> int:
    """The context budget for ``question``: ``wanted`` tokens, capped so that the prompt the
    generator ``gen`` builds (template, instructions, question, ``settings.max_tokens`` of
    answer) fits its context window; an error when the question alone leaves no room."""
    from fathom.stages.generate.prompt import build_messages

    # Chat-template tokens (the no-source prompt minus its message texts), plus everything
    # a prompt with sources spends outside the sources themselves.
    bare = build_messages(question, [])
    template = gen.prompt_tokens(question, []) - sum(gen.count_tokens([m["content"] for m in bare]))
    framing = settings.framing
    overhead = max(0, template) + prompt_overhead(question, gen.count_tokens, framing=framing)
    room = gen.context_window - overhead - settings.max_tokens - 16
    if room <= 0:
        raise FathomError(
            f"the question alone ({overhead} tokens) leaves no room in the "
            f"{gen.context_window}-token context of {gen.model} — raise "
            "generator.context_window or shorten the question"
        )
    return max(0, min(wanted, room))
