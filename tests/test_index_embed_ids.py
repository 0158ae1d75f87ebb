"""Embedder ids: what a manifest, an ONNX export and a trained policy record about the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fathom.core.config import EmbedderConfig
from fathom.core.errors import ConfigError
from fathom.index.embed import (
    MINILM_ID,
    SentenceTransformerEmbedder,
    embedder_id_for,
    ensure_onnx_export,
    make_embedder,
    packaged_minilm_dir,
    resolve_model,
)
from fathom.index.onnx_embed import OnnxEmbedder, onnx_ready

TEXTS = ["Owls hunt at night.", "What are the key findings of the report?", "hello"]


def _copy_minilm(dest: Path, pooling: str = "mean") -> Path:
    """A copy of the packaged MiniLM (weights symlinked), with ``pooling`` as its pooling mode."""
    src = packaged_minilm_dir()
    assert src is not None
    for f in src.rglob("*"):
        if f.is_file():
            target = dest / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.stat().st_size > 1 << 20:
                target.symlink_to(f)
            else:
                shutil.copyfile(f, target)
    if pooling != "mean":
        cfg_path = dest / "1_Pooling" / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["pooling_mode_mean_tokens"] = False
        cfg[f"pooling_mode_{pooling}_token"] = True
        cfg_path.write_text(json.dumps(cfg))
    return dest


@pytest.fixture(scope="module")
def alike(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two different models in folders both named ``model``, and a moved copy of the first."""
    root = tmp_path_factory.mktemp("alike")
    return {
        "a": _copy_minilm(root / "a" / "model"),
        "b": _copy_minilm(root / "b" / "model", pooling="cls"),
        "a_moved": _copy_minilm(root / "elsewhere" / "deeper" / "model"),
    }


def test_local_folders_named_alike_get_distinct_ids(
    alike: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    id_a, id_b = resolve_model(str(alike["a"]))[1], resolve_model(str(alike["b"]))[1]
    assert id_a.startswith("path:model@") and id_b.startswith("path:model@")
    assert id_a != id_b  # the pooling config alone differs
    # The id follows the contents, not where the folder is or where the command runs.
    assert resolve_model(str(alike["a_moved"]))[1] == id_a
    monkeypatch.chdir(alike["a"].parent)
    assert resolve_model("model") == (str(alike["a"]), id_a)
    monkeypatch.chdir(alike["a"].parent.parent)
    assert resolve_model("./a/model/")[1] == id_a
    assert embedder_id_for(EmbedderConfig(name="./b/model")) == id_b


def test_changed_weights_change_the_id(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "README.md").write_text("notes")
    weights = folder / "model.safetensors"
    data = bytearray(3 << 20)
    weights.write_bytes(bytes(data))
    before = resolve_model(str(folder))[1]
    (folder / "README.md").write_text("other notes")  # not part of the model
    assert resolve_model(str(folder))[1] == before
    data[-10] = 1  # the weights' tail
    weights.write_bytes(bytes(data))
    assert resolve_model(str(folder))[1] != before


def test_packaged_minilm_keeps_its_hub_id() -> None:
    """Shipped policies and classifiers record this id: every way of naming the model gives it."""
    local = packaged_minilm_dir()
    for name in ("all-MiniLM-L6-v2", MINILM_ID, "minilm", str(local)):
        assert resolve_model(name) == (str(local), MINILM_ID), name
    assert embedder_id_for(EmbedderConfig()) == MINILM_ID


def test_exports_of_models_named_alike_stay_apart(alike: dict[str, Path], tmp_path: Path) -> None:
    """Each model gets its own ONNX export, and embeds with its own pooling through it."""
    models = tmp_path / "models"
    a = SentenceTransformerEmbedder(str(alike["a"]))
    b = SentenceTransformerEmbedder(str(alike["b"]))
    dir_a, dir_b = ensure_onnx_export(a, models), ensure_onnx_export(b, models)
    assert dir_a != dir_b
    assert json.loads((dir_b / "fathom.json").read_text())["embedder_id"] == b.id
    assert onnx_ready(dir_b, b.id) and not onnx_ready(dir_a, b.id)
    # The ingest path picks the export of the configured model, not its namesake's.
    emb = make_embedder(EmbedderConfig(name=str(alike["b"])), models)
    assert emb.onnx_dir == dir_b
    want_a, want_b = a.embed(TEXTS), b.embed(TEXTS)
    got_b = emb.embed(TEXTS)
    np.testing.assert_allclose(got_b, want_b, atol=1e-4)
    assert np.abs(got_b - want_a).max() > 0.05  # CLS and mean pooling really differ
    np.testing.assert_allclose(OnnxEmbedder(dir_a).embed(TEXTS), want_a, atol=1e-4)


def test_hashing_ids_match_the_embedder() -> None:
    for name, want in (("hashing", "hashing:384"), ("hashing:0384", "hashing:384")):
        cfg = EmbedderConfig(name=name)
        assert embedder_id_for(cfg) == make_embedder(cfg).id == want
    for bad in ("hashing:abc", "hashing:-4", "hashing:0", "hashing:3.5"):
        cfg = EmbedderConfig(name=bad)
        with pytest.raises(ConfigError, match="whole number"):
            embedder_id_for(cfg)
        with pytest.raises(ConfigError, match="whole number"):
            make_embedder(cfg)
