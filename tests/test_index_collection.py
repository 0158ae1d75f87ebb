"""Collections: build, reload, incremental updates, validation — against real files on disk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fathom.chunking import make_chunker
from fathom.core.errors import CollectionNotFound, IndexMismatchError
from fathom.index.collection import Collection, embed_input, list_collections, remove_collection
from fathom.index.embed import HashingEmbedder
from fathom.index.ingest import ingest

TOPICS = {
    "llamas.txt": "Llamas live in the Andes. They carry loads for herders and eat grass.",
    "rivers.md": "# Rivers\n\nThe Amazon is the largest river by discharge.\n\n# Deltas\n\n"
    "A delta forms where a river deposits sediment at its mouth.",
    "volcano.txt": "Mount Etna is an active volcano on the east coast of Sicily.",
}


def write_docs(folder: Path, docs: dict[str, str] = TOPICS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def run_ingest(cfg, paths, name="c", embedder=None, rebuild=False):
    embedder = embedder or HashingEmbedder(64)
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    return ingest(cfg, list(paths), name, embedder, chunker, rebuild=rebuild)


def test_build_and_reload_is_consistent(cfg, tmp_path: Path, minilm) -> None:
    docs = write_docs(tmp_path / "docs")
    report = run_ingest(cfg, [docs], embedder=minilm)
    assert report.committed and report.count("ok") == 3 and report.count("failed") == 0
    coll = Collection.open(cfg, "c", expect_embedder=minilm.id)
    assert coll.check() == []
    m = coll.manifest
    assert m.embedder_id == "sentence-transformers/all-MiniLM-L6-v2" and m.embedder_dim == 384
    assert m.chunker["name"] == "semantic" and m.dense["kind"] == "flat"
    chunks = coll.store.all()
    assert len(chunks) == m.n_chunks == coll.dense.size == coll.bm25.n
    # Vectors on disk are exactly the embedder's output for the stored embedding inputs.
    expect = minilm.embed([embed_input(c, True) for c in chunks])
    np.testing.assert_allclose(coll.dense.vectors(), expect, atol=1e-5)
    # Sections and titles survive into chunks.
    rivers = [c for c in chunks if "Amazon" in c.text]
    assert rivers and rivers[0].section == "Rivers"
    raw = json.loads((coll.directory / "manifest.json").read_text())
    # The manifest is a few hundred bytes whatever the collection holds: every document's entry
    # is a line of the generation's documents.jsonl, read when first used.
    assert raw["format_version"] == 2 and raw["counts"]["documents"] == 3
    assert "documents" not in raw
    lines = (coll.data_dir / "documents.jsonl").read_text().splitlines()
    assert len(lines) == 3
    for doc in map(json.loads, lines):
        assert len(doc["sha256"]) == 64 and doc["status"] == "ok"


def test_reingest_unchanged_embeds_nothing(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    first = run_ingest(cfg, [docs])
    gen = Collection.open(cfg, "c").manifest.generation
    second = run_ingest(cfg, [docs])
    assert second.embedded_chunks == 0 and not second.committed
    assert second.count("unchanged") == 3 and second.total_chunks == first.total_chunks
    assert Collection.open(cfg, "c").manifest.generation == gen


def test_changed_file_is_replaced_and_removed_file_dropped(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    run_ingest(cfg, [docs])
    before = {c.chunk_id: c.doc_id for c in Collection.open(cfg, "c").store.all()}
    (docs / "llamas.txt").write_text("Alpacas are smaller than llamas and are kept for wool.")
    (docs / "volcano.txt").unlink()
    report = run_ingest(cfg, [docs])
    status = {Path(f.path).name: f.status for f in report.files}
    assert status == {"llamas.txt": "ok", "rivers.md": "unchanged", "volcano.txt": "removed"}
    coll = Collection.open(cfg, "c")
    assert coll.check() == []
    texts = " ".join(c.text for c in coll.store.all())
    assert "Alpacas" in texts and "Etna" not in texts and "Llamas live" not in texts
    # The unchanged document kept its chunk ids and vectors.
    rivers = {cid for cid, doc in before.items() if doc in {c.doc_id for c in coll.store.all()}}
    assert len(rivers) == 2 and rivers <= {c.chunk_id for c in coll.store.all()}
    assert report.embedded_chunks == 1
    assert [p.name for p in coll.directory.iterdir() if p.name.startswith("gen-")] == [
        coll.manifest.data_dir_name
    ]


def test_documents_from_other_roots_are_kept(cfg, tmp_path: Path) -> None:
    a = write_docs(tmp_path / "a", {"one.txt": "First folder text about owls."})
    b = write_docs(tmp_path / "b", {"two.txt": "Second folder text about bats."})
    run_ingest(cfg, [a])
    run_ingest(cfg, [b])
    titles = {c.title for c in Collection.open(cfg, "c").store.all()}
    assert titles == {"one", "two"}


def test_duplicate_content_is_indexed_once(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", {"a.txt": "Same words here.", "b.txt": "Same words here."})
    report = run_ingest(cfg, [docs])
    assert [f.status for f in report.files] == ["ok", "skipped"]
    assert "same content as" in report.files[1].reason
    assert Collection.open(cfg, "c").check() == []


def test_embedder_mismatch_is_a_clear_error(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    run_ingest(cfg, [docs], embedder=HashingEmbedder(64))
    with pytest.raises(IndexMismatchError, match=r"hashing:64.*hashing:32.*--rebuild"):
        run_ingest(cfg, [docs], embedder=HashingEmbedder(32))
    with pytest.raises(IndexMismatchError, match="--embedder hashing:64"):
        Collection.open(cfg, "c", expect_embedder="hashing:32")
    report = run_ingest(cfg, [docs], embedder=HashingEmbedder(32), rebuild=True)
    assert report.committed and Collection.open(cfg, "c").manifest.embedder_dim == 32


def test_format_version_mismatch_says_how_to_fix(cfg, tmp_path: Path) -> None:
    run_ingest(cfg, [write_docs(tmp_path / "docs")])
    path = cfg.home_path() / "collections" / "c" / "manifest.json"
    data = json.loads(path.read_text())
    data["format_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(IndexMismatchError, match=r"format version 99.*--rebuild"):
        Collection.open(cfg, "c")


def test_records_jsonl_incremental(cfg, tmp_path: Path) -> None:
    rows = [
        {
            "doc_id": f"d{i}",
            "title": f"Title {i}",
            "text": f"Record number {i} talks about topic {i}.",
        }
        for i in range(5)
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    first = run_ingest(cfg, [path])
    assert first.count("ok") == 5
    rows[2]["text"] = "Record two now says something else entirely."
    path.write_text("\n".join(json.dumps(r) for r in rows[:4]) + "\n")
    second = run_ingest(cfg, [path])
    assert (second.count("ok"), second.count("unchanged"), second.count("removed")) == (1, 3, 1)
    coll = Collection.open(cfg, "c")
    assert coll.check() == []
    assert sorted({c.source_id for c in coll.store.all()}) == ["d0", "d1", "d2", "d3"]


def test_list_and_remove(cfg, tmp_path: Path) -> None:
    run_ingest(cfg, [write_docs(tmp_path / "docs")], name="alpha")
    assert [m.name for m in list_collections(cfg)] == ["alpha"]
    remove_collection(cfg, "alpha")
    assert list_collections(cfg) == []
    with pytest.raises(CollectionNotFound, match="fathom ingest"):
        Collection.open(cfg, "alpha")


def test_paths_are_stored_absolute_so_another_directory_keeps_them(
    cfg, tmp_path: Path, monkeypatch
) -> None:
    """Relative paths given from one directory and then another name the same files: the
    first folder's documents are not taken for gone."""
    write_docs(tmp_path / "a", {"one.txt": "First folder text about owls."})
    write_docs(tmp_path / "b", {"two.txt": "Second folder text about bats."})
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    run_ingest(cfg, ["a"])
    monkeypatch.chdir(tmp_path / "sub")
    report = run_ingest(cfg, ["../b"])
    assert report.count("removed") == 0
    paths = [d.path for d in Collection.open(cfg, "c").manifest.documents]
    assert paths == [str(tmp_path / "a" / "one.txt"), str(tmp_path / "b" / "two.txt")]
    again = run_ingest(cfg, [tmp_path / "a"])  # the same file by its absolute path
    assert again.count("unchanged") == 1 and not again.committed


