"""Fitting the depth forest: scikit-learn's RandomForestClassifier on a sweep's probe features
and oracle labels, exported to the flat arrays ``router.forest.ForestPolicy`` walks with numpy
(``router.forest`` explains the labels and the decision rules). Only training imports
scikit-learn; the shipped policy is the arrays and its JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError
from fathom.router.forest import ForestPolicy, TreeArrays

if TYPE_CHECKING:
    import numpy as np
    from fathom.router.cost import ContextTokens


def fit_forest(
    features: np.ndarray,
    labels: np.ndarray,
    budgets: tuple[int, ...],
    feature_names: tuple[str, ...],
    n_trees: int = 100,
    max_depth: int = 10,
    seed: int = 0,
    confidence: float = 0.9,
    meta: dict[str, Any] | None = None,
    cost: float | None = None,
    budget_tokens: tuple[float, ...] = (),
    most_likely: bool = False,
    sample_weight: np.ndarray | None = None,
    context_tokens: ContextTokens | None = None,
) -> ForestPolicy:
    """Fit the forest on ``features`` ``(n, d)`` and labels ``(n,)``: budget indices, or
    ``len(budgets)`` where no budget suffices; ``sample_weight`` ``(n,)`` weighs the
    questions (e.g. each document set equally)."""
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    x = np.asarray(features, dtype=np.float32)
    y = np.asarray(labels, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != len(feature_names) or len(x) != len(y):
        raise ConfigError(
            f"training data: {x.shape} features for {len(feature_names)} names and {len(y)} labels"
        )
    model = RandomForestClassifier(
        n_estimators=n_trees,
        max_depth=max_depth,
        min_samples_leaf=2,
        class_weight=None,
        random_state=seed,
        n_jobs=1,  # deterministic and the same on every machine
    )
    model.fit(x, y, sample_weight=sample_weight)
    info = dict(meta or {})
    info.update(
        {
            "n_trees": n_trees,
            "max_depth": max_depth,
            "seed": seed,
            "n_train": len(y),
            "label_counts": {
                **{str(b): int((y == i).sum()) for i, b in enumerate(budgets)},
                "none suffices": int((y == len(budgets)).sum()),
            },
        }
    )
    policy = forest_from_sklearn(model, budgets, feature_names, confidence, info)
    policy.cost = cost
    policy.most_likely = most_likely
    policy.budget_tokens = tuple(float(t) for t in budget_tokens)
    policy.context_tokens = context_tokens
    return policy


def forest_from_sklearn(
    model: Any,
    budgets: tuple[int, ...],
    feature_names: tuple[str, ...],
    confidence: float = 0.9,
    meta: dict[str, Any] | None = None,
) -> ForestPolicy:
    """Export a fitted ``RandomForestClassifier`` (classes = budget indices, and
    ``len(budgets)`` for "none suffices") to arrays."""
    import numpy as np

    n_classes = len(budgets) + 1
    trees = []
    for est in model.estimators_:
        t = est.tree_
        # sklearn ≥ 1.4 stores class fractions at each node; map the tree's classes (the
        # labels seen in training) onto all budgets.
        raw = t.value[:, 0, :].astype(np.float64)
        raw /= np.clip(raw.sum(axis=1, keepdims=True), 1e-12, None)
        value = np.zeros((raw.shape[0], n_classes), dtype=np.float32)
        value[:, model.classes_] = raw
        trees.append(
            TreeArrays(
                left=t.children_left.astype(np.int32),
                right=t.children_right.astype(np.int32),
                feature=t.feature.astype(np.int32),
                threshold=t.threshold.astype(np.float64),
                value=value,
            )
        )
    info = dict(meta or {})
    info["feature_importances"] = dict(
        zip(feature_names, model.feature_importances_.tolist(), strict=True)
    )
    return ForestPolicy(tuple(budgets), tuple(feature_names), trees, confidence, info)
