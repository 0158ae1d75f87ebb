"""Segments: adding a document to a large collection writes one small segment beside the old
one (hard-linked, never rewritten), removing one writes a tombstone, searches never return a
tombstoned row, small segments merge, and an approximate (IVF) segment behaves the same."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fathom.chunking import make_chunker
from fathom.index.collection import Collection
from fathom.index.embed import HashingEmbedder
from fathom.index.ingest import ingest
from fathom.index.segments import plan, read_layout

WORDS = (
    "amber basalt cobalt delta ember fjord granite harbor iris jasper kelp lagoon mesa nickel "
    "onyx prairie quartz reef sierra tundra umber valley willow xenon yarrow zephyr"
).split()


def _library(folder: Path, n: int, tag: str) -> Path:
    """``n`` one-chunk documents, each naming its own rare word (``tag`` + number)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        a, b = WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
        text = f"Report {tag}{i} covers the {a} and the {b} survey. Its code word is {tag}{i}x."
        (folder / f"{tag}-{i:03d}.txt").write_text(text, encoding="utf-8")
    return folder


def _ingest(cfg, paths, name="s"):
    embedder = HashingEmbedder(64)
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    return ingest(cfg, list(paths), name, embedder, chunker)


def _inode(path: Path) -> int:
    return os.stat(path).st_ino


def _hits(coll: Collection, query: str, k: int = 5) -> tuple[list[str], list[str]]:
    """Document ids of the dense and the BM25 top ``k``."""
    vec = HashingEmbedder(64).embed([query])[0]
    dense = coll.chunks(coll.dense.search(vec, k)[1].tolist())
    sparse = coll.chunks(coll.bm25.search(query, k)[1].tolist())
    return [c.doc_id for c in dense], [c.doc_id for c in sparse]


def test_adding_a_document_links_the_old_segment_and_writes_only_the_new(cfg, tmp_path) -> None:
    base = _library(tmp_path / "base", 60, "b")
    _ingest(cfg, [base])
    first = Collection.open(cfg, "s")
    big = first.data_dir / "dense.faiss"  # one segment: the generation folder itself
    inode, n_base = _inode(big), len(first)
    first.close()

    extra = _library(tmp_path / "extra", 1, "e")
    report = _ingest(cfg, [extra])
    assert report.committed and report.embedded_chunks == 1
    coll = Collection.open(cfg, "s")
    layout = coll.layout
    assert [s.rows for s in layout.segments] == [n_base, 1] and not layout.deleted
    kept = coll.data_dir / layout.segments[0].name / "dense.faiss"
    assert _inode(kept) == inode  # the same file: linked, not written
    assert coll.check() == []
    assert len(coll) == n_base + 1
    new_doc = next(d for d in coll.manifest.documents if d.path.endswith("e-000.txt"))
    assert new_doc.rows == (n_base, n_base + 1)
    _dense, sparse = _hits(coll, "e0x")
    assert sparse[0] == new_doc.doc_id
    # Every chunk reads back from its segment at its row.
    assert coll.chunks([n_base])[0].doc_id == new_doc.doc_id
    assert coll.store.find(coll.chunks([3])[0].chunk_id) == 3


def test_bm25_of_a_new_segment_scores_as_one_built_whole(cfg, tmp_path) -> None:
    """The new segment is scored with the collection's statistics, so its scores are those a
    collection built in one go gives the same rows."""
    base = _library(tmp_path / "base", 60, "b")
    extra = _library(tmp_path / "extra", 1, "e")
    _ingest(cfg, [base])
    _ingest(cfg, [extra])
    _ingest(cfg, [base, extra], name="whole")
    seg, whole = Collection.open(cfg, "s"), Collection.open(cfg, "whole")
    assert len(seg.layout.segments) == 2 and len(whole.layout.segments) == 1
    q = "e0x survey"
    by_id = {c.chunk_id: s for c, s in zip(seg.store.all(), seg.bm25.scores(q), strict=True)}
    want = {c.chunk_id: s for c, s in zip(whole.store.all(), whole.bm25.scores(q), strict=True)}
    new_id = seg.chunks([len(seg) - 1])[0].chunk_id
    assert by_id[new_id] == pytest.approx(want[new_id], rel=1e-5)
    assert by_id[new_id] > 0


