"""Ingest throughput: a full Fathom ingest vs the compute floor of embedding the same chunks.

For each set: a full ingest of ``<set>/docs.jsonl`` into a fresh collection (wall clock and the
IngestReport's phases), then — same run, same already-loaded model — sentence-transformers
``encode`` of exactly the texts Fathom embedded (``embed_input(chunk, title_prefix)`` of the
stored chunks), normalised, at the best batch size of 16/32/64/128 (chosen on a sample).
Model load and a one-text warm-up are excluded from BOTH sides. Finally an unchanged re-ingest,
reported as a fraction of the first.

With ``--executor ray``: the first set's records written out as text files, ingested locally and
with ``--executor ray`` on a local Ray of ``--workers`` CPUs (same files, same configuration;
the model's ONNX export made beforehand, so both embed through it); chunks/s of each, the Ray
run's start excluded and each side's model load included, and how far the two collections'
vectors are apart.

    python bench/ingest.py [--data DIR] [--sets covidqa_200423,squad_v1.1_dev] [--out FILE.json]
    python bench/ingest.py --executor ray [--sets covidqa_200423] [--workers 2] [--out FILE.json]
        [--records DOCS.jsonl] [--per-file N] [--embedder NAME]

``--records`` ingests another docs.jsonl (``bench/scale.py --write-haystack`` writes one of a
given number of chunks), ``--per-file`` records to a text file; ``--embedder hashing:384``
embeds with feature hashing on both sides, to compare the two executors' parsing, chunking and
writing where embedding a hundred thousand chunks twice would take hours on two cores.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np
from fathom.bench.common import (
    Stopwatch,
    bench_config,
    data_dir,
    default_out,
    log,
    print_table,
    progress_printer,
    ratio,
    st_model,
    temp_home,
    write_json,
)

BATCH_SIZES = (16, 32, 64, 128)
TARGET_RATIO = 1.3


def encode(model, texts: list[str], batch_size: int) -> np.ndarray:
    return model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


def floor(model, texts: list[str], sample: int, seed: int = 0) -> dict:
    """Best batch size on a random sample (by CPU seconds, robust to other processes' load),
    then the full encode at that size (wall and CPU seconds)."""
    pick = random.Random(seed).sample(texts, min(sample, len(texts)))
    per_batch = {}
    for bs in BATCH_SIZES:
        with Stopwatch() as sw:
            encode(model, pick, bs)
        per_batch[bs] = {"wall": sw.seconds, "cpu": sw.cpu}
        log(
            f"floor: batch {bs}: {len(pick) / sw.seconds:.1f} texts/s wall, "
            f"{len(pick) / sw.cpu:.1f} per CPU-s on {len(pick)} sampled"
        )
    best = min(per_batch, key=lambda bs: per_batch[bs]["cpu"])
    with Stopwatch() as full:
        encode(model, texts, best)
    return {
        "batch_size": best,
        "sample": len(pick),
        "sample_seconds": per_batch,
        "seconds": full.seconds,
        "cpu_seconds": full.cpu,
    }


def bench_set(cfg, name: str, docs_path: Path, embedder, chunker, sample: int) -> dict:
    from fathom.index.collection import Collection, embed_input
    from fathom.index.ingest import ingest

    log(f"{name}: full ingest")
    with Stopwatch() as first:
        report = ingest(cfg, [docs_path], name, embedder, chunker, progress=progress_printer(name))
    with Stopwatch() as second:
        again = ingest(cfg, [docs_path], name, embedder, chunker)
    coll = Collection.open(cfg, name)
    texts = [embed_input(c, coll.manifest.embed_title_prefix) for c in coll.store.all()]
    coll.close()
    assert len(texts) == report.embedded_chunks, "the store holds what was embedded"
    log(f"{name}: floor over {len(texts)} chunk texts")
    fl = floor(st_model(embedder), texts, sample)
    docs = report.count("ok")
    return {
        "documents": docs,
        "chunks": report.total_chunks,
        "chars": sum(len(t) for t in texts),
        "wall_s": first.seconds,
        "cpu_s": first.cpu,
        "phases_s": report.seconds,
        "docs_per_s": docs / first.seconds,
        "chunks_per_s": report.total_chunks / first.seconds,
        "floor": fl,
        "floor_chunks_per_s": len(texts) / fl["seconds"],
        "total_over_floor": ratio(first.seconds, fl["seconds"]),
        "total_over_floor_cpu": ratio(first.cpu, fl["cpu_seconds"]),
        "embed_over_floor": ratio(report.seconds.get("embed", 0.0), fl["seconds"]),
        "reingest_s": second.seconds,
        "reingest_committed": again.committed,
        "reingest_fraction": ratio(second.seconds, first.seconds),
    }


def write_files(docs_path: Path, folder: Path, per_file: int = 1) -> int:
    """The records of ``docs_path`` as text files ``folder/<n>.txt``, ``per_file`` records to
    a file (each its title, a blank line, its text, blank lines between records); how many
    files."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    n, batch = 0, []

    def flush() -> None:
        nonlocal n
        (folder / f"{n:06d}.txt").write_text("\n\n".join(batch), encoding="utf-8")
        n += 1
        batch.clear()

    with open(docs_path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                batch.append(
                    "\n\n".join(x for x in (rec.get("title", ""), rec.get("text", "")) if x)
                )
                if len(batch) >= per_file:
                    flush()
    if batch:
        flush()
    return n


def bench_ray(cfg, docs_path: Path, folder: Path, workers: int, per_file: int = 1) -> dict:
    """Local ingest against ``--executor ray`` (a local Ray of ``workers`` CPUs) of the same
    text files; chunks/s of each and the vectors' largest difference."""
    import ray
    from fathom.index.collection import Collection
    from fathom.index.ingest import ingest_paths
    from fathom.index.ray_ingest import ingest_on_ray

    files = write_files(docs_path, folder / "files", per_file)
    warm = folder / "warm"
    warm.mkdir()
    (warm / "w.txt").write_text("A warm-up file: the ONNX export is made once, before timing.")
    ingest_paths(cfg, [warm], "warm")
    log(f"ray: {files} files; local ingest")
    with Stopwatch() as local:
        lrep = ingest_paths(cfg, [folder / "files"], "local", progress=progress_printer("local"))
    with Stopwatch() as start:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    log(f"ray: started in {start.seconds:.1f}s; ingest on {workers} workers")
    try:
        with Stopwatch() as remote:
            rrep = ingest_on_ray(cfg, [folder / "files"], "ray", progress=progress_printer("ray"))
    finally:
        ray.shutdown()
    a, b = Collection.open(cfg, "local"), Collection.open(cfg, "ray")
    va, vb = a.dense.vectors(), b.dense.vectors()
    same_store = [c.to_dict() for c in a.store.all()] == [c.to_dict() for c in b.store.all()]
    a.close()
    b.close()
    chunks = lrep.total_chunks
    return {
        "files": files,
        "chunks": chunks,
        "ray_chunks": rrep.total_chunks,
        "workers": workers,
        "local_s": local.seconds,
        "ray_s": remote.seconds,
        "ray_start_s_excluded": start.seconds,
        "local_chunks_per_s": chunks / local.seconds,
        "ray_chunks_per_s": rrep.total_chunks / remote.seconds,
        "ray_over_local_throughput": ratio(local.seconds, remote.seconds),
        "chunk_store_identical": same_store,
        "vectors_max_abs_diff": float(np.abs(va - vb).max()) if len(va) == len(vb) else None,
        "vectors_identical": bool(len(va) == len(vb) and (va == vb).all()),
    }


def main_ray(args: argparse.Namespace) -> int:
    """``--executor ray``: local against local Ray on the first set."""
    name = args.sets.split(",")[0].strip()
    records = args.records or data_dir(args.data) / name / "docs.jsonl"
    if args.records:
        name = args.records.name
    overrides = {"embedder.name": args.embedder} if args.embedder else None
    with temp_home("ingest-ray") as home:
        r = bench_ray(bench_config(home, overrides), records, home, args.workers, args.per_file)
    r["embedder"] = args.embedder or "the packaged MiniLM"
    r["per_file"] = args.per_file
    print_table(
        f"Ingest of {r['files']} text files ({r['chunks']} chunks): local vs --executor ray "
        f"(local Ray, {r['workers']} workers; its start, {r['ray_start_s_excluded']:.1f} s, "
        "excluded; model load included on both sides)",
        ["set", "local s", "ray s", "local chunks/s", "ray chunks/s", "ray/local", "max |Δv|"],
        [[name, r["local_s"], r["ray_s"], r["local_chunks_per_s"], r["ray_chunks_per_s"],
          r["ray_over_local_throughput"], r["vectors_max_abs_diff"]]],
        digits=2,
    )  # fmt: skip
    write_json(args.out, {"bench": "ingest --executor ray", "set": name, **r})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", help="data folder (default: $FATHOM_DATA, else shared/data beside the checkout)"
    )
    parser.add_argument(
        "--sets",
        default="covidqa_200423,squad_v1.1_dev",
        help="comma-separated folders holding a docs.jsonl",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=128,
        help="chunk texts used to pick the floor's batch size (default 128)",
    )
    parser.add_argument("--out", type=Path, default=default_out("ingest"))
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="ray: local ingest against --executor ray on the first set's records as files",
    )
    parser.add_argument("--workers", type=int, default=2, help="local Ray CPUs (default 2)")
    parser.add_argument(
        "--records", type=Path, help="ray: a docs.jsonl to ingest instead of the first set's"
    )
    parser.add_argument(
        "--per-file", type=int, default=1, help="ray: records written to each text file"
    )
    parser.add_argument(
        "--embedder", help="ray: embedder.name for both sides (e.g. hashing:384: no model)"
    )
    args = parser.parse_args(argv)
    if args.executor == "ray":
        return main_ray(args)
    root = data_dir(args.data)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]

    from fathom.chunking import make_chunker
    from fathom.index.embed import make_embedder

    results: dict[str, dict] = {}
    with temp_home("ingest") as home:
        cfg = bench_config(home)
        embedder = make_embedder(cfg.embedder)
        with Stopwatch() as load:
            embedder.embed(["warm-up"])  # model load + first call: excluded from both sides
        log(f"model loaded in {load.seconds:.1f}s (excluded from both sides)")
        chunker = make_chunker(cfg.chunker, embedder.token_counter())
        for name in sets:
            results[name] = bench_set(
                cfg, name, root / name / "docs.jsonl", embedder, chunker, args.sample
            )

    print_table(
        "Full Fathom ingest (wall seconds; model load excluded)",
        ["set", "docs", "chunks", "total s", "parse+chunk s", "embed s", "write s", "docs/s",
         "chunks/s"],
        [[n, r["documents"], r["chunks"], r["wall_s"], r["phases_s"].get("parse_chunk", 0.0),
          r["phases_s"].get("embed", 0.0), r["phases_s"].get("write", 0.0), r["docs_per_s"],
          r["chunks_per_s"]] for n, r in results.items()],
        digits=2,
    )  # fmt: skip
    print_table(
        f"Ingest vs encode floor (same chunk texts, same loaded model; target total/floor ≤ "
        f"{TARGET_RATIO}); CPU = this process's CPU seconds",
        ["set", "floor bs", "floor s", "total/floor", "embed/floor", "total CPU s",
         "floor CPU s", "CPU total/floor"],
        [[n, r["floor"]["batch_size"], r["floor"]["seconds"], r["total_over_floor"],
          r["embed_over_floor"], r["cpu_s"], r["floor"]["cpu_seconds"],
          r["total_over_floor_cpu"]] for n, r in results.items()],
        digits=2,
    )  # fmt: skip
    print_table(
        "Unchanged re-ingest",
        ["set", "first s", "re-ingest s", "fraction", "committed"],
        [
            [n, r["wall_s"], r["reingest_s"], r["reingest_fraction"], r["reingest_committed"]]
            for n, r in results.items()
        ],
        digits=3,
    )
    write_json(
        args.out,
        {
            "bench": "ingest",
            "model_load_excluded_s": load.seconds,
            "target_total_over_floor": TARGET_RATIO,
            "sets": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
