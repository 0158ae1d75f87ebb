"""``embedder.precision = int8``: a quantized ONNX model for ingest and queries, recorded in the
collection so its queries never mix precisions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.core.config import load_config
from fathom.core.errors import ConfigError
from fathom.index.collection import Collection
from fathom.index.embed import ensure_onnx_export, make_embedder, make_query_embedder
from fathom.index.manifest import file_sha256
from fathom.index.onnx_embed import MODEL_FILES, OnnxEmbedder, int8_ready, quantize_int8

TEXTS = [
    "What are the key findings of the report?",
    "Owls hunt at night and have excellent hearing.",
    "The 1973 oil crisis began in October 1973, when OAPEC proclaimed an embargo.",
    "A long passage about retrieval depth. " * 80,
]


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_int8_model_is_a_close_but_real_quantization(minilm, models_cache: Path) -> None:
    directory = ensure_onnx_export(minilm, models_cache)
    fp32 = OnnxEmbedder(directory)
    int8 = OnnxEmbedder(directory, precision="int8", verify=True)
    assert int8_ready(directory)
    a, b = fp32.embed(TEXTS), int8.embed(TEXTS)
    assert b.shape == a.shape and b.dtype == np.float32
    cos = _cos(a, b)
    assert cos.min() > 0.95 and cos.mean() > 0.98, cos  # the same model, slightly perturbed
    assert np.abs(a - b).max() > 1e-3  # and not the fp32 model under another name
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    size = {p: (directory / f).stat().st_size for p, f in MODEL_FILES.items()}
    assert size["int8"] < 0.4 * size["fp32"], size
    # Dynamic quantization needs no calibration data: the same export gives the same file.
    before = file_sha256(directory / MODEL_FILES["int8"])
    quantize_int8(directory)
    assert file_sha256(directory / MODEL_FILES["int8"]) == before


def test_int8_vectors_do_not_depend_on_the_batch(minilm, models_cache: Path) -> None:
    """Activations are quantized per call: a chunk embedded at ingest beside others (padded to the
    longest) must get the vector its text gets alone on the query path."""
    int8 = OnnxEmbedder(ensure_onnx_export(minilm, models_cache), precision="int8")
    texts = [*TEXTS, "Owls.", "Bees make honey from nectar collected from flowers."]
    batched = int8.embed(texts, batch_size=8)
    alone = np.stack([int8.embed_query(t) for t in texts])
    np.testing.assert_allclose(batched, alone, atol=1e-6)
    np.testing.assert_allclose(int8.embed(texts[::-1], batch_size=3)[::-1], alone, atol=1e-6)


def test_int8_model_follows_its_source_export(minilm, models_cache: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(ensure_onnx_export(minilm, models_cache), copy)
    OnnxEmbedder(copy, precision="int8")
    assert int8_ready(copy)
    meta = json.loads((copy / "fathom.json").read_text())
    meta["sha256"]["model.onnx"] = "0" * 64  # as if the fp32 model were exported again
    (copy / "fathom.json").write_text(json.dumps(meta))
    assert not int8_ready(copy)
    OnnxEmbedder(copy, precision="int8")  # quantizes the new source
    assert int8_ready(copy)


def test_int8_collection_records_its_precision_and_refuses_mixing(
    tmp_path: Path, fathom_home: Path, models_cache: Path, minilm, monkeypatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Owls hunt at night and have excellent hearing.")
    (folder / "b.txt").write_text("Bees make honey from nectar collected from flowers.")
    monkeypatch.setenv("FATHOM_EMBEDDER__PRECISION", "int8")
    runner = CliRunner()
    res = runner.invoke(cli.main, ["ingest", str(folder), "-c", "q8", "--json"])
    assert res.exit_code == 0, res.output
    cfg = load_config()
    coll = Collection.open(cfg, "q8", expect_embedder=minilm.id)
    assert coll.manifest.embedder_precision == "int8"
    # The stored vectors are the int8 model's, not the fp32 model's.
    q8 = make_query_embedder(cfg.embedder, cfg.models_path())
    assert isinstance(q8, OnnxEmbedder) and q8.precision == "int8"
    texts = [coll.embed_text(c) for c in coll.chunks(range(len(coll)))]
    np.testing.assert_allclose(coll.dense.vectors(), q8.embed(texts), atol=1e-5)
    coll.close()
    res = runner.invoke(cli.main, ["search", "q8", "nocturnal birds", "-k", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert "Owls" in json.loads(res.output)["hits"][0]["text"]

    # Queries follow the collection whatever embedder.precision says now ...
    monkeypatch.setenv("FATHOM_EMBEDDER__PRECISION", "fp32")
    from fathom.index.retrieve import open_retriever

    retriever = open_retriever(load_config(), "q8")
    assert retriever.embedder.precision == "int8"
    retriever.collection.close()
    res = runner.invoke(cli.main, ["search", "q8", "nocturnal birds", "-k", "1", "--json"])
    assert res.exit_code == 0 and "Owls" in json.loads(res.output)["hits"][0]["text"]
    res = runner.invoke(
        cli.main,
        ["ask", "q8", "Which birds hunt at night?", "--generator", "extractive", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["trace"]["embedder"] == f"{minilm.id} (int8)"  # reported
    # ... but adding documents at another precision would mix vectors: refused.
    (folder / "c.txt").write_text("Salmon swim upstream to spawn in the rivers where they hatched.")
    res = runner.invoke(cli.main, ["ingest", str(folder), "-c", "q8", "--json"])
    assert res.exit_code != 0 and "precision" in res.output, res.output


def test_int8_needs_model_weights_and_the_onnx_path(tmp_path: Path) -> None:
    cfg = load_config(overrides={"embedder.name": "hashing:64", "embedder.precision": "int8"})
    with pytest.raises(ConfigError, match="no weights"):
        make_embedder(cfg.embedder, tmp_path)
    cfg = load_config(overrides={"embedder.precision": "int8", "embedder.query_backend": "torch"})
    with pytest.raises(ConfigError, match="ONNX Runtime"):
        make_embedder(cfg.embedder, tmp_path)
    cfg = load_config(overrides={"embedder.precision": "int8"})
    with pytest.raises(ConfigError, match="models folder"):
        make_embedder(cfg.embedder)
