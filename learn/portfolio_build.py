"""Build a portfolio from training questions (``fathom portfolio build``).

``build_portfolio`` runs every pool member on the training questions (one shared dense and BM25
search per question, ``learn.portfolio_runs``), scores them, picks ``size`` members greedily by
best-of coverage (``learn.portfolio_select``) and trains the router that chooses among them per
question (``train_router``: the ridge regressions ``router.portfolio.router.PortfolioRouter``
evaluates at ask time). ``build_portfolio_file`` is the whole command: the collection, the
training questions, the portfolio written to its file. ``fathom.evaluation.portfolio`` measures
one on held-out questions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder
    from fathom.index.collection import Collection
    from fathom.learn.questions import Question
    from fathom.router.portfolio.pool import Member
    from fathom.router.portfolio.router import PortfolioRouter

ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


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
    from fathom.learn.portfolio_runs import member_runs, run_scores
    from fathom.router.portfolio.router import router_inputs

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
    from fathom.learn.portfolio_runs import resolve_score
    from fathom.learn.portfolio_select import greedy_portfolio
    from fathom.router.portfolio.pool import pool_for
    from fathom.router.portfolio.router import input_schema, probe_settings

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
        "baselines": _baselines(scores, pool, size),
        "router": router.to_dict(),
    }


def _baselines(scores: np.ndarray, pool: tuple[Member, ...], size: int) -> dict[str, Any]:
    """What the greedy portfolio is compared with: the best single member, the ``size`` best
    members by average score, and every member together."""
    import numpy as np
    from fathom.learn.portfolio_select import coverage, top_k_by_average

    by_avg = top_k_by_average(scores, size)
    single = int(np.argmax(scores.mean(axis=0)))
    return {
        "best_single": {
            "member": pool[single].name,
            "coverage": float(scores[:, single].mean()),
        },
        "top_k_by_average": {
            "members": [pool[j].name for j in by_avg.members],
            "coverage": by_avg.value,
        },
        "all_members": {"coverage": coverage(scores, list(range(len(pool))))},
    }


def portfolio_path(cfg: Any, spec: str | Path) -> Path:
    """Where ``portfolio build --out SPEC`` writes: a bare name is
    ``$FATHOM_HOME/portfolios/NAME.json``, anything else a path (``.json`` added)."""
    spec = str(spec)
    bare = "/" not in spec and not spec.endswith(".json")
    return (cfg.home_path() / "portfolios" / spec if bare else Path(spec)).with_suffix(".json")


def build_portfolio_file(
    cfg: Any,
    target: str | None,
    questions_path: str | Path,
    *,
    size: int,
    top_n: int,
    by: str | None,
    split: str,
    split_seed: int,
    limit: int | None,
    out: str | Path,
) -> tuple[dict[str, Any], Path, int]:
    """``fathom portfolio build``: resolve ``target`` (documents or a collection), score the
    answerable questions on the ``split`` half of its documents (``all``: every one), build the
    portfolio and write it to ``out`` (``portfolio_path``), its scores cached beside it.
    Returns the portfolio, its file and how many questions it was built on."""
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import load_questions, split_by_document
    from fathom.learn.train_policy import portable
    from fathom.router.classify import QueryClassifier

    if not target:
        raise ConfigError("give --docs PATH or --collection NAME")
    name = resolve_target(cfg, target)
    questions = load_questions(questions_path)
    if split != "all":
        questions = split_by_document(questions, split, split_seed)
    questions = [q for q in questions if q.doc_ids or q.answers][:limit]
    if not questions:
        raise ConfigError("no answerable questions to score")
    path = portfolio_path(cfg, out)
    embedder_id = embedder_id_for(cfg.embedder)
    coll = Collection.open(cfg, name, expect_embedder=embedder_id)
    info = build_portfolio(
        coll,
        query_embedder_for(cfg, coll),
        embedder_id,
        QueryClassifier.from_config(cfg),
        questions,
        size=size,
        n=top_n,
        by=by,
        cache=path.with_suffix(".scores.npz"),
        describe={
            "questions": portable(str(questions_path)),  # $FATHOM_DATA/… when under it
            "split": split,
            "split_seed": split_seed,
        },
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return info, path, len(questions)


def train_router(
    inputs: np.ndarray,
    scores: np.ndarray,
    members: list[str] | tuple[str, ...],
    schema: dict[str, Any],
) -> PortfolioRouter:
    """Fit the router on training questions: ``inputs`` ``(N, d)`` and the members' scores
    ``(N, members)`` (columns in ``members`` order, which is also the tie order)."""
    import numpy as np
    from fathom.router.portfolio.router import PortfolioRouter
    from sklearn.linear_model import RidgeCV

    x = np.asarray(inputs, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0] or y.shape[1] != len(members):
        raise ConfigError(
            f"portfolio router: inputs {x.shape} and scores {y.shape} for {len(members)} members"
        )
    if x.shape[0] < 2:
        raise ConfigError("portfolio router: need at least 2 training questions")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-12] = 1.0  # constant inputs stay 0 after centring
    model = RidgeCV(alphas=ALPHAS).fit((x - mean) / scale, y)
    return PortfolioRouter(
        members=tuple(members),
        mean=mean,
        scale=scale,
        coef=np.asarray(model.coef_, dtype=np.float64).T.reshape(x.shape[1], len(members)),
        intercept=np.asarray(model.intercept_, dtype=np.float64).reshape(len(members)),
        alpha=float(model.alpha_),
        feature_schema=dict(schema),
    )
