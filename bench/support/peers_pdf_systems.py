"""One system's run for bench/peers_pdf.py, in a child process: each PDF indexed on its own
(kept under ``work/<system>/<doc>`` and reused on a rerun, with the timings of the run that built
it), then each of its questions searched to ``depth``, each hit written as ``[pages, tokens]``.

- ``llamaindex``: ``SimpleDirectoryReader(input_files=[pdf]).load_data()`` (its default PDF
  reader: pypdf, one Document per page) → ``VectorStoreIndex.from_documents`` with the default
  ``SentenceSplitter`` and ``HuggingFaceEmbedding`` of the packaged MiniLM; a node's page is the
  place of the page Document it was split from.
- ``txtai``: the per-page text LlamaIndex's reader extracts, read again for it (txtai's
  ``Textractor`` has no backend that runs offline here: bench/peers_pdf.py says why)
  → ``Segmentation(paragraphs=True)`` → ``Embeddings(path=MODEL, content=True, hybrid=True)``;
  a segment keeps its page.
- ``fathom``: each PDF ingested into a collection of its own in ``work/fathom-home`` (timed
  only: ingest as ``ask`` does it on first use), and searched with Fathom's hybrid retrieval in
  the collections the MMLongBench run answered from (``mmlb_home``).

The spec: ``{"documents": [{"doc_id", "pdf", "questions": [{"qid", "question"}]}], "depth",
"work", "mmlb_home", "threads"}``; the output: ``{"documents": {doc_id: {"read_s", "build_s",
"units", "cached"}}, "ranked": {qid: [[pages, tokens], ...]}}``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import log
from fathom.bench.peers import model_path, set_threads
from fathom.bench.support.peers_pdf_match import page_numbers


def _counter():
    from fathom.chunking.tokens import token_counter_for

    return token_counter_for(model_path())


def _cached(folder: Path) -> dict[str, Any] | None:
    meta = folder / "meta.json"
    return json.loads(meta.read_text()) | {"cached": True} if meta.is_file() else None


def _save_meta(folder: Path, meta: dict[str, Any]) -> dict[str, Any]:
    (folder / "meta.json").write_text(json.dumps(meta))
    return meta | {"cached": False}


def read_pages(pdf: Path) -> tuple[list[Any], float]:
    """LlamaIndex's default reading of ``pdf``: its page Documents and the seconds it took."""
    from llama_index.core import SimpleDirectoryReader

    t = time.perf_counter()
    docs = SimpleDirectoryReader(input_files=[str(pdf)]).load_data()
    return docs, time.perf_counter() - t


class LlamaIndexSystem:
    """LlamaIndex's defaults over one PDF at a time."""

    def __init__(self) -> None:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        self.embed = HuggingFaceEmbedding(model_name=model_path(), device="cpu")
        self.embed.get_text_embedding("warm-up")  # the model's first call is not timed

    def info(self) -> dict[str, Any]:
        return {}

    def build(self, pdf: Path, folder: Path) -> dict[str, Any]:
        from llama_index.core import VectorStoreIndex

        docs, read_s = read_pages(pdf)
        t = time.perf_counter()
        index = VectorStoreIndex.from_documents(docs, embed_model=self.embed)
        index.storage_context.persist(persist_dir=str(folder))
        build_s = time.perf_counter() - t
        pages = page_numbers([d.doc_id for d in docs])
        meta = {"read_s": read_s, "build_s": build_s, "units": len(index.docstore.docs)}
        (folder / "pages.json").write_text(json.dumps(pages))
        return _save_meta(folder, meta)

    def open(self, folder: Path):
        from llama_index.core import StorageContext, load_index_from_storage

        storage = StorageContext.from_defaults(persist_dir=str(folder))
        index = load_index_from_storage(storage, embed_model=self.embed)
        return index, json.loads((folder / "pages.json").read_text())

    def search(self, opened, query: str, depth: int, counter) -> list[list[Any]]:
        from llama_index.core.schema import MetadataMode

        index, pages = opened
        nodes = index.as_retriever(similarity_top_k=depth).retrieve(query)
        texts = [n.node.get_content(MetadataMode.NONE) for n in nodes]
        counts = counter.count(texts) if texts else []
        return [[[pages[n.node.ref_doc_id]], c] for n, c in zip(nodes, counts, strict=True)]


