"""The cascade: start shallow, read the answer's confidence, deepen only when it is low.

A one-shot policy decides k from the probe before anything is read. The cascade instead answers
at the first rung of a ladder of depths (1, 2, 3, 5, 8, 12, 20 by default) and climbs to the next
rung only while the answer's confidence is below ``threshold`` — the answerer's own probability
when it states one (the extractive answerer's calibrated scorer), else the feedback scorer's
support. Every rung reads the previous rung's sources in the same order and adds the next
ones, so a backend that keeps the shared prompt prefix (llama.cpp, Ollama) evaluates only the
new sources and the question again; the trace counts what was read that way
(``tokens.context_read``).

``CascadeDepth.decide`` gives the first rung; the Engine runs the climb with the feedback loop's
machinery (``feedback.loop.FeedbackLoop.climbing``), whatever ``feedback.enabled`` says: the
climb is the policy itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fathom.core.base import Decision, DepthQuery
from fathom.core.errors import ConfigError
from fathom.router.depth import DepthPolicyBase

LADDER = (1, 2, 3, 5, 8, 12, 20)
THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Cascade:
    """The depths tried, shallow first, and the confidence that stops the climb."""

    ladder: tuple[int, ...] = LADDER
    threshold: float = THRESHOLD

    def __post_init__(self) -> None:
        if not self.ladder or any(k < 1 for k in self.ladder):
            raise ConfigError(f"cascade ladder {list(self.ladder)}: depths must be ≥ 1")
        if list(self.ladder) != sorted(set(self.ladder)):
            raise ConfigError(f"cascade ladder {list(self.ladder)}: must be strictly ascending")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"cascade threshold {self.threshold:g}: must be within (0, 1]")

    def choose(self, budgets: tuple[int, ...], confidence: Any) -> Any:
        """Where the climb ends on a sweep, as budget indices: per row of ``confidence``
        ``(n, len(budgets))`` (the answer's confidence at each budget), the first rung whose
        confidence reaches the threshold, else the top rung. Every rung must be a budget."""
        import numpy as np

        missing = [r for r in self.ladder if r not in budgets]
        if missing:
            raise ConfigError(f"cascade ladder depths {missing} are not among the sweep's budgets")
        cols = [budgets.index(r) for r in self.ladder]
        conf = np.asarray(confidence, dtype=np.float64)[:, cols]
        reached = conf >= self.threshold - 1e-12  # NaN never reaches it
        first = np.where(reached.any(axis=1), reached.argmax(axis=1), len(cols) - 1)
        return np.asarray(cols)[first]


class CascadeDepth(DepthPolicyBase):
    """The depth policy that starts the cascade at its first rung (``--policy cascade``, the
    eval strategy ``cascade[@T]``). Its ``climb`` is the ladder the Engine climbs after
    reading each answer."""

    def __init__(self, cascade: Cascade | None = None, name: str = "cascade") -> None:
        self.cascade = cascade or Cascade()
        self.climb = self.cascade
        self.name = name
        self.deepest_k = self.cascade.ladder[-1]

    def decide(self, query: DepthQuery) -> Decision:
        c, found = self.cascade, len(query.probe.hits)
        k = min(c.ladder[0], found)
        rungs = ", ".join(str(r) for r in c.ladder)
        reason = (
            f"cascade: answer at k = {c.ladder[0]} first, then climb k = {rungs} while the "
            f"answer's confidence is below {c.threshold:g}"
        )
        if k < c.ladder[0]:
            reason += f"; only {found} chunks found"
        return Decision(k, self.name, reason, scores={"threshold": c.threshold})
