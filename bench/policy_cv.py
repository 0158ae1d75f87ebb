"""Depth forests in grouped cross-validation on the training sweeps, and what differs between a
set's training half and its held-out half.

**Cross-validation** (how a forest recipe is chosen without looking at the held-out halves):
the training sweeps, combined as ``fathom policy train`` combines them, are split into
``--folds`` folds by document: the questions of one document (their first gold document, within
their set) stay in one fold. For each fold, a forest trained on the other folds with
``--trees``, ``--max-depth``, ``--lambda`` and one of ``--seeds`` chooses each of the fold's
questions' budget at each preference, priced as ``ask`` prices it for the extractive answerer
(each question's own probed chunks). The out-of-fold choices are then scored per document set
as ``bench/policy_tradeoffs.py`` scores a held-out sweep: answer quality, context tokens, and
the saving against that set's fixed frontier at the policy's own quality. The table gives each
seed's saving and their mean.

**Shift** (``--test`` sweeps and ``--policy``): for each set with both a training sweep and a
held-out sweep, the two halves side by side. The fixed frontier (quality at each budget), the
share of questions no budget answers, the share first answered at k ≥ 8, and how the forest's
P(enough by k) fares on each half: its mean against the observed share (calibration) and its
ranking AUC (whether a higher P(enough by k) picks out the questions whose first k chunks hold
the answer). On the training half the probabilities are the first seed's out-of-fold ones (each
question scored by a forest that never saw its document); on the held-out half they are the
``--policy`` file's (the shipped forest, trained on every training question).

    python bench/policy_cv.py --train DIR [--train DIR …] [--test DIR … --policy FILE]
        [--folds 5] [--seeds 0,1,2,3,4] [--trees 100] [--max-depth 10] [--lambda 0.01]
        [--balance-sets] [--multi-hop-price PREFER=SHARE] [--quality answer_recall] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import default_out, log, machine_info, print_table, write_json
from fathom.bench.policy_tradeoffs import own_tokens, saving_and_status

DEEP = 8  # "first answered at k ≥ DEEP": the questions only a deep read answers


def set_name(source: str) -> str:
    """A document set's short name from its sweep's question file
    (``…/covidqa_200423/questions.jsonl`` → ``covidqa_200423``)."""
    path = Path(str(source))
    return path.parent.name if path.suffix else path.name


def document_folds(sweep: Any, n_folds: int, seed: int = 0) -> np.ndarray:
    """Fold index per question: every question of one document (its set and first gold
    document) in the same fold; documents dealt to folds in a seeded random order."""
    sets = sweep.sets or [""] * len(sweep.qids)
    groups = sweep.groups or sweep.qids
    keys = [f"{s}\x00{g}" for s, g in zip(sets, groups, strict=True)]
    unique = sorted(set(keys))
    if len(unique) < n_folds:
        raise SystemExit(f"{len(unique)} documents: too few for {n_folds} folds")
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[i]: pos % n_folds for pos, i in enumerate(order)}
    return np.asarray([fold_of[k] for k in keys], dtype=np.int64)


def out_of_fold(
    sweep: Any,
    folds: np.ndarray,
    *,
    seed: int,
    trees: int,
    max_depth: int,
    lam: float,
    preferences: tuple[str, ...],
    balance_sets: bool = False,
    reading: bool = True,
    multi_hop_price: dict[str, float] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each question's forest probabilities and chosen budget index per preference, from the
    forest trained on the other folds."""
    from fathom.learn.train_policy import train_forest
    from fathom.router.cost import ReadingCost

    n = len(sweep.qids)
    proba = np.zeros((n, len(sweep.budgets) + 1), dtype=np.float64)
    choice = {p: np.zeros(n, dtype=np.int64) for p in preferences}
    for f in np.unique(folds):
        held = np.flatnonzero(folds == f)
        forest = train_forest(
            sweep.subset(np.flatnonzero(folds != f)),
            n_trees=trees,
            max_depth=max_depth,
            seed=seed,
            cost=lam,
            balance_sets=balance_sets,
            reading=reading,
            multi_hop_price=multi_hop_price,
        )
        part = sweep.subset(held)
        x = part.inputs(forest.feature_names)
        p = forest.predict_proba(x)
        proba[held] = p
        own = own_tokens(forest, part, f"fold {f}")
        for prefer in preferences:
            choice[prefer][held] = forest.choose(
                p, reading=ReadingCost(prefer), tokens=own, inputs=x
            )
    return proba, choice


def outcome(sweep: Any, choice: np.ndarray) -> dict[str, Any]:
    """Quality, context tokens, mean k and the saving against the sweep's own fixed frontier
    of the budget indices ``choice`` (no intervals: cross-validation compares recipes)."""
    rows = np.arange(len(choice))
    value, status = saving_and_status(sweep.quality, sweep.tokens, choice, rows)
    return {
        "quality": float(sweep.quality[rows, choice].mean()),
        "tokens": float(sweep.tokens[rows, choice].mean()),
        "mean_k": float(np.asarray(sweep.budgets)[choice].mean()),
        "saving": None if status else value,
        "saving_status": status,
    }


