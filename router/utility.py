"""The utility router: pick the strategy bundle with the best quality − latency − cost trade-off.

A bundle is a named retrieval budget (``skip`` = 0, ``light``, ``medium``, ``heavy``). From a
budget sweep, each bundle gets priors per query type — mean quality, mean end-to-end latency and
mean tokens (prompt + completion) of that type's questions at the bundle's budget — and the
policy picks, for the router's query type, the bundle maximising

    utility = quality − w_lat · latency / latency_scale − w_cost · tokens / token_scale

where the scales are the sweep's deepest-bundle means (so both penalties are in [0, ~1]).
Presets: ``quality`` (0, 0), ``balanced`` (0.1, 0.1), ``latency`` (0.4, 0.05), ``cost``
(0.05, 0.4). Saved as JSON (no pickle); the decision is a dictionary lookup and a max.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fathom.core.base import Decision, DepthQuery
from fathom.core.errors import ConfigError, FathomError
from fathom.router.depth import DepthPolicyBase

FORMAT = 1
PRESETS: dict[str, tuple[float, float]] = {
    "quality": (0.0, 0.0),
    "balanced": (0.1, 0.1),
    "latency": (0.4, 0.05),
    "cost": (0.05, 0.4),
}
DEFAULT_BUNDLES: dict[str, int] = {"skip": 0, "light": 2, "medium": 5, "heavy": 12}


@dataclass
class UtilityPolicy(DepthPolicyBase):
    """Bundles (name → budget k), priors per query type, and the weights in use."""

    bundles: dict[str, int]
    # query type (or "*" for all) → bundle → {"quality", "latency_ms", "tokens", "n"}
    priors: dict[str, dict[str, dict[str, float]]]
    latency_scale: float
    token_scale: float
    preset: str = "balanced"
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = "utility"
    prices_reading: ClassVar[bool] = False  # its own trade-off, fixed in training

    @property
    def deepest_k(self) -> int:
        """The deepest bundle: how deep the probe goes for this policy."""
        return max(self.bundles.values(), default=0)

    @property
    def weights(self) -> tuple[float, float]:
        if self.preset not in PRESETS:
            raise ConfigError(f"utility preset {self.preset!r}: one of {', '.join(PRESETS)}")
        return PRESETS[self.preset]

    def utilities(self, qtype: str) -> dict[str, float]:
        w_lat, w_cost = self.weights
        pri = self.priors.get(qtype) or self.priors["*"]
        return {
            name: p["quality"]
            - w_lat * p["latency_ms"] / self.latency_scale
            - w_cost * p["tokens"] / self.token_scale
            for name, p in pri.items()
        }

    def decide(self, query: DepthQuery) -> Decision:
        qtype = query.qtype
        u = self.utilities(qtype)
        # Ties go to the smaller budget.
        order = sorted(u, key=lambda b: (-u[b], self.bundles[b]))
        best, runner = order[0], order[1] if len(order) > 1 else order[0]
        k = min(self.bundles[best], len(query.probe.hits))
        source = qtype if qtype in self.priors else "all types"
        reason = (
            f"utility ({self.preset}): {best} (k = {self.bundles[best]}) has the best "
            f"quality − latency − cost for {source} questions ({u[best]:.3f}); runner-up "
            f"{runner} ({u[runner]:.3f})"
        )
        return Decision(k, self.name, reason, scores={f"u_{b}": round(v, 4) for b, v in u.items()})

    def describe(self, path: Path) -> dict[str, Any]:
        """What ``fathom policy show`` prints: the preset, bundles, metadata, each query type's
        utilities and the priors they come from."""
        info = {"kind": "utility", "preset": self.preset, "bundles": self.bundles, **self.meta}
        info["utilities"] = {t: self.utilities(t) for t in self.priors}
        return {**info, "priors": self.priors}

    def save(self, path: str | Path) -> Path:
        path = Path(path).with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "format": FORMAT,
            "kind": "utility",
            "bundles": self.bundles,
            "priors": self.priors,
            "latency_scale": self.latency_scale,
            "token_scale": self.token_scale,
            "preset": self.preset,
            **self.meta,
        }
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path, preset: str | None = None) -> UtilityPolicy:
        path = Path(path).with_suffix(".json")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise FathomError(f"{path}: cannot read a utility policy ({exc})") from None
        if data.get("kind") != "utility" or data.get("format") != FORMAT:
            raise FathomError(f"{path}: not a format-{FORMAT} utility policy")
        keys = ("format", "kind", "bundles", "priors", "latency_scale", "token_scale", "preset")
        policy = cls(
            {k: int(v) for k, v in data["bundles"].items()},
            data["priors"],
            float(data["latency_scale"]),
            float(data["token_scale"]),
            preset or data.get("preset", "balanced"),
            {k: v for k, v in data.items() if k not in keys},
        )
        _ = policy.weights  # validates the preset
        return policy
