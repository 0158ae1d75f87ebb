"""Retrieval against brute-force numpy over the same collection (ties may reorder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fathom.chunking import make_chunker
from fathom.index.collection import Collection, embed_input
from fathom.index.ingest import ingest
from fathom.index.retrieve import CollectionRetriever, rrf_fuse

SENTENCES = [
    "The mitochondria is the powerhouse of the cell and produces ATP.",
    "Photosynthesis in chloroplasts converts light into chemical energy.",
    "The French Revolution began in 1789 with the storming of the Bastille.",
    "Napoleon crowned himself emperor in 1804 at Notre-Dame.",
    "Black holes form when massive stars collapse under gravity.",
    "Neutron stars are the dense remnants of supernova explosions.",
    "Python is a programming language created by Guido van Rossum.",
    "Rust guarantees memory safety without a garbage collector.",
    "The Nile flows north through eleven countries into the Mediterranean.",
    "Mount Everest is the highest mountain above sea level.",
]


@pytest.fixture
def coll(cfg, tmp_path: Path, minilm) -> Collection:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, s in enumerate(SENTENCES):
        (folder / f"doc{i:02d}.txt").write_text(s)
    chunker = make_chunker(cfg.chunker, minilm.token_counter())
    ingest(cfg, [folder], "r", minilm, chunker)
    return Collection.open(cfg, "r")


def _same_up_to_ties(got_rows, got_scores, want_scores, k):
    """``got`` is a valid top-k of ``want_scores``: its scores equal the k best, in order."""
    want = np.sort(want_scores)[::-1][:k]
    np.testing.assert_allclose(np.asarray(got_scores), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want_scores[np.asarray(got_rows)], got_scores, rtol=1e-5, atol=1e-5)


QUERIES = ["energy in plant cells", "when did the revolution start", "collapsed stars", "zzz qqq"]


@pytest.mark.parametrize("query", QUERIES)
def test_dense_matches_brute_force(coll: Collection, minilm, query: str) -> None:
    chunks = coll.store.all()
    vecs = minilm.embed([embed_input(c, True) for c in chunks])
    want = vecs @ minilm.embed_query(query)
    hits = CollectionRetriever(coll, minilm, mode="dense").search(query, 5)
    rows = [next(i for i, c in enumerate(chunks) if c.chunk_id == h.chunk.chunk_id) for h in hits]
    _same_up_to_ties(rows, [h.scores["dense"] for h in hits], want, 5)
    assert [h.ranks["dense"] for h in hits] == [1, 2, 3, 4, 5]


def _bm25_brute(docs: list[list[str]], query: list[str], k1=1.5, b=0.75) -> np.ndarray:
    """Lucene-style BM25 (bm25s's default) computed directly from term counts."""
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    out = np.zeros(n)
    for term in set(query):
        df = sum(term in d for d in docs)
        if not df:
            continue
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = d.count(term)
            out[i] += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl)) if tf else 0
    return out * (query.count(query[0]) if False else 1)


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_matches_brute_force(coll: Collection, query: str) -> None:
    chunks = coll.store.all()
    analyzer = coll.bm25.analyzer
    docs = analyzer.terms_batch([embed_input(c, True) for c in chunks])
    terms = analyzer.terms(query)
    want = _bm25_brute(docs, terms)
    hits = CollectionRetriever(coll, None, mode="bm25").search(query, 5)
    positive = int((want > 0).sum())
    assert len(hits) == min(5, positive)  # rows with no matching term are not hits
    rows = [next(i for i, c in enumerate(chunks) if c.chunk_id == h.chunk.chunk_id) for h in hits]
    if hits:
        _same_up_to_ties(rows, [h.scores["bm25"] for h in hits], want, len(hits))


def test_rrf_fuse_hand_worked() -> None:
    dense = (np.array([0.9, 0.8, 0.7]), np.array([3, 1, 2]))
    bm25 = (np.array([5.0, 4.0]), np.array([1, 7]))
    out = rrf_fuse({"dense": dense, "bm25": bm25}, rrf_k=60, k=4)
    fused = {row: score for row, score, _, _ in out}
    assert [row for row, *_ in out] == [1, 3, 7, 2]
    assert fused[1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3] == pytest.approx(1 / 61)
    assert fused[7] == pytest.approx(1 / 62) and fused[2] == pytest.approx(1 / 63)
    assert out[0][2] == {"dense": 2, "bm25": 1} and out[0][3] == {"dense": 0.8, "bm25": 5.0}


