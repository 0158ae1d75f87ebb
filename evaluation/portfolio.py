"""Evaluate a portfolio on held-out questions (``fathom portfolio eval``). It measures:

* best-of coverage (the score of the best member per question, which only an oracle could pick)
  for the greedy portfolio, the best single member, the top K by average and the whole pool;
* what runs without an oracle: the router's top ``ell`` members fused by reciprocal rank fusion,
  against a random ``ell`` members (the exact expectation over every ``ell``-subset), for every
  ``ell`` from 1 to the portfolio size;

each with a percentile-bootstrap interval, and paired intervals on the differences that matter;
every interval also over documents (``coverage_documents``, ``differences_documents``: documents
resampled with their questions kept together, the interval a claim rests on).
``evaluate_portfolio_file`` is the whole command: the portfolio file, the held-out questions,
the collection.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci
from fathom.router.portfolio.pool import pool_members

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder
    from fathom.index.collection import Collection
    from fathom.learn.portfolio_runs import MemberRuns
    from fathom.learn.questions import Question
    from fathom.router.portfolio.pool import Member


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
    from fathom.learn.portfolio_runs import member_runs, run_scores
    from fathom.router.portfolio.router import check_probe

    by, n = info["score"], int(info["top_n"])
    pool = pool_members(collection, [m["name"] for m in info["pool"]])
    router_info = info.get("router")
    if router_info:
        check_probe(info, collection.cfg)  # the router reads this run's probe features
    runs: MemberRuns = member_runs(collection, embedder, questions, pool, n, classifier=classifier)
    scores = run_scores(collection, questions, runs, by)
    members: list[str] = list(info["members"])
    rows, diffs = _oracle_rows(info["baselines"], members, pool, scores)
    if router_info:
        routed_rows, routed_diffs = _router_rows(
            router_info,
            embedder_id,
            info["baselines"],
            members,
            runs,
            _fuser(collection, questions, runs, n, by),
            rows[_single_name(info["baselines"])],
        )
        rows.update(routed_rows)
        diffs.update(routed_diffs)
    docs = [q.doc_ids[0] if q.doc_ids else q.qid for q in questions]

    def by_document(values: dict[str, np.ndarray]) -> dict[str, Any]:
        return {k: cluster_bootstrap_ci(v.tolist(), docs, n_boot) for k, v in values.items()}

    return {
        "n_questions": len(questions),
        "score": by,
        "top_n": n,
        "members": members,
        "coverage": {k: bootstrap_ci(v.tolist(), n_boot) for k, v in rows.items()},
        "differences": {k: bootstrap_ci(v.tolist(), n_boot) for k, v in diffs.items()},
        "documents": len(set(docs)),
        "coverage_documents": by_document(rows),
        "differences_documents": by_document(diffs),
    }


def _single_name(baselines: dict[str, Any]) -> str:
    return f"best single ({baselines['best_single']['member']})"


def _oracle_rows(
    baselines: dict[str, Any], members: list[str], pool: Sequence[Member], scores: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Best-of coverage per question (only an oracle could pick the member) for the portfolio,
    the best single member, the top K by average and the whole pool; and the portfolio's gain
    over the best single member."""
    col = {m.name: j for j, m in enumerate(pool)}

    def best_of(names: list[str]) -> np.ndarray:
        return scores[:, [col[x] for x in names]].max(axis=1)

    single_name = _single_name(baselines)
    rows: dict[str, np.ndarray] = {
        "portfolio, best member per question (oracle)": best_of(members),
        single_name: best_of([baselines["best_single"]["member"]]),
        "top K by average, best member (oracle)": best_of(baselines["top_k_by_average"]["members"]),
        "whole pool, best member (oracle)": best_of([m.name for m in pool]),
    }
    diffs: dict[str, np.ndarray] = {
        "portfolio (oracle) − best single": rows["portfolio, best member per question (oracle)"]
        - rows[single_name]
    }
    return rows, diffs


Fused = Callable[[list[list[str]]], "np.ndarray"]


