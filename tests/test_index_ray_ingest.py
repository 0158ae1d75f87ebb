"""``ingest --executor ray``: a local Ray (2 CPUs, started once for the module) builds the same
collection as a local ingest of the same files — chunk store and BM25 byte for byte, manifest
equal but for its timestamps, vectors equal to float tolerance — and resumes a run killed
before its commit without parsing again what it kept. A file whose task fails, or whose chunking
or embedding raises on its worker, is that file's failure, never another's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fathom.bench.support import docgen
from fathom.index.collection import Collection, collections_root
from fathom.index.ingest import ingest_paths
from fathom.index.manifest import read_manifest
from fathom.index.ray_ingest import PARTS, ingest_on_ray, planned_files

# Per file on a worker against across files here: the embedder's batches differ, and with them
# the last bits of a vector (padding length and the BLAS kernel's blocking); see docs/ray.md.
VECTOR_ATOL = 1e-5


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray with 2 CPUs for the module (without ray: a failure in CI, a skip elsewhere)."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI", "").lower() in ("1", "true"):
            pytest.fail("ray is not installed: pip install -e '.[ray]'")
        pytest.skip("ray is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two PDFs, a DOCX, text and Markdown, a copy of one file, a truncated PDF, an empty file."""
    folder = tmp_path_factory.mktemp("corpus")
    docgen.make_sample_pdf(folder / "sample.pdf", toc=True)
    docgen.make_two_column_pdf(folder / "columns.pdf")
    docgen.make_docx(folder / "report.docx")
    docgen.make_utf8_text(folder / "notes.txt")
    docgen.make_markdown(folder / "readme.md")
    docgen.make_versioned_corpus(folder / "texts", 6, version=1)
    shutil.copy(folder / "notes.txt", folder / "notes-copy.txt")
    docgen.make_truncated_pdf(folder / "broken.pdf")
    docgen.make_empty_file(folder / "empty.txt")
    return folder


def _manifest(coll: Collection) -> dict:
    """The manifest without what differs between two builds of the same files."""
    data = json.loads((coll.directory / "manifest.json").read_text())
    for key in ("name", "collection", "created", "updated", "created_at", "updated_at"):
        data.pop(key, None)
    return data


def _files(coll: Collection) -> dict[str, bytes]:
    """Every file of the collection's generation but the dense index, by name."""
    data = coll.directory / coll.manifest.data_dir_name
    return {
        str(p.relative_to(data)): p.read_bytes()
        for p in sorted(data.rglob("*"))
        if p.is_file() and not p.name.startswith(("dense", "readers"))
    }


def _same_collection(cfg, local: str, remote: str) -> None:
    a, b = Collection.open(cfg, local), Collection.open(cfg, remote)
    try:
        assert a.manifest.n_chunks == b.manifest.n_chunks > 10
        assert _manifest(a) == _manifest(b)
        assert _files(a) == _files(b)  # chunk store, BM25, OCR words: byte for byte
        va, vb = a.dense.vectors(0, a.manifest.n_chunks), b.dense.vectors(0, b.manifest.n_chunks)
        assert va.shape == vb.shape and va.dtype == vb.dtype == np.float32
        np.testing.assert_allclose(va, vb, rtol=0, atol=VECTOR_ATOL)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("ship", [False, True], ids=["shared-files", "bytes-shipped"])
def test_ray_ingest_builds_the_local_collection(cfg, corpus, ray_local, ship) -> None:
    local_events: list[tuple[str, dict]] = []
    local = ingest_paths(
        cfg, [corpus], "local", progress=lambda e, **i: local_events.append((e, i))
    )
    events: list[tuple[str, dict]] = []
    planned = len(planned_files(cfg, [corpus], "ray", rebuild=False))
    # ship: what --ray-address does, each file's bytes sent to its worker
    remote = ingest_on_ray(
        cfg, [corpus], "ray", progress=lambda e, **i: events.append((e, i)), ship=ship
    )
    assert remote.committed and remote.to_dict()["counts"] == local.to_dict()["counts"]
    assert [(f.path, f.status, f.reason) for f in remote.files] == [
        (f.path, f.status, f.reason) for f in local.files
    ]
    # Progress: the same events, in the same order, as a local ingest's.
    assert [i for e, i in events if e == "file"] == [i for e, i in local_events if e == "file"]
    assert ("ray", {"tasks": planned, "resumed": 0}) in events and planned >= 10
    _same_collection(cfg, "local", "ray")
    assert not (collections_root(cfg) / "ray" / PARTS).exists()
    # Indexed files are not sent again; those that failed or were skipped are, as a local
    # ingest parses them again.
    not_indexed = local.count("failed") + local.count("skipped")
    again = ingest_on_ray(cfg, [corpus], "ray", progress=lambda e, **i: events.append((e, i)))
    assert not again.committed and events[-1] == ("ray", {"tasks": not_indexed, "resumed": 0})


