"""Dense, BM25 and hybrid (reciprocal rank fusion) retrieval over a collection.

Each hit keeps its chunk, its 1-based rank and score in every retriever that found it, and the
fused score. ``probe`` returns the hits together with per-stage timings.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from stages.base import Hit, Probe
from stages.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from index.collection import Collection
    from stages.base import Embedder, SearchMode


def rrf_fuse(
    ranked: dict[str, tuple[np.ndarray, np.ndarray]], rrf_k: int, k: int
) -> list[tuple[int, float, dict[str, int], dict[str, float]]]:
    """Reciprocal rank fusion of per-retriever ``(scores, rows)`` lists (best first).

    Returns the top ``k`` as ``(row, fused, ranks, scores)``; ties break by row for determinism.
    """
    fused: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    scores: dict[int, dict[str, float]] = {}
    for name, (sc, rows) in ranked.items():
        for rank, (s, row) in enumerate(zip(sc.tolist(), rows.tolist(), strict=True), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (rrf_k + rank)
            ranks.setdefault(row, {})[name] = rank
            scores.setdefault(row, {})[name] = float(s)
    order = sorted(fused, key=lambda r: (-fused[r], r))[:k]
    return [(r, fused[r], ranks[r], scores[r]) for r in order]


class CollectionRetriever:
    """Searches one collection in ``dense``, ``bm25`` or ``hybrid`` mode."""

    def __init__(
        self,
        collection: Collection,
        embedder: Embedder | None,
        mode: SearchMode = "hybrid",
        rrf_k: int = 60,
        candidates: int = 100,
    ) -> None:
        if mode not in ("dense", "bm25", "hybrid"):
            raise ConfigError(f"retrieval.mode = {mode!r}: must be dense, bm25 or hybrid")
        if mode != "bm25" and embedder is None:
            raise ConfigError(f"retrieval.mode = {mode!r} needs an embedder")
        self.collection = collection
        self.embedder = embedder
        self.mode = mode
        self.rrf_k = rrf_k
        self.candidates = candidates

    def search(self, query: str, k: int) -> list[Hit]:
        return list(self.probe(query, k).hits)

    def ranked(
        self, query: str, depth: int, qvec: np.ndarray | None = None
    ) -> tuple[dict, dict[str, float]]:
        """Each retriever's ``(scores, rows)`` to ``depth``, and the time each step took (ms).

        ``qvec`` is the query's embedding when the caller already has it.
        """
        timings: dict[str, float] = {}
        ranked: dict[str, tuple] = {}
        if self.mode in ("dense", "hybrid"):
            if qvec is None:
                assert self.embedder is not None
                t = time.perf_counter()
                qvec = self.embedder.embed_query(query)
                timings["embed_query"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            ranked["dense"] = self.collection.dense.search(qvec, depth)
            timings["dense"] = (time.perf_counter() - t) * 1000
        if self.mode in ("bm25", "hybrid"):
            t = time.perf_counter()
            ranked["bm25"] = self.collection.bm25.search(query, depth)
            timings["bm25"] = (time.perf_counter() - t) * 1000
        return ranked, timings

    def probe(self, query: str, k: int, qvec: np.ndarray | None = None) -> Probe:
        """Top ``k`` hits with timings: embed_query, dense, bm25, fuse, fetch (ms)."""
        depth = max(k, self.candidates) if self.mode == "hybrid" else k
        ranked, timings = self.ranked(query, depth, qvec)
        t = time.perf_counter()
        if self.mode == "hybrid":
            top = rrf_fuse(ranked, self.rrf_k, k)
        else:
            name = self.mode
            sc, rows = ranked[name]
            top = [
                (int(r), float(s), {name: i}, {name: float(s)})
                for i, (s, r) in enumerate(zip(sc[:k], rows[:k], strict=True), start=1)
            ]
        timings["fuse"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        chunks = self.collection.chunks([row for row, *_ in top])
        hits = tuple(
            Hit(chunk=c, score=fused, ranks=ranks, scores=scores, row=row)
            for c, (row, fused, ranks, scores) in zip(chunks, top, strict=True)
        )
        timings["fetch"] = (time.perf_counter() - t) * 1000
        return Probe(query=query, hits=hits, timings_ms=timings)


def open_retriever(cfg, name: str, mode: SearchMode | None = None) -> CollectionRetriever:
    """A retriever over collection ``name`` using the embedder it was built with."""
    from index.collection import Collection
    from index.embed import embedder_id_for, make_query_embedder

    mode = mode or cfg.retrieval.mode
    coll = Collection.open(cfg, name, expect_embedder=embedder_id_for(cfg.embedder))
    embedder = make_query_embedder(cfg.embedder, cfg.models_path()) if mode != "bm25" else None
    return CollectionRetriever(
        coll, embedder, mode=mode, rrf_k=cfg.retrieval.rrf_k, candidates=cfg.retrieval.candidates
    )
