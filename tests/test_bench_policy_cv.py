"""bench/policy_cv.py: folds by document, out-of-fold forests that never see a question's
document, and the per-half calibration and ranking figures."""

from __future__ import annotations

import numpy as np
import pytest
from fathom.bench.policy_cv import document_folds, enough_by, half_profile, out_of_fold, set_name
from fathom.learn.sweep import combine_sweeps
from fathom.router.features import FEATURE_NAMES
from fathom.router.sweep import Sweep

BUDGETS = (0, 1, 2, 4)
TOKENS = np.array([0, 100, 200, 400], dtype=np.float32)


def _sweep(name: str, docs: int, per_doc: int, seed: int) -> Sweep:
    """``docs`` documents of ``per_doc`` questions each. A document's questions share one
    feature vector (its own) and one answer depth, drawn at random per document: a forest can
    only know a document's depth by having seen that document."""
    rng = np.random.default_rng(seed)
    depth = rng.integers(1, len(BUDGETS), size=docs)
    vec = rng.normal(size=(docs, len(FEATURE_NAMES))).astype(np.float32)
    doc = np.repeat(np.arange(docs), per_doc)
    n = len(doc)
    quality = (np.arange(len(BUDGETS))[None, :] >= depth[doc][:, None]).astype(np.float32)
    return Sweep(
        run={"judge": "recall", "questions": f"data/{name}/questions.jsonl"},
        budgets=BUDGETS,
        qids=[f"{name}-{i}" for i in range(n)],
        query_types=["factual"] * n,
        features=vec[doc],
        quality=quality,
        tokens=np.tile(TOKENS, (n, 1)),
        latency=np.ones((n, len(BUDGETS)), dtype=np.float32),
        sets=[f"data/{name}/questions.jsonl"] * n,
        groups=[f"d{d}" for d in doc],  # the same names in every set: not the same documents
        probe_tokens=[[100] * 4 for _ in range(n)],
    )


def test_a_documents_questions_share_a_fold_and_sets_keep_their_documents_apart() -> None:
    both = combine_sweeps([_sweep("a", 10, 3, 0), _sweep("b", 10, 3, 1)])
    folds = document_folds(both, 5)
    for first in range(0, len(folds), 3):
        assert len(set(folds[first : first + 3].tolist())) == 1
    # "d0" of set a and "d0" of set b are two documents: twenty of them dealt over five folds.
    assert np.bincount(folds).tolist() == [12] * 5
    assert set_name(both.sets[0]) == "a" and set_name(both.sets[-1]) == "b"


def test_subset_keeps_every_field_of_a_question_together() -> None:
    sweep = _sweep("a", 4, 2, 0)
    sweep.probe_tokens = [[i] * 4 for i in range(8)]
    part = sweep.subset([5, 2])
    assert part.qids == ["a-5", "a-2"] and part.groups == ["d2", "d1"]
    assert np.array_equal(part.features, sweep.features[[5, 2]])
    assert np.array_equal(part.quality, sweep.quality[[5, 2]])
    assert part.probe_tokens == [[5] * 4, [2] * 4] and part.budgets == BUDGETS


def test_out_of_fold_forests_never_see_the_question_document() -> None:
    """Depth here is a property of the document alone. A forest that saw the document ranks its
    questions perfectly; out of fold it can only guess, so its ranking is near chance."""
    from fathom.learn.train_policy import train_forest

    sweep = _sweep("a", 60, 4, 0)
    enough = enough_by(sweep)
    proba, choice = out_of_fold(
        sweep, document_folds(sweep, 5), seed=0, trees=20, max_depth=10, lam=0.01,
        preferences=("quality", "fast"),
    )  # fmt: skip
    held = half_profile(sweep, proba, choice["quality"])
    seen = train_forest(sweep, n_trees=20, max_depth=10, seed=0, cost=0.01)
    in_sample = half_profile(sweep, seen.predict_proba(sweep.features), choice["quality"])
    assert in_sample["by_k"]["1"]["auc"] > 0.95
    assert abs(held["by_k"]["1"]["auc"] - 0.5) < 0.2
    assert enough[:, 1].mean() == pytest.approx(held["by_k"]["1"]["enough"])
    assert set(choice) == {"quality", "fast"} and choice["quality"].shape == (240,)
    # Cheaper preference, never more depth.
    assert (choice["fast"] <= choice["quality"]).all()


def test_a_half_profile_counts_depth_needs_and_scores_the_probabilities() -> None:
    quality = np.array(
        [[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=np.float32
    )  # first answered at k = 1, 2, 4, never
    sweep = _sweep("a", 4, 1, 0)
    sweep.quality = quality
    # P(label): question i puts 0.9 on its own budget, 0.1 on "none".
    proba = np.zeros((4, 5))
    for i, label in enumerate([1, 2, 3, 4]):
        proba[i, label], proba[i, 4] = (0.9, 0.1) if label < 4 else (0.0, 1.0)
    prof = half_profile(sweep, proba, np.array([1, 2, 3, 3]))
    assert prof["none_suffices"] == 0.25
    assert prof["by_k"]["1"]["enough"] == 0.25 and prof["by_k"]["4"]["enough"] == 0.75
    assert prof["by_k"]["1"]["predicted"] == pytest.approx(0.9 / 4)
    assert prof["by_k"]["2"]["auc"] == 1.0  # the two answered by k = 2 have the higher P
    assert prof["policy"]["quality"] == 0.75 and prof["policy"]["tokens"] == 275.0
