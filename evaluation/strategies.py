"""Strategy specs for ``fathom eval --strategies``: names → depth policies.

| spec | policy |
|---|---|
| ``none`` | no retrieval (k = 0; the probe is not charged) |
| ``fixed:K`` | always K chunks |
| ``gap`` / ``gap:A-B`` | Adaptive-k: largest gap of the sorted similarities, k within A–B (1–20) |
| ``threshold:pNN[:K]`` | retrieve K (4) chunks when the top similarity reaches the |
| | NNth percentile of the fitting split's top similarities, else none |
| ``strategy`` | the router's per-type default, with the feedback loop (Fathom's own default) |
| ``forest[:PATH][@C]`` | the learned forest policy at PATH (default: the shipped one), at |
| ``forest[:PATH]@lambda=L`` | confidence C or by cost λ = L per 1000 tokens (default: its own) |
| ``forest[:PATH]@likely`` | or by the most likely oracle label (for SLO-first forests) |
| ``reinforce:PATH`` | the REINFORCE controller at PATH (greedy) |
| ``utility:PATH[@PRESET]`` | the utility router at PATH with a weight preset (quality, balanced, |
| | latency, cost; default: the file's) |
| ``cascade[@T]`` | answer at k = 1, climb 1, 2, 3, 5, 8, 12, 20 while the answer's own |
| | confidence is below T (default 0.5; ``router.cascade``) |

Appending ``+fb`` turns the feedback loop on for any other spec (it is off by default, so each
row measures its policy alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fathom.core.errors import ConfigError

_SPEC = re.compile(
    r"^(?:(?P<none>none)|fixed:(?P<k>\d+)|(?P<gap>gap)(?::(?P<a>\d+)-(?P<b>\d+))?|"
    r"threshold:p(?P<p>\d+(?:\.\d+)?)(?::(?P<tk>\d+))?|(?P<strategy>strategy)|"
    r"(?P<forest>forest)(?::(?P<fpath>[^@+]+))?"
    r"(?:@(?P<conf>0?\.\d+|1(?:\.0*)?)|@lambda=(?P<fcost>\d*\.?\d+)|(?P<likely>@likely))?|"
    r"(?P<utility>utility):(?P<upath>[^@+]+)(?:@(?P<preset>[a-z]+))?|"
    r"(?P<reinforce>reinforce):(?P<rpath>[^@+]+)|"
    r"(?P<cascade>cascade)(?:@(?P<ct>0?\.\d+|1(?:\.0*)?))?)"
    r"(?P<fb>\+fb)?$"
)


@dataclass(frozen=True, slots=True)
class StrategySpec:
    """One parsed ``--strategies`` item."""

    name: str
    kind: str  # none | fixed | gap | threshold | strategy | forest | utility | reinforce | cascade
    k: int | None = None
    k_min: int = 1
    k_max: int = 20
    percentile: float | None = None
    feedback: bool = False
    path: str | None = None  # a learned policy's file
    confidence: float | None = None  # a forest's confidence rule; a cascade's threshold
    cost: float | None = None  # a forest's λ per 1000 tokens
    most_likely: bool = False  # a forest's most-likely-label rule
    preset: str | None = None  # utility weights

    @property
    def needs_fit(self) -> bool:
        return self.kind == "threshold"

    @property
    def retrieves(self) -> bool:
        return self.kind != "none"


def parse_strategy(spec: str) -> StrategySpec:
    s = spec.strip()
    m = _SPEC.match(s)
    if not m:
        raise ConfigError(
            f"strategy {spec!r}: expected none, fixed:K, gap[:A-B], threshold:pNN[:K], "
            "strategy, forest[:PATH][@C|@lambda=L|@likely], utility:PATH[@PRESET] or "
            "cascade[@T] (optionally with +fb)"
        )
    fb = bool(m["fb"])
    if m["none"]:
        return StrategySpec(s, "none", k=0, feedback=False)
    if m["k"] is not None:
        return StrategySpec(s, "fixed", k=int(m["k"]), feedback=fb)
    if m["gap"]:
        a, b = int(m["a"] or 1), int(m["b"] or 20)
        if not 1 <= a <= b:
            raise ConfigError(f"strategy {spec!r}: need 1 ≤ A ≤ B")
        return StrategySpec(s, "gap", k_min=a, k_max=b, feedback=fb)
    if m["p"] is not None:
        p = float(m["p"])
        if not 0 <= p <= 100:
            raise ConfigError(f"strategy {spec!r}: the percentile must be within 0–100")
        k = int(m["tk"] or 4)
        if k < 1:
            raise ConfigError(f"strategy {spec!r}: the gate's k must be ≥ 1")
        return StrategySpec(s, "threshold", k=k, percentile=p, feedback=fb)
    if m["reinforce"]:
        return StrategySpec(s, "reinforce", path=m["rpath"], feedback=fb)
    if m["cascade"]:
        # The climb is the policy itself: it runs whatever +fb says.
        threshold = float(m["ct"]) if m["ct"] else None
        return StrategySpec(s, "cascade", confidence=threshold, feedback=False)
    if m["utility"]:
        return StrategySpec(s, "utility", path=m["upath"], preset=m["preset"], feedback=fb)
    if m["forest"]:
        conf = float(m["conf"]) if m["conf"] else None
        cost = float(m["fcost"]) if m["fcost"] else None
        return StrategySpec(
            s,
            "forest",
            path=m["fpath"],
            confidence=conf,
            cost=cost,
            most_likely=bool(m["likely"]),
            feedback=fb,
        )
    return StrategySpec(s, "strategy", feedback=True)


def parse_strategies(specs: str | list[str]) -> list[StrategySpec]:
    """``"none,fixed:2,gap"`` (or a list) → specs, in order, without duplicates."""
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    out: list[StrategySpec] = []
    for item in items:
        if item.strip():
            spec = parse_strategy(item)
            if spec.name in {s.name for s in out}:
                raise ConfigError(f"strategy {spec.name!r} is listed twice")
            out.append(spec)
    if not out:
        raise ConfigError("no strategies given")
    return out


def make_policy(
    spec: StrategySpec, fitted: dict[str, Any] | None = None, embedder: str | None = None
) -> tuple[Any, int | None]:
    """``(policy, k)`` for ``Engine.answer``: a fixed ``k`` or a policy object (None, None =
    the strategy default). ``fitted`` holds threshold fits by spec name; ``embedder`` is the
    collection's embedder id, which a learned policy must have been trained with."""
    from fathom.router.depth import ScoreGapDepth, ScoreThresholdDepth

    if spec.kind in ("none", "fixed"):
        return None, spec.k
    if spec.kind == "gap":
        return ScoreGapDepth(spec.k_min, spec.k_max), None
    if spec.kind == "threshold":
        fit = (fitted or {}).get(spec.name)
        if fit is None:
            raise ConfigError(f"strategy {spec.name!r} has not been fitted")
        policy = ScoreThresholdDepth(fit["threshold"], fit["k"], fit["percentile"])
        policy.name = spec.name
        return policy, None
    if spec.kind == "forest":
        from fathom.router.forest import ForestPolicy, default_policy_path

        policy = ForestPolicy.load(spec.path or default_policy_path(), expect_embedder=embedder)
        if spec.confidence is not None:
            policy.confidence, policy.cost, policy.most_likely = spec.confidence, None, False
        if spec.cost is not None:
            policy.cost, policy.most_likely = spec.cost, False
            policy._tokens()  # fails now, clearly, when the forest has no token costs
        if spec.most_likely:
            policy.most_likely = True
        policy.name = spec.name
        return policy, None
    if spec.kind == "cascade":
        from fathom.router.cascade import THRESHOLD, Cascade, CascadeDepth

        threshold = THRESHOLD if spec.confidence is None else spec.confidence
        return CascadeDepth(Cascade(threshold=threshold), name=spec.name), None
    if spec.kind == "reinforce":
        from fathom.router.reinforce import ReinforcePolicy

        assert spec.path is not None
        policy = ReinforcePolicy.load(spec.path, expect_embedder=embedder)
        policy.name = spec.name
        return policy, None
    if spec.kind == "utility":
        from fathom.router.utility import UtilityPolicy

        assert spec.path is not None
        policy = UtilityPolicy.load(spec.path, preset=spec.preset)
        policy.name = spec.name
        return policy, None
    return None, None
