"""Aggregates of per-query metrics: bootstrap intervals (over questions, and over documents with
their questions kept together), paired comparisons, percentiles.

The per-query judges themselves (SQuAD answer scores, ranking scores) are
``fathom.feedback.judges``. Pure functions over floats; numpy is the only dependency.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence

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
    means = np.empty(n_boot, dtype=np.float64)
    for start, idx in _draws(n, n_boot, seed):
        means[start : start + len(idx)] = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"mean": mean, "lo": float(lo), "hi": float(hi), "n": n}


def _draws(n: int, n_boot: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """``n_boot`` resamples of ``range(n)`` with replacement, ``(first resample, (rows, n)
    int64)`` a chunk at a time, from ``numpy.random.default_rng(seed)``: the same draws for
    questions (``bootstrap_ci``) and for documents (``cluster_bootstrap_ci``)."""
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOT_CHUNK // n)
    for start in range(0, n_boot, rows):
        yield start, rng.integers(0, n, size=(min(start + rows, n_boot) - start, n))


def _clusters(groups: Sequence[str], n: int) -> tuple[np.ndarray, int]:
    """Each item's cluster number (in order of first appearance) and the number of clusters."""
    if len(groups) != n:
        raise ValueError(f"cluster bootstrap: {n} values against {len(groups)} groups")
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(g, len(codes)) for g in groups], dtype=np.int64), len(codes)


def cluster_bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    groups: Sequence[str],
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, float | int] | None:
    """Mean with a document-level (cluster) percentile-bootstrap interval: ``{mean, lo, hi, n,
    clusters}``.

    ``groups[i]`` names the document of ``values[i]``. Each resample draws as many documents as
    there are, with replacement, and keeps every question of a drawn document; its mean is over
    those questions. Questions about one document are not independent, so this interval is the
    one a claim about documents rests on; with one question per document it is
    ``bootstrap_ci``'s (the same draws). One document gives ``lo == hi == mean``.
    """
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    code, n_clusters = _clusters(groups, n)
    if n == 0:
        return None
    mean = float(x.mean())
    out = {"mean": mean, "lo": mean, "hi": mean, "n": n, "clusters": n_clusters}
    if n_clusters == 1 or n_boot <= 0:
        return out
    sums = np.bincount(code, weights=x, minlength=n_clusters)
    counts = np.bincount(code, minlength=n_clusters).astype(np.float64)
    means = np.empty(n_boot, dtype=np.float64)
    for start, idx in _draws(n_clusters, n_boot, seed):
        means[start : start + len(idx)] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return out | {"lo": float(lo), "hi": float(hi)}


def cluster_resamples(groups: Sequence[str], n_boot: int = 1000, seed: int = 0) -> list[np.ndarray]:
    """``n_boot`` document-level resamples of the items ``groups`` names: each an int64 array
    of item indices, every item of each drawn document (drawn as ``cluster_bootstrap_ci``
    draws), for statistics that are not a mean (a saving against a re-fitted frontier)."""
    code, n_clusters = _clusters(groups, len(groups))
    if n_clusters == 0:
        return []
    members = [np.flatnonzero(code == c) for c in range(n_clusters)]
    return [
        np.concatenate([members[c] for c in row])
        for _, idx in _draws(n_clusters, n_boot, seed)
        for row in idx
    ]


def document_ci(
    rows: Sequence[dict],
    value: Callable[[dict], float | None],
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, float | int] | None:
    """``cluster_bootstrap_ci`` of ``value(row)`` over the eval rows where it is a number, each
    row's document named by ``document_of``: the document-level interval of a summary's mean."""
    pairs = [(v, document_of(r)) for r in rows if (v := value(r)) is not None]
    return cluster_bootstrap_ci([v for v, _ in pairs], [d for _, d in pairs], n_boot, seed)


def document_of(row: dict) -> str:
    """The document an eval or sweep row's question is about, for ``cluster_bootstrap_ci``: its
    first gold document, else (no gold document) its qid, a document of its own."""
    gold = row.get("gold_doc_ids") or [row.get("qid")]
    return str(gold[0])


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
