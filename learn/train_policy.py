"""``fathom policy train``: a depth policy from the oracle labels of budget sweeps
(``learn.sweep``): a random forest imitating them, a REINFORCE policy network, or utility
bundles.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fathom.core.errors import FathomError
from fathom.learn.reinforce import train_reinforce
from fathom.learn.sweep import combine_sweeps, load_sweep
from fathom.learn.utility import fit_utility
from fathom.router.sweep import Sweep


def portable(paths: Any) -> Any:
    """Training-data paths as a policy file records them: under ``FATHOM_DATA`` as
    ``$FATHOM_DATA/…``, so a shipped policy names no folder of the machine it was trained on;
    other paths as given (a path or a list of them)."""
    if isinstance(paths, list):
        return [portable(p) for p in paths]
    root = os.environ.get("FATHOM_DATA")
    if not isinstance(paths, str) or not root:
        return paths
    try:
        rel = Path(paths).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return paths
    return f"$FATHOM_DATA/{rel.as_posix()}"


def train_forest(
    sweep: Sweep,
    epsilon: float = 0.0,
    slo_ms: float | None = None,
    n_trees: int = 100,
    max_depth: int = 10,
    seed: int = 0,
    confidence: float = 0.9,
    embedder: str = "",
    cost: float | None = None,
    strict_slo: bool = False,
    most_likely: bool = False,
    balance_sets: bool = False,
    reading: bool = True,
    multi_hop_price: dict[str, float] | None = None,
) -> Any:
    """A ``ForestPolicy`` imitating the sweep's oracle labels, deciding by ``cost`` λ when
    given (else by ``confidence``), pricing each question's depth with its own probed chunks
    (``router.cost.ContextTokens`` fitted on the sweep; the sweep's mean context tokens per
    budget when it logged no probe tokens).
    ``balance_sets``: every document set of a combined sweep weighs the same in training,
    however many questions it has (else each question weighs the same).
    ``reading``: on the reader's features too, where the sweep logged them (the policy then
    reads the passages before deciding); their training medians stand in at ``ask`` when the
    reader cannot run.
    ``multi_hop_price``: preference → the share of the token price a question the router types
    multi-hop pays there (``ForestPolicy.multi_hop_price``; the decision rule only, the trees
    are the same)."""
    import numpy as np
    from fathom.learn.forest import fit_forest
    from fathom.router.features import FEATURE_NAMES, READING_NAMES

    labels = sweep_labels(sweep, epsilon, slo_ms, strict_slo)
    meta = _forest_meta(sweep, labels, embedder, epsilon, slo_ms, strict_slo)
    names = FEATURE_NAMES
    if reading and sweep.reading is not None:
        names = FEATURE_NAMES + READING_NAMES
        meta["reading_medians"] = [float(v) for v in np.median(sweep.reading, axis=0)]
    weight = set_weights(sweep) if balance_sets else None
    if weight is not None:
        meta["balance_sets"] = True
    if multi_hop_price:
        meta["multi_hop_price"] = checked_shares(multi_hop_price)
    context_tokens = _context_tokens(sweep, meta)
    return fit_forest(
        sweep.inputs(names),
        labels,
        sweep.budgets,
        names,
        n_trees=n_trees,
        max_depth=max_depth,
        seed=seed,
        confidence=confidence,
        meta=meta,
        cost=cost,
        budget_tokens=tuple(float(t) for t in sweep.tokens.mean(axis=0)),
        most_likely=most_likely,
        sample_weight=weight,
        context_tokens=context_tokens,
    )


def parse_shares(values: Iterable[str]) -> dict[str, float] | None:
    """``PREFER=SHARE`` options (``--multi-hop-price``) as the mapping ``train_forest`` takes
    (None when none was given), checked as ``checked_shares`` checks them."""
    out: dict[str, float] = {}
    for value in values:
        prefer, _, share = value.partition("=")
        try:
            out[prefer.strip()] = float(share)
        except ValueError:
            raise FathomError(f"{value!r}: PREFER=SHARE, e.g. quality=0.5") from None
    return checked_shares(out) if out else None


def checked_shares(shares: dict[str, float]) -> dict[str, float]:
    """``multi_hop_price`` as a forest records it: each key a preference, each share above 0."""
    from fathom.router.cost import PREFERENCES

    for prefer, share in shares.items():
        if prefer not in PREFERENCES:
            raise FathomError(f"multi-hop price at {prefer!r}: use one of {PREFERENCES}")
        if not share > 0:
            raise FathomError(f"multi-hop price at {prefer}: {share} (a share above 0)")
    return {k: float(v) for k, v in shares.items()}


def _forest_meta(
    sweep: Sweep,
    labels: Any,
    embedder: str,
    epsilon: float,
    slo_ms: float | None,
    strict_slo: bool,
) -> dict[str, Any]:
    """What a forest records about its training: the retrieval and pipeline the labels were
    measured with, the labelling rule, the training data and the oracle's quality and tokens."""
    import numpy as np
    from fathom import __version__

    reachable = sweep.quality.max(axis=1) > 0
    config = sweep.run.get("config") or {}
    return {
        "embedder": embedder,
        "fathom_version": __version__,
        "judge": sweep.run.get("judge"),
        # The fused and BM25 features mean what this retrieval made them mean.
        "retrieval": {
            k: config.get("retrieval", {}).get(k)
            for k in ("mode", "fusion", "dense_weight", "candidates")
        },
        # What the labels were measured with: the reranker reorders what the first k hold,
        # and a context budget below k's tokens condenses them.
        "pipeline": {
            "rerank": (config.get("rerank") or {}).get("enabled"),
            "budget_tokens": (config.get("compress") or {}).get("budget_tokens"),
        },
        "epsilon": epsilon,
        "slo_ms": slo_ms,
        "strict_slo": strict_slo,
        "training_data": {
            "questions": portable(sweep.run.get("questions")),
            "docs": portable(sweep.run.get("docs")),
            "doc_split": sweep.run.get("doc_split"),
            "split_seed": sweep.run.get("split_seed"),
            "n_questions": len(labels),
            "n_none_suffices": int((~reachable).sum()),
            "generator": sweep.run.get("generator"),
        },
        "oracle": {
            "mean_quality": float(sweep.quality.max(axis=1).mean()),
            "mean_tokens": float(
                sweep.tokens[np.arange(len(labels)), np.where(reachable, labels, 0)].mean()
            ),
            "deepest_tokens": float(sweep.tokens[:, -1].mean()),
        },
    }


