"""Dense vector index: FAISS exact inner product, approximate above a configurable size
(``index.ann``: an inverted file, IVF, trained from the vectors it indexes, or an HNSW graph),
opened memory-mapped (``index.mmap``).

A search may be restricted to some rows (the chunks of the documents ``--doc`` selects, as
``[start, end)`` ranges): an exact scan of just those vectors, read in place from FAISS's own
storage, when the index is flat or they number at most ``scan_up_to`` (a collection of that
size would be a flat index); else the approximate index searched with an ID selector, and
scanned exactly after all when it finds fewer than ``k`` of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
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
        self._stored: np.ndarray | None = None  # a view of FAISS's vectors (``stored``)

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
        if n > cfg.hnsw_threshold and cfg.ann == "ivf":
            return cls(_build_ivf(vectors, cfg), "ivf")
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
        if self.kind == "ivf":
            ivf = _faiss().extract_index_ivf(self.index)
            out.update(nlist=int(ivf.nlist), codes=_codes(self.index))
        return out

    def save(self, directory: Path) -> None:
        _faiss().write_index(self.index, str(directory / self.FILE))

    @classmethod
    def load(
        cls,
        directory: Path,
        ef_search: int = 128,
        mmap: bool = True,
        nprobe: int = 512,
        refine: int = 32,
    ) -> DenseIndex:
        """The index saved in ``directory``; ``mmap``: memory-mapped in place (its vectors are
        read from the file as searches touch them, never copied in), which a generation's files
        allow because they are written once, into a new folder, and never rewritten."""
        faiss = _faiss()
        # Queries come one at a time: OpenMP threads only add synchronisation to a single-query
        # scan (measured 2-3× slower P50 with 2 threads under load on 2 cores).
        faiss.omp_set_num_threads(1)
        path = str(directory / cls.FILE)
        index = None
        if mmap:
            try:
                index = faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC)
            except RuntimeError:  # an index type FAISS cannot map in place: read it whole
                index = None
        if index is None:
            index = faiss.read_index(path)
        kind = "flat"
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = ef_search
            kind = "hnsw"
        elif faiss.try_extract_index_ivf(index) is not None:
            _tune_ivf(index, nprobe, refine)
            kind = "ivf"
        return cls(index, kind)

    def search(
        self,
        query: np.ndarray,
        k: int,
        within: Sequence[tuple[int, int]] | None = None,
        scan_up_to: int = 250_000,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows for ``query`` ``(dim,)``: ``(scores (k',), rows (k',) int64)``;
        ``within``: only these ``[start, end)`` row ranges (sorted, disjoint)."""
        import numpy as np

        if within is not None:
            return self._search_within(query, k, within, scan_up_to)
        k = min(k, self.size)
        if k <= 0:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        if hasattr(self.index, "k_factor"):  # IVF codes, re-scored: as many for any depth
            params = _faiss().IndexRefineSearchParameters(k_factor=self.refine_factor(k))
            scores, rows = self.index.search(q, k, params=params)
        else:
            scores, rows = self.index.search(q, k)
        keep = rows[0] >= 0
        return scores[0][keep], rows[0][keep].astype(np.int64)

    def refine_factor(self, k: int) -> float:
        """How many candidates per hit an IVF index re-scores for a top ``k``: ``index.
        ivf_refine`` × 10 candidates in all whatever ``k`` (what a top 10 gets), at least
        two per hit — a deep candidate list for fusion re-scores no more than a top 10."""
        return max(2.0, float(self.index.k_factor) * 10 / max(k, 1))

    def _search_within(
        self, query: np.ndarray, k: int, within: Sequence[tuple[int, int]], scan_up_to: int
    ) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        n = sum(b - a for a, b in within)
        k = min(k, n)
        if k <= 0:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        q = np.ascontiguousarray(query.reshape(-1), dtype=np.float32)
        if self.kind != "flat" and n > scan_up_to:
            scores, rows = self._graph_within(q, k, within)
            if len(rows) == k:
                return scores, rows
        if self.kind == "ivf":  # no flat copy of the vectors: rebuild just these
            scores = np.concatenate([self.vectors(a, b) @ q for a, b in within])
        else:
            stored = self.stored()
            scores = np.concatenate([stored[a:b] @ q for a, b in within])
        rows = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in within])
        return top_k(scores, rows, k)

    def _graph_within(
        self, q: np.ndarray, k: int, within: Sequence[tuple[int, int]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The approximate index searched for rows ``within`` only (an ID selector)."""
        import numpy as np

        faiss = _faiss()
        if len(within) == 1:
            selector = faiss.IDSelectorRange(int(within[0][0]), int(within[0][1]))
        else:
            rows = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in within])
            selector = faiss.IDSelectorBatch(rows)
        if self.kind == "ivf":
            nprobe = int(faiss.extract_index_ivf(self.index).nprobe)
            params = faiss.SearchParametersIVF(sel=selector, nprobe=nprobe)
            if hasattr(self.index, "k_factor"):  # codes re-scored from the stored vectors
                params = faiss.IndexRefineSearchParameters(
                    k_factor=self.refine_factor(k), base_index_params=params
                )
        else:
            ef = max(int(self.index.hnsw.efSearch), k)
            params = faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        scores, rows = self.index.search(q.reshape(1, -1), k, params=params)
        keep = rows[0] >= 0
        return scores[0][keep], rows[0][keep].astype(np.int64)

    def stored(self) -> np.ndarray:
        """Every stored vector, ``(n, dim) float32``: a view of FAISS's own memory where the
        index keeps its vectors flat (no copy), else a copy."""
        if self._stored is None or len(self._stored) != self.size:
            faiss = _faiss()
            flat = faiss.downcast_index(self.index.storage) if self.kind == "hnsw" else self.index
            if hasattr(flat, "get_xb") and self.size:
                view = faiss.rev_swig_ptr(flat.get_xb(), self.size * self.dim)
                self._stored = view.reshape(self.size, self.dim)
            else:
                self._stored = self.vectors()
        return self._stored

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


def ivf_lists(n: int, cfg: IndexConfig) -> int:
    """Inverted lists for ``n`` vectors: ``index.ivf_nlist``, or about 4·√n as a power of two
    (4,096 at a million), never more than a list per 39 vectors (FAISS's k-means minimum)."""
    if cfg.ivf_nlist:
        return max(1, min(cfg.ivf_nlist, n))
    want = 4 * n**0.5
    nlist = 1 << max(0, round(math.log2(max(want, 1))))
    return max(1, min(nlist, n // 39 or 1))


def _build_ivf(vectors: np.ndarray, cfg: IndexConfig) -> Any:
    """An inverted file over ``vectors``: its centroids trained on an even sample of them
    (fixed seed), each vector kept as a 4-bit product-quantised code that FAISS scans with
    SIMD ("fast scan", 192 bytes at 384 dimensions), and the best ``index.ivf_refine`` × k
    candidates re-scored exactly from the vectors themselves, stored flat beside the codes
    (memory-mapped at query time, so only those candidates' pages are read). Ids are rows.
    A dimension the codes cannot split in two is kept flat in the lists instead."""
    import numpy as np

    faiss = _faiss()
    n, dim = vectors.shape
    nlist = ivf_lists(n, cfg)
    if dim % 2 == 0:
        index = faiss.index_factory(
            dim, f"IVF{nlist},PQ{dim // 2}x4fs,RFlat", faiss.METRIC_INNER_PRODUCT
        )
        ivf = faiss.extract_index_ivf(index)
    else:
        quantizer = faiss.IndexFlatIP(dim)
        index = ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.niter = 12
    ivf.cp.seed = 1234
    sample = min(n, 40 * nlist)
    index.train(vectors[np.linspace(0, n - 1, sample).astype(np.int64)])
    index.add(vectors)
    if not hasattr(index, "k_factor"):
        index.make_direct_map()  # reconstruction by row
    _tune_ivf(index, cfg.ivf_nprobe, cfg.ivf_refine)
    return index


def _tune_ivf(index: Any, nprobe: int, refine: int) -> None:
    """Lists a query scans (at most all of them) and the re-scored share of candidates."""
    ivf = _faiss().extract_index_ivf(index)
    ivf.nprobe = min(nprobe, int(ivf.nlist))
    if hasattr(index, "k_factor"):
        index.k_factor = float(refine)


def _codes(index: Any) -> str:
    return "pq4-fast-scan+refine" if hasattr(index, "k_factor") else "flat"


def top_k(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``scores`` ``(n,)`` with their ``rows`` ``(n,) int64``, by score and
    then row: ``(scores (k,) float32, rows (k,) int64)``."""
    import numpy as np

    if k < len(scores):
        cand = np.argpartition(-scores, k - 1)[:k]
        kth = scores[cand].min()
        cand = np.flatnonzero(scores >= kth)  # every row tied at the k-th score competes
    else:
        cand = np.arange(len(scores))
    order = cand[np.lexsort((rows[cand], -scores[cand]))[:k]]
    return scores[order].astype(np.float32), rows[order].astype(np.int64)