def test_removing_a_document_writes_a_tombstone_and_searches_skip_it(cfg, tmp_path) -> None:
    base = _library(tmp_path / "base", 60, "b")
    _ingest(cfg, [base])
    inode = _inode(Collection.open(cfg, "s").data_dir / "chunks.jsonl")
    gone = base / "b-007.txt"
    gone_id = next(
        d.doc_id for d in Collection.open(cfg, "s").manifest.documents if d.path == str(gone)
    )
    gone.unlink()
    report = _ingest(cfg, [base])
    assert report.committed and report.embedded_chunks == 0
    coll = Collection.open(cfg, "s")
    layout = coll.layout
    assert len(layout.segments) == 1 and layout.dead == 1
    assert _inode(coll.data_dir / layout.segments[0].name / "chunks.jsonl") == inode
    assert coll.check() == [] and len(coll) == 59
    assert all(d.doc_id != gone_id for d in coll.manifest.documents)
    for query in ("b7x", "b7 survey report"):
        dense, sparse = _hits(coll, query, k=59)
        assert gone_id not in dense and gone_id not in sparse
        assert len(dense) == 59
    assert gone_id not in {c.doc_id for _, c in coll.live()}
    assert coll.store.find(coll.store.get(layout.deleted[0][0]).chunk_id) is None


def test_a_changed_document_is_a_tombstone_and_a_new_row(cfg, tmp_path) -> None:
    base = _library(tmp_path / "base", 60, "b")
    _ingest(cfg, [base])
    (base / "b-010.txt").write_text("Report b10 now covers the zeppelin hangar.", encoding="utf-8")
    report = _ingest(cfg, [base])
    assert report.embedded_chunks == 1
    coll = Collection.open(cfg, "s")
    assert [s.rows for s in coll.layout.segments] == [60, 1] and coll.layout.dead == 1
    assert coll.check() == []
    _dense, sparse = _hits(coll, "zeppelin hangar", k=3)
    doc = next(d for d in coll.manifest.documents if d.path.endswith("b-010.txt"))
    assert sparse[0] == doc.doc_id and sparse.count(doc.doc_id) == 1


def test_small_segments_merge_and_a_mostly_dead_segment_is_rewritten(cfg, tmp_path) -> None:
    base = _library(tmp_path / "base", 40, "b")
    _ingest(cfg, [base])
    for i in range(6):
        _ingest(cfg, [_library(tmp_path / f"x{i}", 2, f"x{i}_")])
        coll = Collection.open(cfg, "s")
        assert coll.check() == []
        # Geometric sizes: never more segments than the sizes allow.
        rows = [s.rows for s in coll.layout.segments]
        assert all(a >= 4 * b for a, b in itertools.pairwise(rows)), rows
    assert len(coll) == 52
    # Removing most of the base's documents rewrites it: no segment stays mostly dead.
    for p in sorted(base.iterdir())[:30]:
        p.unlink()
    _ingest(cfg, [base])
    coll = Collection.open(cfg, "s")
    assert coll.check() == [] and len(coll) == 22 and coll.layout.dead == 0


def test_plan_keeps_large_segments_and_merges_small_ones() -> None:
    from fathom.index.segments import Layout, Segment

    layout = Layout([Segment("a", 1000), Segment("b", 100), Segment("c", 10)])
    assert plan(layout, [1000, 100, 10], 5, 4.0, 0.3).merge == [2]
    assert plan(layout, [1000, 100, 10], 30, 4.0, 0.3).merge == [1, 2]
    # 40 % dead: rewritten, and the smaller segments after it fold into that rewrite.
    assert plan(layout, [600, 100, 10], 0, 4.0, 0.3).merge == [0, 1, 2]
    assert plan(layout, [1000, 60, 10], 0, 4.0, 0.3).merge == [1, 2]
    assert plan(layout, [1000, 0, 10], 0, 4.0, 0.3).merge == [1]  # nothing live: dropped


def test_an_ivf_segment_adds_and_removes_like_an_exact_one(cfg, tmp_path) -> None:
    """Above the threshold the base segment is an IVF index; adding and removing documents
    leaves it in place, and its top hits are the exact scan's within the recall bound."""
    ann_cfg = replace(cfg, index=replace(cfg.index, hnsw_threshold=50, ann="ivf", ivf_nlist=4))
    base = _library(tmp_path / "base", 120, "b")
    _ingest(ann_cfg, [base])
    coll = Collection.open(ann_cfg, "s")
    assert coll.dense.kind == "ivf" and coll.manifest.dense["kind"] == "ivf"
    vecs = coll.dense.vectors()
    found, total = 0, 0
    for q in vecs[:40:4]:
        exact = set(np.argsort(-(vecs @ q), kind="stable")[:10].tolist())
        got = set(coll.dense.search(q, 10)[1].tolist())
        found, total = found + len(exact & got), total + 10
    assert found / total >= 0.9
    coll.close()
    _ingest(ann_cfg, [_library(tmp_path / "extra", 1, "e")])
    (base / "b-005.txt").unlink()
    _ingest(ann_cfg, [base])
    coll = Collection.open(ann_cfg, "s")
    assert coll.check() == []
    assert [s.rows for s in coll.layout.segments] == [120, 1] and coll.layout.dead == 1
    assert coll.dense.kind == "ivf"
    removed = read_layout(coll.data_dir, coll.manifest.n_rows).deleted[0][0]
    for q in vecs[:20]:
        assert removed not in coll.dense.search(q, 10)[1].tolist()
    _dense, sparse = _hits(coll, "e0x", k=3)
    assert sparse[0] == coll.chunks([120])[0].doc_id


