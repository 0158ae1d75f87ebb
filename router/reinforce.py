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
    import torch
    from fathom.router.sweep import Sweep

FORMAT = 1
_LAYERS = ("proj", "h1", "h2", "out")


def fit_standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std of ``x`` ``(n, n_features)``, both ``(n_features,) float32``.

    A feature constant in training gets mean = its value and std = 1 (so does std below 10⁻⁶,
    keeping its mean): it stands at 0 in training, and a value unseen there moves the input by its
    raw difference, not a million times it (``std + 1e-6`` did that: one "why" question after
    training on none sent the policy to an extreme budget). Policies saved before keep their
    stored mean and std.
    """
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    mean, std = x.mean(axis=0), x.std(axis=0)
    # Tested exactly as well: the float32 mean of a large constant is rounded, so its std is not
    # quite 0 (about 6·10⁻⁵ for 64 rows of 1000.1).
    const = x.max(axis=0) == x.min(axis=0)
    mean = np.where(const, x[0], mean).astype(np.float32)
    std = np.where(const | (std < 1e-6), 1.0, std).astype(np.float32)
    return mean, std


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

    # -- training --------------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        sweep: Sweep,
        qvecs: np.ndarray,
        lam: float = 0.1,
        epochs: int = 60,
        batch_size: int = 64,
        lr: float = 3e-4,
        entropy: float = 0.05,
        clip: float = 1.0,
        seed: int = 0,
        samples: int = 8,
        weight_decay: float = 1e-3,
        meta: dict[str, Any] | None = None,
    ) -> ReinforcePolicy:
        """Fit on ``sweep`` (quality and context tokens per budget) and the questions' query
        embeddings ``qvecs`` ``(n, dim)``; deterministic for a seed (one torch thread)."""
        import numpy as np
        import torch
        from fathom.router.features import FEATURE_NAMES

        torch.manual_seed(seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            rng = np.random.default_rng(seed)
            x = np.asarray(sweep.features, dtype=np.float32)
            mean, std = fit_standardisation(x)
            reward = torch.tensor(
                np.asarray(sweep.quality, np.float32) - lam * np.asarray(sweep.tokens) / 1000.0,
                dtype=torch.float32,
            )
            n = reward.shape[0]
            trainer = _Trainer(
                torch.tensor(np.asarray(qvecs, dtype=np.float32)),
                torch.tensor((x - mean) / std),
                reward,
                lr=lr,
                weight_decay=weight_decay,
                entropy=entropy,
                clip=clip,
                samples=samples,
                seed=seed,
            )
            curves = [
                {"epoch": epoch, **trainer.epoch(rng.permutation(n), batch_size)}
                for epoch in range(epochs)
            ]
            weights = trainer.weights()
        finally:
            torch.set_num_threads(threads)
        info = dict(meta or {})
        info.update(
            {"lambda": lam, "epochs": epochs, "lr": lr, "entropy": entropy, "clip": clip,
             "samples": samples, "weight_decay": weight_decay, "seed": seed, "n_train": int(n),
             "curves": curves}
        )  # fmt: skip
        return cls(tuple(sweep.budgets), tuple(FEATURE_NAMES), weights, mean, std, info)

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


class _Trainer:
    """REINFORCE on one sweep: the policy network in torch, its optimiser, and the running-mean
    baseline. ``q`` are the query embeddings, ``feats`` the standardised probe features and
    ``reward`` ``(n, n_budgets)`` each budget's reward, per question."""

    def __init__(
        self,
        q: torch.Tensor,
        feats: torch.Tensor,
        reward: torch.Tensor,
        *,
        lr: float,
        weight_decay: float,
        entropy: float,
        clip: float,
        samples: int,
        seed: int,
    ) -> None:
        import torch

        self.q, self.feats, self.reward = q, feats, reward
        self.entropy, self.clip, self.samples = entropy, clip, samples
        self.n_actions = reward.shape[1]
        self.proj = torch.nn.Linear(q.shape[1], 128)
        self.body = torch.nn.Sequential(
            torch.nn.Linear(128 + feats.shape[1], 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, self.n_actions),
        )
        self.params = list(self.proj.parameters()) + list(self.body.parameters())
        self.opt = torch.optim.Adam(self.params, lr=lr, weight_decay=weight_decay)
        # The running-mean baseline starts at the expected reward of a uniform policy: from 0
        # every early advantage is positive and the policy collapses onto the first budget
        # that pays on average.
        self.baseline = float(reward.mean())
        self.gen = torch.Generator().manual_seed(seed)

    def epoch(self, order: np.ndarray, batch_size: int) -> dict[str, Any]:
        """One pass over the questions in ``order``, a batch per step: the mean reward of the
        sampled actions and each budget's share of them."""
        import numpy as np
        import torch

        rewards, counts = [], np.zeros(self.n_actions, dtype=np.int64)
        for start in range(0, len(order), batch_size):
            r, action = self.step(torch.tensor(order[start : start + batch_size]))
            rewards.append(float(r.mean()))
            counts += np.bincount(action.numpy().ravel(), minlength=self.n_actions)
        return {
            "reward": float(np.mean(rewards)),
            "action_shares": (counts / counts.sum()).round(4).tolist(),
        }

    def step(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One update on the questions ``idx``: ``samples`` actions each, drawn from the policy
        and priced by the sweep; their rewards and the actions, both ``(batch, samples)``."""
        import torch

        logits = self.body(torch.cat([self.proj(self.q[idx]), self.feats[idx]], dim=1))
        dist = torch.distributions.Categorical(logits=logits)
        # (batch, samples) actions, each priced by the sweep.
        action = torch.multinomial(dist.probs, self.samples, replacement=True, generator=self.gen)
        r = self.reward[idx.unsqueeze(1), action]
        log_p = torch.log_softmax(logits, dim=1).gather(1, action)
        # Advantage: reward minus the running-mean baseline. (Dividing it by the batch's
        # spread, uncentred, magnified the baseline's lag and collapsed the policy
        # onto one budget.)
        adv = r - self.baseline
        loss = -(adv * log_p).mean() - self.entropy * dist.entropy().mean()
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        self.baseline = 0.9 * self.baseline + 0.1 * float(r.mean())
        return r, action

    def weights(self) -> dict[str, np.ndarray]:
        """The trained layers as numpy arrays, named as ``ReinforcePolicy.weights``."""
        layers = [self.proj, self.body[0], self.body[2], self.body[4]]
        weights = {}
        for name, layer in zip(_LAYERS, layers, strict=True):
            weights[f"{name}.w"] = layer.weight.detach().numpy().T.copy()
            weights[f"{name}.b"] = layer.bias.detach().numpy().copy()
        return weights
