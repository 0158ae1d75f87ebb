"""The torch-free query path: an ONNX export that embeds exactly like sentence-transformers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.core.config import load_config
from fathom.core.errors import BackendUnavailable
from fathom.index.embed import ensure_onnx_export, make_query_embedder
from fathom.index.onnx_embed import OnnxEmbedder, onnx_dir

REPO = Path(__file__).resolve().parent.parent

TEXTS = [
    "hello",
    "What are the key findings of the report?",
    "Ünïcödé, emoji 🙂 and a long dash — in one line.",
    "A long passage about retrieval depth. " * 80,  # longer than max_seq_length: truncated alike
    "",
]


def test_onnx_export_matches_sentence_transformers(minilm, models_cache: Path) -> None:
    directory = ensure_onnx_export(minilm, models_cache)
    assert directory == onnx_dir(models_cache, minilm.id)
    onnx = OnnxEmbedder(directory, verify=True)
    a, b = minilm.embed(TEXTS), onnx.embed(TEXTS)
    assert b.shape == a.shape and b.dtype == np.float32
    cos = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.9999, cos
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)


def test_tampered_export_is_refused(minilm, models_cache: Path, tmp_path: Path) -> None:
    import shutil

    src = ensure_onnx_export(minilm, models_cache)
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    (copy / "tokenizer.json").write_text("{}")
    with pytest.raises(BackendUnavailable, match="checksum mismatch"):
        OnnxEmbedder(copy, verify=True)


def test_query_backend_onnx_requires_an_export(tmp_path: Path) -> None:
    cfg = load_config(
        overrides={"embedder.query_backend": "onnx", "embedder.cache_dir": str(tmp_path / "empty")}
    )
    with pytest.raises(BackendUnavailable, match="fathom ingest"):
        make_query_embedder(cfg.embedder, cfg.models_path())


def test_search_after_ingest_does_not_import_torch(
    tmp_path: Path, fathom_home: Path, models_cache: Path, minilm
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Owls hunt at night and have excellent hearing.")
    (folder / "b.txt").write_text("Bees make honey from nectar collected from flowers.")
    res = CliRunner().invoke(cli.main, ["ingest", str(folder), "-c", "q", "--json"])
    assert res.exit_code == 0, res.output
    code = (
        "import sys, json; sys.argv = ['fathom', 'search', 'q', 'nocturnal birds', '--json', "
        "'-k', '1']\nimport cli\ntry:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, "
        "'st': 'sentence_transformers' in sys.modules}))"
    )
    env = {"FATHOM_HOME": str(fathom_home), "FATHOM_EMBEDDER__CACHE_DIR": str(models_cache)}
    import os

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    hits = json.loads(lines[0])["hits"]
    assert "Owls" in hits[0]["text"]
    assert json.loads(lines[-1]) == {"torch": False, "st": False}


def test_ingest_embedder_uses_the_export(minilm, models_cache: Path) -> None:
    """With an export, ``make_embedder(cfg, models)`` embeds through ONNX Runtime (no torch
    model loaded) with the same vectors and token counter; ``query_backend = torch`` opts out."""
    from fathom.index.embed import make_embedder

    ensure_onnx_export(minilm, models_cache)
    cfg = load_config(overrides={"embedder.cache_dir": str(models_cache)})
    emb = make_embedder(cfg.embedder, cfg.models_path())
    a, b = minilm.embed(TEXTS), emb.embed(TEXTS)
    assert emb._model is None and emb.dim == minilm.dim and emb.id == minilm.id
    cos = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.9999, cos
    assert emb.token_counter().id == minilm.token_counter().id  # manifests stay compatible
    cfg.embedder.query_backend = "torch"
    assert make_embedder(cfg.embedder, cfg.models_path()).onnx_dir is None


def test_a_failed_export_is_a_warning_in_the_ingest_report(tmp_path, monkeypatch) -> None:
    """`ingest --json` prints no progress, so the report itself carries the failed export."""
    import json

    from click.testing import CliRunner
    from fathom import cli
    from fathom.index import embed

    def broken(embedder, models):
        raise RuntimeError("no space left on device")

    monkeypatch.setattr(embed, "ensure_onnx_export", broken)
    monkeypatch.setenv("FATHOM_EMBEDDER__CACHE_DIR", str(tmp_path / "models"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Owls hunt at night. They have excellent hearing.")
    res = CliRunner().invoke(cli.main, ["ingest", str(docs), "-c", "owls", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["counts"]["ok"] == 1
    (warning,) = report["warnings"]
    assert "ONNX export" in warning and "no space left on device" in warning
