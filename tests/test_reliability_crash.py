"""Crash safety and concurrency: SIGKILL at seeded random points, two writers, readers mid-write.

``FATHOM_KILL_TRIALS`` sets the number of kill points (default 20).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fathom.bench.support.docgen import ingest_command as _cmd
from fathom.bench.support.docgen import make_versioned_corpus as _write_corpus
from fathom.core.config import load_config
from fathom.index.collection import Collection, collections_root
from fathom.index.locks import writer_lock

TRIALS = int(os.environ.get("FATHOM_KILL_TRIALS", "20"))


def _texts(home: Path, name: str = "k") -> set[str]:
    """The collection's chunk texts after a full consistency check (raises if unsound)."""
    os.environ["FATHOM_HOME"] = str(home)  # the fathom_home fixture restores it
    coll = Collection.open(load_config(), name)
    try:
        problems = coll.check()
        assert problems == [], problems
        return {c.text for c in coll.store.all()}
    finally:
        coll.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A committed version-1 collection, the version-2 corpus, and how long a v2 ingest takes."""
    root = tmp_path_factory.mktemp("kill")
    corpus, home = root / "corpus", root / "home"
    _write_corpus(corpus, 60, version=1)
    env = {**os.environ, "FATHOM_HOME": str(home)}
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    _write_corpus(corpus, 80, version=2)
    probe = root / "probe-home"
    shutil.copytree(home, probe)
    t0 = time.perf_counter()
    subprocess.run(
        _cmd(corpus),
        check=True,
        env={**env, "FATHOM_HOME": str(probe)},
        capture_output=True,
        timeout=300,
    )
    return {"corpus": corpus, "home": home, "seconds": time.perf_counter() - t0}


@pytest.mark.parametrize("seed", range(TRIALS))
def test_sigkill_at_a_random_point(template: dict, tmp_path: Path, seed: int) -> None:
    """Kill anywhere from start-up to commit: the collection loads, passes check(), and holds
    exactly version 1 or exactly version 2; the next ingest recovers and cleans up."""
    home = tmp_path / "home"
    shutil.copytree(template["home"], home)
    v1 = _texts(home)
    env = {**os.environ, "FATHOM_HOME": str(home)}
    proc = subprocess.Popen(
        _cmd(template["corpus"]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # Spread the kill points over the whole run, start-up included.
    time.sleep(random.Random(seed).uniform(0.1, 1.05) * template["seconds"])
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    texts = _texts(home)
    assert texts == v1 or (texts and all("Version 2" in t for t in texts))
    if seed % 5 == 0:  # recovery costs a full ingest: checked on a quarter of the trials
        subprocess.run(
            _cmd(template["corpus"]), check=True, env=env, capture_output=True, timeout=300
        )
        assert all("Version 2" in t for t in _texts(home))
        coll_dir = home / "collections" / "k"
        dirs = sorted(p.name for p in coll_dir.iterdir() if p.is_dir())
        assert not [d for d in dirs if d.startswith(".tmp-")], dirs


def test_second_ingest_waits_for_the_lock(tmp_path: Path, fathom_home: Path) -> None:
    corpus = tmp_path / "c"
    _write_corpus(corpus, 5, version=1)
    directory = collections_root(load_config()) / "k"
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    with writer_lock(directory, timeout=5):
        proc = subprocess.Popen(
            _cmd(corpus), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(3.0)
        assert proc.poll() is None  # still waiting: the lock is held
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "waiting for another ingest of 'k'" in err
    assert _texts(fathom_home)


def test_second_ingest_fails_clearly_after_the_lock_timeout(
    tmp_path: Path, fathom_home: Path
) -> None:
    corpus = tmp_path / "c"
    _write_corpus(corpus, 5, version=1)
    directory = collections_root(load_config()) / "k"
    env = {**os.environ, "FATHOM_HOME": str(fathom_home), "FATHOM_INGEST__LOCK_TIMEOUT_S": "0.5"}
    with writer_lock(directory, timeout=5):
        proc = subprocess.run(
            _cmd(corpus, "k", "--json"), env=env, capture_output=True, text=True, timeout=120
        )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "being written by another process" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_two_concurrent_ingests_both_commit(tmp_path: Path, fathom_home: Path) -> None:
    """Two writers started together into one collection: serialised, nothing lost."""
    a, b = tmp_path / "a", tmp_path / "b"
    _write_corpus(a, 30, version=1)
    _write_corpus(b, 30, version=2)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    procs = [
        subprocess.Popen(_cmd(d), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for d in (a, b)
    ]
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0
    texts = _texts(fathom_home)
    assert any("Version 1" in t for t in texts) and any("Version 2" in t for t in texts)
    os.environ["FATHOM_HOME"] = str(fathom_home)
    assert Collection.open(load_config(), "k").manifest.counts()["documents"] == 60


def test_reader_during_writes_sees_old_or_new(tmp_path: Path, fathom_home: Path) -> None:
    """A reader that opens and fully loads the collection while a writer commits versions
    again and again always sees one whole version: never a mix, never a crash."""
    corpus = tmp_path / "c"
    _write_corpus(corpus, 40, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for version in (2, 3, 4, 5):
                _write_corpus(corpus, 40, version=version)
                subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            stop.set()

    writer = threading.Thread(target=write)
    writer.start()
    cfg = load_config()
    seen: set[int] = set()
    reads = 0
    while not stop.is_set() or reads == 0:
        coll = Collection.open(cfg, "k")
        try:
            assert coll.check() == []
            text = "\n".join(c.text for c in coll.store.all())
        finally:
            coll.close()
        versions = {int(v) for v in re.findall(r"Version (\d+)", text)}
        assert len(versions) == 1, versions
        seen |= versions
        reads += 1
    writer.join()
    assert not errors, errors
    assert reads >= 3 and len(seen) >= 2, (reads, seen)


def test_an_open_reader_keeps_its_generation_until_it_closes(
    tmp_path: Path, fathom_home: Path
) -> None:
    """Indexes load lazily: a reader that opened version 1 must still load them after a writer
    committed version 2. The writer's clean-up leaves version 1 while it is open, and the next
    ingest removes it once the reader has closed."""
    corpus = tmp_path / "c"
    _write_corpus(corpus, 5, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    reader = Collection.open(load_config(), "k")  # nothing loaded yet
    old = reader.manifest.data_dir_name
    _write_corpus(corpus, 5, version=2)
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    assert reader.check() == []  # loads dense.faiss and bm25/ of version 1 now
    assert all("Version 1" in c.text for c in reader.store.all())
    gens = sorted(p.name for p in reader.directory.iterdir() if p.name.startswith("gen-"))
    assert old in gens and len(gens) == 2
    reader.close()
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    gens = sorted(p.name for p in reader.directory.iterdir() if p.name.startswith("gen-"))
    assert gens == [Collection.open(load_config(), "k").manifest.data_dir_name] != [old]


def test_a_reader_never_takes_a_generation_a_clean_up_is_removing(
    tmp_path: Path, fathom_home: Path
) -> None:
    """Between a clean-up unlinking a generation's reader-lock file and removing its folder, a
    reader that read the old manifest must read the manifest again, not open the folder
    unlocked (it vanished under such a reader mid-load). A current generation without the file
    (written before reader locks existed) still opens."""
    import shutil

    from fathom.index.locks import READERS
    from fathom.index.manifest import read_manifest

    corpus = tmp_path / "c"
    _write_corpus(corpus, 5, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    cfg = load_config()
    directory = Collection.open(cfg, "k").directory
    old_manifest = read_manifest(directory)
    old = directory / old_manifest.data_dir_name
    keep = tmp_path / "old-generation"
    shutil.copytree(old, keep)  # the version-1 folder as a clean-up finds it
    _write_corpus(corpus, 5, version=2)
    subprocess.run(_cmd(corpus), check=True, env=env, capture_output=True, timeout=300)
    if not old.exists():  # the writer removed it: put it back, mid-removal (lock file gone)
        shutil.copytree(keep, old)
    (old / READERS).unlink(missing_ok=True)
    stale = Collection(directory, old_manifest, cfg)
    assert stale._hold() is False  # read the manifest again
    current = Collection.open(cfg, "k")
    assert current.manifest.data_dir_name != old_manifest.data_dir_name
    current.close()
    (current.data_dir / READERS).unlink()  # a generation from before reader locks
    legacy = Collection(directory, read_manifest(directory), cfg)
    assert legacy._hold() is True
    assert all("Version 2" in c.text for c in legacy.store.all())
