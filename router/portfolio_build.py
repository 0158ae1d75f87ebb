"""Build a portfolio from training questions, and evaluate one on held-out questions.

``build_portfolio`` runs every pool member on the training questions (one shared dense and BM25
search per question), scores them, picks ``size`` members greedily by best-of coverage
(``router.portfolio``) and trains the router that chooses among them per question
(``router.portfolio_router``). ``evaluate_portfolio`` measures, on other questions:

* best-of coverage (the score of the best member per question, which only an oracle could pick)
  for the greedy portfolio, the best single member, the top K by average and the whole pool;
* what runs without an oracle: the router's top ``ell`` members fused by reciprocal rank fusion,
  against a random ``ell`` members (the exact expectation over every ``ell``-subset), for every
  ``ell`` from 1 to the portfolio size;

each with a percentile-bootstrap interval, and paired intervals on the differences that matter.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.stages.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from fathom.evaluation.data import Question
    from fathom.index.collection import Collection
    from fathom.router.portfolio_pool import Member, MemberRuns
    from fathom.stages.base import Embedder


def _runs_cached(
    cache: Path | None,
    key: str,
    collection: Collection,
    embedder: Embedder,
    questions: list[Question],
    pool: tuple[Member, ...],
    n: int,
    by: str,
    classifier: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Member scores ``(N, pool)``, router inputs ``(N, d)`` and the query embedding's
    dimension, from ``cache`` (an ``.npz``) when its key matches, else computed and saved."""
    import numpy as np

    from fathom.router.portfolio_pool import member_runs, run_scores
    from fathom.router.portfolio_router import router_inputs

    if cache is not None and cache.is_file():
        with np.load(cache, allow_pickle=False) as data:
            if "inputs" in data and str(data["key"]) == key:
                return data["scores"], data["inputs"], data["qvec_dim"]
    runs = member_runs(collection, embedder, questions, pool, n, classifier=classifier)
    scores = run_scores(collection, questions, runs, by)
    inputs = router_inputs(runs.qvecs, runs.features).astype(np.float32)
    dim = np.array(runs.qvecs.shape[1])
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            cache, scores=scores, inputs=inputs, qvec_dim=dim, by=np.array(by), key=np.array(key)
        )
    return scores, inputs, dim


def build_portfolio(
    collection: Collection,
    embedder: Embedder,
    embedder_id: str,
    classifier: Any,
    questions: list[Question],
    *,
    size: int,
    n: int,
    by: str | None,
    cache: Path | None = None,
    describe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The portfolio file's contents: members in greedy order with their gains, the baselines
    and the router (see the module docstring)."""
    import numpy as np

    from fathom.router.portfolio import coverage, greedy_portfolio, top_k_by_average
    from fathom.router.portfolio_pool import pool_for, resolve_score
    from fathom.router.portfolio_router import input_schema, probe_settings, train_router

    by = resolve_score(questions, by)
    pool = pool_for(collection)
    probe = probe_settings(collection.cfg)  # what the router's features are computed from
    questions_ids = [q.qid for q in questions]
    key = json.dumps(
        [collection.name, n, by, [m.name for m in pool], questions_ids, embedder_id, probe]
    )
    scores, inputs, dim = _runs_cached(
        cache, key, collection, embedder, questions, pool, n, by, classifier
    )
    size = min(size, len(pool))
    greedy = greedy_portfolio(scores, size)
    by_avg = top_k_by_average(scores, size)
    single = int(np.argmax(scores.mean(axis=0)))
    members = [pool[j].name for j in greedy.members]
    router = train_router(
        inputs, scores[:, list(greedy.members)], members, input_schema(embedder_id, int(dim))
    )
    return {
        "kind": "portfolio",
        **(describe or {}),
        "collection": collection.name,
        "n_questions": len(questions),
        "score": by,
        "top_n": n,
        "probe": probe,
        "pool": [
            {
                "name": m.name,
                "kind": m.kind,
                "params": m.params,
                "mean_score": float(scores[:, j].mean()),
            }
            for j, m in enumerate(pool)
        ],
        "members": members,
        "gains": list(greedy.gains),
        "coverage": list(greedy.coverage),
        "baselines": {
            "best_single": {
                "member": pool[single].name,
                "coverage": float(scores[:, single].mean()),
            },
            "top_k_by_average": {
                "members": [pool[j].name for j in by_avg.members],
                "coverage": by_avg.value,
            },
            "all_members": {"coverage": coverage(scores, list(range(len(pool))))},
        },
        "router": router.to_dict(),
    }


def load_portfolio(path: Path) -> dict[str, Any]:
    """A portfolio file written by ``fathom portfolio build``."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the portfolio ({exc})") from exc
    if not isinstance(info, dict) or info.get("kind") != "portfolio":
        raise ConfigError(f"{path}: not a portfolio (fathom portfolio build writes one)")
    return info


