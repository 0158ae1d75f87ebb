"""The weights of a shipped reader, read back out of its int8 ONNX graph.

The package ships the reader as ``model.int8.onnx`` only (ONNX Runtime's dynamic quantization:
per-channel QInt8 ``MatMul`` weights, uint8 embedding tables, fp32 biases and layer norms), so a
run that goes on from the shipped reader (``python -m fathom.learn.reader --init index/reader``)
starts from those weights dequantized: ``(quantized − zero point) × scale``. A quantized ``MatMul``
weight carries a graph-made name (``onnx::MatMul_906``); it is named here by the bias its product
is added to (``…query.bias`` → ``…query.weight``), found by following the graph from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

QUANTIZED = "_quantized"


def dequantized_weights(path: Path) -> dict[str, np.ndarray]:
    """Every weight of the reader graph at ``path`` as fp32 arrays keyed by the torch
    ``ReaderNet`` parameter names (``bert.encoder.layer.0.attention.self.query.weight``, …)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    arrays = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    out: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        if name.endswith(QUANTIZED):
            base = name[: -len(QUANTIZED)]
            zero = arrays[base + "_zero_point"].astype(np.float32)
            weight = (value.astype(np.float32) - zero) * arrays[base + "_scale"]
            if base.startswith("bert.embeddings."):  # a Gather table, kept as torch lays it out
                out[base] = weight
            else:  # MatMul's [in, out] is the transpose of torch's Linear weight
                out[_linear_name(base, name, consumers, arrays)] = weight.T.copy()
        elif not any(name.endswith(s) for s in ("_scale", "_zero_point")):
            out[name] = value.astype(np.float32)
    return out


def _linear_name(
    base: str, quantized: str, consumers: dict[str, list[Any]], arrays: dict[str, Any]
) -> str:
    """The torch name of the ``Linear`` weight whose quantized copy is ``quantized``: the bias
    added to its product names it (at most a few nodes downstream: cast, scale, add)."""
    if base.endswith("_Transposed"):  # a 1-output Linear ONNX exported as Gemm's transpose
        return base[: -len("_Transposed")]
    frontier, seen = [quantized], set()
    for _ in range(6):
        following = []
        for name in frontier:
            for node in consumers.get(name, []):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if node.op_type == "Add":
                    for other in node.input:
                        if other.endswith(".bias") and other in arrays:
                            return other[: -len(".bias")] + ".weight"
                following.extend(node.output)
        frontier = following
    raise ValueError(f"{quantized}: no bias follows this weight in the reader graph")


def load_into(model: Any, folder: Path) -> dict[str, Any]:
    """Load the reader in ``folder`` (``model.int8.onnx`` and ``reader.json``) into the torch
    ``model``; every parameter must come from the graph and every graph weight must be used.
    Returns what that reader was (its folder's name, checksum and training record)."""
    import json

    import torch
    from fathom.index.reader import META_FILE, MODEL_FILE

    weights = dequantized_weights(folder / MODEL_FILE)
    state = model.state_dict()
    missing = sorted(set(state) - set(weights))
    extra = sorted(set(weights) - set(state))
    if missing or extra:
        raise SystemExit(
            f"{folder}: its graph does not match the reader network "
            f"(missing {missing[:3]}, unexpected {extra[:3]})"
        )
    for name, value in weights.items():
        if tuple(state[name].shape) != value.shape:
            raise SystemExit(
                f"{folder}: {name} is {value.shape}, the network wants {tuple(state[name].shape)}"
            )
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    return {
        "reader": folder.name,
        "sha256": meta.get("sha256", {}).get(MODEL_FILE),
        "dequantized": True,
        **meta.get("training", {}),
    }