def _context_tokens(sweep: Sweep, meta: dict[str, Any]) -> Any:
    """The ``router.cost.ContextTokens`` fitted on the sweep's probed chunks, so each question
    is priced with its own chunks (its fit's error recorded in ``meta``); None when the sweep
    logged no probe tokens."""
    import numpy as np
    from fathom.router.cost import ContextTokens

    probed = sweep.probe_sums()
    if probed is None:
        return None
    context_tokens = ContextTokens.fit(*probed, sweep.tokens)
    fitted = context_tokens.estimate(*probed)
    meta["context_tokens_fit"] = {
        "mean_abs_error": round(float(np.abs(fitted - sweep.tokens)[:, 1:].mean()), 1),
        "mean_tokens": round(float(sweep.tokens[:, 1:].mean()), 1),
    }
    return context_tokens


def sweep_labels(
    sweep: Sweep, epsilon: float = 0.0, slo_ms: float | None = None, strict_slo: bool = False
) -> Any:
    """Each question's oracle label ``(n,)``: the index of its smallest sufficient budget
    (``router.forest.oracle_labels``), or ``len(budgets)`` where no budget answers it.

    That extra class, "none suffices", is what the forest learns for such questions: as label 0
    ("skip") it would teach the policy to skip retrieval for questions that merely look like
    them, and dropped it would hide that such questions exist."""
    import numpy as np
    from fathom.router.forest import oracle_labels

    reachable = sweep.quality.max(axis=1) > 0
    labels = np.full(len(sweep.qids), len(sweep.budgets), dtype=np.int64)
    labels[reachable] = oracle_labels(
        sweep.quality[reachable], sweep.latency[reachable], epsilon, slo_ms, strict_slo
    )
    return labels