def _fuser(
    collection: Collection, questions: list[Question], runs: MemberRuns, n: int, by: str
) -> Fused:
    """The score of each question's named members, their results fused by reciprocal rank
    fusion to the top ``n``."""
    from fathom.learn.portfolio_runs import fuse_rows, score_rows

    rrf_k = collection.cfg.retrieval.rrf_k  # as ask fuses the chosen members' results

    def fused(names_per_q: list[list[str]]) -> np.ndarray:
        lists = [
            fuse_rows([r[m] for m in names], n, rrf_k)
            for r, names in zip(runs.rows, names_per_q, strict=True)
        ]
        return score_rows(collection, questions, lists, by)

    return fused


def _router_rows(
    router_info: dict[str, Any],
    embedder_id: str,
    baselines: dict[str, Any],
    members: list[str],
    runs: MemberRuns,
    fused: Fused,
    single: np.ndarray,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """What runs without an oracle: for every ``ell`` below the portfolio's size the router's
    top ``ell`` members fused against a random ``ell`` (the exact expectation over every
    ``ell``-subset); at its size all members fused and the top K by average fused, against
    the best single member (``single``, its scores)."""
    import numpy as np
    from fathom.router.portfolio.router import PortfolioRouter, input_schema, router_inputs

    router = PortfolioRouter.from_dict(
        router_info, expect_schema=input_schema(embedder_id, runs.qvecs.shape[1])
    )
    chosen = router.choose(router_inputs(runs.qvecs, runs.features), len(members))
    n_questions = len(runs.rows)
    rows: dict[str, np.ndarray] = {}
    diffs: dict[str, np.ndarray] = {}
    for ell in range(1, len(members)):
        routed = fused([c[:ell] for c in chosen])
        subsets = [fused([list(s)] * n_questions) for s in itertools.combinations(members, ell)]
        rand = np.mean(np.stack(subsets), axis=0)
        rows[f"router, top {ell} fused"] = routed
        rows[f"random {ell} fused (expected)"] = rand
        diffs[f"router − random at ℓ = {ell}"] = routed - rand
        if ell == 1:
            diffs["router ℓ = 1 − best single"] = routed - single
    if members:
        ell = len(members)
        routed = fused([c[:ell] for c in chosen])
        rows[f"all {ell} members fused"] = routed
        top_k = list(baselines["top_k_by_average"]["members"])
        rows[f"top {len(top_k)} by average, fused"] = fused([top_k] * n_questions)
        diffs[f"all {ell} fused − best single"] = routed - single
    return rows, diffs


def evaluate_portfolio_file(
    cfg: Any,
    path: str,
    *,
    docs: str | None,
    questions: str,
    split: str,
    bootstrap: int,
) -> dict[str, Any]:
    """``fathom portfolio eval``: the portfolio ``path`` (a file or a name under
    ``$FATHOM_HOME/portfolios``) on the answerable questions of the ``split`` half of the
    documents (by the split seed it was built with; ``all``: every one), over ``docs`` or the
    collection it was built on; ``evaluate_portfolio``'s result with what it measured."""
    from fathom.core.errors import ConfigError
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import load_questions, split_by_document
    from fathom.router.classify import QueryClassifier
    from fathom.router.portfolio.file import load_portfolio, resolve_portfolio

    resolved = resolve_portfolio(cfg, path)
    info = load_portfolio(resolved)
    name = resolve_target(cfg, docs) if docs else info["collection"]
    asked = load_questions(questions)
    if split != "all":
        asked = split_by_document(asked, split, info.get("split_seed", 0))
    asked = [q for q in asked if q.doc_ids or q.answers]
    if not asked:
        raise ConfigError("no answerable questions to evaluate")
    embedder_id = embedder_id_for(cfg.embedder)
    coll = Collection.open(cfg, name, expect_embedder=embedder_id)
    result = evaluate_portfolio(
        info,
        coll,
        query_embedder_for(cfg, coll),
        embedder_id,
        QueryClassifier.from_config(cfg),
        asked,
        bootstrap,
    )
    return {"portfolio": str(resolved), "questions": str(questions), "split": split, **result}