def test_ray_ingest_resumes_after_a_crash(cfg, corpus, ray_local) -> None:
    seen: list[str] = []

    def crash_on_fourth(event: str, **info) -> None:
        if event == "file" and info["status"] == "ok":
            seen.append(info["path"])
            if len(seen) == 4:
                raise KeyboardInterrupt  # killed before the commit

    with pytest.raises(KeyboardInterrupt):
        ingest_on_ray(cfg, [corpus], "resumed", progress=crash_on_fourth)
    parts = collections_root(cfg) / "resumed" / PARTS
    assert len(list(parts.glob("*.json"))) >= 4
    assert read_manifest(collections_root(cfg) / "resumed") is None  # nothing committed
    planned = len(planned_files(cfg, [corpus], "resumed", rebuild=False))
    events: list[tuple[str, dict]] = []
    report = ingest_on_ray(cfg, [corpus], "resumed", progress=lambda e, **i: events.append((e, i)))
    assert report.committed and not parts.exists()
    counts = next(i for e, i in events if e == "ray")
    assert counts["resumed"] >= 4 and counts["tasks"] + counts["resumed"] == planned
    ingest_paths(cfg, [corpus], "local")
    _same_collection(cfg, "local", "resumed")


def test_cli_ingest_executor_ray(corpus, ray_local) -> None:
    from click.testing import CliRunner
    from fathom.cli import main

    runner = CliRunner()
    done = runner.invoke(main, ["ingest", str(corpus), "-c", "cli", "--executor", "ray", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["committed"] and report["counts"]["ok"] >= 10


def test_a_failed_task_is_its_own_files_failure(cfg, tmp_path, ray_local, monkeypatch) -> None:
    """One file's Ray task fails (fast, while an earlier file is still being parsed): that file,
    and only it, is failed, with its own reason; the file waited for meanwhile, and the rest,
    are indexed."""
    from fathom.index import ray_ingest

    folder = tmp_path / "files"
    folder.mkdir()
    for name, text in [
        ("a-slow.txt", "The Zorblax pump is cast from titanium."),
        ("boom.txt", "This file's task fails."),
        ("c.txt", "The probe lands on Europa."),
    ]:
        (folder / name).write_text(text + "\n")

    def task(*args):  # a closure: shipped to the workers by value, the real parse_file there
        import time
        from pathlib import Path

        from fathom.index.ray_ingest import parse_file

        name = Path(args[2]).name
        if name == "boom.txt":
            raise ValueError("the boom file's own failure")
        if name == "a-slow.txt":
            time.sleep(3)  # boom.txt's failure arrives while this file is waited for
        return parse_file(*args)

    monkeypatch.setattr(ray_ingest, "parse_file", task)
    report = ingest_on_ray(cfg, [folder], "failing")
    got = {Path(f.path).name: (f.status, f.reason) for f in report.files}
    assert {n: s for n, (s, _r) in got.items()} == {
        "a-slow.txt": "ok",
        "boom.txt": "failed",
        "c.txt": "ok",
    }
    reason = got["boom.txt"][1]
    assert "the boom file's own failure" in reason and "ValueError" in reason
    assert str(folder / "boom.txt") in reason and "\n" not in reason
    assert report.committed and report.count("ok") == 2


def test_a_chunking_or_embedding_error_is_the_files_failure(cfg, tmp_path, monkeypatch) -> None:
    """On a worker, a chunker or embedder that raises on a file makes that file's result a
    failure with the reason, as a parser's error does, instead of failing the task."""
    from fathom.chunking import make_chunker
    from fathom.chunking.tokens import token_counter_for
    from fathom.index import ray_ingest
    from fathom.index.ray_ingest import parse_file

    note = tmp_path / "note.txt"
    note.write_text("The Zorblax pump is cast from titanium.\n")

    class BrokenChunker:
        def split(self, doc):
            raise RuntimeError("the chunker broke")

    class BrokenEmbedder:
        dim = 4

        def embed(self, texts):
            raise RuntimeError("the embedder broke")

    whole = make_chunker(cfg.chunker, token_counter_for(None))
    for tools, broke in [
        ((cfg, BrokenEmbedder(), BrokenChunker()), "the chunker broke"),
        ((cfg, BrokenEmbedder(), whole), "the embedder broke"),
    ]:
        monkeypatch.setattr(ray_ingest, "_tools", lambda *_a, tools=tools: tools)
        part, vectors = parse_file(cfg.to_dict(), None, str(note), "abc", None, None)
        assert set(part) == {"path", "sha256", "error"}
        assert part["path"] == str(note) and part["sha256"] == "abc"
        assert broke in part["error"] and part["error"].startswith(f"{note}: ")
        assert vectors.shape[0] == 0
