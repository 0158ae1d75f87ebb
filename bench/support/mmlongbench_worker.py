"""One variant's run for bench/mmlongbench.py, in one warm process: each document ingested into
its own collection (``FATHOM_HOME``: reused when it is there), then each of its questions asked
of it with an ``Engine``, one JSON line per answer (``Answer.to_dict()`` as ``ask --json`` prints
it, with ``qid``, ``doc_id`` and ``ask_ms``) appended to the answers file.

Run as a script (``python mmlongbench_worker.py JOBS.json``) with the Fathom tree under test first
on ``PYTHONPATH`` as ``fathom``: it imports only the standard library at the top and only that
tree's public entry points (``load_config``, ``resolve_target``, ``Engine``) after, so another
checkout runs its own code. The configuration is loaded as the CLI loads it (``./fathom.toml``,
the environment), with ``generator.backend = extractive``.

``JOBS.json``: ``{"answers": PATH, "ingest_log": PATH, "documents": [{"doc_id", "path",
"questions": [{"qid", "question"}, ...]}, ...]}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def _progress(label: str):
    """An ingest progress callback: a line on stderr at most every 30 s of embedding."""
    last = [0.0]

    def emit(event: str, **info: Any) -> None:
        now = time.perf_counter()
        if event == "embedded" and now - last[0] >= 30:
            last[0] = now
            _log(f"  {label}: embedded {info.get('done')}/{info.get('total')} chunks")

    return emit


def run(jobs: dict[str, Any]) -> None:
    import fathom
    from fathom.core.config import load_config
    from fathom.index.targets import resolve_target
    from fathom.stages.pipeline import Engine

    _log(f"fathom from {Path(fathom.__file__).resolve().parent}")
    cfg = load_config(overrides={"generator.backend": "extractive"})
    documents = jobs["documents"]
    with (
        open(jobs["answers"], "a", encoding="utf-8") as out,
        open(jobs["ingest_log"], "a", encoding="utf-8") as ingest_log,
    ):
        for i, doc in enumerate(documents, 1):
            label = f"[{i}/{len(documents)}] {doc['doc_id']}"
            t0 = time.perf_counter()
            collection = resolve_target(cfg, doc["path"], progress=_progress(label))
            ingest_s = time.perf_counter() - t0
            ingest_log.write(json.dumps({"doc_id": doc["doc_id"], "resolve_s": ingest_s}) + "\n")
            ingest_log.flush()
            _log(f"{label}: collection ready in {ingest_s:.1f} s; {len(doc['questions'])} asks")
            engine = Engine(cfg, collection)
            try:
                for q in doc["questions"]:
                    t = time.perf_counter()
                    answer = engine.ask(q["question"])
                    ask_ms = (time.perf_counter() - t) * 1000
                    row = {"qid": q["qid"], "doc_id": doc["doc_id"], "ask_ms": ask_ms}
                    out.write(json.dumps({**row, **answer.to_dict()}, default=str) + "\n")
                    out.flush()
            finally:
                engine.close()


if __name__ == "__main__":
    run(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
