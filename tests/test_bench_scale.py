"""bench/scale.py's pure parts: the haystack is deterministic and never copies a needle, the
exact scan is exact, the random-vector embedder is reproducible, and a row has its schema."""

from __future__ import annotations

import numpy as np
from fathom.bench.scale import (
    ROW_KEYS,
    ScaleEmbedder,
    ann_recall,
    check_row,
    exact_top10,
    make_row,
    merge_rows,
)
from fathom.bench.support import scale_haystack as hs

NEEDLE = {
    "doc_id": "squad:Oil:0",
    "title": "1973 oil crisis",
    "text": "The crisis began in October 1973. Prices rose from three dollars to twelve dollars.",
}


def _real() -> list[dict]:
    out = []
    for i in range(30):
        sents = [
            f"Document {i} sentence {j} tells about the river and its many bridges."
            for j in range(5)
        ]
        out.append({"title": f"Title {i}", "text": " ".join(sents)})
    # a record that holds a needle's sentence, and a repeat
    out.append(
        {
            "title": "Copy",
            "text": "Intro sentence here for the copy. The crisis began in October 1973.",
        }
    )
    out.append(dict(out[0]))
    return out


def test_records_holding_a_needle_sentence_or_repeating_are_dropped() -> None:
    keys = hs.needle_keys([NEEDLE])
    kept = hs.without_needles(_real(), keys)
    assert len(kept) == 30
    assert all("October 1973" not in r["text"] for r in kept)


def test_distractors_are_deterministic_and_never_copy_a_needle() -> None:
    keys = hs.needle_keys([NEEDLE])
    real = _real()  # the pool is built from every record, the copy included
    pool = hs.sentence_pool(real, keys)
    assert all(hs.fingerprint(s) not in keys for doc in pool for s in doc)
    titles = [r["title"] for r in real]
    first = [hs.distractor(pool, titles, i, seed=3) for i in range(50)]
    again = [hs.distractor(pool, titles, i, seed=3) for i in range(50)]
    other = [hs.distractor(pool, titles, i, seed=4) for i in range(50)]
    assert first == again
    assert first != other
    assert len({d["text"] for d in first}) == 50
    for d in first:
        assert 100 <= len(d["text"].split()) <= hs.MAX_WORDS
        assert not any(hs.fingerprint(s) in keys for s in hs.sentences(d["text"]))
        assert "October 1973" not in d["text"]


def test_compose_puts_needles_first_and_grows_by_prefix() -> None:
    keys = hs.needle_keys([NEEDLE])
    real = hs.without_needles(_real(), keys)
    counts = [(r, 1 + i % 2) for i, r in enumerate(real)]
    pool = hs.sentence_pool(real, keys)
    small, ids, n_small = hs.compose([NEEDLE], counts, pool, 0, 20, needle_chunks=1)
    big, _, n_big = hs.compose([NEEDLE], counts, pool, 0, 200, needle_chunks=1)
    assert small[0]["text"] == NEEDLE["text"] and ids == {NEEDLE["doc_id"]: small[0]["doc_id"]}
    assert n_small >= 20 and n_big >= 200
    real_texts = {r["text"] for r in real}
    assert {r["text"] for r in small if r["text"] in real_texts} <= {r["text"] for r in big}
    assert [r["doc_id"] for r in big] == sorted(r["doc_id"] for r in big)  # rows follow the file
    assert sum(NEEDLE["text"] in r["text"] for r in big) == 1
    # Distractor documents of several paragraphs: the same distractors, grouped.
    grouped, _, n_grouped = hs.compose([NEEDLE], counts, pool, 0, 200, 1, doc_chunks=20)
    assert n_grouped == n_big and len(grouped) < len(big)
    paragraphs = [p for r in grouped for p in r["text"].split("\n\n")]
    assert paragraphs == [p for r in big for p in r["text"].split("\n\n")]


def test_exact_top10_matches_a_full_sort() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((1000, 16)).astype(np.float32)
    qs = rng.standard_normal((7, 16)).astype(np.float32)
    want = np.argsort(-(qs @ vecs.T), axis=1)[:, :10]
    assert np.array_equal(exact_top10(vecs, qs, block=128), want)


class _Inner:
    id, name, dim = "fake", "fake", 8

    def embed(self, texts, batch_size=None):
        return np.ones((len(texts), self.dim), dtype=np.float32) / np.sqrt(self.dim)


def test_random_vectors_are_unit_reproducible_and_needles_real() -> None:
    needle = np.full(8, 1 / np.sqrt(8), dtype=np.float32)
    a = ScaleEmbedder(_Inner(), {"needle": needle}, all_real=False, seed=1)
    b = ScaleEmbedder(_Inner(), {"needle": needle}, all_real=False, seed=1)
    va, vb = a.embed(["x", "needle", "y"]), b.embed(["x", "needle", "y"])
    assert np.array_equal(va, vb)
    assert np.allclose(np.linalg.norm(va, axis=1), 1, atol=1e-5)
    assert np.array_equal(va[1], needle)
    assert a.vectors().shape == (3, 8) and (a.first_text, a.last_text) == ("x", "y")


def _query() -> dict:
    ms = {"p50": 1.0, "p95": 2.0, "p99": 3.0, "mean": 1.2}
    return {
        "chunks": 1000, "open_s": 0.2, "rss_open_gib": 0.1, "rss_after_gib": 0.2,
        "rss_peak_gib": 0.2, "dense_kind": "flat", "queries": 10, "hybrid_ms": ms,
        "dense_ms": ms, "bm25_ms": ms, "hybrid_wall_ms": ms, "ann_recall_at_10": 1.0,
        "answer_recall_at_5_hybrid": 0.9, "answer_recall_at_5_dense": 0.8,
        "answer_recall_at_5_bm25": 0.7,
    }  # fmt: skip


def test_a_row_has_the_schema_and_merges_by_size_and_vectors() -> None:
    build = {"ingest_s": 10.0, "disk_gib": 0.01, "add_pdf_s": 1.5, "remove_pdf_s": 1.0}
    row = make_row(1000, "random", build, _query())
    assert list(row)[: len(ROW_KEYS)] == list(ROW_KEYS)
    assert check_row(row) == []
    assert row["chunks_per_s"] == 100.0 and row["remove_pdf_s"] == 1.0
    assert check_row({**row, "vectors": "fake"}) and check_row({"chunks": 1})
    again = {**row, "ingest_s": 5.0}
    real = make_row(1000, "real", build, _query())
    merged = merge_rows([row, real], [again])
    assert [(r["vectors"], r["ingest_s"]) for r in merged] == [("random", 5.0), ("real", 10.0)]


def test_ann_recall_counts_a_row_tied_with_the_tenth() -> None:
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((50, 8)).astype(np.float32)
    vecs[49] = vecs[0]  # a duplicate chunk
    q = vecs[:1] * 3
    exact = exact_top10(vecs, q)
    assert ann_recall(vecs, q, exact, [exact[0].tolist()]) == 1.0
    swapped = [49 if r == 0 else r for r in exact[0].tolist()]
    assert ann_recall(vecs, q, exact, [swapped]) == 1.0
    assert ann_recall(vecs, q, exact, [exact[0].tolist()[:5]]) == 0.5
