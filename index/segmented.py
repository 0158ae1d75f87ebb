"""Reading a generation of several segments (``index.segments``) as one collection: a chunk
store, a dense index and a BM25 index whose rows are the segments' rows in order, and whose
searches never return a tombstoned row.

``open_parts`` gives the plain ``ChunkStore``/``DenseIndex``/``Bm25Index`` for a generation of
one segment without tombstones (every collection built in one ingest), so those pay nothing.

A search runs in every segment and the results merge by score. Dense scores are cosine
similarities, comparable across segments. BM25 scores are comparable because a segment written
beside others is scored with the whole collection's statistics (``Bm25Index.build``'s
``stats``): document frequencies, row count and mean length summed over the segments it joins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from fathom.core.base import Chunk
from fathom.index.segments import Layout
from fathom.index.store import ChunkStore

if TYPE_CHECKING:
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Analyzer, Bm25Index


def live_mask(layout: Layout) -> np.ndarray | None:
    """``(rows,) bool``, False at tombstones; None when there are none."""
    if not layout.deleted:
        return None
    mask = np.ones(layout.rows, dtype=bool)
    for a, b in layout.deleted:
        mask[a:b] = False
    return mask


class SegmentedStore:
    """The chunk stores of the segments as one (a tombstoned row still reads: grounding may
    show a neighbour, and ``all`` keeps rows in place; ``live`` tells them apart)."""

    def __init__(self, stores: list[ChunkStore], layout: Layout) -> None:
        self.stores = stores
        self.bases = np.asarray([*layout.bases, layout.rows], dtype=np.int64)
        self.live = live_mask(layout)

    def __len__(self) -> int:
        return int(self.bases[-1])

    def _locate(self, row: int) -> tuple[int, int]:
        if not 0 <= row < len(self):
            raise IndexError(row)
        seg = int(np.searchsorted(self.bases, row, side="right")) - 1
        return seg, row - int(self.bases[seg])

    def get(self, row: int) -> Chunk:
        seg, local = self._locate(int(row))
        return self.stores[seg].get(local)

    def find(self, chunk_id: str) -> int | None:
        for seg, store in enumerate(self.stores):
            local = store.find(chunk_id)
            if local is not None:
                row = int(self.bases[seg]) + local
                if self.live is None or self.live[row]:
                    return row
        return None

    def rows(self, rows: Iterable[int]) -> list[Chunk]:
        return [self.get(int(r)) for r in rows]

    def all(self) -> list[Chunk]:
        return [c for store in self.stores for c in store.all()]

    def close(self) -> None:
        for store in self.stores:
            store.close()


class SegmentedDense:
    """The segments' dense indexes as one: each searched, the hits merged by score."""

    def __init__(self, parts: list[DenseIndex], layout: Layout) -> None:
        self.parts = parts
        self.bases = layout.bases
        self.live = live_mask(layout)
        self.dead_in = [
            0 if self.live is None else int((~self.live[b : b + p.size]).sum())
            for b, p in zip(self.bases, parts, strict=True)
        ]

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def dim(self) -> int:
        return self.parts[0].dim

    @property
    def kind(self) -> str:
        return max(self.parts, key=lambda p: p.size).kind

    def search(
        self,
        query: np.ndarray,
        k: int,
        within: Sequence[tuple[int, int]] | None = None,
        scan_up_to: int = 250_000,
    ) -> tuple[np.ndarray, np.ndarray]:
        from fathom.index.dense import top_k

        scores, rows = [], []
        for i, (base, part) in enumerate(zip(self.bases, self.parts, strict=True)):
            if within is not None:
                local = _clip(within, base, base + part.size)
                if not local:
                    continue
                s, r = part.search(query, k, local, scan_up_to)
            else:
                s, r = self._live_top(i, query, k)
            scores.append(s)
            rows.append(r + base)
        if not rows:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        return top_k(np.concatenate(scores), np.concatenate(rows), k)

    def _live_top(self, i: int, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Segment ``i``'s top ``k`` live rows (local): asked for more while tombstones took
        some of the places."""
        part, base = self.parts[i], self.bases[i]
        want = min(part.size, k + min(self.dead_in[i], 4 * k))
        while True:
            s, r = part.search(query, want)
            if not self.dead_in[i]:
                return s, r
            keep = self.live[r + base]
            if keep.sum() >= k or want >= part.size:
                return s[keep][:k], r[keep][:k]
            want *= 2

    def _split(self, rows: np.ndarray) -> Iterable[tuple[int, np.ndarray, np.ndarray]]:
        seg = np.searchsorted(np.asarray(self.bases), rows, side="right") - 1
        for i in np.unique(seg):
            where = np.flatnonzero(seg == i)
            yield int(i), where, rows[where] - self.bases[int(i)]

    def rows_vectors(self, rows: Iterable[int]) -> np.ndarray:
        keys = np.fromiter((int(r) for r in rows), dtype=np.int64)
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        for i, where, local in self._split(keys):
            out[where] = self.parts[i].rows_vectors(local.tolist())
        return out

    def vectors(self, start: int = 0, end: int | None = None) -> np.ndarray:
        end = self.size if end is None else end
        out = [
            p.vectors(max(start - b, 0), min(end - b, p.size))
            for b, p in zip(self.bases, self.parts, strict=True)
            if start < b + p.size and end > b
        ]
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)


class SegmentedBm25:
    """The segments' BM25 indexes as one: every row's score, tombstones at 0, then the top."""

    def __init__(self, parts: list[Bm25Index], layout: Layout) -> None:
        self.parts = parts
        self.live = live_mask(layout)

    @property
    def n(self) -> int:
        return sum(p.n for p in self.parts)

    @property
    def analyzer(self) -> Analyzer:
        return self.parts[0].analyzer

    def scores(self, query: str) -> np.ndarray:
        out = np.concatenate([p.scores(query) for p in self.parts]).astype(np.float32)
        if self.live is not None:
            out[~self.live] = 0
        return out

    def search(
        self, query: str, k: int, within: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        from fathom.index.sparse import top_positive

        scores = self.scores(query)
        if within is not None and len(scores):
            picked, where = top_positive(scores[within], k)
            return picked, within[where]
        return top_positive(scores, k)


def _clip(within: Sequence[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """``within``'s ranges inside ``[lo, hi)``, made local to it."""
    out = []
    for a, b in within:
        a, b = max(a, lo), min(b, hi)
        if a < b:
            out.append((a - lo, b - lo))
    return out


def open_parts(data_dir: Path, layout: Layout, cfg: Any) -> tuple[Any, Any, Any]:
    """``(store, dense, bm25)`` of generation folder ``data_dir`` under ``cfg.index``: the
    plain indexes for one segment without tombstones, else the segmented readers. Loaded
    eagerly; ``Collection`` calls the three loaders below lazily instead."""
    return (
        open_store(data_dir, layout),
        open_dense(data_dir, layout, cfg),
        open_bm25(data_dir, layout, cfg),
    )


def _single(layout: Layout) -> bool:
    return len(layout.segments) == 1 and not layout.deleted


def open_store(data_dir: Path, layout: Layout) -> Any:
    stores = [ChunkStore(layout.folder(data_dir, s)) for s in layout.segments]
    return stores[0] if _single(layout) else SegmentedStore(stores, layout)


def open_dense(data_dir: Path, layout: Layout, cfg: Any) -> Any:
    from fathom.index.dense import DenseIndex

    idx = cfg.index
    parts = [
        DenseIndex.load(
            layout.folder(data_dir, s), idx.hnsw_ef_search, idx.mmap, idx.ivf_nprobe, idx.ivf_refine
        )
        for s in layout.segments
    ]
    return parts[0] if _single(layout) else SegmentedDense(parts, layout)


def open_bm25(data_dir: Path, layout: Layout, cfg: Any) -> Any:
    from fathom.index.sparse import Bm25Index

    parts = [
        Bm25Index.load(layout.folder(data_dir, s), mmap=cfg.index.mmap) for s in layout.segments
    ]
    return parts[0] if _single(layout) else SegmentedBm25(parts, layout)
