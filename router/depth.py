"""Retrieval-depth policies: given the probe, how many chunks (0 = none) go to the generator.

Every policy returns a ``Decision`` (k, policy name, reason, per-action scores), so learned
policies drop in beside these rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stages.base import Decision, Probe, QueryType
from stages.errors import ConfigError

if TYPE_CHECKING:
    from router.strategy import Strategy


class FixedDepth:
    """Always ``k`` (the ``--k`` flag, and the fixed-k baselines)."""

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ConfigError(f"k = {k}: must be ≥ 0")
        self.k = k
        self.name = f"fixed:{k}"

    def decide(self, question: str, probe: Probe, qtype: QueryType) -> Decision:
        k = min(self.k, len(probe.hits))
        reason = "fixed depth requested" if self.k else "retrieval skipped (k = 0)"
        if k < self.k:
            reason += f"; only {len(probe.hits)} chunks found"
        return Decision(k=k, policy=self.name, reason=reason)


class StrategyDepth:
    """The query type's strategy default, clipped to what the probe found."""

    name = "strategy"

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy

    def decide(self, question: str, probe: Probe, qtype: QueryType) -> Decision:
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
    """Adaptive-k: cut the sorted fused scores at their largest gap, within ``[k_min, k_max]``."""

    def __init__(self, k_min: int = 1, k_max: int = 20) -> None:
        self.k_min, self.k_max = k_min, k_max
        self.name = "gap"

    def decide(self, question: str, probe: Probe, qtype: QueryType) -> Decision:
        scores = [h.score for h in probe.hits[: self.k_max + 1]]
        if len(scores) <= self.k_min:
            return Decision(len(scores), self.name, "fewer hits than the minimum depth")
        gaps = [scores[i] - scores[i + 1] for i in range(len(scores) - 1)]
        best = max(range(self.k_min - 1, len(gaps)), key=lambda i: (gaps[i], -i))
        k = best + 1
        return Decision(
            k,
            self.name,
            f"largest score gap after rank {k} ({gaps[best]:.4f})",
            scores={"gap": gaps[best]},
        )