def test_hybrid_keeps_both_ranks_and_finds_the_answer(coll: Collection, minilm) -> None:
    probe = CollectionRetriever(coll, minilm, mode="hybrid").probe("Bastille 1789", 3)
    top = probe.hits[0]
    assert "Bastille" in top.chunk.text
    assert set(top.ranks) == {"dense", "bm25"} and top.ranks["bm25"] == 1
    assert set(probe.timings_ms) >= {"embed_query", "dense", "bm25", "fuse", "fetch"}
    scores = [h.score for h in probe.hits]
    assert scores == sorted(scores, reverse=True)


def test_convex_fusion_normalises_each_list_and_weights_them() -> None:
    import numpy as np
    from fathom.index.retrieve import convex_fuse

    ranked = {
        "dense": (np.array([0.9, 0.7, 0.5]), np.array([4, 1, 2])),
        "bm25": (np.array([12.0, 8.0, 2.0]), np.array([1, 9, 4])),
    }
    out = convex_fuse(ranked, {"dense": 0.5, "bm25": 0.5}, 10)
    fused = {row: score for row, score, _, _ in out}
    # dense min-max: 4 → 1, 1 → 0.5, 2 → 0; bm25: 1 → 1, 9 → 0.6, 4 → 0
    assert fused[1] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert fused[4] == pytest.approx(0.5 * 1.0)
    assert fused[9] == pytest.approx(0.5 * 0.6)
    assert fused[2] == pytest.approx(0.0)
    assert [row for row, *_ in out] == [1, 4, 9, 2]
    assert out[0][2] == {"dense": 2, "bm25": 1} and out[0][3] == {"dense": 0.7, "bm25": 12.0}
    # A list of equal scores counts each of them as its best; the weights shift the order.
    flat = {
        "dense": (np.array([0.3, 0.3]), np.array([5, 6])),
        "bm25": (np.array([1.0]), np.array([6])),
    }
    assert [r for r, *_ in convex_fuse(flat, {"dense": 0.9, "bm25": 0.1}, 2)] == [6, 5]
    assert convex_fuse(flat, {"dense": 0.9, "bm25": 0.1}, 1)[0][1] == pytest.approx(1.0)


def _convex_reference(ranked, weights, k):
    """The fusion as a plain loop over every hit (the definition, for the test below)."""
    import numpy as np

    fused, ranks, scores = {}, {}, {}
    for name, (sc, rows) in ranked.items():
        if len(rows) == 0:
            continue
        sc64 = np.asarray(sc, dtype=np.float64)
        lo, hi = float(sc64.min()), float(sc64.max())
        norm = (sc64 - lo) / (hi - lo) if hi > lo else np.ones_like(sc64)
        hits = zip(norm.tolist(), sc64.tolist(), rows.tolist(), strict=True)
        for rank, (z, s, row) in enumerate(hits, 1):
            fused[row] = fused.get(row, 0.0) + float(weights.get(name, 0.0)) * z
            ranks.setdefault(row, {})[name] = rank
            scores.setdefault(row, {})[name] = s
    order = sorted(fused, key=lambda r: (-fused[r], r))[:k]
    return [(r, fused[r], ranks[r], scores[r]) for r in order]


@pytest.mark.parametrize("seed", range(30))
def test_convex_fusion_equals_the_loop_definition_exactly(seed: int) -> None:
    import numpy as np
    from fathom.index.retrieve import convex_fuse

    rng = np.random.default_rng(seed)
    ranked = {}
    for name in ("dense", "bm25", "extra")[: rng.integers(1, 4)]:
        n = int(rng.integers(0, 60))
        rows = rng.choice(80, size=n, replace=False)
        # Coarse scores make ties (within and across lists) common.
        sc = np.sort(rng.integers(0, 6, size=n).astype(np.float32))[::-1]
        ranked[name] = (sc, rows)
    weights = {name: float(rng.random()) for name in ranked}
    for k in (1, 5, 200):
        assert convex_fuse(ranked, weights, k) == _convex_reference(ranked, weights, k)


def test_retriever_rejects_unknown_fusion(coll: Collection) -> None:
    from fathom.core.errors import ConfigError

    with pytest.raises(ConfigError, match="fusion"):
        CollectionRetriever(coll, None, mode="bm25", fusion="max")
    with pytest.raises(ConfigError, match="dense_weight"):
        CollectionRetriever(coll, None, mode="bm25", dense_weight=1.5)
