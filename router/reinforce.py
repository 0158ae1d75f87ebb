"""The cost-aware REINFORCE depth controller.

A policy network maps the question to a distribution over budgets: the query embedding through
a learned 384 → 128 projection, joined with the standardised probe features, then two hidden
layers of 128 (ReLU) and a softmax over the budgets. It is trained on a budget sweep with
REINFORCE: an action is sampled per question, its reward is

    r = quality(question, budget) − λ · tokens(question, budget) / 1000

(read from the sweep, so training needs no generation), the advantage is r minus a running
mean of rewards (started at a uniform policy's expected reward), and the loss is
−advantage · log π(action) − β · entropy, with the gradient norm clipped. Each question draws
``samples`` actions per step (8 by default): the sweep prices every budget, so more draws cost
nothing but lower the gradient's variance. With Adam at 3·10⁻⁴ and weight decay 10⁻³ this
trains stably; one draw at 3·10⁻³ (the first version) swung between shallow and deep policies
from one λ to the next and saved less than the forest on held-out documents. Training uses torch;
the weights are saved with safetensors and inference is a few numpy matrix products, greedy
(the most probable budget).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fathom.core.base import Decision, DepthQuery
from fathom.core.errors import FathomError
from fathom.router.depth import DepthPolicyBase

if TYPE_CHECKING:
    import numpy as np

FORMAT = 1
_LAYERS = ("proj", "h1", "h2", "out")


@dataclass
class ReinforcePolicy(DepthPolicyBase):
    budgets: tuple[int, ...]
    feature_names: tuple[str, ...]
    weights: dict[
        str, np.ndarray
    ]  # proj.w (emb, 128), proj.b, h1.w, h1.b, h2.w, h2.b, out.w, out.b
    mean: np.ndarray  # feature standardisation
    std: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = "reinforce"
    prices_reading: ClassVar[bool] = False  # its own trade-off, fixed in training

    @property
    def deepest_k(self) -> int:
        """The deepest budget: its features were computed on a probe this deep in training."""
        return max(self.budgets, default=0)

    # -- inference -------------------------------------------------------------------------------

    def proba(self, qvecs: np.ndarray, features: np.ndarray) -> np.ndarray:
        """``(n, n_budgets)`` action probabilities."""
        import numpy as np

        w = self.weights
        q = np.atleast_2d(np.asarray(qvecs, dtype=np.float32))
        f = (np.atleast_2d(np.asarray(features, dtype=np.float32)) - self.mean) / self.std
        h = np.concatenate([q @ w["proj.w"] + w["proj.b"], f], axis=1)
        h = np.maximum(h @ w["h1.w"] + w["h1.b"], 0)
        h = np.maximum(h @ w["h2.w"] + w["h2.b"], 0)
        z = h @ w["out.w"] + w["out.b"]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def decide(self, query: DepthQuery) -> Decision:
        from fathom.router.features import probe_features

        if query.qvec is None:
            raise FathomError("the reinforce policy needs the query embedding")
        t = time.perf_counter()
        probe = query.probe
        p = self.proba(query.qvec, probe_features(query.question, probe, query.type_probs))[0]
        order = p.argsort()[::-1]
        i, runner = int(order[0]), int(order[1]) if len(order) > 1 else int(order[0])
        k = min(self.budgets[i], len(probe.hits))
        reason = (
            f"reinforce (λ = {self.meta.get('lambda')}): k = {self.budgets[i]} is the most "
            f"probable budget (P = {p[i]:.2f}); runner-up k = {self.budgets[runner]} "
            f"(P = {p[runner]:.2f})"
        )
        scores = {f"p_k{b}": round(float(x), 4) for b, x in zip(self.budgets, p, strict=True)}
        scores["decide_ms"] = round((time.perf_counter() - t) * 1000, 4)
        return Decision(k, self.name, reason, scores=scores)

    def describe(self, path: Path) -> dict[str, Any]:
        """What ``fathom policy show`` prints: the metadata saved beside the weights (budgets,
        features, embedder, λ, the training curve)."""
        import json

        return json.loads(Path(path).with_suffix(".json").read_text(encoding="utf-8"))

    # -- persistence -----------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """``path`` (``.safetensors``) with the weights and standardisation, plus ``.json``."""
        from safetensors.numpy import save_file

        path = Path(path).with_suffix(".safetensors")
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.astype("float32") for k, v in self.weights.items()}
        tensors["feature.mean"] = self.mean.astype("float32")
        tensors["feature.std"] = self.std.astype("float32")
        save_file(tensors, str(path))
        from fathom.router.features import write_policy_meta

        write_policy_meta(path, "reinforce", FORMAT, self.budgets, self.meta)
        return path

    @classmethod
    def load(cls, path: str | Path, expect_embedder: str | None = None) -> ReinforcePolicy:
        from fathom.router.features import read_policy_meta
        from safetensors.numpy import load_file

        w_path = Path(path).with_suffix(".safetensors")
        meta = read_policy_meta(Path(path), "reinforce", FORMAT, ".safetensors", expect_embedder)
        t = load_file(str(w_path))
        weights = {k: v for k, v in t.items() if not k.startswith("feature.")}
        skip = ("format", "kind", "budgets", "feature_names", "feature_schema")
        info = {k: v for k, v in meta.items() if k not in skip}
        return cls(
            tuple(meta["budgets"]),
            tuple(meta["feature_names"]),
            weights,
            t["feature.mean"],
            t["feature.std"],
            info,
        )
