"""Training the REINFORCE depth controller (``router.reinforce`` describes the network, the
reward and why these settings): torch, one thread, deterministic for a seed; what it writes is
the weights in safetensors and a JSON that ``ReinforcePolicy`` reads with numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fathom.router.features import FEATURE_NAMES
from fathom.router.reinforce import _LAYERS, ReinforcePolicy

if TYPE_CHECKING:
    import numpy as np
    import torch
    from fathom.router.sweep import Sweep


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


def train_reinforce(
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
    """A REINFORCE policy fitted on ``sweep`` (quality and context tokens per budget) and the
    questions' query embeddings ``qvecs`` ``(n, dim)``; deterministic for a seed (one torch
    thread)."""
    import numpy as np
    import torch

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
    return ReinforcePolicy(tuple(sweep.budgets), tuple(FEATURE_NAMES), weights, mean, std, info)


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
