"""Retrieval-depth policies: given the probe, how many chunks (0 = none) go to the generator.

Every policy has the same ``decide(question, probe, qtype, *, type_probs, qvec)`` and returns a
``Decision`` (k, policy name, reason, per-action scores), so learned policies (the forest,
REINFORCE, utility bundles) drop in beside these rules; a policy reads what it needs of the
query-type probabilities and the query vector. ``deepest_k`` is how deep the probe must go for
the policy to see every hit it may keep or read (0: the default probe depth);
``requested_depth`` is the one rule ``ask`` and the eval worker follow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.base import Decision, Probe, QueryType
from fathom.core.errors import ConfigError, FathomError, IndexMismatchError

if TYPE_CHECKING:
    from fathom.router.cost import ReadingCost
    from fathom.router.strategy import Strategy


class FixedDepth:
    """Always ``k`` (the ``--k`` flag, and the fixed-k baselines)."""

    deepest_k = 0
    prices_reading = False

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ConfigError(f"k = {k}: must be ≥ 0")
        self.k = k
        self.name = f"fixed:{k}"

    def decide(
        self,
        question: str,
        probe: Probe,
        qtype: QueryType,
        *,
        type_probs: dict[str, float] | None = None,
        qvec: Any = None,
        cost: ReadingCost | None = None,
    ) -> Decision:
        k = min(self.k, len(probe.hits))
        reason = "fixed depth requested" if self.k else "retrieval skipped (k = 0)"
        if k < self.k:
            reason += f"; only {len(probe.hits)} chunks found"
        return Decision(k=k, policy=self.name, reason=reason)


class StrategyDepth:
    """The query type's strategy default, clipped to what the probe found."""

    name = "strategy"
    deepest_k = 0
    prices_reading = False

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy

    def decide(
        self,
        question: str,
        probe: Probe,
        qtype: QueryType,
        *,
        type_probs: dict[str, float] | None = None,
        qvec: Any = None,
        cost: ReadingCost | None = None,
    ) -> Decision:
        s = self.strategy
        k = min(s.k_default, len(probe.hits))
        reason = (
            f"{qtype.replace('_', '-')} question: strategy default k = {s.k_default} "
            f"(range {s.k_min}–{s.k_max})"
        )
        if k < s.k_default:
            reason += f"; only {len(probe.hits)} chunks found"
        return Decision(k=k, policy=self.name, reason=reason)


class ScoreGapDepth:
    """Adaptive-k: cut at the largest gap between consecutive similarity scores, within
    ``[k_min, k_max]``.

    Reads the hits' dense cosines sorted best first (fused RRF scores only encode ranks); the
    fused scores when no hit has a dense score. The fused order's top k are then kept.
    """

    prices_reading = False

    def __init__(self, k_min: int = 1, k_max: int = 20) -> None:
        if not 1 <= k_min <= k_max:
            raise ConfigError(f"gap depth range {k_min}–{k_max}: need 1 ≤ k_min ≤ k_max")
        self.k_min, self.k_max = k_min, k_max
        self.deepest_k = k_max
        self.name = "gap" if (k_min, k_max) == (1, 20) else f"gap:{k_min}-{k_max}"

    def decide(
        self,
        question: str,
        probe: Probe,
        qtype: QueryType,
        *,
        type_probs: dict[str, float] | None = None,
        qvec: Any = None,
        cost: ReadingCost | None = None,
    ) -> Decision:
        dense = [h.scores["dense"] for h in probe.hits if "dense" in h.scores]
        raw = dense if dense else [h.score for h in probe.hits]
        scores = sorted(raw, reverse=True)[: self.k_max + 1]
        if len(scores) <= self.k_min:
            return Decision(
                min(len(scores), len(probe.hits)), self.name, "fewer hits than the minimum depth"
            )
        gaps = [scores[i] - scores[i + 1] for i in range(len(scores) - 1)]
        best = max(range(self.k_min - 1, len(gaps)), key=lambda i: (gaps[i], -i))
        k = min(best + 1, len(probe.hits))
        return Decision(
            k,
            self.name,
            f"largest similarity gap after rank {k} ({gaps[best]:.4f})",
            scores={"gap": gaps[best]},
        )


def requested_depth(k: int | None, policy: Any | None) -> int:
    """The probe depth an answer at fixed depth ``k``, else by ``policy`` (None: the strategy
    default), asks for: ``k``, else the policy's ``deepest_k`` (0: nothing beyond the default,
    ``router.strategy.probe_depth``). A learned policy's features were computed on a probe as
    deep as its deepest budget."""
    if k:
        return k
    return policy.deepest_k if policy is not None else 0


def top_similarity(probe: Probe) -> float:
    """The probe's best dense cosine (its best BM25 score when no hit has a dense score);
    0.0 without hits. Fused RRF scores only encode ranks, so gates read this instead."""
    dense = [h.scores["dense"] for h in probe.hits if "dense" in h.scores]
    if dense:
        return max(dense)
    sparse = [h.scores["bm25"] for h in probe.hits if "bm25" in h.scores]
    return max(sparse) if sparse else 0.0