class TxtaiSystem:
    """txtai's defaults (as bench/peers.py's txtai-default) over one PDF's page texts."""

    def __init__(self) -> None:
        from txtai import Embeddings
        from txtai.pipeline import Segmentation

        self.models: dict[str, Any] = {}  # txtai's model cache: one MiniLM for every index
        self.segment = Segmentation(paragraphs=True)
        warm = Embeddings(path=model_path(), content=True, hybrid=True, models=self.models)
        warm.index([{"id": "0::0", "text": "warm-up"}])  # the model's load is not timed

    def info(self) -> dict[str, Any]:
        """Which backend txtai's Textractor would read a PDF with here (None: none installed)."""
        from txtai.pipeline.data.filetohtml import FileToHTML

        backend = FileToHTML("available").backend
        return {"textractor_backend": type(backend).__name__ if backend else None}

    def build(self, pdf: Path, folder: Path) -> dict[str, Any]:
        from txtai import Embeddings

        docs, read_s = read_pages(pdf)
        texts = [d.text for d in docs]
        t = time.perf_counter()
        rows = [
            {"id": f"{page}::{i}", "text": part}
            for page, text in enumerate(texts, start=1)
            for i, part in enumerate(self.segment(text))
        ]
        embeddings = Embeddings(path=model_path(), content=True, hybrid=True, models=self.models)
        embeddings.index(rows)
        embeddings.save(str(folder))
        meta = {"read_s": read_s, "build_s": time.perf_counter() - t, "units": len(rows)}
        return _save_meta(folder, meta)

    def open(self, folder: Path):
        from txtai import Embeddings

        if not (folder / "embeddings").is_file():
            return None  # no text to index (a PDF of scanned pages): txtai saves no index
        embeddings = Embeddings(models=self.models)
        embeddings.load(str(folder))
        return embeddings

    def search(self, opened, query: str, depth: int, counter) -> list[list[Any]]:
        rows = opened.search(query, depth) if opened is not None else []
        counts = counter.count([r["text"] for r in rows]) if rows else []
        return [[[int(r["id"].split("::")[0])], c] for r, c in zip(rows, counts, strict=True)]


class FathomSystem:
    """Fathom's ingest (timed, into its own home) and hybrid search (in the answered run's)."""

    def __init__(self, work: Path, mmlb_home: Path) -> None:
        from fathom.bench.common import bench_config
        from fathom.index.embed import make_embedder
        from fathom.index.ingest import ingest_paths

        self.cfg = bench_config(work / "fathom-home")
        self.answered = bench_config(mmlb_home)
        # One untimed ingest first: it exports the ONNX model every later ingest embeds with.
        tiny = work / "warm-up.txt"
        tiny.parent.mkdir(parents=True, exist_ok=True)
        tiny.write_text("Fathom warm-up document.\n")
        ingest_paths(self.cfg, [tiny], "warm-up")
        self.embedder = make_embedder(self.cfg.embedder, self.cfg.models_path())
        self.embedder.embed(["warm-up"])
        self.names = collections_by_file(mmlb_home)

    def info(self) -> dict[str, Any]:
        return {}

    def build(self, pdf: Path, folder: Path) -> dict[str, Any]:
        from fathom.index.ingest import ingest_paths

        t = time.perf_counter()
        report = ingest_paths(self.cfg, [pdf], "peers-pdf-" + folder.name, embedder=self.embedder)
        wall = time.perf_counter() - t
        parse = report.seconds.get("parse_chunk", 0.0)
        meta = {"read_s": parse, "build_s": wall - parse, "units": report.total_chunks}
        return _save_meta(folder, meta)

    def open(self, folder: Path):
        from fathom.index.retrieve import open_retriever

        return open_retriever(self.answered, self.names[folder.name])

    def search(self, opened, query: str, depth: int, counter) -> list[list[Any]]:
        hits = opened.probe(query, depth).hits
        counts = counter.count([h.chunk.text for h in hits]) if hits else []
        return [
            [list(range(h.chunk.page_start, h.chunk.page_end + 1)), c]
            for h, c in zip(hits, counts, strict=True)
        ]


def collections_by_file(home: Path) -> dict[str, str]:
    """The collections of a FATHOM_HOME by the file name of the one document each holds (the
    MMLongBench worker names them ``auto-<hash of the content>``)."""
    out: dict[str, str] = {}
    for manifest in sorted((home / "collections").glob("*/manifest.json")):
        data = json.loads(manifest.read_text())
        for doc in data.get("documents", []):
            if doc.get("status") == "ok":
                out[Path(doc["path"]).name] = data["name"]
    return out


def make_system(name: str, spec: dict[str, Any]):
    if name == "llamaindex":
        return LlamaIndexSystem()
    if name == "txtai":
        return TxtaiSystem()
    if name == "fathom":
        return FathomSystem(Path(spec["work"]), Path(spec["mmlb_home"]))
    raise SystemExit(f"unknown system {name}")


def run(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Index every document of ``spec`` (or reuse its index) and search each of its questions."""
    set_threads(int(spec["threads"]))
    system = make_system(name, spec)
    counter = _counter()
    out: dict[str, Any] = {"documents": {}, "ranked": {}, **system.info()}
    docs = spec["documents"]
    for i, doc in enumerate(docs, start=1):
        folder = Path(spec["work"]) / name / doc["doc_id"]
        meta = _cached(folder)
        if meta is None:
            folder.mkdir(parents=True, exist_ok=True)
            meta = system.build(Path(doc["pdf"]), folder)
        out["documents"][doc["doc_id"]] = meta
        opened = system.open(folder)
        for q in doc["questions"]:
            out["ranked"][q["qid"]] = system.search(opened, q["question"], spec["depth"], counter)
        log(
            f"{name} [{i}/{len(docs)}] {doc['doc_id']}: {meta['units']} chunks, read "
            f"{meta['read_s']:.1f} s, build {meta['build_s']:.1f} s"
            + (" (kept)" if meta["cached"] else "")
        )
    return out
