"""The portfolio router: which of a portfolio's members to run for one question.

A light linear model scores every member for a question from what is known before any member
runs: the query embedding and the probe features (``router.features``) of the probe
``Engine.prepare`` makes — the configured retriever (``retrieval.mode``, ``fusion``, its weight
or ``rrf_k``, ``candidates``) to the depth a question with no ``--k`` gets (``probe_depth``).
The portfolio records those settings (``probe_settings``); a run whose probe differs is refused
(``check_probe``), since its features would mean something else.

One ridge regression per member predicts s(q, r) — the member's score on the question
(gold-document recall or answer containment in its top n) — from the standardised inputs; the
``ell`` members with the highest predictions run and their results are fused. The
regularisation strength is chosen by leave-one-out cross-validation (``RidgeCV``, efficient for
ridge), so training (``learn.portfolio_build.train_router``) is deterministic. Inference is one
matrix–vector product (numpy only); the model is stored as JSON inside the portfolio file, no
pickle.

Members the router cannot tell apart get the same prediction; ties go to the member the greedy
selection picked first (the one that covers most on its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.config import Config

FORMAT = 1
# What portfolios built before the probe was recorded were trained on: a default hybrid
# retriever (convex, w = 0.5, 100 candidates) to depth 20 — the depth rule's with 20 reranker
# candidates, as every strategy's k_max is at most 20.
LEGACY_PROBE: dict[str, Any] = {
    "retrieval.mode": "hybrid",
    "retrieval.fusion": "convex",
    "retrieval.candidates": 100,
    "retrieval.dense_weight": 0.5,
    "rerank.candidates": 20,
}


@dataclass(frozen=True)
class PortfolioRouter:
    """Per-member ridge regressions over ``[query embedding, probe features]``."""

    members: tuple[str, ...]
    mean: np.ndarray  # (d,)
    scale: np.ndarray  # (d,)
    coef: np.ndarray  # (d, members)
    intercept: np.ndarray  # (members,)
    alpha: float
    feature_schema: dict[str, Any]

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        """Predicted s(q, r): ``(questions, members)`` for ``(questions, d)`` inputs."""
        import numpy as np

        x = np.atleast_2d(np.asarray(inputs, dtype=np.float64))
        if x.shape[1] != self.mean.shape[0]:
            raise ConfigError(
                f"portfolio router: {x.shape[1]} inputs, trained on {self.mean.shape[0]}"
            )
        return ((x - self.mean) / self.scale) @ self.coef + self.intercept

    def choose(self, inputs: np.ndarray, ell: int) -> list[list[str]]:
        """The ``ell`` members to run, best first, for each row of ``inputs``."""
        import numpy as np

        if not 1 <= ell <= len(self.members):
            raise ConfigError(f"portfolio router: ell = {ell}, between 1 and {len(self.members)}")
        pred = self.predict(inputs)
        # Stable sort on the negated prediction: equal predictions keep the greedy order.
        order = np.argsort(-pred, axis=1, kind="stable")[:, :ell]
        return [[self.members[j] for j in row] for row in order.tolist()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": "ridge",
            "members": list(self.members),
            "alpha": self.alpha,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(),
            "feature_schema": self.feature_schema,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], expect_schema: dict[str, Any] | None = None):
        import numpy as np

        if d.get("format") != FORMAT or d.get("kind") != "ridge":
            raise ConfigError(
                f"portfolio router format {d.get('format')!r}/{d.get('kind')!r}: this Fathom "
                f"reads format {FORMAT} ridge routers — rebuild the portfolio"
            )
        if expect_schema is not None and d["feature_schema"] != expect_schema:
            raise ConfigError(
                f"portfolio router was trained on inputs {d['feature_schema']}, this run makes "
                f"{expect_schema} (another embedder or feature schema) — rebuild the portfolio"
            )
        return cls(
            members=tuple(d["members"]),
            mean=np.asarray(d["mean"], dtype=np.float64),
            scale=np.asarray(d["scale"], dtype=np.float64),
            coef=np.asarray(d["coef"], dtype=np.float64),
            intercept=np.asarray(d["intercept"], dtype=np.float64),
            alpha=float(d["alpha"]),
            feature_schema=dict(d["feature_schema"]),
        )


def router_inputs(qvecs: np.ndarray, features: np.ndarray) -> np.ndarray:
    """The router's input rows: the query embedding beside the probe features."""
    import numpy as np

    return np.hstack([np.atleast_2d(qvecs), np.atleast_2d(features)]).astype(np.float64)


def input_schema(embedder_id: str, dim: int) -> dict[str, Any]:
    """What the inputs are, so a router is never applied to inputs of another kind."""
    from fathom.router.features import FEATURE_NAMES, SCHEMA_VERSION

    return {
        "embedder": embedder_id,
        "dim": dim,
        "probe_features": SCHEMA_VERSION,
        "n_probe_features": len(FEATURE_NAMES),
    }


def probe_settings(cfg: Config) -> dict[str, Any]:
    """The settings that shape the probe the router reads, keyed by configuration key: the
    retriever's and the reranker's depth. Only what changes the probe is listed (``rrf_k`` does
    not matter to convex fusion, nor the fusion to a dense-only retriever)."""
    r = cfg.retrieval
    out: dict[str, Any] = {"retrieval.mode": r.mode}
    if r.mode == "hybrid":
        out["retrieval.fusion"] = r.fusion
        out["retrieval.candidates"] = r.candidates
        if r.fusion == "convex":
            out["retrieval.dense_weight"] = r.dense_weight
        else:
            out["retrieval.rrf_k"] = r.rrf_k
    out["rerank.candidates"] = cfg.rerank.candidates
    return out


def probe_depth(settings: dict[str, Any], question: str, qtype: str | None) -> int:
    """How many hits ``Engine.prepare`` probes for ``question`` of type ``qtype`` with no
    ``--k`` (``router.strategy.probe_depth``)."""
    from fathom.router.strategy import probe_depth as depth_rule
    from fathom.router.strategy import strategy_for

    k_max = strategy_for(qtype, question).k_max if qtype else 0
    return depth_rule(k_max, int(settings["rerank.candidates"]))


def check_probe(info: dict[str, Any], cfg: Config, name: str = "") -> dict[str, Any]:
    """The portfolio's probe settings, checked against this run's: ``ConfigError`` naming each
    setting that differs (its router would read features that mean something else)."""
    trained = dict(info.get("probe") or LEGACY_PROBE)
    now = probe_settings(cfg)
    keys = [k for k in sorted(set(trained) | set(now)) if trained.get(k) != now.get(k)]
    if keys:
        diff = "; ".join(f"{k} = {trained.get(k)!r} at build, {now.get(k)!r} now" for k in keys)
        back = ", ".join(f"{k} = {trained[k]!r}" for k in keys if k in trained)
        label = f"portfolio {name}" if name else "the portfolio"
        raise ConfigError(
            f"{label}: its router was trained on the features of another probe ({diff}) — "
            "they would not mean the same; rebuild it with this configuration "
            f"(`fathom portfolio build … --out {name or 'NAME'}`) or set {back}"
        )
    return trained
