"""Dense, BM25 and hybrid retrieval over a collection.

Hybrid fuses the two ranked lists either by a convex combination of min-max normalised scores
(``convex``, the default) or by reciprocal rank fusion (``rrf``). Bruch, Gai and Ingber ("An
Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023) found the convex
combination better than RRF and about as robust; on SciFact (BEIR test, our chunked
collection) it gives nDCG@10 0.726 against RRF's 0.715, and the weight that is best on
SciFact's *train* queries is the untuned 0.5 (``bench/retrieval_beir.py``).

Each hit keeps its chunk, its 1-based rank and score in every retriever that found it, and the
fused score. ``probe`` returns the hits together with per-stage timings.

``within`` (a ``index.doc_filter.DocFilter``) restricts every retriever to the chunks of some
documents before fusion: the dense search to their vectors, BM25's ranking to their rows. The
top ``k`` is then exact within those documents, and holds ``k`` hits whenever they have ``k``
chunks (BM25, as always, ranks only chunks that share a term with the query).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from fathom.core.base import Hit, Probe
from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder, SearchMode
    from fathom.index.collection import Collection
    from fathom.index.doc_filter import DocFilter


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


def convex_fuse(
    ranked: dict[str, tuple[np.ndarray, np.ndarray]], weights: dict[str, float], k: int
) -> list[tuple[int, float, dict[str, int], dict[str, float]]]:
    """Convex combination of per-retriever ``(scores, rows)`` lists (best first).

    Each list's scores are min-max normalised over the list (all 1 when they are equal), a row
    a retriever did not return counts as that list's minimum (0), and the fused score is
    ``sum_r weights[r] * normalised_r`` (in [0, 1] when the weights sum to 1). Returns the top
    ``k`` as ``(row, fused, ranks, scores)``; ties break by row.
    """
    import numpy as np

    lists = [(name, sc, rows) for name, (sc, rows) in ranked.items() if len(rows)]
    if not lists:
        return []
    row_parts, value_parts = [], []
    for name, sc, rows in lists:
        sc64 = np.asarray(sc, dtype=np.float64)
        lo, hi = float(sc64.min()), float(sc64.max())
        norm = (sc64 - lo) / (hi - lo) if hi > lo else np.ones_like(sc64)
        row_parts.append(np.asarray(rows, dtype=np.int64))
        value_parts.append(float(weights.get(name, 0.0)) * norm)
    # One pass over every (row, weighted score), summed per row in list order (as a loop would).
    unique, inverse = np.unique(np.concatenate(row_parts), return_inverse=True)
    fused = np.bincount(inverse, weights=np.concatenate(value_parts), minlength=len(unique))
    order = np.lexsort((unique, -fused))[:k]
    # Ranks and raw scores only for the rows returned.
    where = [{row: i for i, row in enumerate(rows.tolist())} for rows in row_parts]
    out = []
    for i in order.tolist():
        row = int(unique[i])
        ranks: dict[str, int] = {}
        scores: dict[str, float] = {}
        for (name, sc, _rows), pos in zip(lists, where, strict=True):
            j = pos.get(row)
            if j is not None:
                ranks[name] = j + 1
                scores[name] = float(sc[j])
        out.append((row, float(fused[i]), ranks, scores))
    return out


class CollectionRetriever:
    """Searches one collection in ``dense``, ``bm25`` or ``hybrid`` mode."""

    def __init__(
        self,
        collection: Collection,
        embedder: Embedder | None,
        mode: SearchMode = "hybrid",
        rrf_k: int = 60,
        candidates: int = 100,
        fusion: str = "convex",
        dense_weight: float = 0.5,
    ) -> None:
        if mode not in ("dense", "bm25", "hybrid"):
            raise ConfigError(f"retrieval.mode = {mode!r}: must be dense, bm25 or hybrid")
        if fusion not in ("convex", "rrf"):
            raise ConfigError(f"retrieval.fusion = {fusion!r}: must be convex or rrf")
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"retrieval.dense_weight = {dense_weight}: must be within 0–1")
        self.fusion = fusion
        self.weights = {"dense": dense_weight, "bm25": 1.0 - dense_weight}
        if mode != "bm25" and embedder is None:
            raise ConfigError(f"retrieval.mode = {mode!r} needs an embedder")
        self.collection = collection
        self.embedder = embedder
        self.mode = mode
        self.rrf_k = rrf_k
        self.candidates = candidates

    def search(self, query: str, k: int, within: DocFilter | None = None) -> list[Hit]:
        return list(self.probe(query, k, within=within).hits)

    def ranked(
        self,
        query: str,
        depth: int,
        qvec: np.ndarray | None = None,
        within: DocFilter | None = None,
    ) -> tuple[dict, dict[str, float]]:
        """Each retriever's ``(scores, rows)`` to ``depth``, and the time each step took (ms).

        ``qvec`` is the query's embedding when the caller already has it; ``within``, the
        documents to search (default: all).
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
            ranked["dense"] = self.collection.dense.search(
                qvec,
                depth,
                within=within.ranges if within is not None else None,
                scan_up_to=self.collection.cfg.index.hnsw_threshold,
            )
            timings["dense"] = (time.perf_counter() - t) * 1000
        if self.mode in ("bm25", "hybrid"):
            t = time.perf_counter()
            rows = within.rows if within is not None else None
            ranked["bm25"] = self.collection.bm25.search(query, depth, within=rows)
            timings["bm25"] = (time.perf_counter() - t) * 1000
        return ranked, timings

    def probe(
        self,
        query: str,
        k: int,
        qvec: np.ndarray | None = None,
        within: DocFilter | None = None,
    ) -> Probe:
        """Top ``k`` hits with timings: embed_query, dense, bm25, fuse, fetch (ms); ``within``:
        only the chunks of those documents."""
        depth = max(k, self.candidates) if self.mode == "hybrid" else k
        ranked, timings = self.ranked(query, depth, qvec, within)
        t = time.perf_counter()
        if self.mode == "hybrid" and self.fusion == "convex":
            top = convex_fuse(ranked, self.weights, k)
        elif self.mode == "hybrid":
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
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for

    mode = mode or cfg.retrieval.mode
    coll = Collection.open(cfg, name, expect_embedder=embedder_id_for(cfg.embedder))
    embedder = query_embedder_for(cfg, coll) if mode != "bm25" else None
    return retriever_for(cfg, coll, embedder, mode)


def retriever_for(
    cfg, collection: Collection, embedder: Embedder | None, mode: SearchMode | None = None
) -> CollectionRetriever:
    """A retriever over an open collection with the configured fusion and depth."""
    r = cfg.retrieval
    return CollectionRetriever(
        collection,
        embedder,
        mode=mode or r.mode,
        rrf_k=r.rrf_k,
        candidates=r.candidates,
        fusion=r.fusion,
        dense_weight=r.dense_weight,
    )
