"""Aggregates of per-query metrics: bootstrap intervals, paired comparisons, percentiles.

The per-query judges themselves (SQuAD answer scores, ranking scores) are
``fathom.feedback.judges``. Pure functions over floats; numpy is the only dependency.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

# --- aggregates ----------------------------------------------------------------------------------

# Bootstrap index matrices are drawn this many elements at a time (8 MB of int64).
_BOOT_CHUNK = 1_000_000


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05
) -> dict[str, float | int] | None:
    """Mean with a percentile-bootstrap ``1 - alpha`` interval: ``{mean, lo, hi, n}``.

    Resamples with ``numpy.random.default_rng(seed)``; one value gives ``lo == hi == mean``,
    no value gives ``None``.
    """
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return None
    mean = float(x.mean())
    if n == 1 or n_boot <= 0:
        return {"mean": mean, "lo": mean, "hi": mean, "n": n}
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot, dtype=np.float64)
    rows = max(1, _BOOT_CHUNK // n)
    for start in range(0, n_boot, rows):
        stop = min(start + rows, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))  # (rows, n) int64
        means[start:stop] = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"mean": mean, "lo": float(lo), "hi": float(hi), "n": n}


def paired_compare(
    a: Sequence[float], b: Sequence[float], tol: float = 1e-9
) -> dict[str, float | int] | None:
    """Shares of pairs where ``a`` wins (``a - b > tol``), ties or loses: ``{win, tie, loss, n}``.

    ``None`` when there are no pairs.
    """
    if len(a) != len(b):
        raise ValueError(f"paired_compare: {len(a)} values against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    win = int(np.count_nonzero(d > tol))
    loss = int(np.count_nonzero(d < -tol))
    return {"win": win / n, "tie": (n - win - loss) / n, "loss": loss / n, "n": n}


def percentiles(
    values: Sequence[float] | np.ndarray, qs: Sequence[float] = (50, 95, 99)
) -> dict[str, float] | None:
    """``{mean, p50, p95, p99}`` (keys follow ``qs``), linear interpolation; ``None`` if empty."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    out = {"mean": float(x.mean())}
    for q, v in zip(qs, np.percentile(x, list(qs)), strict=True):
        out[f"p{q:g}"] = float(v)
    return out


def stable_seed(seed: int, name: str) -> int:
    """A seed derived from ``seed`` and ``name``, the same in every process (unlike ``hash``)."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
