"""Decision time of the learned depth policies: features + policy, excluding the probe.

Probes a collection once per question (not timed), then times ``probe_features`` and the
forest's decision on each, beside the cost of the probe itself measured in the same run.
Target: P99 < 1 ms for the forest and the utility router. A forest that reads the passages
(``reads_passages``) also needs the reader's reading of the probe's first candidates: timed
per question as ``ask`` pays it (the reranking, moved before the decision), and with the
decision.

    python bench/policy_latency.py --collection NAME [--policy FILE] [--utility FILE]
        [--home DIR] [--questions FILE] [--limit 300]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from fathom.bench.common import (
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    read_jsonl,
    write_json,
)
from fathom.core.base import DepthQuery

TARGET_P99_MS = 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default=None, help="FATHOM_HOME holding the collection")
    ap.add_argument("--collection", required=True)
    ap.add_argument("--policy", default=None, help="forest policy (default: the shipped one)")
    ap.add_argument("--utility", default=None, help="a utility policy JSON to time as well")
    ap.add_argument("--data", default=None)
    ap.add_argument("--questions", default=None, help="JSONL (default: SQuAD 1.1 dev questions)")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--out", type=Path, default=default_out("policy_latency"))
    args = ap.parse_args(argv)
    if args.home:
        os.environ["FATHOM_HOME"] = args.home

    from fathom.core.config import load_config
    from fathom.router.features import probe_features
    from fathom.router.forest import ForestPolicy, default_policy_path
    from fathom.stages.pipeline import Engine

    cfg = load_config()
    cfg.generator.backend = "extractive"
    engine = Engine(cfg, args.collection)
    policy = ForestPolicy.load(args.policy or default_policy_path())
    qfile = Path(args.questions) if args.questions else (
        data_dir(args.data) / "squad_v1.1_dev" / "questions.jsonl"
    )  # fmt: skip
    questions = [q["question"] for q in read_jsonl(qfile)][: args.limit]
    log(f"probing {len(questions)} questions")
    prepared = [engine.prepare(q) for q in questions]
    probe_ms = [p.stages_ms["probe"] for p in prepared]
    feat_ms, decide_ms, read_ms, read_decide_ms = [], [], [], []
    readings: list = [None] * len(prepared)
    if policy.reads_passages:
        from fathom.stages.plan import passage_readings

        for i, p in enumerate(prepared):
            p.memo.clear()
            t = time.perf_counter()
            readings[i] = passage_readings(engine.parts, p)
            read_ms.append((time.perf_counter() - t) * 1000)

    def query(i: int) -> DepthQuery:
        p = prepared[i]
        return DepthQuery(
            p.question, p.probe, p.query_type, type_probs=p.type_probs, readings=readings[i]
        )

    for i in range(min(20, len(prepared))):  # warm-up: first-use caches, lazy conversions
        policy.decide(query(i))
    from fathom.core.words import content_terms

    content_terms.cache_clear()  # first sight of each chunk, as in a real ask
    for p in prepared:
        t = time.perf_counter()
        probe_features(p.question, p.probe, p.type_probs)
        feat_ms.append((time.perf_counter() - t) * 1000)
    content_terms.cache_clear()
    for i in range(len(prepared)):
        t = time.perf_counter()
        policy.decide(query(i))
        decide_ms.append((time.perf_counter() - t) * 1000)
        if read_ms:
            read_decide_ms.append(read_ms[i] + decide_ms[-1])
    util_ms: list[float] = []
    if args.utility:
        from fathom.router.utility import UtilityPolicy

        util = UtilityPolicy.load(args.utility)
        for p in prepared:
            t = time.perf_counter()
            util.decide(DepthQuery(p.question, p.probe, p.query_type))
            util_ms.append((time.perf_counter() - t) * 1000)
    rows = [
        ["features", *percentiles(feat_ms).values()],
        ["features + forest decision", *percentiles(decide_ms).values()],
        *([["utility decision", *percentiles(util_ms).values()]] if util_ms else []),
        *([["reading (the reranker's)", *percentiles(read_ms).values()]] if read_ms else []),
        *(
            [["reading + forest decision", *percentiles(read_decide_ms).values()]]
            if read_ms
            else []
        ),
        ["probe (for scale)", *percentiles(probe_ms).values()],
    ]
    keys = list(percentiles(feat_ms).keys())
    print_table(
        f"decision time over {len(prepared)} questions, {len(policy.trees)} trees (ms)",
        ["what", *keys],
        rows,
        digits=3,
    )
    p99 = max(percentiles(decide_ms)["p99"], percentiles(util_ms)["p99"] if util_ms else 0.0)
    verdict = "met" if p99 < TARGET_P99_MS else "MISSED"
    print(f"target: P99 < {TARGET_P99_MS} ms → worst {p99:.3f} ({verdict})")
    write_json(
        args.out,
        {
            "bench": "policy_latency",
            "n": len(prepared),
            "trees": len(policy.trees),
            "features_ms": percentiles(feat_ms),
            "decide_ms": percentiles(decide_ms),
            "utility_ms": percentiles(util_ms) if util_ms else None,
            "reads_passages": policy.reads_passages,
            "reading_ms": percentiles(read_ms) if read_ms else None,
            "reading_and_decide_ms": percentiles(read_decide_ms) if read_ms else None,
            "probe_ms": percentiles(probe_ms),
            "target_p99_ms": TARGET_P99_MS,
            "met": p99 < TARGET_P99_MS,
        },
    )
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