def enough_by(sweep: Any) -> np.ndarray:
    """``(n, n_budgets)`` bool: the first k chunks already reach the question's best quality
    (what the forest's P(enough by k) predicts); all False where no budget answers."""
    from fathom.learn.train_policy import sweep_labels

    return sweep_labels(sweep)[:, None] <= np.arange(len(sweep.budgets))[None, :]


def half_profile(sweep: Any, proba: np.ndarray, choice: np.ndarray) -> dict[str, Any]:
    """One half of a set: its frontier and depth needs, and how ``proba`` fares on it."""
    from sklearn.metrics import roc_auc_score

    enough = enough_by(sweep)
    cum = np.cumsum(proba[:, : len(sweep.budgets)], axis=1)
    reach = sweep.quality.max(axis=1) > 0
    first = np.where(reach, enough.argmax(axis=1), -1)
    deep = np.asarray(sweep.budgets)[np.maximum(first, 0)] >= DEEP
    by_k: dict[str, Any] = {}
    for j, k in enumerate(sweep.budgets):
        if k == 0:
            continue
        y = enough[:, j]
        by_k[str(k)] = {
            "quality": float(sweep.quality[:, j].mean()),
            "tokens": float(sweep.tokens[:, j].mean()),
            "enough": float(y.mean()),
            "predicted": float(cum[:, j].mean()),
            "auc": float(roc_auc_score(y, cum[:, j])) if 0 < y.sum() < len(y) else None,
        }
    return {
        "n": len(sweep.qids),
        "documents": len(set(sweep.groups or sweep.qids)),
        "none_suffices": float((~reach).mean()),
        "first_at_deep": float((reach & deep).mean()),
        "by_k": by_k,
        "policy": outcome(sweep, choice),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", action="append", required=True, help="training sweep folder")
    ap.add_argument("--test", action="append", default=[], help="held-out sweep (shift table)")
    ap.add_argument("--policy", type=Path, help="the forest scored on the --test sweeps")
    ap.add_argument("--quality", default="answer_recall", help="row metric (as in policy train)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", default="0,1,2,3,4", help="forest seeds, comma-separated")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--max-depth", type=int, default=10)
    ap.add_argument("--lambda", dest="lam", type=float, default=0.01, help="the forest's λ")
    ap.add_argument(
        "--balance-sets", action="store_true", help="each set weighs the same (as policy train)"
    )
    ap.add_argument(
        "--no-reading",
        dest="reading",
        action="store_false",
        help="the probe's features alone, where the sweeps logged the reader's too",
    )
    ap.add_argument(
        "--multi-hop-price",
        action="append",
        default=[],
        metavar="PREFER=SHARE",
        help="as policy train's: a multi-hop question's share of the token price there",
    )
    ap.add_argument("--out", type=Path, default=default_out("policy_cv"))
    args = ap.parse_args(argv)
    if args.test and args.policy is None:
        ap.error("--test needs --policy: the forest whose held-out probabilities to compare")

    from fathom.core.errors import FathomError
    from fathom.learn.sweep import combine_sweeps, load_sweep
    from fathom.learn.train_policy import parse_shares
    from fathom.router.cost import PREFERENCES, ReadingCost
    from fathom.router.registry import load_policy

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    try:
        shares = parse_shares(args.multi_hop_price)
    except FathomError as exc:
        ap.error(f"--multi-hop-price {exc}")
    train = combine_sweeps([load_sweep(d, quality=args.quality) for d in args.train])
    names = np.asarray([set_name(s) for s in (train.sets or [""] * len(train.qids))])
    folds = document_folds(train, args.folds)
    log(f"{len(train.qids)} training questions, {len(set(names))} sets, {args.folds} folds")

    # Each set's questions, in the order the sets were given.
    parts = {n: train.subset(np.flatnonzero(names == n)) for n in dict.fromkeys(names.tolist())}
    per_seed: dict[int, dict[str, Any]] = {}
    first_proba: np.ndarray | None = None
    for seed in seeds:
        log(f"seed {seed}")
        proba, choice = out_of_fold(
            train, folds, seed=seed, trees=args.trees, max_depth=args.max_depth,
            lam=args.lam, preferences=PREFERENCES, balance_sets=args.balance_sets,
            reading=args.reading, multi_hop_price=shares,
        )  # fmt: skip
        if first_proba is None:
            first_proba, first_choice = proba, choice
        per_seed[seed] = {
            name: {p: outcome(part, c[names == name]) for p, c in choice.items()}
            for name, part in parts.items()
        }

    results: dict[str, Any] = {
        "machine": machine_info(),
        "train": args.train,
        "quality": args.quality,
        "folds": args.folds,
        "seeds": seeds,
        "trees": args.trees,
        "max_depth": args.max_depth,
        "lambda": args.lam,
        "balance_sets": args.balance_sets,
        "multi_hop_price": shares or {},
        "reading": args.reading and train.reading is not None,
        "cv": {},
        "shift": {},
    }
    table = []
    for name, part in parts.items():
        fq = part.quality.mean(axis=0)
        kstar = int(np.argmax(fq))
        results["cv"][name] = {
            "n": len(part.qids),
            "kstar": f"fixed:{part.budgets[kstar]}",
            "kstar_quality": float(fq[kstar]),
            "preferences": {},
        }
        for prefer in PREFERENCES:
            runs = [per_seed[s][name][prefer] for s in seeds]
            savings = [r["saving"] for r in runs]
            defined = [s for s in savings if s is not None]
            mean = float(np.mean(defined)) if len(defined) == len(savings) else None
            results["cv"][name]["preferences"][prefer] = {"seeds": runs, "mean_saving": mean}
            table.append(
                [
                    name,
                    prefer,
                    *[_saving(r) for r in runs],
                    "—" if mean is None else f"{mean * 100:.1f} %",
                    f"{np.mean([r['quality'] for r in runs]):.3f}",
                    f"{fq[kstar]:.3f}",
                    f"{np.mean([r['tokens'] for r in runs]):.0f}",
                ]
            )
    print_table(
        f"grouped {args.folds}-fold cross-validation on the training sweeps "
        f"({args.trees} trees, depth {args.max_depth}, λ = {args.lam:g})",
        ["set", "prefer", *[f"seed {s}" for s in seeds], "mean", "quality", "k* quality",
         "context tok"],
        table,
    )  # fmt: skip

    if args.test:
        policy = load_policy(args.policy)
        if policy.name != "forest":
            ap.error(f"--policy {args.policy}: a forest, not a {policy.name} policy")
        assert first_proba is not None
        for test_dir in args.test:
            test = load_sweep(test_dir, quality=args.quality)
            name = set_name((test.sets or [test_dir])[0])
            if name not in results["cv"]:
                log(f"{test_dir}: no training sweep of {name}; no shift table")
                continue
            rows = np.flatnonzero(names == name)
            held_x = test.inputs(policy.feature_names)
            held_proba = policy.predict_proba(held_x).astype(np.float64)
            held_choice = policy.choose(
                held_proba,
                reading=ReadingCost("quality"),
                tokens=own_tokens(policy, test, name),
                inputs=held_x,
            )
            halves = {
                "training half, out of fold": half_profile(
                    parts[name], first_proba[rows], first_choice["quality"][rows]
                ),
                "held-out half, --policy": half_profile(test, held_proba, held_choice),
            }
            results["shift"][name] = {"policy": str(args.policy), **halves}
            _print_shift(name, halves)
    write_json(args.out / "policy_cv.json", results)
    log(f"results in {args.out}/")
    return 0


def _print_shift(name: str, halves: dict[str, dict[str, Any]]) -> None:
    a, b = halves.values()
    rows: list[list[str]] = [
        ["questions (documents)", f"{a['n']} ({a['documents']})", f"{b['n']} ({b['documents']})"],
        ["no budget answers", f"{a['none_suffices']:.1%}", f"{b['none_suffices']:.1%}"],
        [f"first answered at k ≥ {DEEP}", f"{a['first_at_deep']:.1%}", f"{b['first_at_deep']:.1%}"],
    ]  # fmt: skip
    for k in a["by_k"]:
        x, y = a["by_k"][k], b["by_k"][k]
        rows.append([f"k = {k}: quality at tokens", f"{x['quality']:.3f} at {x['tokens']:.0f}",
                     f"{y['quality']:.3f} at {y['tokens']:.0f}"])  # fmt: skip
        rows.append([f"k = {k}: P(enough) predicted / observed",
                     f"{x['predicted']:.3f} / {x['enough']:.3f}",
                     f"{y['predicted']:.3f} / {y['enough']:.3f}"])  # fmt: skip
        rows.append([f"k = {k}: ranking AUC", _auc(x["auc"]), _auc(y["auc"])])
    pa, pb = a["policy"], b["policy"]
    rows.append(
        [
            "prefer = quality: quality at tokens, saving",
            f"{pa['quality']:.3f} at {pa['tokens']:.0f}, {_saving(pa)}",
            f"{pb['quality']:.3f} at {pb['tokens']:.0f}, {_saving(pb)}",
        ]
    )
    print_table(f"{name}: training half against held-out half", ["", *halves], rows)


def _saving(r: dict[str, Any]) -> str:
    return r["saving_status"] if r["saving"] is None else f"{r['saving'] * 100:.1f} %"


def _auc(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
