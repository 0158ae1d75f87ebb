"""Building a collection: ``fathom ingest`` and ``ask FILE``'s first use.

A build parses and chunks what changed (unchanged files, by sha256, keep their chunks and
vectors), embeds the new chunks, writes a new ``gen-*`` folder, fsyncs it, then replaces
``manifest.json`` — the commit point — and removes the generations no reader holds. A crash at
any point leaves the previous manifest and its generation intact. One bad file is recorded in
the manifest as failed, with the reason, and the rest of the batch goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.base import Chunk, Document
from fathom.core.errors import IndexMismatchError, ParseError
from fathom.index.collection import check_name, collections_root, embed_input
from fathom.index.generation import (
    Pending,
    assemble_generation,
    collect_garbage,
    embedder_precision,
    max_generation,
    write_generation,
)
from fathom.index.locks import writer_lock
from fathom.index.manifest import DocEntry, Manifest, file_sha256, read_manifest
from fathom.index.ocr_words import PageWords, WordsUpdate

if TYPE_CHECKING:
    from fathom.core.base import Chunker, Embedder
    from fathom.core.config import Config

Progress = Callable[..., None]


@dataclass
class FileResult:
    path: str
    status: str  # ok | unchanged | failed | skipped | removed
    reason: str = ""
    pages: int = 0
    chunks: int = 0
    ocr_pages: int = 0  # pages whose text was read by OCR


@dataclass
class IngestReport:
    collection: str
    generation: int
    committed: bool
    files: list[FileResult] = field(default_factory=list)
    embedded_chunks: int = 0
    total_chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # about the collection, not one file

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def ocr_pages(self) -> int:
        """Pages read by OCR in this run (an unchanged file keeps its count, but was not read)."""
        return sum(f.ocr_pages for f in self.files if f.status == "ok")

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "generation": self.generation,
            "committed": self.committed,
            "counts": {
                s: self.count(s) for s in ("ok", "unchanged", "failed", "skipped", "removed")
            },
            "embedded_chunks": self.embedded_chunks,
            "total_chunks": self.total_chunks,
            "ocr_pages": self.ocr_pages,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "files": [f.__dict__ for f in self.files],
            "warnings": list(self.warnings),
        }


def _iter_inputs(
    paths: list[Path], follow_symlinks: bool
) -> Iterator[tuple[str, Path | None, str, str]]:
    """Yield ``(kind, path, status, reason)``; kind is 'file', 'records' or 'problem'. A file
    reached twice (a folder and a file inside it, or one path given twice) comes once."""
    from fathom import ingestion

    seen: set[Path] = set()
    for p in paths:
        if p.suffix.lower() == ".jsonl" and p.is_file():
            if p not in seen:
                seen.add(p)
                yield "records", p, "ok", ""
            continue
        for src in ingestion.discover([p], follow_symlinks=follow_symlinks):
            path = Path(src.path)
            if path in seen:
                continue
            seen.add(path)
            if src.status == "ok":
                yield "file", path, "ok", ""
            else:
                yield "problem", path, src.status, src.problem or ""


def _absolute(path: str | Path) -> Path:
    """``path`` made absolute against the working directory, without resolving symlinks."""
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def _split_record(entry: DocEntry) -> tuple[str, str]:
    """``(file, suffix)`` of a manifest entry's path: the ``#record`` suffix of a record from
    a ``.jsonl`` file is split off (a file name may itself hold a ``#``)."""
    path, sid = entry.path, entry.source_id
    if sid and path.endswith("#" + sid):
        return path[: -len(sid) - 1], "#" + sid
    return path, ""


def _file_of(entry: DocEntry) -> Path:
    """The file a manifest entry came from."""
    return Path(_split_record(entry)[0])


def _canonical(entry: DocEntry) -> DocEntry:
    """``entry`` with an absolute path. Paths are stored absolute, so the same file is the same
    entry whichever directory a later ingest runs from; entries from manifests written before
    that are read against the current directory."""
    file, suffix = _split_record(entry)
    if Path(file).is_absolute():
        return entry
    return DocEntry.from_dict({**entry.__dict__, "path": str(_absolute(file)) + suffix})


def _under(entry: DocEntry, roots: list[Path]) -> bool:
    base = _file_of(entry)
    return any(base == r or r in base.parents for r in roots)


def ingest(
    cfg: Config,
    paths: list[str | Path],
    name: str,
    embedder: Embedder,
    chunker: Chunker,
    rebuild: bool = False,
    progress: Progress | None = None,
    password: str | None = None,
    load_document: Callable[[Path, Any], Document] | None = None,
) -> IngestReport:
    """Bring collection ``name`` up to date with ``paths``; commit atomically.

    Unchanged documents (same path and sha256) keep their chunks and vectors; changed ones are
    re-parsed and re-embedded; documents under ``paths`` that are gone, and documents whose file
    no longer exists, are dropped. One bad file is recorded as failed and the rest go on.
    ``load_document`` parses a file in place of ``ingestion.load_document`` (Ray's results).
    """
    emit = progress or (lambda *a, **k: None)
    check_name(name)
    directory = collections_root(cfg) / name
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with writer_lock(directory, timeout=cfg.ingest.lock_timeout_s, on_wait=emit):
        old = None if rebuild else read_manifest(directory)
        old_dir = directory / old.data_dir_name if old else None
        if old is not None and old_dir is not None and not old_dir.is_dir():
            old = None  # manifest without data: treat as a fresh build
        chunker_params = {"name": chunker.name, **chunker.params()}
        if old is not None:
            _check_compatible(old, embedder, chunker_params, cfg, name)
        roots = [_absolute(p) for p in paths]
        run = _Run(cfg, name, roots, old, chunker, emit, password, load_document)
        run.read_inputs()
        timings["parse_chunk"] = time.perf_counter() - t0
        dropped = run.carry_over_old()
        report = run.report
        if old is not None and not run.changed(dropped):
            # A writer killed after its commit but before its clean-up left the previous
            # generation behind; nothing else would ever remove it.
            collect_garbage(directory, keep=old.data_dir_name)
            report.generation = old.generation
            report.total_chunks = old.n_chunks
            timings["total"] = time.perf_counter() - t0
            report.seconds = timings
            emit("done", committed=False)
            return report

        manifest = _write_next(run, directory, name, old_dir, embedder, chunker_params, timings)
        report.committed = True
        report.total_chunks = manifest.n_chunks
        collect_garbage(directory, keep=manifest.data_dir_name)
    timings["total"] = time.perf_counter() - t0
    report.seconds = timings
    emit("done", committed=True)
    return report


def _write_next(
    run: _Run,
    directory: Path,
    name: str,
    old_dir: Path | None,
    embedder: Embedder,
    chunker_params: dict[str, Any],
    timings: dict[str, float],
) -> Manifest:
    """Embed the run's new chunks in one stream of batches and write the next generation of
    collection ``name`` (the old one's kept rows copied over); its manifest."""
    cfg, old, emit, report = run.cfg, run.old, run.emit, run.report
    t1 = time.perf_counter()
    new_chunks = [c for p in run.pending for c in p.chunks]
    emit("embed_start", total=len(new_chunks))
    new_vecs = _embed_all(embedder, new_chunks, cfg, emit)
    timings["embed"] = time.perf_counter() - t1
    report.embedded_chunks = len(new_chunks)

    t2 = time.perf_counter()
    generation = (old.generation if old else max_generation(directory)) + 1
    report.generation = generation
    manifest, build = assemble_generation(
        cfg, name, generation, old, old_dir, run.kept, run.pending, run.failed, new_vecs,
        embedder, chunker_params,
    )  # fmt: skip
    words = WordsUpdate(
        new=[(p.entry.doc_id, p.entry.sha256, p.words) for p in run.pending if p.words],
        kept=[entry.doc_id for entry in run.kept.values()],
        old_dir=old_dir,
    )
    write_generation(directory, manifest, build, cfg, emit, words)
    timings["write"] = time.perf_counter() - t2
    return manifest


class _Run:
    """One ingest's reading: what every input became (kept from the old generation, parsed
    and chunked anew, failed or skipped), as the report and the next manifest will say."""

    def __init__(
        self,
        cfg: Config,
        name: str,
        roots: list[Path],
        old: Manifest | None,
        chunker: Chunker,
        emit: Progress,
        password: str | None,
        load_document: Callable[[Path, Any], Document] | None = None,
    ) -> None:
        self.cfg, self.roots, self.old, self.chunker = cfg, roots, old, chunker
        self.emit, self.password = emit, password
        # file → (under a root, exists): asked once per file, not per record of a .jsonl
        self._files: dict[str, tuple[bool, bool]] = {}
        self.old_docs = [_canonical(d) for d in old.documents] if old else []
        # An entry indexed ("ok") wins over a failed or skipped one of the same path.
        self.old_by_path = {
            d.path: d for d in sorted(self.old_docs, key=lambda d: d.status == "ok")
        }
        self.report = IngestReport(collection=name, generation=0, committed=False)
        self.kept: dict[str, DocEntry] = {}  # path -> reused entry (rows refer to the old store)
        self.pending: list[Pending] = []
        self.failed: list[DocEntry] = []
        # Content already indexed (doc_id → path): a copy is skipped, in this run or against a
        # document an earlier run indexed that this one keeps (not under the paths, still there).
        self.seen_ids: dict[str, str] = {
            d.doc_id: d.path
            for d in self.old_docs
            if d.status == "ok" and self._file(d) == (False, True)
        }
        self.admitted: set[str] = set()
        # Indexed files no longer where they were, by content: a file found elsewhere with
        # that content is the same document moved, and keeps its chunks and vectors.
        self.gone = {
            d.sha256: d
            for d in self.old_docs
            if d.status == "ok" and d.sha256 and not d.source_id and not self._file(d)[1]
        }
        self.moved_from: set[str] = set()
        self.load_document = load_document

    def _file(self, entry: DocEntry) -> tuple[bool, bool]:
        """Whether ``entry``'s file lies under a path this run reads, and still exists."""
        file = _split_record(entry)[0]
        if file not in self._files:
            self._files[file] = (_under(entry, self.roots), Path(file).exists())
        return self._files[file]

    def _result(self, path: str, status: str, reason: str = "", **info: Any) -> None:
        self.report.files.append(
            FileResult(
                path,
                status,
                reason,
                info.get("pages", 0),
                info.get("chunks", 0),
                info.get("ocr_pages", 0),
            )
        )
        extra = {"reason": reason} if reason else {}
        self.emit("file", path=path, status=status, **extra, **info)

    def fail(self, path: str, reason: str, sha: str = "") -> None:
        if not reason.startswith(path):
            reason = f"{path}: {reason}"
        self.failed.append(DocEntry(path, "failed", sha, error=reason))
        self._result(path, "failed", reason)

    def _unchanged(self, path: str, prev: DocEntry, reason: str = "") -> None:
        self.kept[path] = prev
        self.report.files.append(
            FileResult(path, "unchanged", reason, prev.pages, prev.chunks, prev.ocr_pages)
        )
        extra = {"reason": reason} if reason else {}
        self.emit("file", path=path, status="unchanged", chunks=prev.chunks, **extra)

    def _moved(self, path: str, sha: str) -> bool:
        """Keep a file another path held when it was indexed, and is gone from, as that
        document under its new path (no parsing, no embedding); whether it was one."""
        prev = self.gone.pop(sha, None)
        if prev is None or prev.doc_id in self.seen_ids:
            return False
        self.moved_from.add(prev.path)
        self.seen_ids[prev.doc_id] = path
        self._unchanged(path, dataclasses.replace(prev, path=path), f"moved from {prev.path}")
        return True

    def admit(self, doc: Document, size: int, words: PageWords | None = None) -> None:
        """A parsed document: skipped as a repeat or a copy, kept when unchanged, else chunked
        and queued for embedding (with ``words``, those OCR read on its pages)."""
        prev = self.old_by_path.get(doc.path)
        if doc.path in self.admitted:  # a .jsonl record whose id repeats an earlier one
            reason = f"record id {doc.source_id!r} repeats an earlier record; not indexed"
            self._result(doc.path, "skipped", reason)
            return
        self.admitted.add(doc.path)
        if doc.doc_id in self.seen_ids:
            first = self.seen_ids[doc.doc_id]
            self.report.files.append(FileResult(doc.path, "skipped", f"same content as {first}"))
            self.failed.append(
                DocEntry(doc.path, "skipped", doc.sha256, doc.doc_id, error=f"duplicate of {first}")
            )
            return
        self.seen_ids[doc.doc_id] = doc.path
        if prev is not None and prev.status == "ok" and prev.sha256 == doc.sha256:
            self._unchanged(doc.path, prev)
            return
        chunks = self.chunker.split(doc)
        entry = DocEntry(
            path=doc.path,
            status="ok",
            sha256=doc.sha256,
            doc_id=doc.doc_id,
            title=doc.title,
            format=doc.format,
            source_id=doc.source_id,
            size=size,
            pages=len(doc.pages),
            sections=len(doc.sections),
            chunks=len(chunks),
            warnings=list(doc.warnings),
            ocr_pages=len(doc.ocr_pages),
            meta=doc.meta.to_dict(),
        )
        if not chunks:
            entry.status, entry.error = "failed", "no text to index"
            self.failed.append(entry)
            self._result(doc.path, "failed", entry.error)
            return
        self.pending.append(Pending(entry, chunks, words or {}))
        info = {"ocr_pages": len(doc.ocr_pages)} if doc.ocr_pages else {}
        self._result(doc.path, "ok", pages=len(doc.pages), chunks=len(chunks), **info)

    def read_inputs(self) -> None:
        """Every file and record under the roots, each once."""
        from fathom import ingestion

        inputs = list(_iter_inputs(self.roots, self.cfg.ingest.follow_symlinks))
        self.emit("discovered", files=sum(1 for k, *_ in inputs if k != "problem"))
        for kind, path, status, reason in inputs:
            assert path is not None
            if kind == "problem":
                if status == "failed":
                    self.fail(str(path), reason)
                else:
                    self._result(str(path), "skipped", reason)
            elif kind == "records":
                try:
                    for doc in ingestion.load_records(path):
                        self.admit(doc, len(doc.text))
                except (ParseError, OSError, ValueError) as exc:
                    self.fail(str(path), str(exc))
            else:
                self._read_file(path)

    def _read_file(self, path: Path) -> None:
        from fathom import ingestion

        spath, ing = str(path), self.cfg.ingest
        max_bytes = ing.max_file_mb << 20
        try:
            size = path.stat().st_size
            if size > max_bytes:
                raise ParseError(
                    spath,
                    f"{size >> 20} MiB is over the {ing.max_file_mb} MiB limit",
                    "raise ingest.max_file_mb or split the file",
                )
            sha = file_sha256(path)
        except ParseError as exc:
            self.fail(spath, str(exc))
            return
        except OSError as exc:
            self.fail(spath, f"{spath}: cannot read ({exc.strerror or exc})")
            return
        prev = self.old_by_path.get(spath)
        if prev is not None and prev.status == "ok" and prev.sha256 == sha:
            if prev.doc_id in self.seen_ids:
                first = self.seen_ids[prev.doc_id]
                self.report.files.append(FileResult(spath, "skipped", f"same content as {first}"))
                return
            self.seen_ids[prev.doc_id] = spath
            self._unchanged(spath, prev)
            return
        if self._moved(spath, sha):
            return
        started = time.perf_counter()

        def on_page(done: int, total: int) -> None:
            rate = done / max(time.perf_counter() - started, 1e-9)
            self.emit("ocr_page", path=spath, done=done, total=total, rate=rate)

        words: PageWords = {}  # what OCR read on each page, for showing it without OCR

        load = self.load_document or ingestion.load_document
        try:
            doc = load(path, load_options(self.cfg, self.password, on_page, words.__setitem__))
        except ParseError as exc:
            self.fail(spath, str(exc), sha)
            return
        except Exception as exc:  # a parser bug on one file must not sink the batch
            self.fail(spath, f"{spath}: unexpected parser error ({type(exc).__name__}: {exc})", sha)
            return
        self.admit(doc, size, words)

    def carry_over_old(self) -> bool:
        """Old documents not seen this run: dropped if under a given root or gone from disk,
        else kept (failed and skipped ones too, so a later ingest of another folder keeps
        saying why they are not indexed). Whether any was dropped."""
        seen_paths = {f.path for f in self.report.files}
        dropped = False
        for doc in self.old_docs:
            if doc.path in seen_paths or doc.path in self.moved_from:
                continue
            if self._file(doc) != (False, True):  # under a path read, or gone
                dropped = True
                if doc.status == "ok":
                    self._result(doc.path, "removed", "no longer present")
            elif doc.status == "ok":
                self.kept[doc.path] = doc
            else:
                self.failed.append(doc)
            seen_paths.add(doc.path)
        return dropped

    def changed(self, dropped: bool) -> bool:
        """Whether the collection needs a new generation."""
        old = self.old
        if old is None or self.pending or dropped:
            return True
        old_failed = {(d.path, d.error) for d in self.old_docs if d.status != "ok"}
        new_failed = {(d.path, d.error) for d in self.failed}
        moved = any(d.path != c.path for d, c in zip(old.documents, self.old_docs, strict=True))
        return new_failed != old_failed or moved or bool(self.moved_from)


def load_options(cfg: Config, password: str | None, on_page: Any, on_words: Any) -> Any:
    """The loaders' options from ``ingest.*``: limits, password, OCR, the callbacks that
    report OCR progress and keep the words OCR read."""
    from fathom import ingestion

    ing = cfg.ingest
    return ingestion.LoadOptions(
        max_bytes=ing.max_file_mb << 20,
        password=password,
        ocr=ingestion.OcrSettings(
            ing.ocr, ing.ocr_min_confidence, ing.ocr_dpi, page_timeout_s=ing.ocr_page_timeout_s
        ),
        on_page=on_page,
        on_words=on_words,
        timeout_s=ing.file_timeout_s,
        max_text_chars=ing.max_text_mb << 20,
    )


def _check_compatible(
    old: Manifest, embedder: Embedder, chunker_params: dict[str, Any], cfg: Config, name: str
) -> None:
    fix = f"re-ingest with `fathom ingest ... --collection {name} --rebuild` or use another name"
    if old.embedder_id != embedder.id:
        raise IndexMismatchError(
            f"collection {name!r} was built with embedder {old.embedder_id!r}, "
            f"not {embedder.id!r} — {fix}"
        )
    if old.chunker != chunker_params:
        raise IndexMismatchError(
            f"collection {name!r} was chunked with {old.chunker}, not {chunker_params} — {fix}"
        )
    if old.embedder_precision != embedder_precision(embedder):
        raise IndexMismatchError(
            f"collection {name!r} was embedded at precision {old.embedder_precision!r}, not "
            f"{embedder_precision(embedder)!r} — {fix}"
        )
    if old.embed_title_prefix != cfg.embedder.title_prefix:
        raise IndexMismatchError(
            f"collection {name!r} has embedder.title_prefix = {old.embed_title_prefix} — {fix}"
        )


def _embed_all(embedder: Embedder, chunks: list[Chunk], cfg: Config, emit: Progress):
    import numpy as np

    texts = [embed_input(c, cfg.embedder.title_prefix) for c in chunks]
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    # Large outer batches keep the model's own length-sorted batching effective while still
    # reporting progress; each call sorts by length internally.
    step = max(cfg.embedder.batch_size * 16, 256)
    parts = []
    for start in range(0, len(texts), step):
        parts.append(embedder.embed(texts[start : start + step]))
        emit("embedded", done=min(start + step, len(texts)), total=len(texts))
    return np.concatenate(parts, axis=0)


def ingest_paths(
    cfg: Config,
    paths: list[str | Path],
    name: str,
    rebuild: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    password: str | None = None,
    chunker: Chunker | None = None,
    load_document: Callable[[Path, Any], Document] | None = None,
) -> IngestReport:
    """``ingest`` with the embedder and chunker that ``cfg`` names (``embedder``, ``chunker``
    and ``load_document`` override them, e.g. with Ray's results; ``password`` opens
    encrypted PDFs)."""
    from fathom.chunking import make_chunker
    from fathom.index.embed import make_embedder

    embedder = embedder or make_embedder(cfg.embedder, cfg.models_path())
    chunker = chunker or make_chunker(cfg.chunker, embedder.token_counter())
    report = ingest(
        cfg, paths, name, embedder, chunker, rebuild=rebuild, progress=progress,
        password=password, load_document=load_document,
    )  # fmt: skip
    warning = _export_query_model(cfg, getattr(embedder, "inner", embedder), progress)
    if warning:
        report.warnings.append(warning)
    return report


def _export_query_model(cfg: Config, embedder: Embedder, progress: Progress | None) -> str | None:
    """Leave an ONNX export of the embedder for the torch-free query path (once per model);
    the warning when the export failed."""
    from fathom.index.embed import SentenceTransformerEmbedder, ensure_onnx_export
    from fathom.index.onnx_embed import onnx_dir, onnx_ready

    if (
        not isinstance(embedder, SentenceTransformerEmbedder)
        or cfg.embedder.query_backend == "torch"
    ):
        return None
    if onnx_ready(onnx_dir(cfg.models_path(), embedder.id), embedder.id):
        return None
    if progress:
        progress("exporting", model=embedder.id)
    try:
        ensure_onnx_export(embedder, cfg.models_path())
    except Exception as exc:  # the query path falls back to sentence-transformers
        warning = (
            f"ONNX export of {embedder.id} failed ({exc}); queries will load sentence-transformers"
        )
        logging.getLogger(__name__).warning(warning)
        if progress:
            progress("warning", message=warning)
        return warning
    return None
