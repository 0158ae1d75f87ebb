"""Second-stage reranking: Fathom's reader, a cross-encoder, or an embedding reranker.

Both return NEW hits (records are frozen) ordered by the rerank score, best first, with
``scores["rerank"]``, ``ranks["rerank"]`` (1-based) added and ``score`` set to the rerank score.
The sort is stable: hits with equal scores keep their input order.

``make_reranker`` picks the backend: ``fathom-reader`` (the default: the reader model shipped in
the package, ``fathom.index.reader``), ``embedding`` (the ``EmbeddingReranker`` itself), or a
configured cross-encoder (a local path, the local
Hugging Face cache, then a download unless ``HF_HUB_OFFLINE`` is set), or — when that cannot be
loaded — the ``EmbeddingReranker``, which needs no model beyond the query embedder, together with
a plain-English notice for the report.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from fathom.core.base import Hit
from fathom.core.errors import BackendUnavailable
from fathom.core.words import content_terms, is_statement, lexical_overlap, term_weights

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import numpy as np
    from fathom.core.base import Embedder, Reranker
    from fathom.core.config import RerankConfig
    from fathom.index.reader import Reader, Windows

# ---------------------------------------------------------------------------------------------
# Shared output contract
# ---------------------------------------------------------------------------------------------


def _reordered(
    hits: list[Hit], scores: Iterable[float], extra: dict[str, list[float]] | None = None
) -> list[Hit]:
    """New hits sorted by ``scores`` (stable), with ``rerank`` score and rank recorded, and
    each of ``extra``'s per-hit values under its name in ``scores``."""
    scored = list(zip(hits, (float(s) for s in scores), strict=True))
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])  # sorted() is stable
    out: list[Hit] = []
    for rank, i in enumerate(order, start=1):
        hit, s = scored[i]
        more = {name: float(values[i]) for name, values in (extra or {}).items()}
        out.append(
            dataclasses.replace(
                hit,
                score=s,
                ranks={**hit.ranks, "rerank": rank},
                scores={**hit.scores, **more, "rerank": s},
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Cross-encoder
# ---------------------------------------------------------------------------------------------


def _offline() -> bool:
    """True when the environment forbids hub downloads (read now, not at library import)."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_unreachable(timeout: float = 2.0) -> str | None:
    """Why the Hugging Face hub cannot be reached, or ``None`` when it can (or a proxy is set).

    A quick TCP check before a download: without network, huggingface_hub retries for about a
    minute before giving up.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None  # the proxy decides; let the download try
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = (
        url.hostname or "huggingface.co",
        url.port or (443 if url.scheme == "https" else 80),
    )
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host} unreachable: {_short(exc, 80)}"
    return None


def _hf_cache_dir() -> Path:
    """huggingface_hub's cache folder, resolved from the environment as the library does."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "huggingface" / "hub"


def in_hf_cache(repo_id: str) -> bool:
    """Whether a snapshot of ``repo_id`` with a ``config.json`` is in the local hub cache."""
    folder = _hf_cache_dir() / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    return folder.is_dir() and any(folder.glob("*/config.json"))


def _cross_encoder_class(model: str):
    """sentence-transformers' ``CrossEncoder`` (imports torch: call only when loading)."""
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise BackendUnavailable(
            f"reranker {model!r}: sentence-transformers is not installed ({exc}) — pip install -e ."
        ) from None
    from fathom.index.embed import quiet_transformers

    quiet_transformers()
    return CrossEncoder


def _short(exc: BaseException, limit: int = 160) -> str:
    """The first line of an exception message, shortened for a one-line notice."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` by hub name or local path; loads on first use.

    The rerank score is the model's raw logit (no sigmoid), which orders exactly as the
    probability but does not saturate into ties. For a model with several labels the last
    label's logit is used (the "relevant" class of binary rerankers).
    """

    def __init__(self, model: str, batch_size: int = 32, max_length: int = 512) -> None:
        self.model = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.name = f"cross-encoder:{model}"
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                self._model = self._open()
        return self._model

    def _open(self):
        if not self.model.strip():
            raise BackendUnavailable("reranker '': rerank.model is empty — name a CrossEncoder")
        kwargs = {"max_length": self.max_length, "device": "cpu"}
        path = Path(self.model).expanduser()
        if path.exists():
            CrossEncoder = _cross_encoder_class(self.model)
            try:
                return CrossEncoder(str(path.resolve()), **kwargs)
            except Exception as exc:  # any loader failure means the backend is unusable
                raise BackendUnavailable(
                    f"reranker {self.model!r}: cannot load the model folder ({_short(exc)}) — "
                    "check that it holds a saved CrossEncoder"
                ) from None
        # Decide from the cache folder and the network before importing torch (seconds), so
        # the fallback costs nothing when the model cannot be had.
        cached_error: Exception | None = None
        if in_hf_cache(self.model):
            CrossEncoder = _cross_encoder_class(self.model)
            try:
                return CrossEncoder(self.model, local_files_only=True, **kwargs)
            except Exception as exc:  # a broken cached copy: try the hub
                cached_error = exc
        if _offline():
            raise BackendUnavailable(
                f"reranker {self.model!r}: not in the local Hugging Face cache and downloads "
                "are disabled (HF_HUB_OFFLINE) — download it once while online, or set "
                "rerank.model to a local path"
            ) from cached_error
        unreachable = _hub_unreachable()
        if unreachable:
            raise BackendUnavailable(
                f"reranker {self.model!r}: not in the local Hugging Face cache and {unreachable} "
                "— download it once while online, or set rerank.model to a local path"
            ) from cached_error
        CrossEncoder = _cross_encoder_class(self.model)
        try:
            return CrossEncoder(self.model, **kwargs)
        except Exception as exc:  # network, auth, missing repo, bad files: all unusable
            raise BackendUnavailable(
                f"reranker {self.model!r}: not cached and the download failed ({_short(exc)}) "
                "— download it once while online, or set rerank.model to a local path"
            ) from None

    def load(self) -> CrossEncoderReranker:
        """Load the model now (raises ``BackendUnavailable``); returns ``self``."""
        self._load()
        return self

    def scores(self, query: str, texts: list[str]) -> np.ndarray:
        """Raw relevance logits of ``(query, text)`` pairs: ``(len(texts),) float32``."""
        import numpy as np
        import torch

        if not texts:
            return np.zeros(0, dtype=np.float32)
        model = self._load()
        out = model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            activation_fn=torch.nn.Identity(),
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        out = np.asarray(out, dtype=np.float32)
        return out[:, -1] if out.ndim == 2 else out.reshape(-1)

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` re-ordered by cross-encoder score (new Hit objects)."""
        if not hits:
            return []
        return _reordered(hits, self.scores(query, [h.chunk.text for h in hits]).tolist())


# ---------------------------------------------------------------------------------------------
# Fathom's reader
# ---------------------------------------------------------------------------------------------


class ReaderReranker:
    """Fathom's reader (``fathom.index.reader``) as a reranker.

    Each hit is cut into the reader's short windows (``RERANK_LENGTH`` tokens) and read in the
    ``windows_per_hit`` of them with the most of the question's content words (IDF-weighted
    over all the windows; ties go to the earlier window), all hits' windows in one batch. A
    hit's reading is its best window's relevance logit plus its best span's margin over
    no-answer; the rerank score is that reading standardised over the hits (mean 0, deviation
    1) plus ``PRIOR`` × −log(its rank in the order it came in), so the first-stage ranking
    still counts where the reader hesitates (chosen on the training halves). A query that
    states rather than asks (``core.words.is_statement``: a claim, a keyword query) is not what
    the reader was trained to answer: its first-stage ranking weighs ``STATEMENT_PRIOR``
    instead (chosen on SciFact's 809 training claims: nDCG@10 0.677 at 0.5, 0.727 at 2, 0.729
    at 3, 0.727 at 4, against 0.724 unreranked).
    """

    PRIOR = 0.5
    STATEMENT_PRIOR = 3.0

    def __init__(self, reader: Reader | None = None, windows_per_hit: int = 1) -> None:
        from fathom.index.reader import NAME, shared_reader

        self.reader = reader if reader is not None else shared_reader()
        self.windows_per_hit = max(1, windows_per_hit)
        self.name = NAME

    def load(self) -> ReaderReranker:
        """Open the model now (raises ``BackendUnavailable``); returns ``self``."""
        self.reader.load()
        return self

    def chosen(self, query: str, texts: list[str]) -> Windows:
        """The windows of ``texts`` the reranker reads: the best by term overlap per text."""
        import numpy as np
        from fathom.index.reader import RERANK_LENGTH

        windows = self.reader.encode(query, texts, max_length=RERANK_LENGTH)
        counts = np.bincount(windows.owner, minlength=len(texts))
        if counts.max(initial=0) <= self.windows_per_hit:
            return windows
        spans = []
        for r in range(len(windows)):
            tok = np.flatnonzero(windows.passage[r])
            text = texts[int(windows.owner[r])]
            spans.append(
                text[windows.starts[r, tok[0]] : windows.ends[r, tok[-1]]] if len(tok) else ""
            )
        q_terms = content_terms(query)
        w_terms = [content_terms(t) for t in spans]
        weights = term_weights(q_terms, w_terms)
        overlap = np.array([lexical_overlap(weights, t) for t in w_terms], dtype=np.float64)
        keep: list[int] = []
        for t in range(len(texts)):
            rows = np.flatnonzero(windows.owner == t)
            best = rows[np.argsort(-overlap[rows], kind="stable")[: self.windows_per_hit]]
            keep.extend(sorted(best.tolist()))
        return windows.select(keep)

    def scores(self, query: str, texts: list[str]) -> np.ndarray:
        """Each text's rerank score ``(len(texts),) float32`` (see the class docstring)."""
        return self.read(query, texts)[0]

    def read(self, query: str, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(score, reading, margin)``, each ``(len(texts),)``: the rerank score, the raw
        reading (best window's relevance logit plus its best span's margin) and the best span's
        margin over no-answer (the reader's abstention bar applies to it); a text without a
        window reads just below the lowest of the others."""
        import numpy as np
        from fathom.index.reader import best_spans

        if not texts:
            empty = np.zeros(0, dtype=np.float32)
            return empty, empty, empty
        windows = self.chosen(query, texts)
        start, end, rel = self.reader.run(windows)
        _, _, margin = best_spans(start, end, windows.passage)
        reading = np.full(len(texts), -np.inf, dtype=np.float64)
        np.maximum.at(reading, windows.owner, rel.astype(np.float64) + margin)
        best_margin = np.full(len(texts), -np.inf, dtype=np.float64)
        np.maximum.at(best_margin, windows.owner, np.asarray(margin, dtype=np.float64))
        for a in (reading, best_margin):
            a[~np.isfinite(a)] = a[np.isfinite(a)].min(initial=0.0) - 1.0
        spread = reading.std()
        z = (reading - reading.mean()) / spread if spread > 0 else np.zeros_like(reading)
        prior = -np.log(np.arange(1, len(texts) + 1, dtype=np.float64))
        weight = self.STATEMENT_PRIOR if is_statement(query) else self.PRIOR
        score = (z + weight * prior).astype(np.float32)
        return score, reading.astype(np.float32), best_margin.astype(np.float32)

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` re-ordered by the reader's relevance (new Hit objects), each with its
        ``reading`` and ``margin`` (``read``) in ``scores``: what a depth policy that reads
        passages decides from."""
        if not hits:
            return []
        score, reading, margin = self.read(query, [h.chunk.text for h in hits])
        extra = {"reading": reading.tolist(), "margin": margin.tolist()}
        return _reordered(hits, score.tolist(), extra)


# ---------------------------------------------------------------------------------------------
# Embedding fallback
# ---------------------------------------------------------------------------------------------


class EmbeddingReranker:
    """Reranks with the query embedder alone: best-sentence similarity plus term overlap.

    ``score = DENSE_WEIGHT * dense + LEXICAL_WEIGHT * lexical`` where

    * ``dense`` = the highest cosine between the query and any unit of the chunk; the units are
      its sentences (``split_sentences``) plus the whole chunk, so both a single answer-bearing
      sentence and a chunk that answers only as a whole can win. A chunk with more than
      ``max_sentences`` sentences is cut into that many runs of consecutive sentences, so all
      of its text is still seen. All units of all hits are embedded in one batch; the whole
      chunk's vector comes from the index (``vectors``) when the caller can look it up, since
      that is the longest unit to embed.
    * ``lexical`` = the IDF-weighted share of the query's content words (stopwords removed,
      plural ``s`` dropped) that occur in the chunk, IDF computed over the hits being reranked.

    With ``embedder=None`` the score is ``lexical`` alone (``name`` is then "lexical").
    """

    DENSE_WEIGHT = 0.8
    LEXICAL_WEIGHT = 0.2

    def __init__(
        self,
        embedder: Embedder | None,
        max_sentences: int = 32,
        vectors: Callable[[list[Hit]], np.ndarray | None] | None = None,
    ) -> None:
        """``vectors(hits)``: the stored embeddings of the hits' chunks ``(len(hits), dim)``,
        or None when some hit has none."""
        self.embedder = embedder
        self.max_sentences = max(1, max_sentences)
        self.vectors = vectors
        self.name = "embedding" if embedder is not None else "lexical"

    def units(
        self, text: str, whole: bool = True, spans: list[tuple[int, int]] | None = None
    ) -> list[str]:
        """The sentence units of one chunk (at most ``max_sentences``) plus, with ``whole``,
        the whole text; ``spans`` are its sentences when known (else ``text`` is split)."""
        from fathom.chunking.sentences import split_sentences

        if spans is None:
            spans = split_sentences(text)
        if len(spans) > self.max_sentences:
            size = math.ceil(len(spans) / self.max_sentences)
            spans = [
                (spans[i][0], spans[min(i + size, len(spans)) - 1][1])
                for i in range(0, len(spans), size)
            ]
        out = [text[s:e] for s, e in spans]
        if whole and (len(out) != 1 or out[0] != text.strip()):
            out.append(text)
        return out or [text]

    def scores(
        self,
        query: str,
        texts: list[str],
        text_vectors: np.ndarray | None = None,
        spans: list[list[tuple[int, int]]] | None = None,
    ) -> list[float]:
        """Blended relevance of each text to ``query`` (see the class docstring); ``spans``,
        when given, are each text's sentences."""
        import numpy as np

        if not texts:
            return []
        q_terms = content_terms(query)
        doc_terms = [content_terms(t) for t in texts]
        weights = term_weights(q_terms, doc_terms)
        lexical = np.array([lexical_overlap(weights, d) for d in doc_terms], dtype=np.float32)
        if self.embedder is None:
            return lexical.tolist()
        stored = text_vectors is not None and len(text_vectors) == len(texts)
        units = [
            self.units(t, whole=not stored, spans=spans[i] if spans is not None else None)
            for i, t in enumerate(texts)
        ]
        owner = np.repeat(np.arange(len(texts)), [len(u) for u in units])
        vecs = self.embedder.embed([u for us in units for u in us])
        qvec = np.asarray(self.embedder.embed_query(query), dtype=np.float32).reshape(-1)
        sims = vecs @ qvec
        dense = np.full(len(texts), -1.0, dtype=np.float32)
        np.maximum.at(dense, owner, sims)
        if stored:
            dense = np.maximum(dense, np.asarray(text_vectors, dtype=np.float32) @ qvec)
        return (self.DENSE_WEIGHT * dense + self.LEXICAL_WEIGHT * lexical).tolist()

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` re-ordered by the blended score (new Hit objects)."""
        if not hits:
            return []
        from fathom.chunking.sentences import chunk_sentences

        stored = self.vectors(hits) if self.vectors is not None else None
        texts = [h.chunk.text for h in hits]
        spans = [chunk_sentences(h.chunk) for h in hits]
        return _reordered(hits, self.scores(query, texts, stored, spans))


def rerank_head(cfg: RerankConfig, reranker: Reranker) -> int:
    """How many of the candidates ``reranker`` reads: ``rerank.candidates`` for a cross-encoder,
    at most ``rerank.embedding_candidates`` for the embedding fallback (which embeds every
    sentence of each)."""
    if isinstance(reranker, EmbeddingReranker):
        return max(1, min(cfg.candidates, cfg.embedding_candidates))
    return cfg.candidates


def rerank_behind(reranker: Reranker, question: str, hits: list[Hit], n: int) -> list[Hit]:
    """The first ``n`` of ``hits`` reranked, then the rest, never reranked, scored just below
    the head's lowest in their order: their fused scores are on another scale, and the
    compressor orders sources by score."""
    head, tail = reranker.rerank(question, hits[:n]), hits[n:]
    if not head or not tail:
        return head + tail
    floor = min(h.score for h in head)
    step = 1e-6 * max(1.0, abs(floor))
    return head + [
        dataclasses.replace(h, score=floor - step * i) for i, h in enumerate(tail, start=1)
    ]


# ---------------------------------------------------------------------------------------------
# Choosing a backend
# ---------------------------------------------------------------------------------------------


EMBEDDING = "embedding"  # rerank.model naming the embedding reranker itself


def make_reranker(
    cfg: RerankConfig,
    embedder: Embedder | None,
    vectors: Callable[[list[Hit]], np.ndarray | None] | None = None,
) -> tuple[Reranker, str | None]:
    """The configured reranker (Fathom's reader, the embedding reranker or a cross-encoder),
    loaded now; else the embedding reranker and a notice.

    The notice is one plain-English line for the report; it is ``None`` when the configured
    model loaded. The caller decides whether reranking is enabled (``cfg.enabled``).
    """
    from fathom.index.reader import NAME

    if cfg.model == EMBEDDING:
        return EmbeddingReranker(embedder, vectors=vectors), None
    chosen = (
        ReaderReranker()
        if cfg.model == NAME
        else CrossEncoderReranker(cfg.model, batch_size=cfg.batch_size)
    )
    try:
        return chosen.load(), None
    except BackendUnavailable as exc:
        reason = str(exc)
        for prefix in (f"reranker {cfg.model!r}: ", "reader model: "):
            reason = reason[len(prefix) :] if reason.startswith(prefix) else reason
        reason = reason.split(" — ", 1)[0]
    fallback = EmbeddingReranker(embedder, vectors=vectors)
    where = " offline" if _offline() else ""
    used = "the embedding reranker" if embedder is not None else "term overlap (no embedder)"
    return fallback, f"reranker: {cfg.model} unavailable{where} ({reason}); used {used} instead"
