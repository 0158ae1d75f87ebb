"""Dense vector index: FAISS exact inner product, HNSW above a configurable size."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.config import IndexConfig


def _faiss():
    import faiss

    return faiss


class DenseIndex:
    """Inner-product search over L2-normalised vectors (cosine similarity)."""

    FILE = "dense.faiss"

    def __init__(self, index: Any, kind: str) -> None:
        self.index = index
        self.kind = kind

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @classmethod
    def build(cls, vectors: np.ndarray, cfg: IndexConfig) -> DenseIndex:
        """Index ``vectors``, ``(n, dim) float32``; row i keeps id i."""
        import numpy as np

        faiss = _faiss()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        if n > cfg.hnsw_threshold:
            index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.hnsw_ef_construction
            index.hnsw.efSearch = cfg.hnsw_ef_search
            kind = "hnsw"
        else:
            index = faiss.IndexFlatIP(dim)
            kind = "flat"
        if n:
            index.add(vectors)
        return cls(index, kind)

    def params(self, cfg: IndexConfig) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "metric": "ip", "n": self.size, "dim": self.dim}
        if self.kind == "hnsw":
            out.update(m=cfg.hnsw_m, ef_construction=cfg.hnsw_ef_construction)
        return out

    def save(self, directory: Path) -> None:
        _faiss().write_index(self.index, str(directory / self.FILE))

    @classmethod
    def load(cls, directory: Path, ef_search: int = 128) -> DenseIndex:
        faiss = _faiss()
        # Queries come one at a time: OpenMP threads only add synchronisation to a single-query
        # scan (measured 2-3× slower P50 with 2 threads under load on 2 cores).
        faiss.omp_set_num_threads(1)
        index = faiss.read_index(str(directory / cls.FILE))
        kind = "flat"
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = ef_search
            kind = "hnsw"
        return cls(index, kind)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows for ``query`` ``(dim,)``: ``(scores (k',), rows (k',) int64)``."""
        import numpy as np

        k = min(k, self.size)
        if k <= 0:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        scores, rows = self.index.search(q, k)
        keep = rows[0] >= 0
        return scores[0][keep], rows[0][keep].astype(np.int64)

    def rows_vectors(self, rows: Iterable[int]) -> np.ndarray:
        """Stored vectors of ``rows`` as ``(len(rows), dim) float32``, in one FAISS call."""
        import numpy as np

        keys = np.fromiter((int(r) for r in rows), dtype=np.int64)
        if not len(keys):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.index.reconstruct_batch(keys), dtype=np.float32)

    def vectors(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Stored vectors ``[start, end)`` as ``(n, dim) float32`` (for incremental rebuilds)."""
        import numpy as np

        end = self.size if end is None else end
        if end <= start:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.index.reconstruct_n(start, end - start)
