"""``fathom ingest --watch``: the collection follows files written, changed and deleted, a file
still being written is read once it is complete, readers never see a broken collection, and
Ctrl-C ends it cleanly; plus the watcher's parts on their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.index.collection import Collection, collections_root
from fathom.index.ingest import ingest_paths
from fathom.index.manifest import read_manifest
from fathom.index.watch import DocumentFilter, _Root, ingest_batch, wait_until_stable


def _until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``check()`` holds; fails the test after ``timeout``."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
    return time.monotonic() - t0


def _docs(cfg) -> dict[str, str]:
    """Indexed documents of ``notes``: file name → sha256."""
    m = read_manifest(collections_root(cfg) / "notes")
    return {Path(d.path).name: d.sha256 for d in m.documents if d.status == "ok"} if m else {}


def _generation(cfg) -> int:
    m = read_manifest(collections_root(cfg) / "notes")
    return m.generation if m else 0


class Reader(threading.Thread):
    """Opens the collection again and again while it changes, checking it each time."""

    def __init__(self, cfg) -> None:
        super().__init__(daemon=True)
        self.cfg, self.stop, self.reads, self.problems = cfg, threading.Event(), 0, []

    def run(self) -> None:
        from fathom.index.retrieve import CollectionRetriever

        while not self.stop.is_set():
            try:
                coll = Collection.open(self.cfg, "notes")
                try:
                    problems = coll.check()
                    hits = CollectionRetriever(coll, None, mode="bm25").search("pump", 5)
                    if problems or not hits:
                        self.problems.append(f"gen {coll.manifest.generation}: {problems}")
                finally:
                    coll.close()
                self.reads += 1
            except Exception as exc:  # any failure to read is what this test looks for
                self.problems.append(repr(exc))


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT at its default in the watcher, however the tests were started: a process
    started in the background of a shell without job control inherits SIGINT ignored, and
    Python then leaves it ignored, so Ctrl-C (this test's SIGINT) would never reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_watch_follows_the_folder_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    cfg = load_config()
    folder = tmp_path / "watched"
    folder.mkdir()
    docgen.make_text(folder / "a.md", "# Pumps\n\nThe Zorblax pump is blue.\n")
    env = {
        **os.environ,
        "FATHOM_INGEST__WATCH_DEBOUNCE_MS": "200",
        "FATHOM_INGEST__WATCH_STABLE_MS": "600",
    }
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fathom", "ingest", str(folder), "-c", "notes", "--watch"],
            stdout=stdout,
            stderr=stderr,
            env=env,
            preexec_fn=_ctrl_c_as_at_a_terminal,
        )
    reader = Reader(cfg)
    try:
        _until(lambda: "watching" in err.read_text(), 180, "the first ingest and the watch")
        assert set(_docs(cfg)) == {"a.md"}
        reader.start()

        docgen.make_text(folder / "b.md", "# Turbines\n\nThe turbine pump spins fast.\n")
        took = [_until(lambda: "b.md" in _docs(cfg), 20, "a file written")]

        first = _docs(cfg)["a.md"]
        docgen.make_text(folder / "a.md", "# Pumps\n\nThe Zorblax pump is red now.\n")
        took.append(_until(lambda: _docs(cfg).get("a.md") != first, 20, "a file changed"))

        (folder / "b.md").unlink()
        took.append(_until(lambda: "b.md" not in _docs(cfg), 20, "a file deleted"))

        # A file written in pieces, slower than the debounce: read once, complete.
        before = _generation(cfg)
        with (folder / "c.md").open("w", encoding="utf-8") as fh:
            fh.write("# Valves\n\nThe pump valve opens")
            for part in range(6):
                fh.flush()
                time.sleep(0.25)
                fh.write(f" and closes {part}")
            fh.write(". END OF VALVES.\n")
        took.append(_until(lambda: "c.md" in _docs(cfg), 20, "a file written slowly"))
        time.sleep(2.0)  # any later batch of the same writes commits nothing
        assert _generation(cfg) == before + 1
        coll = Collection.open(cfg, "notes")
        try:
            texts = " ".join(c.text for c in coll.store.all())
        finally:
            coll.close()
        assert "END OF VALVES" in texts and "red now" in texts and "turbine" not in texts
        assert "still being written" in err.read_text()
        assert max(took) < 10, took
    finally:
        reader.stop.set()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    reader.join(timeout=30)
    assert code == 0, err.read_text()[-2000:]
    assert "stopped watching" in err.read_text()
    assert reader.reads > 5 and reader.problems == []
    lines = out.read_text().splitlines()
    assert any("1 added, 0 changed, 0 removed" in line for line in lines)
    assert any("0 added, 1 changed, 0 removed" in line for line in lines)
    assert any("0 added, 0 changed, 1 removed" in line for line in lines)


def test_the_filter_takes_what_ingest_would_read(tmp_path: Path) -> None:
    from watchfiles import Change

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    for name in ("sub/a.md", "b.pdf", "c.exe", ".hidden/d.md", "e.md.swp", ".f.md"):
        (folder / name).write_text("x")
    single = tmp_path / "one.txt"
    single.write_text("x")
    os.symlink(folder / "b.pdf", folder / "link.pdf")
    roots = [_Root(folder), _Root(single)]
    strict, follow = DocumentFilter(roots, False), DocumentFilter(roots, True)
    took = {
        name
        for name in ("sub/a.md", "b.pdf", "c.exe", ".hidden/d.md", "e.md.swp", ".f.md", "sub")
        if strict(Change.modified, str(folder / name))
    }
    assert took == {"sub/a.md", "b.pdf", "sub"}
    assert strict(Change.deleted, str(folder / "gone-folder"))  # a folder removed
    assert strict(Change.deleted, str(folder / "gone.docx"))
    assert not strict(Change.deleted, str(folder / "gone.exe"))
    assert strict(Change.modified, str(single))
    assert not strict(Change.added, str(tmp_path / "other.txt"))
    assert not strict(Change.added, str(folder / "link.pdf"))
    assert follow(Change.added, str(folder / "link.pdf"))


def test_waiting_for_a_file_still_being_written(tmp_path: Path) -> None:
    path = tmp_path / "growing.txt"
    path.write_text("start")
    done = threading.Event()

    def write() -> None:
        with path.open("a") as fh:
            for _ in range(8):
                time.sleep(0.05)
                fh.write(" more")
                fh.flush()
        done.set()

    events: list[tuple[str, dict]] = []
    writer = threading.Thread(target=write)
    writer.start()
    stable = wait_until_stable(
        [path], 0.2, threading.Event(), lambda e, **kw: events.append((e, kw))
    )
    assert stable and done.is_set()
    assert events and events[0] == ("waiting", {"files": [str(path)]})
    writer.join()
    stop = threading.Event()
    stop.set()
    assert wait_until_stable([path], 5.0, stop, lambda e, **kw: None) is False


def test_a_batch_counts_what_it_did(tmp_path: Path, minilm) -> None:
    cfg = load_config()
    folder = tmp_path / "docs"
    folder.mkdir()
    a = docgen.make_text(folder / "a.md", "The Zorblax pump is blue.\n")
    b = docgen.make_text(folder / "b.md", "Turbines spin.\n")
    ingest_paths(cfg, [folder], "notes", embedder=minilm)
    docgen.make_text(a, "The Zorblax pump is red.\n")
    b.unlink()
    c = docgen.make_text(folder / "c.md", "Valves open.\n")
    batch = ingest_batch(cfg, "notes", [a, b, c], events=3, embedder=minilm)
    assert (batch.added, batch.changed, batch.removed) == (1, 1, 1)
    assert batch.report.committed and batch.report.generation == 2
    assert set(_docs(cfg)) == {"a.md", "c.md"}
    again = ingest_batch(cfg, "notes", [a], events=1, embedder=minilm)
    assert not again.report.committed and (again.added, again.changed, again.removed) == (0, 0, 0)
    assert again.to_dict()["report"]["counts"]["unchanged"] == 1
