"""Pins of the shipped int8 reader's outputs are kept per int8 kernel family: ONNX Runtime's
int8 matrix products give slightly different logits on a CPU with VNNI dot-product
instructions (``avx512_vnni``, ``avx_vnni``) than on one with AVX2 alone — on the fixed reader
input, 11.58 against 11.26 for the span's margin — and a near-tie (which of two spans, which
passage first) can turn on that. A pinned file ``NAME.json`` is read on a VNNI CPU (and where
the flags cannot be read); ``NAME.avx2.json`` elsewhere."""

from __future__ import annotations

from pathlib import Path


def int8_kernels() -> str:
    """``"vnni"`` or ``"avx2"``: the int8 kernel family of this CPU (from /proc/cpuinfo;
    ``"vnni"`` where that cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "vnni"
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    if not flags:
        return "vnni"
    return "vnni" if ("avx512_vnni" in flags or "avx_vnni" in flags) else "avx2"


def pinned_file(path: Path) -> Path:
    """The pins of this CPU's int8 kernel family: ``path`` itself, or its ``.avx2`` sibling."""
    if int8_kernels() == "vnni":
        return path
    return path.with_suffix(".avx2" + path.suffix)
