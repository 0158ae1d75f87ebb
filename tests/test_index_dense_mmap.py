"""The dense index and the BM25 arrays opened memory-mapped: the same results as read whole
(a flat, an HNSW and an IVF index, restricted searches and vector reads included); an index
type FAISS cannot map in place is read whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fathom.core.config import IndexConfig
from fathom.index.dense import DenseIndex


def _vectors(n: int = 800, dim: int = 24) -> np.ndarray:
    vecs = np.random.default_rng(1).normal(size=(n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_a_mapped_index_answers_as_one_read_whole(tmp_path: Path, kind: str) -> None:
    vecs = _vectors()
    threshold = 10_000 if kind == "flat" else 0
    ann = "hnsw" if kind == "hnsw" else "ivf"
    DenseIndex.build(vecs, IndexConfig(hnsw_threshold=threshold, ann=ann)).save(tmp_path)
    whole = DenseIndex.load(tmp_path, mmap=False)
    mapped = DenseIndex.load(tmp_path, mmap=True)
    assert mapped.kind == whole.kind == kind
    for q in vecs[:20:4]:
        for got, want in zip(mapped.search(q, 10), whole.search(q, 10), strict=True):
            np.testing.assert_array_equal(got, want)
        within = [(100, 180), (700, 720)]
        for got, want in zip(
            mapped.search(q, 7, within=within), whole.search(q, 7, within=within), strict=True
        ):
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mapped.stored(), vecs)
    np.testing.assert_array_equal(mapped.vectors(5, 9), vecs[5:9])
    np.testing.assert_array_equal(mapped.rows_vectors([3, 500]), vecs[[3, 500]])


def test_an_index_faiss_cannot_map_is_read_whole(tmp_path: Path, monkeypatch) -> None:
    import faiss

    DenseIndex.build(_vectors(50), IndexConfig()).save(tmp_path)
    real = faiss.read_index

    def refuse_mapping(path: str, flags: int = 0):
        if flags:
            raise RuntimeError("Error: mmap not supported for this index type")
        return real(path)

    monkeypatch.setattr(faiss, "read_index", refuse_mapping)
    index = DenseIndex.load(tmp_path, mmap=True)
    assert index.size == 50 and len(index.search(_vectors(50)[0], 3)[1]) == 3


def test_mapped_bm25_arrays_score_as_read_whole(tmp_path: Path) -> None:
    from fathom.index.sparse import Bm25Index

    texts = [f"pump impeller bronze casing {'seal ' * (i % 5)} row {i}" for i in range(60)]
    Bm25Index.build(texts, IndexConfig()).save(tmp_path)
    whole, mapped = Bm25Index.load(tmp_path), Bm25Index.load(tmp_path, mmap=True)
    assert isinstance(mapped.data, np.memmap) and not isinstance(whole.data, np.memmap)
    for query in ("impeller seal", "row 7 casing", "absent words"):
        np.testing.assert_array_equal(mapped.scores(query), whole.scores(query))
        for got, want in zip(mapped.search(query, 5), whole.search(query, 5), strict=True):
            np.testing.assert_array_equal(got, want)
