"""Retrieval-depth policies: given the probe, how many chunks (0 = none) go to the generator.

Every policy has the same ``decide(query)`` over one ``core.base.DepthQuery`` and returns a
``Decision`` (k, policy name, reason, per-action scores), so learned policies (the forest,
REINFORCE, utility bundles; their kinds are registered in ``router.registry``) drop in beside
these rules; a policy reads what it needs of the query-type probabilities and the query vector.
``deepest_k`` is how deep the probe must go for the policy to see every hit it may keep or read
(0: the default probe depth); ``requested_depth`` is the one rule ``ask`` and the eval worker
follow. ``DepthPolicyBase`` holds the attributes every policy shares and their defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fathom.core.base import Decision, DepthQuery, Probe
from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    from fathom.router.strategy import Strategy


class DepthPolicyBase:
    """What every depth policy says about itself besides ``decide`` (``core.base.DepthPolicy``):
    by default a one-shot decision that prices nothing, reads the default probe, and whose
    depth means exactly that many chunks."""

    name: str = ""
    deepest_k: int = 0
    prices_reading: bool = False
    reads_passages: bool = False
    # The depth is the query type's strategy default: that type's budget and map-reduce apply.
    follows_strategy: bool = False
    # The ``router.cascade.Cascade`` whose ladder the answer climbs while its confidence is
    # low; None: a one-shot decision.
    climb: Any = None

    def decide(self, query: DepthQuery) -> Decision:
        raise NotImplementedError


class FixedDepth(DepthPolicyBase):
    """Always ``k`` (the ``--k`` flag, and the fixed-k baselines)."""

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ConfigError(f"k = {k}: must be ≥ 0")
        self.k = k
        self.name = f"fixed:{k}"

    def decide(self, query: DepthQuery) -> Decision:
        found = len(query.probe.hits)
        k = min(self.k, found)
        reason = "fixed depth requested" if self.k else "retrieval skipped (k = 0)"
        if k < self.k:
            reason += f"; only {found} chunks found"
        return Decision(k=k, policy=self.name, reason=reason)


class StrategyDepth(DepthPolicyBase):
    """The query type's strategy default, clipped to what the probe found."""

    name = "strategy"
    follows_strategy = True

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy

    def decide(self, query: DepthQuery) -> Decision:
        s, found = self.strategy, len(query.probe.hits)
        k = min(s.k_default, found)
        reason = (
            f"{query.qtype.replace('_', '-')} question: strategy default k = {s.k_default} "
            f"(range {s.k_min}–{s.k_max})"
        )
        if k < s.k_default:
            reason += f"; only {found} chunks found"
        return Decision(k=k, policy=self.name, reason=reason)


class ScoreGapDepth(DepthPolicyBase):
    """Adaptive-k: cut at the largest gap between consecutive similarity scores, within
    ``[k_min, k_max]``.

    Reads the hits' dense cosines sorted best first (fused RRF scores only encode ranks); the
    fused scores when no hit has a dense score. The fused order's top k are then kept.
    """

    def __init__(self, k_min: int = 1, k_max: int = 20) -> None:
        if not 1 <= k_min <= k_max:
            raise ConfigError(f"gap depth range {k_min}–{k_max}: need 1 ≤ k_min ≤ k_max")
        self.k_min, self.k_max = k_min, k_max
        self.deepest_k = k_max
        self.name = "gap" if (k_min, k_max) == (1, 20) else f"gap:{k_min}-{k_max}"

    def decide(self, query: DepthQuery) -> Decision:
        probe = query.probe
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


class ScoreThresholdDepth(DepthPolicyBase):
    """A retrieval gate: ``k`` chunks when the top similarity reaches ``threshold``, else none.

    The threshold is a percentile of the top similarity over a fitting split of questions
    (``fit``), so ``threshold:p50`` retrieves for the better-matched half.
    """

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

    def decide(self, query: DepthQuery) -> Decision:
        probe = query.probe
        top = top_similarity(probe)
        if top >= self.threshold and probe.hits:
            k = min(self.k, len(probe.hits))
            why = f"top similarity {top:.3f} ≥ gate {self.threshold:.3f}: retrieve {k}"
        else:
            k = 0
            why = f"top similarity {top:.3f} < gate {self.threshold:.3f}: retrieval skipped"
        return Decision(k, self.name, why, scores={"top": top, "threshold": self.threshold})
