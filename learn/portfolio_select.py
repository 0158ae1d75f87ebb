"""Retriever portfolios: choose a few retriever configurations that together cover the most
questions.

Each pool member r has a score s(q, r) ∈ [0, 1] per training question q (recall of the gold
documents in its top n, or answer containment). A portfolio S is worth the empirical expected
best-of-S score

    F(S) = mean over q of max over r in S of s(q, r),

the share of questions that at least one member serves, softened by partial scores. F is
monotone (adding a member never lowers any question's best) and submodular (a member adds less
to a larger portfolio: it can only raise the questions the others serve worse). For such
functions the greedy rule — start empty, add the member with the largest marginal gain, repeat
K times — is within a factor 1 − 1/e ≈ 0.632 of the best K-subset (Nemhauser, Wolsey & Fisher,
1978). ``greedy_portfolio`` keeps each question's current best score in one vector, so a step
costs one pass over the pool: O(K · |pool| · N) in all.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

GREEDY_BOUND = 1.0 - 1.0 / math.e


@dataclass(frozen=True)
class Portfolio:
    """Chosen members (column indices, in the order picked), each one's marginal gain when it
    was added, and the objective F after each addition."""

    members: tuple[int, ...]
    gains: tuple[float, ...]
    coverage: tuple[float, ...]

    @property
    def value(self) -> float:
        return self.coverage[-1] if self.coverage else 0.0


def _check(scores: np.ndarray, size: int) -> np.ndarray:
    import numpy as np

    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise ConfigError(f"portfolio scores: need (questions, members), got shape {s.shape}")
    if np.isnan(s).any() or (s < 0).any() or (s > 1).any():
        raise ConfigError("portfolio scores must lie in [0, 1]")
    if not 1 <= size <= s.shape[1]:
        raise ConfigError(f"portfolio size {size}: between 1 and the pool's {s.shape[1]} members")
    return s


def coverage(scores: np.ndarray, members: tuple[int, ...] | list[int]) -> float:
    """F(S): the mean over questions of the best member's score (0 for an empty S)."""
    s = _check(scores, 1)
    if not len(members):
        return 0.0
    return float(s[:, list(members)].max(axis=1).mean())


def greedy_portfolio(scores: np.ndarray, size: int) -> Portfolio:
    """The greedy portfolio of ``size`` members over ``scores`` ``(questions, members)``.
    Ties go to the lower column index, so the result is deterministic."""
    import numpy as np

    s = _check(scores, size)
    n, m = s.shape
    best = np.zeros(n)  # each question's best score so far
    chosen: list[int] = []
    gains: list[float] = []
    values: list[float] = []
    available = np.ones(m, dtype=bool)
    for _ in range(size):
        # Marginal gain of every member at once: mean of max(0, s − best) over questions.
        gain = np.maximum(s - best[:, None], 0.0).mean(axis=0)
        gain[~available] = -1.0
        j = int(np.argmax(gain))
        chosen.append(j)
        gains.append(float(gain[j]))
        available[j] = False
        best = np.maximum(best, s[:, j])
        values.append(float(best.mean()))
    return Portfolio(tuple(chosen), tuple(gains), tuple(values))


def exhaustive_portfolio(scores: np.ndarray, size: int, max_subsets: int = 200_000) -> Portfolio:
    """The best ``size``-subset by trying every one (small pools only: the check on greedy)."""
    s = _check(scores, size)
    m = s.shape[1]
    if math.comb(m, size) > max_subsets:
        raise ConfigError(
            f"{math.comb(m, size)} subsets of {size} from {m} members: too many to try"
        )
    best_value, best_subset = -1.0, ()
    for subset in itertools.combinations(range(m), size):
        value = float(s[:, list(subset)].max(axis=1).mean())
        if value > best_value + 1e-12:
            best_value, best_subset = value, subset
    return Portfolio(best_subset, (), (best_value,))


def top_k_by_average(scores: np.ndarray, size: int) -> Portfolio:
    """The baseline: the ``size`` members with the best mean score, ignoring overlap."""
    import numpy as np

    s = _check(scores, size)
    order = np.argsort(-s.mean(axis=0), kind="stable")[:size].tolist()
    values = [coverage(s, order[: i + 1]) for i in range(size)]
    gains = [values[0]] + [b - a for a, b in itertools.pairwise(values)]
    return Portfolio(tuple(order), tuple(gains), tuple(values))
