"""The confidence feedback loop: when an answer is not supported well enough, retrieve deeper
and answer again.

The rules (``[feedback]``: ``enabled``, ``threshold``, ``max_rounds``, ``growth``):

* deepen while the answer's confidence is below ``threshold``, for at most ``max_rounds``
  rounds, never past twice the strategy's ``k_max`` nor past the candidates there are;
* never when sources were retrieved and none reached the generator (the context budget or the
  deadline left every one out): a deeper k cannot change that;
* the next depth is ``max(k + 1, ceil(k · growth), k_min)``;
* stop, and say why, when the next round would pass the answer deadline, or when the deeper k
  gives the generator the same sources as this one (the context budget is full of better
  sources), since regenerating would repeat the same prompt.

``FeedbackLoop.run`` applies them to an ``attempt(k, escalated)`` the engine supplies, which
retrieves, generates and scores at depth k.

A cascade (``router.cascade``) climbs with the same machinery (``FeedbackLoop.climbing``): the
next depth is the next rung of its ladder, it stops at the ladder's top, and it reads the
answer's confidence (``answer_confidence``: the answerer's own probability when it states one)
instead of the feedback scorer's support.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# attempt(k, escalated) -> (sources used, draft, confidence)
Attempt = Callable[[int, bool], tuple[list[Any], Any, Any]]


@dataclass(frozen=True, slots=True)
class LoopResult:
    k: int  # the depth of the final answer
    used: list[Any]
    draft: Any
    conf: Any
    rounds: int  # feedback rounds run (0: the first answer stood)
    stopped: str  # "" | "deadline" | "same sources": why a wanted round did not run
    stopped_at: int  # the depth the stopped round would have used


def answer_confidence(draft: Any, conf: Any) -> float:
    """How sure the answer is: the answerer's own probability when it states one (the
    extractive answerer's calibrated scorer; an abstention counts as 0), else the feedback
    scorer's support of the answer by its sources."""
    if conf.abstained:
        return 0.0
    stated = draft.confidence
    return float(stated) if stated is not None else float(conf.score)


def support_score(draft: Any, conf: Any) -> float:
    """The feedback scorer's support of the answer (what the feedback loop reads)."""
    return float(conf.score)


@dataclass(frozen=True, slots=True)
class FeedbackLoop:
    enabled: bool
    threshold: float
    max_rounds: int
    growth: float
    # A cascade's depths, shallow first: the next depth is the next rung, the top is the last.
    ladder: tuple[int, ...] = ()

    @classmethod
    def from_config(cls, fb: Any, enabled: bool | None = None) -> FeedbackLoop:
        """From ``cfg.feedback``; ``enabled`` overrides ``feedback.enabled`` when given."""
        return cls(
            enabled=fb.enabled if enabled is None else enabled,
            threshold=fb.threshold,
            max_rounds=fb.max_rounds,
            growth=fb.growth,
        )

    @classmethod
    def climbing(cls, ladder: tuple[int, ...], threshold: float) -> FeedbackLoop:
        """A cascade's climb: up ``ladder`` while the answer's confidence is below
        ``threshold``."""
        return cls(True, threshold, max(0, len(ladder) - 1), 1.0, tuple(ladder))

    def top(self, k_max: int) -> int:
        """The deepest a round may go: the ladder's top, else twice the strategy's ``k_max``."""
        return self.ladder[-1] if self.ladder else k_max * 2

    def wants_deeper(
        self, score: float, rounds: int, k: int, deepest: int, k_max: int, used: list[Any]
    ) -> bool:
        """Whether the answer at depth ``k`` (confidence ``score``, after ``rounds`` rounds,
        from sources ``used``) calls for another round."""
        return (
            self.enabled
            and score < self.threshold
            and rounds < self.max_rounds
            and k < min(deepest, self.top(k_max))
            and (k == 0 or bool(used))
        )

    def next_depth(self, k: int, k_min: int, deepest: int) -> int:
        if self.ladder:
            return min(next((r for r in self.ladder if r > k), self.ladder[-1]), deepest)
        return min(max(k + 1, math.ceil(max(k, 1) * self.growth), k_min), deepest)

    def run(
        self,
        k: int,
        attempt: Attempt,
        *,
        deepest: int,
        k_min: int,
        k_max: int,
        round_fits: Callable[[int, int], bool],
        same_sources: Callable[[int, int], bool] | None = None,
        on_escalate: Callable[[float, int], None] | None = None,
        charge: Callable[[float], None] | None = None,
        score: Callable[[Any, Any], float] = support_score,
    ) -> LoopResult:
        """Answer at depth ``k``, then deepen by the rules above. ``round_fits(k, new_k)``: a
        round at ``new_k`` ends before the deadline; ``same_sources(k, new_k)``: the two depths
        give the generator the same sources; ``on_escalate(confidence, new_k)`` is told of
        each round before it runs; ``charge(ms)`` is given the time the loop's own decision
        took, before each round (and at a stop for the same sources), so a deadline counts
        it. ``score(draft, conf)`` is the confidence the rules read (default: the feedback
        scorer's support)."""
        used, draft, conf = attempt(k, False)
        rounds = 0
        stopped, stopped_at = "", 0
        while self.wants_deeper(score(draft, conf), rounds, k, deepest, k_max, used):
            t = time.perf_counter()
            new_k = self.next_depth(k, k_min, min(deepest, self.top(k_max)))
            if not round_fits(k, new_k):
                stopped, stopped_at = "deadline", new_k
                break
            if same_sources is not None and same_sources(k, new_k):
                stopped, stopped_at = "same sources", new_k
            elif on_escalate is not None:
                on_escalate(score(draft, conf), new_k)
            if charge is not None:
                charge((time.perf_counter() - t) * 1000)
            if stopped:
                break
            rounds += 1
            k = new_k
            used, draft, conf = attempt(k, True)
        return LoopResult(k, used, draft, conf, rounds, stopped, stopped_at)

    def reason(self, reason: str, k: int) -> str:
        """The decision's reason once feedback deepened the answer to ``k``."""
        if self.ladder:
            return f"{reason}; climbed to k = {k} (confidence was below {self.threshold:g})"
        return f"{reason}; feedback deepened to k = {k} (confidence was below {self.threshold})"
