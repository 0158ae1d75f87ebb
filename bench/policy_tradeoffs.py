"""Depth policies on held-out sweeps: token saving against the fixed frontier, a λ sweep, and
REINFORCE training dynamics.

A sweep (``fathom policy sweep``) logs, for every question, the judge's quality and the context
tokens at every budget, plus the probe features. A policy's outcome on a *test* sweep is then a
lookup — the budget it chooses for a question, and that budget's row — so every policy and every
λ is scored on exactly the same questions, without re-running retrieval or generation. (The
``fathom eval`` rows of the same policies agree with these lookups: same engine, same judge.)

The forest's rows: each λ of ``--lambdas``, then ``prefer=quality|balanced|fast`` — the
``--default-lambda`` forest as ``ask`` prices it for the extractive answerer (context tokens,
λ × 1 / 4 / 10; ``router/cost.py``) — then each confidence rule, then each ``--policy``
file as it is (the shipped forest, say), at each preference.

The cascade's rows (``cascade@T`` for each of ``--thresholds``): where the climb up
``router.cascade.LADDER`` ends for each question — the first rung whose answer confidence (the
sweep row's ``answerer_confidence``, an abstention 0) reaches T, else the top rung — and that
rung's row. Its tokens are the final rung's context: each rung's sources extend the previous
rung's, so that is what it reads once (``tokens.context_read``); the generations it ran on the
way are counted beside it (``rounds``). Sweeps made before rows carried the answerer's
confidence have no cascade rows.

The saving: the fixed budgets trace a frontier q(k) against mean tokens t(k);
F(q) is the tokens that frontier needs to reach quality q (linear between adjacent budgets), and
a policy at (q_P, t_P) saves 1 − t_P / F(q_P). k* is the fixed budget with the best quality on
the test split (ties → smaller). 95% intervals come from a paired bootstrap over questions that
recomputes the frontier on every resample, and, where the sweep's rows name their documents,
from one over documents (each resample draws documents and keeps all their questions): a
document's questions are not independent, so that wider interval is the one a saving rests on.
Each row's JSON also holds ``vs_kstar``: its paired difference from answering every question at
k* — the answer quality given up and the share of k*'s tokens not read, with both intervals —
the comparison that stays defined where the frontier's saving is not.

The saving is undefined in two places, and the table says which: "above frontier" when q_P is
above the best fixed quality (no budget reaches it), and "at/below k = 0" when the frontier's
zero-token point (k = 0, ``none``) already reaches q_P, so F(q_P) = 0 (the ``none`` row itself,
or a policy no better than answering without retrieval). A saving's interval is given only when
the point estimate is defined and at most ``MAX_UNDEFINED`` (5 %) of the resamples are — an
interval over the rest would describe a different, conditioned population; the share of
undefined resamples is reported beside it (``saving_undefined``) either way.

    python bench/policy_tradeoffs.py --train DIR [--train DIR …] --test DIR [--test DIR …]
        [--quality answer_recall] [--lambdas 0.0025,0.005,0.01,0.02,0.05]
        [--policy FILE …] [--thresholds 0.3,0.4,0.5,0.6,0.7,0.8] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import default_out, log, machine_info, print_table, write_json
from fathom.learn.reinforce import train_reinforce
from fathom.learn.utility import fit_utility

CONFIDENCES = (0.9, 0.95, 0.98)
PRESETS = ("quality", "balanced", "latency", "cost")
N_BOOT = 1000
MAX_UNDEFINED = 0.05  # above this share of undefined resamples, the saving gets no interval


def frontier_tokens(fq: np.ndarray, ft: np.ndarray, q: float) -> float:
    """Tokens the fixed frontier (qualities ``fq`` at mean tokens ``ft``) needs to reach ``q``;
    NaN above its best quality. At or below the cheapest point's quality: that point's tokens in
    proportion to ``q`` (0 when the cheapest point costs no tokens, as k = 0 does)."""
    order = np.argsort(ft, kind="stable")
    pts: list[tuple[float, float]] = []
    for i in order:
        if not pts or fq[i] > pts[-1][1]:
            pts.append((float(ft[i]), float(fq[i])))
    t0, q0 = pts[0]
    if q <= q0:
        return t0 * q / q0 if q0 > 0 else t0
    for (ta, qa), (tb, qb) in itertools.pairwise(pts):
        if qa <= q <= qb:
            return ta + (tb - ta) * (q - qa) / (qb - qa)
    return float("nan")


def own_tokens(policy: Any, test: Any, name: str) -> np.ndarray | None:
    """Each test question's context tokens per budget as ``policy`` prices them at ``ask``
    (from the question's own probed chunks), or None where it prices at its training means."""
    model = getattr(policy, "context_tokens", None)
    if model is None:
        return None
    probed = test.probe_sums()
    if probed is None:
        log(f"{name}: its rows log no probe tokens; the policy is priced at its training means")
        return None
    return model.estimate(*probed)


ABOVE = "above frontier"
AT_ZERO = "at/below k = 0"


def saving_and_status(
    quality: np.ndarray, tokens: np.ndarray, choice: np.ndarray, rows: np.ndarray
) -> tuple[float, str | None]:
    """1 − t_P / F(q_P) over the questions ``rows``, and why it is NaN when it is: ``ABOVE``
    (no fixed budget reaches q_P) or ``AT_ZERO`` (F(q_P) = 0: k = 0 already reaches q_P)."""
    qs, ts = quality[rows], tokens[rows]
    fq, ft = qs.mean(axis=0), ts.mean(axis=0)
    pick = np.arange(len(rows))
    q_p = float(qs[pick, choice[rows]].mean())
    t_p = float(ts[pick, choice[rows]].mean())
    f = frontier_tokens(fq, ft, q_p)
    if np.isnan(f):
        return float("nan"), ABOVE
    if f <= 0:
        return float("nan"), AT_ZERO
    return 1.0 - t_p / f, None


def saving(quality: np.ndarray, tokens: np.ndarray, choice: np.ndarray, rows: np.ndarray) -> float:
    """1 − t_P / F(q_P) over the questions ``rows``; NaN where undefined (``saving_and_status``)."""
    return saving_and_status(quality, tokens, choice, rows)[0]


def score(
    sweep: Any,
    choice: np.ndarray,
    boot: np.ndarray,
    doc_boot: list[np.ndarray] | None = None,
    kstar: int | None = None,
) -> dict[str, Any]:
    """Quality, tokens and saving of the budget indices ``choice`` with bootstrap intervals.

    ``saving_status`` says why ``saving`` is NaN (None when defined); ``saving_undefined`` is
    the share of resamples whose saving is undefined; ``saving_ci`` is None when the point
    estimate is undefined or more than ``MAX_UNDEFINED`` of the resamples are (module doc).
    With ``doc_boot`` (document-level resamples), ``documents`` holds the same intervals
    over those. With ``kstar`` (the best fixed budget's index), ``vs_kstar`` holds the paired
    difference from answering every question at k*: quality (``quality_delta``) and the share
    of k*'s tokens not read (``tokens_saved``), each with its intervals."""
    n = len(choice)
    q = sweep.quality[np.arange(n), choice]
    t = sweep.tokens[np.arange(n), choice]
    out: dict[str, Any] = {"quality": float(q.mean()), "tokens": float(t.mean())}
    out["saving"], out["saving_status"] = saving_and_status(
        sweep.quality, sweep.tokens, choice, np.arange(n)
    )
    out.update(_intervals(sweep, choice, boot, out["saving_status"]))
    out["mean_k"] = float(np.asarray(sweep.budgets)[choice].mean())
    if doc_boot is not None:
        out["documents"] = _intervals(sweep, choice, doc_boot, out["saving_status"])
    if kstar is not None:
        out["vs_kstar"] = _against_kstar(sweep, choice, kstar, boot, doc_boot)
    return out


def _against_kstar(
    sweep: Any, choice: np.ndarray, kstar: int, boot: Any, doc_boot: Any
) -> dict[str, Any]:
    """Quality minus k*'s and 1 − tokens / k*'s tokens, question by question, with intervals
    over ``boot`` and (``documents``) over ``doc_boot``."""
    rows = np.arange(len(choice))
    dq = sweep.quality[rows, choice] - sweep.quality[:, kstar]
    t, tk = sweep.tokens[rows, choice], sweep.tokens[:, kstar]

    def saved(r: np.ndarray) -> float:
        return float(1 - t[r].mean() / tk[r].mean()) if tk[r].mean() > 0 else float("nan")

    def cis(resamples: Any) -> dict[str, list[float]]:
        qs = [dq[r].mean() for r in resamples]
        ts = [x for x in (saved(r) for r in resamples) if np.isfinite(x)]
        return {
            "quality_delta_ci": np.quantile(qs, [0.025, 0.975]).tolist(),
            "tokens_saved_ci": np.quantile(ts, [0.025, 0.975]).tolist() if ts else None,
        }

    out: dict[str, Any] = {"quality_delta": float(dq.mean()), "tokens_saved": saved(rows)}
    out |= cis(boot)
    if doc_boot is not None:
        out["documents"] = cis(doc_boot)
    return out


def _intervals(sweep: Any, choice: np.ndarray, boot: Any, status: str | None) -> dict[str, Any]:
    """95 % intervals of quality, tokens and saving over the resamples ``boot`` (index arrays),
    and the share of resamples whose saving is undefined."""
    n = len(choice)
    q = sweep.quality[np.arange(n), choice]
    t = sweep.tokens[np.arange(n), choice]
    qb = np.array([q[r].mean() for r in boot])
    tb = np.array([t[r].mean() for r in boot])
    sb = np.array([saving(sweep.quality, sweep.tokens, choice, r) for r in boot])
    defined = sb[np.isfinite(sb)]
    undefined = (len(sb) - len(defined)) / len(sb) if len(sb) else 0.0
    ok = status is None and len(defined) and undefined <= MAX_UNDEFINED
    return {
        "quality_ci": np.quantile(qb, [0.025, 0.975]).tolist(),
        "tokens_ci": np.quantile(tb, [0.025, 0.975]).tolist(),
        "saving_undefined": undefined,
        "saving_ci": np.quantile(defined, [0.025, 0.975]).tolist() if ok else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--train",
        action="append",
        default=[],
        help="training sweep folder (none: only the fixed budgets, the oracle and --policy)",
    )
    ap.add_argument("--test", action="append", required=True, help="held-out sweep folder")
    ap.add_argument("--quality", default="answer_recall", help="row metric (as in policy train)")
    ap.add_argument("--lambdas", default="0.0025,0.005,0.01,0.02,0.05")
    ap.add_argument(
        "--default-lambda", type=float, default=0.01, help="the forest's λ in the table"
    )
    ap.add_argument(
        "--policy",
        action="append",
        default=[],
        help="a trained forest file (e.g. router/policies/depth_forest.npz, the shipped one) "
        "scored as it is, at each --prefer; repeatable",
    )
    ap.add_argument(
        "--thresholds", default="0.3,0.4,0.5,0.6,0.7,0.8", help="the cascade's thresholds"
    )
    ap.add_argument("--epochs", type=int, default=60, help="REINFORCE epochs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=default_out("policy_tradeoffs"))
    args = ap.parse_args(argv)

    from fathom.core.config import load_config
    from fathom.learn.sweep import combine_sweeps, load_sweep
    from fathom.learn.train_policy import sweep_query_vectors, train_forest
    from fathom.router.cascade import Cascade
    from fathom.router.cost import PREFERENCES, ReadingCost
    from fathom.router.registry import load_policy

    lambdas = [float(x) for x in args.lambdas.split(",")]
    thresholds = [float(x) for x in args.thresholds.split(",") if x.strip()]
    given_policies = {path: load_policy(path) for path in args.policy}
    for path, given in given_policies.items():
        if given.name != "forest":
            ap.error(f"--policy {path}: a forest, not a {given.name} policy")
    if not args.train and not given_policies:
        ap.error("give --train sweeps, --policy files, or both")
    cfg = load_config(env={})
    forest: Any = None
    utility: Any = None
    reinforce: dict[float, Any] = {}
    forest_s = 0.0
    n_train = 0
    if args.train:
        train = combine_sweeps([load_sweep(d, quality=args.quality) for d in args.train])
        n_train = len(train.qids)
        log(f"training on {n_train} questions from {len(args.train)} sweeps")
        t0 = time.perf_counter()
        forest = train_forest(train, seed=args.seed, cost=args.default_lambda)
        forest_s = time.perf_counter() - t0
        utility = fit_utility(train)
        train_q = sweep_query_vectors(cfg, train)
        for lam in lambdas:
            log(f"REINFORCE λ = {lam}")
            reinforce[lam] = train_reinforce(
                train, train_q, lam=lam, epochs=args.epochs, seed=args.seed
            )

    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "train": args.train,
        "quality": args.quality,
        "n_train": n_train,
        "forest_train_s": round(forest_s, 2),
        "default_lambda": args.default_lambda,
        "policies": args.policy,
        "sets": {},
    }
    for test_dir in args.test:
        test = load_sweep(test_dir, quality=args.quality)
        name = Path(test_dir).name
        n = len(test.qids)
        rng = np.random.default_rng(args.seed)
        boot = rng.integers(0, n, size=(N_BOOT, n))
        doc_boot = _document_resamples(test, args.seed)
        fq = test.quality.mean(axis=0)
        kstar = int(np.argmax(fq))
        rows: dict[str, dict[str, Any]] = {}
        for j, b in enumerate(test.budgets):
            rows["none" if b == 0 else f"fixed:{b}"] = score(
                test, np.full(n, j), boot, doc_boot, kstar
            )
        if forest is not None:
            x = test.inputs(forest.feature_names)
            proba = forest.predict_proba(x)
            own = own_tokens(forest, test, name)
            for lam in lambdas:
                choice = forest.choose(proba, cost=lam, tokens=own)
                rows[f"forest λ={lam:g}"] = score(test, choice, boot, doc_boot, kstar)
            for prefer in PREFERENCES:  # the shipped rule as `ask` prices it for the extractive
                reading = ReadingCost(prefer)
                choice = forest.choose(
                    proba, cost=args.default_lambda, reading=reading, tokens=own, inputs=x
                )
                rows[f"forest prefer={prefer}"] = score(test, choice, boot, doc_boot, kstar)
            for c in CONFIDENCES:
                rows[f"forest c={c:g}"] = score(
                    test, forest.choose(proba, confidence=c), boot, doc_boot, kstar
                )
        read: dict[str, tuple[Any, Any, Any]] = {}  # each policy's inputs, proba, tokens
        for path, given in given_policies.items():
            given_x = test.inputs(given.feature_names)
            given_proba = given.predict_proba(given_x)
            given_own = own_tokens(given, test, name)
            read[path] = (given_x, given_proba, given_own)
            for prefer in PREFERENCES:
                choice = given.choose(
                    given_proba, reading=ReadingCost(prefer), tokens=given_own, inputs=given_x
                )
                rows[f"{Path(path).stem} prefer={prefer}"] = score(
                    test, choice, boot, doc_boot, kstar
                )
        test_q = sweep_query_vectors(cfg, test) if reinforce else None
        for lam, rl in reinforce.items():
            choice = rl.proba(test_q, test.features).argmax(axis=1)
            rows[f"reinforce λ={lam:g}"] = score(test, choice, boot, doc_boot, kstar)
        for preset in PRESETS if utility is not None else ():
            utility.preset = preset
            k_of = {t: utility.bundles[max(u, key=u.get)] for t in set(test.query_types)
                    for u in [utility.utilities(t)]}  # fmt: skip
            choice = np.array([test.budgets.index(k_of[t]) for t in test.query_types])
            rows[f"utility:{preset}"] = score(test, choice, boot, doc_boot, kstar)
        if test.confidence is not None and np.isfinite(test.confidence).any():
            for t in thresholds:
                climb = Cascade(threshold=t)
                choice = climb.choose(test.budgets, test.confidence)
                rows[f"cascade@{t:g}"] = score(test, choice, boot, doc_boot, kstar)
                rows[f"cascade@{t:g}"]["rounds"] = _rounds(climb, test.budgets, choice)
        else:
            log(f"{name}: its rows carry no answerer confidence; no cascade rows")
        reach = test.quality.max(axis=1) > 0
        oracle = np.where(reach, np.argmax(test.quality >= test.quality.max(axis=1)[:, None], 1), 0)
        rows["oracle"] = score(test, oracle, boot, doc_boot, kstar)
        # Depth by query type at the default λ (multi-hop should get more); without a trained
        # forest, the first --policy's at balanced.
        if forest is not None:
            choice = forest.choose(proba, cost=args.default_lambda, tokens=own)
            depth_of = f"forest λ={args.default_lambda:g}"
        else:
            first = next(iter(given_policies))
            given_x, given_proba, given_own = read[first]
            choice = given_policies[first].choose(
                given_proba, reading=ReadingCost(), tokens=given_own, inputs=given_x
            )
            depth_of = f"{Path(first).stem} prefer=balanced"
        types = np.asarray(test.query_types)
        ks = np.asarray(test.budgets)[choice]
        depth = {
            t: {"n": int((types == t).sum()), "mean_k": float(ks[types == t].mean())}
            for t in sorted(set(types.tolist()))
        }
        results["sets"][name] = {
            "n": n,
            "kstar": f"fixed:{test.budgets[kstar]}",
            "kstar_quality": float(fq[kstar]),
            "rows": rows,
            "depth_by_type": depth,
        }
        table = []
        for label, r in rows.items():
            table.append(
                [
                    label,
                    f"{r['quality']:.3f} [{r['quality_ci'][0]:.3f}, {r['quality_ci'][1]:.3f}]",
                    f"{r['vs_kstar']['quality_delta']:+.3f}",
                    f"{r['tokens']:.0f}",
                    f"{r['mean_k']:.2f}",
                    _pct(r["saving"], r["saving_ci"], r["saving_status"], r["saving_undefined"]),
                    *_by_document(r),
                ]
            )
        print_table(
            f"{name}: {n} held-out questions, k* = fixed:{test.budgets[kstar]}"
            + (f", {len(set(test.groups))} documents" if doc_boot else ""),
            [
                "policy",
                "quality [95% CI]",
                "Δ vs k*",
                "context tok",
                "mean k",
                "saving [95% CI]",
            ]
            + (["quality CI, by document", "saving CI, by document"] if doc_boot else []),
            table,
        )
        print(f"mean k by query type ({depth_of}): {json.dumps(depth)}")
    if forest is not None:
        _plots(args.out, results, reinforce, lambdas)
    write_json(args.out / "policy_tradeoffs.json", results)
    log(f"results and plots in {args.out}/")
    return 0


def _document_resamples(test: Any, seed: int) -> list[np.ndarray] | None:
    """Document-level resamples of a sweep's questions (none for a sweep without documents)."""
    from fathom.evaluation.metrics import cluster_resamples

    return cluster_resamples(test.groups, N_BOOT, seed) if test.groups else None


def _by_document(r: dict[str, Any]) -> list[str]:
    """A row's quality and saving intervals over documents, for the table (none without)."""
    d = r.get("documents")
    if d is None:
        return []
    q = f"[{d['quality_ci'][0]:.3f}, {d['quality_ci'][1]:.3f}]"
    s = "–" if d["saving_ci"] is None else f"[{d['saving_ci'][0]:.0%}, {d['saving_ci'][1]:.0%}]"
    if np.isfinite(r["saving"]) and d["saving_undefined"] > 0:
        s += f" ({d['saving_undefined']:.0%} undefined)"
    return [q, s]


def _rounds(climb: Any, budgets: tuple[int, ...], choice: np.ndarray) -> float:
    """Mean generations a cascade ran: one per rung up to the one it ended at."""
    ends = np.asarray(budgets)[choice]
    return float(np.mean([sum(1 for r in climb.ladder if r <= k) for k in ends]))


def _pct(x: float, ci: list | None, status: str | None = None, undefined: float = 0.0) -> str:
    """A saving for the table: the reason it is undefined, else the value and its interval;
    with undefined resamples, their share."""
    if not np.isfinite(x):
        return status or "undefined"
    if ci is None or ci[0] is None:
        ci = None
    text = f"{x:.0%}" if ci is None else f"{x:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"
    if undefined > 0:
        text += f" ({undefined:.0%} of resamples undefined{', no CI' if ci is None else ''})"
    return text


def _plots(out: Path, results: dict[str, Any], reinforce: dict[float, Any], lambdas: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = results["sets"]
    # λ sweep: quality and tokens against λ, per test set.
    fig, axes = plt.subplots(2, len(sets), figsize=(4.5 * len(sets), 6.5), squeeze=False)
    for col, (name, s) in enumerate(sets.items()):
        rows = s["rows"]
        for kind, style in (("forest", "o-"), ("reinforce", "s--")):
            q = [rows[f"{kind} λ={lam:g}"]["quality"] for lam in lambdas]
            t = [rows[f"{kind} λ={lam:g}"]["tokens"] for lam in lambdas]
            axes[0][col].plot(lambdas, q, style, label=kind)
            axes[1][col].plot(lambdas, t, style, label=kind)
        axes[0][col].axhline(s["kstar_quality"], color="grey", ls=":", label=f"k* ({s['kstar']})")
        axes[1][col].axhline(rows[s["kstar"]]["tokens"], color="grey", ls=":", label="k*")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xscale("log")
            ax.set_xticks(lambdas, [f"{lam:g}" for lam in lambdas])
            ax.minorticks_off()
            ax.grid(alpha=0.3)
        axes[0][col].set_title(name, fontsize=9)
        axes[1][col].set_xlabel("λ (quality per 1000 context tokens)")
    axes[0][0].set_ylabel(f"quality ({results['quality']})")
    axes[1][0].set_ylabel("mean context tokens")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "lambda_sweep.png", dpi=120)
    plt.close(fig)

    # Training dynamics: REINFORCE action shares per epoch, one panel per λ.
    fig, axes = plt.subplots(1, len(lambdas), figsize=(3.6 * len(lambdas), 3.4), squeeze=False)
    for col, lam in enumerate(lambdas):
        rl = reinforce[lam]
        curves = rl.meta["curves"]
        shares = np.array([c["action_shares"] for c in curves]).T
        epochs = [c["epoch"] for c in curves]
        axes[0][col].stackplot(epochs, shares, labels=[f"k={b}" for b in rl.budgets])
        axes[0][col].set_title(f"λ = {lam:g}", fontsize=9)
        axes[0][col].set_xlabel("epoch")
        axes[0][col].set_ylim(0, 1)
    axes[0][0].set_ylabel("share of sampled actions")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    fig.tight_layout()
    fig.savefig(out / "training_dynamics.png", dpi=120)
    plt.close(fig)

    # Pareto: the fixed frontier and every policy, per test set.
    fig, axes = plt.subplots(1, len(sets), figsize=(4.8 * len(sets), 4), squeeze=False)
    for col, (name, s) in enumerate(sets.items()):
        ax = axes[0][col]
        fixed = [(r["tokens"], r["quality"]) for k, r in s["rows"].items() if k.startswith("fixed")]
        ax.plot(*zip(*fixed, strict=True), "k.-", label="fixed k")
        for prefix, marker in (("forest λ", "o"), ("forest c", "^"), ("reinforce", "s"),
                               ("utility", "D"), ("cascade", "v"), ("oracle", "*")):  # fmt: skip
            pts = [
                (r["tokens"], r["quality"]) for k, r in s["rows"].items() if k.startswith(prefix)
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker, ls="", label=prefix, alpha=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("mean context tokens")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"quality ({results['quality']})")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "pareto.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