def pool_members(collection: Collection, names: list[str]) -> tuple[Member, ...]:
    """Pool members by name, in the given order (views must exist and be up to date)."""
    from fathom.router.portfolio_pool import pool_for

    pool = {m.name: m for m in pool_for(collection)}
    unknown = [n for n in names if n not in pool]
    if unknown:
        raise ConfigError(
            f"portfolio names pool members {unknown} that collection {collection.name!r} does "
            "not have (a view that is missing or stale: `fathom collections views`)"
        )
    return tuple(pool[n] for n in names)


def evaluate_portfolio(
    info: dict[str, Any],
    collection: Collection,
    embedder: Embedder,
    embedder_id: str,
    classifier: Any,
    questions: list[Question],
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Coverage rows and paired differences on ``questions`` (see the module docstring)."""
    import numpy as np

    from fathom.evaluation.metrics import bootstrap_ci
    from fathom.router.portfolio_pool import fuse_rows, member_runs, run_scores, score_rows
    from fathom.router.portfolio_router import PortfolioRouter, check_probe, input_schema, router_inputs

    by, n = info["score"], int(info["top_n"])
    pool = pool_members(collection, [m["name"] for m in info["pool"]])
    router_info = info.get("router")
    if router_info:
        check_probe(info, collection.cfg)  # the router reads this run's probe features
    rrf_k = collection.cfg.retrieval.rrf_k  # as ask fuses the chosen members' results
    runs: MemberRuns = member_runs(collection, embedder, questions, pool, n, classifier=classifier)
    col = {m.name: j for j, m in enumerate(pool)}
    scores = run_scores(collection, questions, runs, by)

    def best_of(names: list[str]) -> np.ndarray:
        return scores[:, [col[x] for x in names]].max(axis=1)

    def fused(names_per_q: list[list[str]]) -> np.ndarray:
        lists = [
            fuse_rows([r[m] for m in names], n, rrf_k)
            for r, names in zip(runs.rows, names_per_q, strict=True)
        ]
        return score_rows(collection, questions, lists, by)

    b = info["baselines"]
    members: list[str] = list(info["members"])
    single_name = f"best single ({b['best_single']['member']})"
    rows: dict[str, np.ndarray] = {
        "portfolio, best member per question (oracle)": best_of(members),
        single_name: best_of([b["best_single"]["member"]]),
        "top K by average, best member (oracle)": best_of(b["top_k_by_average"]["members"]),
        "whole pool, best member (oracle)": best_of([m.name for m in pool]),
    }
    diffs: dict[str, np.ndarray] = {
        "portfolio (oracle) − best single": rows["portfolio, best member per question (oracle)"]
        - rows[single_name]
    }
    if router_info:
        router = PortfolioRouter.from_dict(
            router_info, expect_schema=input_schema(embedder_id, runs.qvecs.shape[1])
        )
        chosen = router.choose(router_inputs(runs.qvecs, runs.features), len(members))
        for ell in range(1, len(members) + 1):
            routed = fused([c[:ell] for c in chosen])
            subsets = {
                s: fused([list(s)] * len(questions)) for s in itertools.combinations(members, ell)
            }
            rand = np.mean(np.stack(list(subsets.values())), axis=0)
            if ell == len(members):
                rows[f"all {ell} members fused"] = routed
                top_k = list(b["top_k_by_average"]["members"])
                rows[f"top {len(top_k)} by average, fused"] = fused([top_k] * len(questions))
                diffs[f"all {ell} fused − best single"] = routed - rows[single_name]
                continue
            rows[f"router, top {ell} fused"] = routed
            rows[f"random {ell} fused (expected)"] = rand
            diffs[f"router − random at ℓ = {ell}"] = routed - rand
            if ell == 1:
                diffs["router ℓ = 1 − best single"] = routed - rows[single_name]
    return {
        "n_questions": len(questions),
        "score": by,
        "top_n": n,
        "members": members,
        "coverage": {k: bootstrap_ci(v.tolist(), n_boot) for k, v in rows.items()},
        "differences": {k: bootstrap_ci(v.tolist(), n_boot) for k, v in diffs.items()},
    }