def test_document_entries_live_with_their_segment(cfg, tmp_path) -> None:
    """A kept segment's entries are linked, not written again; the generation's own file holds
    only what differs from them (a moved document) and the failed entries."""
    base = _library(tmp_path / "base", 60, "b")
    _ingest(cfg, [base])
    first = Collection.open(cfg, "s")
    inode = _inode(first.data_dir / "documents.jsonl")
    first.close()
    _ingest(cfg, [_library(tmp_path / "extra", 1, "e")])
    coll = Collection.open(cfg, "s")
    seg = coll.data_dir / coll.layout.segments[0].name
    assert _inode(seg / "documents.jsonl") == inode
    assert (coll.data_dir / "documents.jsonl").read_text() == ""
    assert len(coll.manifest.documents) == 61 and coll.check() == []
    # Moved: the same content at a new path keeps its rows under the new path.
    (base / "b-020.txt").rename(base / "moved-020.txt")
    (base / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    report = _ingest(cfg, [base])
    assert report.embedded_chunks == 0
    coll = Collection.open(cfg, "s")
    paths = {d.path for d in coll.manifest.documents if d.status == "ok"}
    assert str(base / "moved-020.txt") in paths and str(base / "b-020.txt") not in paths
    assert any(d.status == "failed" for d in coll.manifest.documents)
    assert coll.check() == [] and len(coll.layout.segments) == 2
    top = (coll.data_dir / "documents.jsonl").read_text().splitlines()
    assert len(top) == 2  # the moved entry and the failed one
    # And it survives the next generation, which keeps the same segments.
    _ingest(cfg, [_library(tmp_path / "extra2", 1, "f")])
    coll = Collection.open(cfg, "s")
    paths = {d.path for d in coll.manifest.documents if d.status == "ok"}
    assert str(base / "moved-020.txt") in paths and len(paths) == 62
    assert coll.check() == []


def test_a_collection_of_format_1_grows_by_a_segment(cfg, tmp_path) -> None:
    """A collection written before segments (its manifest holding every entry) keeps its one
    segment when a document is added; the segment's entries are written beside it once."""
    import json

    base = _library(tmp_path / "base", 60, "b")
    _ingest(cfg, [base])
    coll = Collection.open(cfg, "s")
    path, entries = coll.directory / "manifest.json", coll.data_dir / "documents.jsonl"
    coll.close()
    data = json.loads(path.read_text())
    data["format_version"] = 1
    data["documents"] = [json.loads(line) for line in entries.read_text().splitlines()]
    data.pop("n_rows")
    entries.unlink()
    path.write_text(json.dumps(data))
    assert len(Collection.open(cfg, "s").manifest.documents) == 60
    _ingest(cfg, [_library(tmp_path / "extra", 1, "e")])
    coll = Collection.open(cfg, "s")
    assert [s.rows for s in coll.layout.segments] == [60, 1]
    assert coll.check() == [] and len(coll.manifest.documents) == 61
    seg = coll.data_dir / coll.layout.segments[0].name / "documents.jsonl"
    assert len(seg.read_text().splitlines()) == 60


def test_many_tombstones_among_the_best_hits_still_leave_k_live_ones(cfg, tmp_path) -> None:
    keep_dead = replace(cfg, index=replace(cfg.index, max_dead=0.9))
    base = _library(tmp_path / "base", 60, "b")
    _ingest(keep_dead, [base])
    coll = Collection.open(keep_dead, "s")
    query = coll.store.get(0).text
    vec = HashingEmbedder(64).embed([query])[0]
    best = coll.dense.search(vec, 40)[1].tolist()
    by_row = {d.rows[0]: d for d in coll.manifest.documents}
    coll.close()
    for row in best[:30]:  # the 30 nearest documents go
        Path(by_row[row].path).unlink()
    _ingest(keep_dead, [base])
    coll = Collection.open(keep_dead, "s")
    assert coll.layout.dead == 30 and len(coll) == 30
    scores, rows = coll.dense.search(vec, 5)
    assert len(rows) == 5 and not set(rows.tolist()) & set(best[:30])
    vecs = coll.dense.vectors()
    live = [r for r in range(60) if r not in set(best[:30])]
    want = sorted((float(vecs[r] @ vec) for r in live), reverse=True)[:5]
    np.testing.assert_allclose(scores, want, rtol=1e-5)
