"""Fitting a utility depth policy: each bundle's priors per query type from a budget sweep
(``router.utility`` describes the utility and its presets)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fathom.core.errors import FathomError
from fathom.router.utility import DEFAULT_BUNDLES, UtilityPolicy

if TYPE_CHECKING:
    from fathom.router.sweep import Sweep


def fit_utility(
    sweep: Sweep,
    bundles: dict[str, int] | None = None,
    preset: str = "balanced",
    min_questions: int = 20,
    meta: dict[str, Any] | None = None,
) -> UtilityPolicy:
    """Priors from ``sweep`` for each query type with at least ``min_questions`` (else the
    pooled ``*`` priors stand in for it)."""
    import numpy as np

    bundles = dict(bundles or DEFAULT_BUNDLES)
    missing = [k for k in bundles.values() if k not in sweep.budgets]
    if missing:
        raise FathomError(f"bundle budgets {missing} are not in the sweep {sweep.budgets}")
    cols = {name: sweep.budgets.index(k) for name, k in bundles.items()}
    types = np.asarray(sweep.query_types)
    total = sweep.total_tokens

    def priors_for(mask: np.ndarray) -> dict[str, dict[str, float]]:
        return {
            name: {
                "quality": float(sweep.quality[mask, c].mean()),
                "latency_ms": float(sweep.latency[mask, c].mean()),
                "tokens": float(total[mask, c].mean()),
                "n": int(mask.sum()),
            }
            for name, c in cols.items()
        }

    priors = {"*": priors_for(np.ones(len(types), dtype=bool))}
    for t in sorted(set(types.tolist())):
        mask = types == t
        if mask.sum() >= min_questions:
            priors[t] = priors_for(mask)
    deepest = max(cols.values())
    return UtilityPolicy(
        bundles,
        priors,
        latency_scale=max(1e-9, float(sweep.latency[:, deepest].mean())),
        token_scale=max(1e-9, float(total[:, deepest].mean())),
        preset=preset,
        meta=dict(meta or {}),
    )
