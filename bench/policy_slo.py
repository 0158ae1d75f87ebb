"""Depth policies under a latency SLO with a real generator (llama.cpp).

Two sweeps from ``fathom policy sweep --generator llamacpp --judge f1`` (a training half and a
held-out half, split by document) log every question's F1 and end-to-end latency at every
budget. The SLO is the median end-to-end latency of k* on the held-out half (k* = the fixed
budget with the best mean F1 there, ties → smaller), unless ``--slo-ms`` gives one. The forest
is trained on the training half with oracle labels under that SLO (the smallest budget within ε
of the question's best F1 whose latency meets the SLO); every policy is then scored by lookup on
the held-out rows — the budget it chooses and that budget's measured F1 and latency — so all
rows use the same questions and the same generations. SLO compliance is the share of questions
whose chosen budget's end-to-end latency is ≤ the SLO. 95 % intervals: bootstrap over questions.

A second table projects what an answer cut at the deadline would give ("… cut at SLO"): each
held-out row keeps the completion tokens that fit before the SLO, at the per-completion-token
time fitted on the held-out rows themselves (generate ms against prompt and completion tokens;
the fit's R² is printed), and its F1 is recomputed on the shortened answer (re-tokenized with
the packaged SmolLM2 tokenizer when the sweep used it, else cut in proportion to words; a cut
that leaves nothing scores 0, also on an unanswerable question, where only an abstention that
was delivered in time counts). It is a projection from measured rows, not a measurement of a
deadline-aware generator: an answer whose prompt alone runs past the SLO still misses it.

    python bench/policy_slo.py --train DIR [--train DIR …] --test DIR [--slo-ms MS]
        [--epsilons 0,0.1] [--confidences 0.5,0.7,0.9] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import default_out, log, machine_info, print_table, write_json

N_BOOT = 1000


def score(test: Any, choice: np.ndarray, slo: float, boot: np.ndarray) -> dict[str, Any]:
    """Mean F1, SLO compliance and latency of the budget indices ``choice`` on ``test``."""
    n = len(choice)
    q = test.quality[np.arange(n), choice].astype(np.float64)
    ms = test.latency[np.arange(n), choice].astype(np.float64)
    met = (ms <= slo).astype(np.float64)
    return {
        "f1": float(q.mean()),
        "f1_ci": np.quantile([q[r].mean() for r in boot], [0.025, 0.975]).tolist(),
        "compliance": float(met.mean()),
        "compliance_ci": np.quantile([met[r].mean() for r in boot], [0.025, 0.975]).tolist(),
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "mean_k": float(np.asarray(test.budgets)[choice].mean()),
    }


def deadline_projection(test_dir: str, test: Any, slo: float) -> tuple[Any, dict[str, Any]]:
    """``test`` with every row's answer cut where its time would pass ``slo`` (module doc)."""
    import dataclasses
    import json

    from fathom.feedback.judges import f1, is_abstention

    rows = {}
    for line in (Path(test_dir) / "log.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        rows[(r["qid"], r["k"])] = r
    picked = [rows[(q, b)] for q in test.qids for b in test.budgets]
    gen = np.array([r["stages_ms"].get("generate", 0.0) for r in picked])
    prompt = np.array([r["tokens"]["prompt"] for r in picked], dtype=np.float64)
    out = np.array([r["tokens"]["completion"] for r in picked], dtype=np.float64)
    design = np.c_[np.ones(len(gen)), prompt, out]
    coef = np.linalg.lstsq(design, gen, rcond=None)[0]
    r2 = 1.0 - float(np.var(gen - design @ coef) / np.var(gen))
    per_token = float(coef[2])
    cut = _cutter(test.run)
    quality = np.array(test.quality, dtype=np.float64)
    latency = np.array(test.latency, dtype=np.float64)
    n_cut = 0
    for i, q in enumerate(test.qids):
        for j, b in enumerate(test.budgets):
            r = rows[(q, b)]
            o = r["tokens"]["completion"]
            before = r["total_ms"] - per_token * o  # everything but the answer's tokens
            fits = max(0, int((slo - before) / per_token + 1e-9))  # no float loss of a token
            if o > fits:
                n_cut += 1
                kept = cut(r["answer"], fits, o)
                # Nothing delivered by the deadline is a missed answer, not an abstention: on
                # an unanswerable question f1("", []) would credit it as one.
                abstained = bool(kept.strip()) and is_abstention(kept)
                quality[i, j] = f1(kept, r["gold_answers"], abstained=abstained)
                latency[i, j] = before + per_token * fits
    fit = {
        "ms_per_completion_token": per_token,
        "ms_per_prompt_token": float(coef[1]),
        "r2": r2,
        "rows_cut": n_cut,
        "rows": len(picked),
    }
    return dataclasses.replace(test, quality=quality, latency=latency), fit


def _cutter(run: dict[str, Any]):
    """``cut(answer, keep, of)``: the answer's first ``keep`` of its ``of`` tokens."""
    from fathom.stages.generate.common import packaged_gguf

    path = packaged_gguf()
    model = (run.get("generator") or {}).get("model", "")
    if path is not None and model == path.name:
        from llama_cpp import Llama

        vocab = Llama(str(path), vocab_only=True, verbose=False)

        def cut(answer: str, keep: int, of: int) -> str:
            ids = vocab.tokenize(answer.encode("utf-8"), add_bos=False, special=False)
            return vocab.detokenize(ids[:keep]).decode("utf-8", errors="ignore")

        return cut

    def cut_words(answer: str, keep: int, of: int) -> str:
        words = answer.split()
        return " ".join(words[: len(words) * keep // max(of, 1)])

    return cut_words


def _table(rows: dict[str, dict[str, Any]], kstar_f1: float) -> list[list[str]]:
    table = []
    for label, r in rows.items():
        table.append(
            [
                label,
                f"{r['f1']:.3f} [{r['f1_ci'][0]:.3f}, {r['f1_ci'][1]:.3f}]",
                f"{100 * (r['f1'] - kstar_f1):+.1f}",
                f"{100 * r['compliance']:.0f} % [{100 * r['compliance_ci'][0]:.0f}, "
                f"{100 * r['compliance_ci'][1]:.0f}]",
                f"{r['p50_ms']:.0f}",
                f"{r['p95_ms']:.0f}",
                f"{r['mean_k']:.2f}",
            ]
        )
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", action="append", required=True, help="training sweep folder")
    ap.add_argument("--test", required=True, help="held-out sweep folder")
    ap.add_argument("--quality", default="f1", help="row metric (as in policy train)")
    ap.add_argument("--slo-ms", type=float, default=None, help="default: k*'s median latency")
    ap.add_argument("--epsilons", default="0,0.1")
    ap.add_argument("--confidences", default="0.5,0.7,0.9")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=default_out("policy_slo"))
    args = ap.parse_args(argv)

    from fathom.learn.sweep import combine_sweeps, load_sweep
    from fathom.learn.train_policy import train_forest

    train = combine_sweeps([load_sweep(d, quality=args.quality) for d in args.train])
    test = load_sweep(args.test, quality=args.quality)
    n = len(test.qids)
    fq = test.quality.mean(axis=0)
    kstar = int(np.argmax(fq))  # ties → the smaller budget
    slo = args.slo_ms or float(np.median(test.latency[:, kstar]))
    log(
        f"train {len(train.qids)} questions, test {n}; k* = {test.budgets[kstar]} "
        f"(F1 {fq[kstar]:.3f}); SLO {slo:.0f} ms"
    )
    boot = np.random.default_rng(args.seed).integers(0, n, size=(N_BOOT, n))
    rows: dict[str, dict[str, Any]] = {}
    choices: dict[str, np.ndarray] = {}
    for j, b in enumerate(test.budgets):
        choices["none" if b == 0 else f"fixed:{b}"] = np.full(n, j)
    for strict in (False, True):
        for eps in (float(x) for x in args.epsilons.split(",")):
            forest = train_forest(train, epsilon=eps, slo_ms=slo, seed=args.seed, strict_slo=strict)
            proba = forest.predict_proba(test.inputs(forest.feature_names))
            tag = f"forest{' strict' if strict else ''} ε={eps:g}"
            for c in (float(x) for x in args.confidences.split(",")):
                choices[f"{tag} c={c:g}"] = forest.choose(proba, confidence=c)
            choices[f"{tag} mode"] = forest.choose(proba, most_likely=True)
    # The oracle under the same labels: what perfect imitation would reach.
    from fathom.router.forest import oracle_labels

    for strict in (False, True):
        oracle = oracle_labels(test.quality, test.latency, 0.0, slo, strict)
        choices[f"oracle{' strict' if strict else ''} (ε=0)"] = oracle
    rows = {label: score(test, choice, slo, boot) for label, choice in choices.items()}

    title = (
        f"{Path(args.test).name}: {n} held-out questions, k* = fixed:{test.budgets[kstar]}, "
        f"SLO {slo:.0f} ms"
    )
    cols = ["policy", "F1 [95% CI]", "Δ F1 pts vs k*", "SLO met [95% CI]", "P50 ms", "P95 ms"]
    print_table(title, [*cols, "mean k"], _table(rows, fq[kstar]))

    # The same choices with every answer cut at the deadline (projected; module doc).
    projected: dict[str, dict[str, Any]] = {}
    fit: dict[str, Any] = {}
    if args.quality == "f1":
        capped, fit = deadline_projection(args.test, test, slo)
        log(
            f"deadline projection: {fit['ms_per_completion_token']:.1f} ms per completion "
            f"token, {fit['ms_per_prompt_token']:.2f} per prompt token (R² {fit['r2']:.3f}); "
            f"{fit['rows_cut']} of {fit['rows']} rows cut"
        )
        projected = {
            f"{label} cut at SLO": score(capped, choice, slo, boot)
            for label, choice in choices.items()
            if not label.startswith("oracle")
        }
        print_table(
            f"{title}, answers cut at the SLO (projected from the measured rows)",
            [*cols, "mean k"],
            _table(projected, fq[kstar]),
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(
        args.out / "policy_slo.json",
        {
            "machine": machine_info(),
            "train": args.train,
            "test": args.test,
            "n_train": len(train.qids),
            "n_test": n,
            "kstar": f"fixed:{test.budgets[kstar]}",
            "kstar_f1": float(fq[kstar]),
            "slo_ms": slo,
            "rows": rows,
            "deadline_projection": {"fit": fit, "rows": projected},
        },
    )
    log(f"results in {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
