"""SIGKILL in the middle of an ingest never leaves a collection that fails to load."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fathom.bench.support.docgen import ingest_command
from fathom.bench.support.docgen import make_versioned_corpus as _write_corpus
from fathom.core.config import load_config
from fathom.index.collection import Collection


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(int(os.environ.get("FATHOM_KILL_TRIALS", "6"))))
def test_sigkill_mid_ingest_keeps_previous_or_new_version(
    tmp_path: Path, fathom_home, seed
) -> None:
    folder = tmp_path / "corpus"
    _write_corpus(folder, 150, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    subprocess.run(
        ingest_command(folder, "k", "--json"), check=True, env=env, capture_output=True, timeout=300
    )
    cfg = load_config()
    v1 = Collection.open(cfg, "k")
    v1_texts = {c.text for c in v1.store.all()}
    v1.close()

    _write_corpus(folder, 180, version=2)
    proc = subprocess.Popen(
        ingest_command(folder, "k", "--json"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(random.Random(seed).uniform(0.3, 3.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    coll = Collection.open(cfg, "k")
    assert coll.check() == []
    texts = {c.text for c in coll.store.all()}
    assert texts == v1_texts or all("Version 2" in t for t in texts)
    coll.close()
    # The next ingest recovers: it completes and cleans up the interrupted build.
    subprocess.run(
        ingest_command(folder, "k", "--json"), check=True, env=env, capture_output=True, timeout=300
    )
    coll = Collection.open(cfg, "k")
    assert coll.check() == [] and coll.manifest.counts()["documents"] == 180
    leftovers = [p.name for p in coll.directory.iterdir() if p.is_dir()]
    assert leftovers == [coll.manifest.data_dir_name]


def test_an_unchanged_ingest_removes_what_a_killed_writer_left(tmp_path: Path, fathom_home) -> None:
    """Killed between its commit and its clean-up, a writer leaves the old generation and its
    temporary build; the next ingest, even with nothing to change, removes them."""
    folder = tmp_path / "corpus"
    _write_corpus(folder, 3, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    subprocess.run(
        ingest_command(folder, "k", "--json"), check=True, env=env, capture_output=True, timeout=300
    )
    coll = Collection.open(load_config(), "k")
    live = coll.manifest.data_dir_name
    (coll.directory / "gen-000000").mkdir()
    (coll.directory / "gen-000000" / "chunks.jsonl").write_text("")
    (coll.directory / ".tmp-gen-000009").mkdir()
    subprocess.run(
        ingest_command(folder, "k", "--json"), check=True, env=env, capture_output=True, timeout=300
    )
    assert sorted(p.name for p in coll.directory.iterdir() if p.is_dir()) == [live]
    assert Collection.open(load_config(), "k").check() == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_sigkill_mid_incremental_ingest_keeps_a_sound_segmented_collection(
    tmp_path: Path, fathom_home, seed
) -> None:
    """The same on a collection whose next generation keeps its old segment (hard links) and
    tombstones removed documents: killed at any point, it opens as one version or the other."""
    folder = tmp_path / "corpus"
    _write_corpus(folder, 150, version=1)
    env = {**os.environ, "FATHOM_HOME": str(fathom_home)}
    run = {"check": True, "env": env, "capture_output": True, "timeout": 300}
    subprocess.run(ingest_command(folder, "k", "--json"), **run)
    cfg = load_config()
    v1 = Collection.open(cfg, "k")
    before = {c.text for _, c in v1.live()}
    v1.close()
    for i in range(3):
        (folder / f"f{i:04d}.txt").unlink()
    extra = tmp_path / "extra"
    _write_corpus(extra, 4, version=2)
    for p in extra.iterdir():
        p.rename(folder / f"new-{p.name}")
    proc = subprocess.Popen(
        ingest_command(folder, "k", "--json"), env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(random.Random(seed).uniform(0.2, 2.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    coll = Collection.open(cfg, "k")
    assert coll.check() == []
    texts = {c.text for _, c in coll.live()}
    after_ok = not any("Version 1 file 0." in t for t in texts) and any(
        "Version 2" in t for t in texts
    )
    assert texts == before or after_ok
    coll.close()
    subprocess.run(ingest_command(folder, "k", "--json"), **run)
    coll = Collection.open(cfg, "k")
    assert coll.check() == [] and coll.manifest.counts()["documents"] == 151
    assert len(coll.layout.segments) == 2 and coll.layout.dead > 0
    leftovers = [p.name for p in coll.directory.iterdir() if p.is_dir()]
    assert leftovers == [coll.manifest.data_dir_name]
