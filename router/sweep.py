"""A budget sweep as arrays: the record the depth policies are trained on.

``fathom policy sweep`` is a ``fathom eval`` run whose strategies are the fixed budgets (``none``
for 0) over the *training* half of the documents, with every question's probe features logged:
per question and budget it gives the judge's quality, the context tokens and the measured
latency. ``learn.sweep`` reads a sweep's log into this record and joins several document sets;
the policies' own ``fit``/``train`` read it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass
class Sweep:
    """A finished sweep as arrays: ``quality``, ``tokens``, ``latency`` are
    ``(n_questions, n_budgets)``; ``features`` ``(n_questions, n_features)``."""

    run: dict[str, Any]
    budgets: tuple[int, ...]
    qids: list[str]
    query_types: list[str]
    features: Any
    quality: Any
    tokens: Any
    latency: Any
    total: Any = None  # prompt + completion tokens, same shape; None: use ``tokens``
    questions: list[str] | None = None  # the question texts, in ``qids`` order
    # The answerer's own confidence at each budget, same shape (an abstention 0; NaN where the
    # answerer stated none, or the sweep predates it): what a cascade reads.
    confidence: Any = None
    # Per question: the document set it comes from (its sweep's question file), and its first
    # gold document (questions sharing one belong together when data is split).
    sets: list[str] | None = None
    groups: list[str] | None = None
    # Per question: its probed chunks' token counts in rank order (None: a sweep made before
    # rows logged them), what ``router.cost.ContextTokens`` is fitted on and prices.
    probe_tokens: list[list[int]] | None = None
    # ``(n_questions, len(READING_NAMES))``: what Fathom's reader made of each question's
    # candidates (``router.features.reading_features``); None: the sweep did not read them.
    reading: Any = None

    def inputs(self, feature_names: tuple[str, ...]) -> Any:
        """The rows a policy over ``feature_names`` reads: the probe features, then the
        reader's where the names go on with them."""
        import numpy as np
        from fathom.core.errors import FathomError
        from fathom.router.features import FEATURE_NAMES, READING_NAMES

        if tuple(feature_names) == FEATURE_NAMES:
            return self.features
        if tuple(feature_names) != FEATURE_NAMES + READING_NAMES:
            raise FathomError("the policy's features are not this Fathom's: retrain it")
        if self.reading is None:
            raise FathomError(
                "this policy reads passages, and the sweep logged no readings "
                "(`fathom policy sweep` without --no-reading)"
            )
        return np.concatenate([self.features, self.reading], axis=1)

    def probe_sums(self) -> tuple[Any, Any] | None:
        """``router.cost.probe_sums`` over this sweep's budgets; None without probe tokens."""
        from fathom.router.cost import probe_sums

        return None if self.probe_tokens is None else probe_sums(self.probe_tokens, self.budgets)

    def subset(self, rows: Any) -> Sweep:
        """The questions at indices ``rows``, in that order, with everything logged of them
        (cross-validation folds, one document set of a combined sweep)."""
        import numpy as np

        idx = np.asarray(rows, dtype=np.int64)

        def pick(xs: list | None) -> list | None:
            return None if xs is None else [xs[i] for i in idx]

        def take(a: Any) -> Any:
            return None if a is None else a[idx]

        return replace(
            self,
            qids=pick(self.qids),
            query_types=pick(self.query_types),
            features=self.features[idx],
            quality=self.quality[idx],
            tokens=self.tokens[idx],
            latency=self.latency[idx],
            total=take(self.total),
            questions=pick(self.questions),
            confidence=take(self.confidence),
            sets=pick(self.sets),
            groups=pick(self.groups),
            probe_tokens=pick(self.probe_tokens),
            reading=take(self.reading),
        )

    @property
    def total_tokens(self) -> Any:
        return self.tokens if self.total is None else self.total

    @property
    def deepest_recall(self) -> float | None:
        """Answer recall at the deepest budget (from the log's ``answer_recall``)."""
        return self.run.get("_deepest_recall")