def set_weights(sweep: Sweep) -> Any:
    """Per-question weights ``(n,)`` under which each document set of ``sweep`` weighs the
    same (mean 1); None for a sweep of one set."""
    import numpy as np

    sets = np.asarray(sweep.sets or [""] * len(sweep.qids))
    names, counts = np.unique(sets, return_counts=True)
    if len(names) < 2:
        return None
    per = {n: len(sets) / (len(names) * c) for n, c in zip(names, counts, strict=True)}
    return np.asarray([per[x] for x in sets], dtype=np.float64)


def sweep_query_vectors(cfg: Any, sweep: Sweep) -> Any:
    """The query embeddings of a sweep's questions ``(n, dim)``, with the query-path embedder
    the collections use (the reinforce policy reads them)."""
    from fathom.index.embed import make_query_embedder

    questions = sweep.questions
    if questions is None:
        raise FathomError("this sweep has no question texts; re-load it with load_sweep")
    embedder = make_query_embedder(cfg.embedder, cfg.models_path())
    return embedder.embed(questions)


def train_policy(
    cfg: Any,
    kind: str,
    sweep_dirs: Iterable[str | Path],
    *,
    out: str | Path,
    quality: str = "quality",
    lam: float | None = None,
    epochs: int = 60,
    preset: str = "balanced",
    epsilon: float = 0.0,
    slo_ms: float | None = None,
    strict_slo: bool = False,
    most_likely: bool = False,
    balance_sets: bool = False,
    trees: int = 100,
    max_depth: int = 10,
    confidence: float = 0.9,
    seed: int = 0,
    reading: bool = True,
    multi_hop_price: dict[str, float] | None = None,
) -> tuple[Path, int]:
    """Train a ``kind`` (forest, reinforce or utility) depth policy on the sweeps in
    ``sweep_dirs`` combined; returns the saved file and the number of training questions."""
    from fathom.index.embed import embedder_id_for

    sweep = combine_sweeps([load_sweep(d, quality=quality) for d in sweep_dirs])
    if kind in ("reinforce", "utility"):
        policy = _train_other(cfg, kind, sweep, lam=lam, epochs=epochs, preset=preset, seed=seed)
        return policy.save(out), len(sweep.qids)
    model = train_forest(
        sweep,
        epsilon=epsilon,
        slo_ms=slo_ms,
        strict_slo=strict_slo,
        most_likely=most_likely,
        balance_sets=balance_sets,
        n_trees=trees,
        max_depth=max_depth,
        seed=seed,
        confidence=confidence,
        embedder=embedder_id_for(cfg.embedder),
        cost=lam,
        reading=reading,
        multi_hop_price=multi_hop_price,
    )
    return model.save(out), len(sweep.qids)


def _train_other(
    cfg: Any, kind: str, sweep: Sweep, *, lam: float | None, epochs: int, preset: str, seed: int
) -> Any:
    """A reinforce or utility policy trained on ``sweep``, with what it records about its
    training."""
    from fathom.index.embed import embedder_id_for

    meta = {
        "judge": sweep.run.get("judge"),
        "embedder": embedder_id_for(cfg.embedder),
        "training_data": {
            "questions": portable(sweep.run.get("questions")),
            "n_questions": len(sweep.qids),
        },
    }
    if kind == "reinforce":
        return train_reinforce(
            sweep,
            sweep_query_vectors(cfg, sweep),
            lam=0.1 if lam is None else lam,
            epochs=epochs,
            seed=seed,
            meta=meta,
        )

    return fit_utility(sweep, preset=preset, meta=meta)
