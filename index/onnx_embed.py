"""The query path's embedder: an ONNX Runtime export of a sentence-transformers model.

Importing torch and sentence-transformers costs seconds; ONNX Runtime plus ``tokenizers`` loads
and embeds a query in a fraction of that. ``export_onnx`` (ingest path, needs torch) writes
``FATHOM_HOME/models/<slug>/`` with ``model.onnx``, the tokenizer, the pooling settings and a
``fathom.json`` carrying sha256 checksums; ``OnnxEmbedder`` (query path, no torch) reads it and
reproduces the model's pooling and normalisation in numpy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import BackendUnavailable
from fathom.index.manifest import file_sha256

if TYPE_CHECKING:
    import numpy as np

META = "fathom.json"
FORMAT = 1
# Model file per ``embedder.precision``; the int8 file is derived from the fp32 one on first use.
MODEL_FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
INT8_META = "model.int8.json"


def model_slug(embedder_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", embedder_id).strip("-")


def onnx_dir(models: Path, embedder_id: str) -> Path:
    """Export folder for ``embedder_id`` under the models folder."""
    return models / model_slug(embedder_id)


def _pooling_from(model_dir: Path) -> dict[str, Any]:
    """Pooling mode, normalisation and max length from a sentence-transformers folder."""
    modules = json.loads((model_dir / "modules.json").read_text())
    pooling: dict[str, Any] = {"mode": "mean", "normalize": False, "max_seq_length": 512}
    for mod in modules:
        kind = mod["type"].rsplit(".", 1)[-1]
        if kind == "Pooling":
            cfg = json.loads((model_dir / mod["path"] / "config.json").read_text())
            if cfg.get("pooling_mode_cls_token"):
                pooling["mode"] = "cls"
            elif cfg.get("pooling_mode_max_tokens"):
                pooling["mode"] = "max"
            elif cfg.get("pooling_mode_mean_sqrt_len_tokens"):
                pooling["mode"] = "mean_sqrt_len"
        elif kind == "Normalize":
            pooling["normalize"] = True
        elif kind not in ("Transformer",):
            raise BackendUnavailable(f"{model_dir}: module {kind} has no ONNX query path")
    sbert = model_dir / "sentence_bert_config.json"
    if sbert.exists():
        pooling["max_seq_length"] = json.loads(sbert.read_text()).get("max_seq_length", 512)
    return pooling


def export_onnx(st_model: Any, model_dir: Path, embedder_id: str, out_dir: Path) -> Path:
    """Export ``st_model`` (a loaded SentenceTransformer from ``model_dir``) to ``out_dir``.

    Written to a temporary folder and renamed into place, so a reader never sees half an export.
    """

    pooling = _pooling_from(model_dir)
    transformer = st_model[0].auto_model.eval()
    tmp = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok = model_dir / "tokenizer.json"
    if not tok.exists():
        raise BackendUnavailable(f"{model_dir}: no tokenizer.json, cannot build the ONNX path")
    shutil.copyfile(tok, tmp / "tokenizer.json")
    names = _trace_to_onnx(transformer, tmp / "model.onnx")
    meta = {
        "format": FORMAT,
        "embedder_id": embedder_id,
        "inputs": names,
        "dim": int(transformer.config.hidden_size),
        **pooling,
        "sha256": {f: file_sha256(tmp / f) for f in ("model.onnx", "tokenizer.json")},
    }
    (tmp / META).write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out_dir)
    return out_dir


def _trace_to_onnx(transformer: Any, path: Path) -> list[str]:
    """Write ``transformer``'s last hidden state as an ONNX graph to ``path``, batch and
    sequence length dynamic; the input names it takes."""
    import torch

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = {
        "input_ids": torch.ones((2, 8), dtype=torch.long),
        "attention_mask": torch.ones((2, 8), dtype=torch.long),
        "token_type_ids": torch.zeros((2, 8), dtype=torch.long),
    }
    import inspect

    accepted = inspect.signature(transformer.forward).parameters
    names = [n for n in names if n in accepted]

    class _Wrapper(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes and advanced indexing
        torch.onnx.export(
            _Wrapper(transformer),
            tuple(sample[n] for n in names),
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={
                **{n: {0: "batch", 1: "seq"} for n in names},
                "last_hidden_state": {0: "batch", 1: "seq"},
            },
            opset_version=17,
            dynamo=False,
        )
    return names


def quantize_int8(directory: Path) -> Path:
    """Write ``model.int8.onnx`` beside an fp32 export: dynamic int8 quantization (ONNX
    Runtime's default operators: the MatMul weights, signed and per output channel, and the
    embedding tables), activations quantized per call (``OnnxEmbedder`` runs it one text per
    call, so a text's vector does not depend on its batch). A quarter of the fp32 file's size.

    Dynamic quantization needs no calibration data, so it is deterministic for a given export.
    Written to a temporary name and renamed into place (concurrent callers race harmlessly).
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = directory / MODEL_FILES["int8"]
    tmp = directory / f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    meta_tmp = tmp.with_suffix(".json.tmp")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "consider pre-processing": shape inference fails on BERT
    try:
        quantize_dynamic(
            str(directory / MODEL_FILES["fp32"]),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
        meta = {
            "source_sha256": json.loads((directory / META).read_text())["sha256"]["model.onnx"],
            "sha256": file_sha256(tmp),
            "method": "onnxruntime quantize_dynamic, QInt8 weights, per channel",
        }
        meta_tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, out)
        os.replace(meta_tmp, directory / INT8_META)
    finally:
        root.setLevel(level)
        tmp.unlink(missing_ok=True)
        meta_tmp.unlink(missing_ok=True)
    return out


def int8_ready(directory: Path) -> bool:
    """True when ``directory`` holds an int8 model derived from its current fp32 export."""
    try:
        meta = json.loads((directory / INT8_META).read_text())
        source = json.loads((directory / META).read_text())["sha256"]["model.onnx"]
    except (OSError, json.JSONDecodeError, KeyError):
        return False
    return meta.get("source_sha256") == source and (directory / MODEL_FILES["int8"]).is_file()


def onnx_ready(directory: Path, embedder_id: str) -> bool:
    """True when ``directory`` holds a complete export for ``embedder_id``."""
    try:
        meta = json.loads((directory / META).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return meta.get("format") == FORMAT and meta.get("embedder_id") == embedder_id


class OnnxEmbedder:
    """Embeds with ONNX Runtime; same vectors as the sentence-transformers model it came from."""

    def __init__(
        self,
        directory: Path,
        verify: bool = False,
        threads: int | None = None,
        precision: str = "fp32",
    ) -> None:
        if precision not in MODEL_FILES:
            raise ValueError(f"precision {precision!r}: expected one of {sorted(MODEL_FILES)}")
        self.directory = directory
        self.meta = json.loads((directory / META).read_text())
        self.precision = precision
        if precision != "fp32" and not int8_ready(directory):
            quantize_int8(directory)
        self.id = self.meta["embedder_id"]
        self.dim = int(self.meta["dim"])
        self.name = self.id
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()
        if verify:
            sums = dict(self.meta["sha256"])
            if precision != "fp32":
                sums[MODEL_FILES[precision]] = json.loads((directory / INT8_META).read_text())[
                    "sha256"
                ]
            for f, want in sums.items():
                if file_sha256(directory / f) != want:
                    raise BackendUnavailable(
                        f"{directory / f}: checksum mismatch — delete {directory} to re-export"
                    )

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
                tok.enable_truncation(int(self.meta["max_seq_length"]))
                tok.enable_padding()
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
                opts.inter_op_num_threads = 1
                opts.log_severity_level = 3
                # Idle worker threads sleep instead of spinning: on a small shared CPU a spinning
                # thread burns the core the other one needs (query P50 7-10 ms vs 42-46 ms under
                # load on 2 cores, bench/peers.py).
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._session = ort.InferenceSession(
                    str(self.directory / MODEL_FILES[self.precision]),
                    opts,
                    providers=["CPUExecutionProvider"],
                )
                self._tokenizer = tok
        return self._session, self._tokenizer

    def model_dir(self) -> Path | None:
        return self.directory

    def embed(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """``(len(texts), dim) float32``, pooled and normalised as the source model does."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tok = self._load()
        step = batch_size or 32
        if self.precision == "int8":
            # Dynamic quantization scales activations over the whole call, padding included, so
            # a text batched with others would get another vector than alone (cos down to 0.98):
            # one text per call keeps ingest and query vectors identical. It is not slower on 2
            # cores, as no padding is computed: the user guide's 15 chunks embed in 140-155 ms
            # against 245-290 ms in batches of 8, 200 SciFact abstracts in 5.0-6.9 s vs 6.1-8.9 s.
            step = 1
        # Batches of similar length: padding to a batch's longest text is wasted compute, so
        # one long text must not pad thirty short ones (sentence-transformers sorts likewise).
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), step):
            idx = order[start : start + step]
            encs = tok.encode_batch([texts[i] for i in idx])
            ids = np.asarray([e.ids for e in encs], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.meta["inputs"]:
                feeds["token_type_ids"] = np.asarray([e.type_ids for e in encs], dtype=np.int64)
            (hidden,) = session.run(["last_hidden_state"], feeds)
            out[idx] = self._pool(hidden, mask)
        return out

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        mode = self.meta["mode"]
        m = mask[..., None].astype(np.float32)
        if mode == "cls":
            vec = hidden[:, 0]
        elif mode == "max":
            vec = np.where(m > 0, hidden, -1e9).max(axis=1)
        else:
            summed = (hidden * m).sum(axis=1)
            counts = np.clip(m.sum(axis=1), 1e-9, None)
            vec = summed / (np.sqrt(counts) if mode == "mean_sqrt_len" else counts)
        vec = vec.astype(np.float32)
        if self.meta["normalize"]:
            vec /= np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)
        return vec

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