class ScoreThresholdDepth:
    """A retrieval gate: ``k`` chunks when the top similarity reaches ``threshold``, else none.

    The threshold is a percentile of the top similarity over a fitting split of questions
    (``fit``), so ``threshold:p50`` retrieves for the better-matched half.
    """

    prices_reading = False

    def __init__(self, threshold: float, k: int = 4, percentile: float | None = None) -> None:
        if k < 1:
            raise ConfigError(f"threshold gate k = {k}: must be ≥ 1")
        self.threshold, self.k, self.percentile = float(threshold), k, percentile
        self.deepest_k = k
        label = f"p{percentile:g}" if percentile is not None else f"{threshold:g}"
        self.name = f"threshold:{label}" + (f":{k}" if k != 4 else "")

    @classmethod
    def fit(cls, top_scores: list[float], percentile: float, k: int = 4) -> ScoreThresholdDepth:
        """The gate at ``percentile`` (0–100) of ``top_scores`` (linear interpolation)."""
        import numpy as np

        if not top_scores:
            raise ConfigError("a threshold gate needs at least one fitting question")
        if not 0 <= percentile <= 100:
            raise ConfigError(f"percentile {percentile}: must be within 0–100")
        return cls(float(np.percentile(top_scores, percentile)), k, percentile)

    def decide(
        self,
        question: str,
        probe: Probe,
        qtype: QueryType,
        *,
        type_probs: dict[str, float] | None = None,
        qvec: Any = None,
        cost: ReadingCost | None = None,
    ) -> Decision:
        top = top_similarity(probe)
        if top >= self.threshold and probe.hits:
            k = min(self.k, len(probe.hits))
            why = f"top similarity {top:.3f} ≥ gate {self.threshold:.3f}: retrieve {k}"
        else:
            k = 0
            why = f"top similarity {top:.3f} < gate {self.threshold:.3f}: retrieval skipped"
        return Decision(k, self.name, why, scores={"top": top, "threshold": self.threshold})


POLICY_KINDS = ("forest", "reinforce", "utility")


def load_policy(path: str | Path, expect_embedder: str | None = None) -> Any:
    """A learned depth policy by its file: the ``kind`` its JSON metadata records (``forest``:
    ``.npz`` + ``.json``, ``reinforce``: ``.safetensors`` + ``.json``, ``utility``: ``.json``).
    Without the metadata file, the loader its weights file suggests says what is missing."""
    from fathom.router.forest import ForestPolicy
    from fathom.router.reinforce import ReinforcePolicy
    from fathom.router.utility import UtilityPolicy

    path = Path(path)
    meta = path.with_suffix(".json")
    if not meta.is_file():
        if path.with_suffix(".safetensors").is_file():
            return ReinforcePolicy.load(path, expect_embedder=expect_embedder)
        return ForestPolicy.load(path, expect_embedder=expect_embedder)
    try:
        kind = json.loads(meta.read_text(encoding="utf-8")).get("kind")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise FathomError(f"{meta}: not a depth policy's metadata ({exc})") from None
    if kind == "reinforce":
        return ReinforcePolicy.load(path, expect_embedder=expect_embedder)
    if kind == "utility":
        return UtilityPolicy.load(meta)
    if kind == "forest":
        return ForestPolicy.load(path, expect_embedder=expect_embedder)
    raise FathomError(
        f"{meta}: a policy of kind {kind!r}; this Fathom reads {', '.join(POLICY_KINDS)}"
    )


def configured_policy(cfg: Any) -> tuple[Any | None, str]:
    """The depth policy ``retrieval.policy`` names — ``auto``: the shipped one when present,
    ``strategy`` or empty: none (the query type's strategy decides), ``cascade``: the cascade
    (``router.cascade``), else a policy file — and
    a notice for the report ("" when none is due).

    The shipped policy reads scores of the embedder it was trained on; with another embedder
    its features mean something else, so it gives way to the strategy, and the notice says so.
    A policy asked for by name that does not fit the embedder is an error."""
    from fathom.index.embed import embedder_id_for
    from fathom.router.forest import default_policy_path

    choice = cfg.retrieval.policy.strip()
    if choice == "cascade":
        from fathom.router.cascade import CascadeDepth

        return CascadeDepth(), ""
    path = None
    if choice == "auto":
        path = default_policy_path() if default_policy_path().is_file() else None
    elif choice and choice != "strategy":
        path = Path(choice)
    if path is None:
        return None, ""
    expect = embedder_id_for(cfg.embedder)
    try:
        return load_policy(path, expect_embedder=expect), ""
    except IndexMismatchError:
        if choice != "auto":
            raise
        return None, (
            f"depth policy: the shipped one was trained on another embedder's scores, "
            f"not {expect}'s; the query type's strategy chose the depth (train one for "
            "this embedder with `fathom policy sweep` and `fathom policy train`)"
        )
