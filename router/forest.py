"""The imitation-learned depth policy: a random forest over probe features, oracle labels.

Training (``learn.forest.fit_forest``): each sweep question's label is the smallest budget whose
quality is within ``epsilon`` of that question's best budget and whose measured latency meets
the SLO (when one is set); scikit-learn fits a RandomForestClassifier (100 trees, depth 10 by
default) on the probe features.

A question no budget answers is labelled with an extra class, "none suffices", rather than
dropped or called "skip": the forest then learns that some questions look hopeless, and its
cumulative probabilities P(the smallest sufficient budget ≤ b) stop short of 1 for them.

Inference needs no scikit-learn: every tree is exported to flat arrays (children, feature,
threshold, leaf class distribution) saved with ``numpy.savez`` (no pickle); at load all trees
are laid out in one set of arrays and walked together, a numpy step per tree level, and the leaf
distributions averaged. Two decision rules over P(enough by b), the cumulative
probability:

* ``confidence`` c: the smallest budget with P(enough by b) ≥ c (the deepest when none does).
  Higher c → deeper, safer retrieval; lower → fewer tokens.
* ``cost`` λ: the budget maximising P(enough by b) − λ · tokens(b) / 1000 — the expected
  quality bought per 1000 tokens, the same trade-off the REINFORCE reward prices. tokens(b) is
  this question's own: its first b probed chunks' stored token counts, turned into context
  tokens by a ``router.cost.ContextTokens`` fitted on the training sweep (a forest trained on a
  sweep without probe tokens prices every question at the sweep's mean tokens at b). It goes
  deep only where the forest expects depth to pay, and stops early on questions that look
  unanswerable at any depth. At ``ask`` the tokens are priced in the answering backend's own
  unit (``router.cost``: seconds of a local model's measured prompt speed, money from the price
  table) and λ follows the user's ``retrieval.prefer``; the extractive answerer and backends
  of unknown speed keep λ per 1000 tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.base import Decision, DepthQuery
from fathom.core.errors import ConfigError
from fathom.router.cost import ContextTokens, ReadingCost, trade_line
from fathom.router.depth import DepthPolicyBase

if TYPE_CHECKING:
    import numpy as np

FORMAT = 2  # 2: an extra "none suffices" class; the cost rule


def default_policy_path() -> Path:
    """The shipped depth policy (``router/policies/depth_forest.npz``)."""
    return Path(__file__).resolve().parent / "policies" / "depth_forest.npz"


def oracle_labels(
    quality: np.ndarray,
    latency: np.ndarray | None = None,
    epsilon: float = 0.0,
    slo_ms: float | None = None,
    strict_slo: bool = False,
) -> np.ndarray:
    """Per question, the index of the smallest budget whose quality is within ``epsilon`` of
    the best and whose latency is ≤ ``slo_ms``; the fastest-enough best when none meets it.

    With ``strict_slo`` the SLO comes first: "the best" is the best among the budgets that meet
    the SLO (the fastest budget when none does), so a question whose good answers are all too
    slow is labelled with a fast budget rather than a slow good one.

    ``quality`` and ``latency``: ``(n_questions, n_budgets)``, budgets ascending.
    """
    import numpy as np

    q = np.asarray(quality, dtype=np.float64)
    if strict_slo and slo_ms is not None and latency is not None:
        lat = np.asarray(latency, dtype=np.float64)
        fast = lat <= slo_ms
        fast = np.where(fast.any(axis=1, keepdims=True), fast, lat <= lat.min(axis=1)[:, None])
        masked = np.where(fast, q, -np.inf)
        ok = fast & (masked >= masked.max(axis=1, keepdims=True) - epsilon - 1e-12)
        return ok.argmax(axis=1)
    ok = q >= q.max(axis=1, keepdims=True) - epsilon - 1e-12
    if slo_ms is not None and latency is not None:
        within = ok & (np.asarray(latency) <= slo_ms)
        ok = np.where(within.any(axis=1, keepdims=True), within, ok)
    return ok.argmax(axis=1)  # first True = smallest budget


@dataclass
class TreeArrays:
    """One decision tree as arrays: node i splits on ``feature[i] <= threshold[i]`` → left."""

    left: np.ndarray  # (nodes,) int32, -1 at leaves
    right: np.ndarray  # (nodes,) int32
    feature: np.ndarray  # (nodes,) int32
    threshold: np.ndarray  # (nodes,) float64
    value: np.ndarray  # (nodes, n_classes) float32, class distribution at the node


@dataclass
class ForestPolicy(DepthPolicyBase):
    """A random forest over ``feature_names``; classes are indices into ``budgets`` plus
    ``len(budgets)`` for "no budget suffices"."""

    budgets: tuple[int, ...]
    feature_names: tuple[str, ...]
    trees: list[TreeArrays]
    confidence: float = 0.9
    meta: dict[str, Any] = field(default_factory=dict)
    cost: float | None = None  # λ per 1000 context tokens: the cost rule; None: confidence
    budget_tokens: tuple[float, ...] = ()  # mean context tokens per budget (the cost rule)
    # Each question's own context tokens per budget, from its probe (None: the means above).
    context_tokens: ContextTokens | None = None
    # The most-likely rule: the oracle label the forest finds most probable ("no budget
    # suffices" → the smallest budget). Suits SLO-first labels, whose cumulative probabilities
    # mix fast and slow reasons for a budget; off: the confidence or cost rule.
    most_likely: bool = False
    name: str = "forest"
    _ready: bool = field(default=False, repr=False)  # the global arrays below are built
    _roots: Any = field(default=None, repr=False)  # each tree's root, global id
    # (all nodes,) global ids of each node's children; a leaf is its own left and right child
    _left: Any = field(default=None, repr=False)
    _right: Any = field(default=None, repr=False)
    _features: Any = field(default=None, repr=False)  # (all nodes,) split feature, 0 at leaves
    _threshold: Any = field(default=None, repr=False)  # +inf at leaves: a leaf steps left
    _values: Any = field(default=None, repr=False)  # (all nodes, classes) float64
    _cum: Any = field(default=None, repr=False)  # its cumulative sums over the budgets
    _depth: int = field(default=0, repr=False)  # the deepest leaf's depth: steps in a walk

    @property
    def deepest_k(self) -> int:
        """The deepest budget: its features were computed on a probe this deep in training."""
        return max(self.budgets, default=0)

    @property
    def reads_passages(self) -> bool:
        """Whether it was trained on the reader's readings of the candidates
        (``router.features.READING_NAMES``): the Engine then reads them before deciding."""
        from fathom.router.features import READING_NAMES

        return self.feature_names[-len(READING_NAMES) :] == READING_NAMES

    def features(self, query: DepthQuery) -> tuple[list[float], bool]:
        """The feature vector of ``query`` in ``feature_names`` order, and whether its readings
        were missing (the reader could not run): the readings' features then take their
        training medians (``meta["reading_medians"]``)."""
        from fathom.router.features import READING_NAMES, probe_features, reading_features

        f = probe_features(query.question, query.probe, query.type_probs)
        if not self.reads_passages:
            return f, False
        if query.readings is None:
            medians = self.meta.get("reading_medians") or [0.0] * len(READING_NAMES)
            return f + [float(v) for v in medians], True
        return f + reading_features(query.readings, query.probe), False

    @property
    def prices_reading(self) -> bool:
        """Whether the cost rule decides: its tokens are then priced in the answering
        backend's unit (``decide``'s ``cost``)."""
        return self.cost is not None and not self.most_likely

    # -- inference -------------------------------------------------------------------------------

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Mean leaf class distribution over the trees: ``(n, n_budgets + 1) float32``, the
        last column "no budget suffices"."""
        import numpy as np

        if not self._ready:
            self._prepare()
        x = np.atleast_2d(np.asarray(x, dtype=np.float32))
        rows = np.arange(x.shape[0])[:, None]
        node = np.repeat(self._roots[None, :], x.shape[0], axis=0)  # (rows, trees)
        for _ in range(self._depth):
            go_left = x[rows, self._features[node]] <= self._threshold[node]
            node = np.where(go_left, self._left[node], self._right[node])
        return self._values[node].mean(axis=1).astype(np.float32)

    def _prepare(self) -> None:
        """All trees in global arrays (node ids offset per tree), so one question walks every
        tree at once: a numpy step per tree level, not a Python step per node."""
        import numpy as np

        offsets = np.cumsum([0] + [len(t.left) for t in self.trees[:-1]]).astype(np.intp)
        self._roots = offsets
        shift = lambda a, off: np.where(a >= 0, a + off, -1)  # noqa: E731
        left = np.concatenate([shift(t.left, o) for t, o in zip(self.trees, offsets, strict=True)])
        right = np.concatenate(
            [shift(t.right, o) for t, o in zip(self.trees, offsets, strict=True)]
        )
        # A leaf steps to itself (feature 0 ≤ +inf → left = itself), so every tree takes the
        # same number of steps, the deepest leaf's, with no test for leaves.
        leaf = left < 0
        ids = np.arange(len(leaf), dtype=np.intp)
        self._left = np.where(leaf, ids, left)
        self._right = np.where(leaf, ids, right)
        self._features = np.concatenate([t.feature for t in self.trees]).astype(np.intp)
        self._features[leaf] = 0
        self._threshold = np.where(leaf, np.inf, np.concatenate([t.threshold for t in self.trees]))
        self._values = np.concatenate([t.value for t in self.trees]).astype(np.float64)
        self._cum = np.cumsum(self._values, axis=1)
        level, depth = self._roots, 0
        while True:
            inner = level[~leaf[level]]
            if not len(inner):
                break
            level, depth = np.concatenate([left[inner], right[inner]]), depth + 1
        self._depth = depth
        self._ready = True

    def _walk(self, x: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every tree's leaf for ``x`` (global ids), and each split taken on the way as
        parallel arrays of parent and child ids."""
        if not self._ready:
            self._prepare()
        import numpy as np

        xs = np.asarray(x, dtype=np.float32)  # compare as the trees were fitted
        node = self._roots
        path = [node]
        for _ in range(self._depth):
            go_left = xs[self._features[node]] <= self._threshold[node]
            node = np.where(go_left, self._left[node], self._right[node])
            path.append(node)
        if len(path) == 1:
            empty = np.zeros(0, dtype=np.intp)
            return node, empty, empty
        # A leaf's steps to itself are splits that change nothing: they add 0 to every
        # contribution.
        return node, np.concatenate(path[:-1]), np.concatenate(path[1:])

    def predict_one(self, x: list[float]) -> list[float]:
        """``predict_proba`` for one feature vector, all trees walked together."""
        return self._mean_leaf(self._walk(x)[0])

    def _mean_leaf(self, leaves: np.ndarray) -> list[float]:
        return (self._values[leaves].sum(axis=0) / max(1, len(leaves))).tolist()

    def explain(self, x: list[float], i: int, n: int = 3) -> list[tuple[str, float, float]]:
        """The ``n`` features that moved P(enough by budget ``i``) most for the vector ``x``:
        ``(name, value, contribution)``. Each split on a tree's path from root to leaf is
        charged the change it makes to that probability (Saabas' path attribution), averaged
        over the trees; the contributions plus the forest's prior sum to the prediction."""
        _, parents, children = self._walk(x)
        return self._explain(x, i, n, parents, children)

    def _explain(self, x: list[float], i: int, n: int, parents: Any, children: Any) -> list:
        import numpy as np

        if not len(parents):
            return []
        delta = self._cum[children, i] - self._cum[parents, i]
        contrib = np.bincount(
            self._features[parents], weights=delta, minlength=len(self.feature_names)
        ) / max(1, len(self.trees))
        top = np.argsort(-np.abs(contrib), kind="stable")[:n]
        xs = np.asarray(x, dtype=np.float32)
        return [(self.feature_names[j], float(xs[j]), float(contrib[j])) for j in top if contrib[j]]

    def choose(
        self,
        proba: np.ndarray,
        confidence: float | None = None,
        cost: float | None = None,
        most_likely: bool | None = None,
        reading: ReadingCost | None = None,
        tokens: np.ndarray | None = None,
        inputs: Any = None,
    ) -> np.ndarray:
        """Budget index per row of ``predict_proba`` under the policy's rule (or the one
        given): with a ``cost`` λ, the argmax of P(enough by b) − λ · tokens(b) / 1000 (with a
        ``reading`` cost, tokens priced in its unit at its preference instead: ``decide``
        passes the answering backend's; ``tokens``: each row's own context tokens per budget,
        ``(n, n_budgets)`` from ``context_tokens``, else the training means); with
        ``most_likely``, the most probable label ("none suffices" → the smallest budget); else
        the smallest budget whose P(enough by b) ≥ ``confidence``, the deepest when none is.
        ``inputs``: the rows' features (``feature_names`` order), with a ``reading`` cost: each
        row pays its share of the price (``price_shares``)."""
        import numpy as np

        p = np.atleast_2d(np.asarray(proba, dtype=np.float64))
        given = confidence is not None or cost is not None
        if most_likely or (most_likely is None and not given and self.most_likely):
            top = p.argmax(axis=1)
            return np.where(top >= len(self.budgets), 0, top)
        cum = np.cumsum(p[:, : len(self.budgets)], axis=1)
        lam = self.cost if cost is None and confidence is None else cost
        if lam is not None:
            # λ as given per 1000 tokens, or priced in the reader's unit at its preference.
            weight = reading.weight(lam) if reading is not None else lam / 1000.0
            priced = self._tokens()[None, :] if tokens is None else np.asarray(tokens, float)
            if inputs is not None and reading is not None:
                weight = weight * self.price_shares(inputs, reading.prefer)[:, None]
            return np.argmax(cum - weight * priced, axis=1)
        c = self.confidence if confidence is None else confidence
        reached = cum >= c - 1e-9
        return np.where(reached.any(axis=1), reached.argmax(axis=1), len(self.budgets) - 1)

    def multi_hop_price(self, prefer: str) -> float:
        """The share of the token price a question the router types multi-hop pays at
        ``prefer`` (``meta["multi_hop_price"]``, set at training; 1 where none is set): a
        reading of one passage at a time cannot tell that the second one is still missing."""
        return float((self.meta.get("multi_hop_price") or {}).get(prefer, 1.0))

    def price_shares(self, inputs: Any, prefer: str) -> np.ndarray:
        """``(n,)``: the share of the token price each row of ``inputs`` (features in
        ``feature_names`` order) pays at ``prefer`` — ``multi_hop_price`` where the router's
        type probabilities put multi-hop first (``router.features.typed_multi_hop``), else 1."""
        import numpy as np
        from fathom.router.features import typed_multi_hop

        x = np.atleast_2d(np.asarray(inputs, dtype=np.float64))
        share = self.multi_hop_price(prefer)
        if share == 1.0:
            return np.ones(len(x))
        return np.where(typed_multi_hop(x, self.feature_names), share, 1.0)

    def _tokens(self) -> np.ndarray:
        import numpy as np

        if len(self.budget_tokens) != len(self.budgets):
            raise ConfigError(
                "this forest has no per-budget token costs (train it from a sweep) — use its "
                "confidence rule instead"
            )
        return np.asarray(self.budget_tokens, dtype=np.float64)

    @property
    def rule(self) -> str:
        if self.most_likely:
            return "most likely label"
        return (
            f"cost λ = {self.cost:g}"
            if self.cost is not None
            else f"confidence {self.confidence:g}"
        )

    def decide(self, query: DepthQuery) -> Decision:
        t = time.perf_counter()
        probe = query.probe
        f, unread = self.features(query)
        leaves, parents, children = self._walk(f)
        proba = self._mean_leaf(leaves)
        # Priced as ask prices it: in the answering backend's unit, balanced when none is said.
        priced = (query.cost or ReadingCost()) if self.prices_reading else None
        nb = len(self.budgets)
        own = None  # this question's context tokens per budget, from its own chunks
        if priced is not None and self.context_tokens is not None:
            own = self.context_tokens.for_probe(
                [h.chunk.n_tokens for h in probe.hits], self.budgets
            )
        rows = None if own is None else [own]
        i = int(self.choose(proba, reading=priced, tokens=rows, inputs=[f])[0])
        share = float(self.price_shares([f], priced.prefer)[0]) if priced is not None else 1.0
        priced_cost: dict[str, Any] | None = None  # set where the cost rule decides
        cum = [float(sum(proba[: j + 1])) for j in range(nb)]
        k = min(self.budgets[i], len(probe.hits))
        if self.most_likely:
            reason = likely_reason(self.budgets, proba, i)
        elif self.cost is not None:
            reading = query.cost or ReadingCost()
            tokens = own if own is not None else [float(t) for t in self._tokens()]
            reason = cost_reason(self.budgets, self.cost, reading, cum, tokens, i, share)
            priced_cost = {
                **reading.to_dict(),
                "amount": round(reading.amount(tokens[i]), 6),
                "trade": trade_line(reading, self.cost, self.budgets, cum, tokens, i, share),
            }
        else:
            runner = i + 1 if i + 1 < nb else max(0, i - 1)
            reason = (
                f"forest: k = {self.budgets[i]} is the smallest budget with P(enough) = "
                f"{cum[i]:.2f} ≥ {self.confidence:.2f}; runner-up k = {self.budgets[runner]} "
                f"(P = {cum[runner]:.2f})"
            )
        drivers = ", ".join(
            f"{name} = {v:.3g} ({c:+.2f})"
            for name, v, c in self._explain(f, i, 3, parents, children)
        )
        reason += f"; driven by {drivers}"
        if proba[nb] >= 0.2:
            reason += f"; P(no depth suffices) = {float(proba[nb]):.2f}"
        if unread:
            reason += "; the reader could not run, so its features took their usual values"
        if k < self.budgets[i]:
            reason += f"; only {len(probe.hits)} chunks found"
        scores = {f"p_k{b}": round(float(p), 4) for b, p in zip(self.budgets, proba, strict=False)}
        scores["p_none_suffices"] = round(float(proba[nb]), 4)
        scores["decide_ms"] = round((time.perf_counter() - t) * 1000, 4)
        return Decision(k, self.name, reason, scores=scores, cost=priced_cost)

    def describe(self, path: Path) -> dict[str, Any]:
        """What ``fathom policy show`` prints: the rule, budgets, token costs and the metadata
        saved with it (training, feature importances)."""
        return {
            "budgets": list(self.budgets),
            "rule": self.rule,
            "confidence": self.confidence,
            "cost": self.cost,
            "budget_tokens": list(self.budget_tokens),
            "context_tokens": self.context_tokens.to_dict() if self.context_tokens else None,
            "n_trees": len(self.trees),
            **self.meta,
        }

    # -- persistence -----------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """``path`` (``.npz``): the tree arrays, plus a ``.json`` beside it with the metadata."""
        import numpy as np

        path = Path(path).with_suffix(".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for i, t in enumerate(self.trees):
            for name in ("left", "right", "feature", "threshold", "value"):
                arrays[f"t{i}_{name}"] = getattr(t, name)
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        from fathom.router.features import write_policy_meta

        write_policy_meta(
            path,
            "forest",
            FORMAT,
            self.budgets,
            feature_names=self.feature_names,
            extra={
                "confidence": self.confidence,
                "cost": self.cost,
                "most_likely": self.most_likely,
                "budget_tokens": list(self.budget_tokens),
                "context_tokens": (
                    self.context_tokens.to_dict() if self.context_tokens is not None else None
                ),
                "n_trees": len(self.trees),
                **self.meta,
            },
        )
        return path

    @classmethod
    def load(cls, path: str | Path, expect_embedder: str | None = None) -> ForestPolicy:
        """Load ``path`` (``.npz`` or its ``.json``); refuses another feature schema or
        embedder."""
        import numpy as np
        from fathom.router.features import read_policy_meta

        arr_path = Path(path).with_suffix(".npz")
        meta = read_policy_meta(
            Path(path), "forest", FORMAT, ".npz", expect_embedder, may_read=True
        )
        with np.load(arr_path, allow_pickle=False) as data:
            trees = [
                TreeArrays(
                    *(data[f"t{i}_{n}"] for n in ("left", "right", "feature", "threshold", "value"))
                )
                for i in range(int(meta["n_trees"]))
            ]
        info = {
            k: v
            for k, v in meta.items()
            if k
            not in (
                "format",
                "kind",
                "budgets",
                "feature_names",
                "feature_schema",
                "confidence",
                "cost",
                "most_likely",
                "budget_tokens",
                "context_tokens",
                "n_trees",
            )
        }
        return cls(
            tuple(meta["budgets"]),
            tuple(meta["feature_names"]),
            trees,
            meta["confidence"],
            info,
            cost=meta.get("cost"),
            budget_tokens=tuple(meta.get("budget_tokens") or ()),
            context_tokens=ContextTokens.from_dict(meta.get("context_tokens")),
            most_likely=bool(meta.get("most_likely", False)),
        )


def likely_reason(budgets: tuple[int, ...], proba: list[float], i: int) -> str:
    """Why the most-likely rule chose budget ``i`` of ``budgets``."""
    nb = len(budgets)
    order = sorted(range(nb + 1), key=lambda j: -proba[j])
    runner = next(j for j in order if j != i and j < nb) if nb > 1 else i
    label = "no budget suffices" if proba[nb] > proba[i] else f"k = {budgets[i]}"
    return (
        f"forest: {label} is the most likely oracle label (P = "
        f"{float(max(proba[i], proba[nb])):.2f}); runner-up k = {budgets[runner]} "
        f"(P = {float(proba[runner]):.2f})"
    )


def cost_reason(
    budgets: tuple[int, ...],
    cost: float,
    reading: ReadingCost,
    cum: list[float],
    tokens: list[float],
    i: int,
    share: float = 1.0,
) -> str:
    """Why the cost rule chose budget ``i``: P(enough) against the cost of reading, in
    tokens or in the answering backend's unit, and the runner-up; ``share``: the part of
    the price a multi-hop question pays (``multi_hop_price``)."""
    nb = len(budgets)
    weight = reading.weight(cost) * share
    utility = [cum[j] - weight * tokens[j] for j in range(nb)]
    runner = max((j for j in range(nb) if j != i), key=lambda j: utility[j])
    if reading.unit == "tokens":
        reason = (
            f"forest: k = {budgets[i]} maximises P(enough) − λ·tokens/1000 "
            f"(P = {cum[i]:.2f} at ~{tokens[i]:.0f} tokens, λ = {weight * 1000:g}); "
            f"runner-up k = {budgets[runner]} (P = {cum[runner]:.2f} at "
            f"~{tokens[runner]:.0f})"
        )
    else:
        reason = (
            f"forest: k = {budgets[i]} maximises P(enough) − the cost of reading "
            f"(P = {cum[i]:.2f}, ~{tokens[i]:.0f} tokens, about "
            f"{reading.format(reading.amount(tokens[i]))}); runner-up "
            f"k = {budgets[runner]} (P = {cum[runner]:.2f}, about "
            f"{reading.format(reading.amount(tokens[runner]))})"
        )
    if share != 1.0:
        reason += (
            f"; a multi-hop question's reading priced at {share:g}× at prefer = {reading.prefer}"
        )
    return reason