def test_a_hash_sign_in_a_file_name_is_part_of_the_name(cfg, tmp_path: Path) -> None:
    a = write_docs(tmp_path / "a", {"notes#1.txt": "Aardvark colonies eat termites."})
    b = write_docs(tmp_path / "b", {"two.txt": "Second folder text about bats."})
    run_ingest(cfg, [a])
    report = run_ingest(cfg, [b])
    assert report.count("removed") == 0
    assert {c.title for c in Collection.open(cfg, "c").store.all()} == {"notes#1", "two"}


def test_a_file_reached_twice_is_indexed_once_and_then_unchanged(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", {"b.txt": "Quantum gravel in the bridge."})
    first = run_ingest(cfg, [docs, docs / "b.txt", docs / "b.txt"])
    assert [f.status for f in first.files] == ["ok"]
    second = run_ingest(cfg, [docs, docs / "b.txt"])
    assert [f.status for f in second.files] == ["unchanged"] and not second.committed
    assert len(Collection.open(cfg, "c").manifest.documents) == 1


def test_a_copy_of_content_indexed_by_an_earlier_run_is_skipped(cfg, tmp_path: Path) -> None:
    docs = write_docs(
        tmp_path / "docs", {"a.txt": "Walrus migration.", "b.txt": "Walrus migration."}
    )
    run_ingest(cfg, [docs / "a.txt"])
    report = run_ingest(cfg, [docs / "b.txt"])
    assert [f.status for f in report.files] == ["skipped"]
    assert "a.txt" in report.files[0].reason
    coll = Collection.open(cfg, "c")
    assert coll.check() == [] and len(coll.store.all()) == 1


def test_a_repeated_record_id_is_skipped_not_lost_silently(cfg, tmp_path: Path) -> None:
    rows = [
        {"doc_id": "d1", "text": "First record about the narwhal."},
        {"doc_id": "d1", "text": "Second record about the okapi."},
        {"doc_id": "d3", "text": "Third record about lemurs."},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = run_ingest(cfg, [path])
    assert [f.status for f in report.files] == ["ok", "skipped", "ok"]
    assert "repeats an earlier record" in report.files[1].reason
    texts = " ".join(c.text for c in Collection.open(cfg, "c").store.all())
    assert "narwhal" in texts and "okapi" not in texts and "lemurs" in texts


def test_a_failed_file_that_is_deleted_leaves_the_manifest(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", {"good.txt": "Some real text.", "bad.txt": ""})
    other = write_docs(tmp_path / "other", {"two.txt": "Second folder text about bats."})
    run_ingest(cfg, [docs])
    run_ingest(cfg, [other])  # another folder: the failed entry is kept, still explained
    assert "failed" in {d.status for d in Collection.open(cfg, "c").manifest.documents}
    (docs / "bad.txt").unlink()
    report = run_ingest(cfg, [docs])
    assert report.committed
    statuses = {Path(d.path).name: d.status for d in Collection.open(cfg, "c").manifest.documents}
    assert statuses == {"good.txt": "ok", "two.txt": "ok"}


def test_a_moved_file_keeps_its_chunks_under_its_new_path(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    run_ingest(cfg, [docs])
    before = {c.chunk_id for c in Collection.open(cfg, "c").store.all()}
    (docs / "volcano.txt").rename(docs / "etna.txt")
    moved = tmp_path / "moved"
    docs.rename(moved)
    report = run_ingest(cfg, [moved])
    assert report.committed and report.embedded_chunks == 0 and report.count("removed") == 0
    reasons = {Path(f.path).name: (f.status, f.reason) for f in report.files}
    assert reasons["etna.txt"] == ("unchanged", f"moved from {docs / 'volcano.txt'}")
    coll = Collection.open(cfg, "c")
    assert coll.check() == [] and {c.chunk_id for c in coll.store.all()} == before
    assert {d.path for d in coll.manifest.documents} == {
        str(moved / n) for n in ("etna.txt", "llamas.txt", "rivers.md")
    }
    assert not run_ingest(cfg, [moved]).committed  # and then it is simply unchanged


def test_a_copy_is_not_taken_for_a_move_while_the_original_is_there(cfg, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", {"a.txt": "Walrus migration."})
    run_ingest(cfg, [docs])
    copy = write_docs(tmp_path / "copy", {"a.txt": "Walrus migration."})
    report = run_ingest(cfg, [copy])
    assert [f.status for f in report.files] == ["skipped"]
    assert [d.path for d in Collection.open(cfg, "c").manifest.documents if d.status == "ok"] == [
        str(docs / "a.txt")
    ]
