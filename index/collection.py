"""A collection on disk: manifest, chunk store, FAISS and BM25 — built atomically, incrementally.

Layout under ``FATHOM_HOME/collections/<name>/``::

    manifest.json        the commit marker; names the live generation
    gen-000007/          chunks.jsonl, chunks.offsets.npy, dense.faiss, bm25/
    .lock                held by the one writer

A build writes a new ``gen-*`` directory, fsyncs it, then replaces ``manifest.json``; older
generations are removed after the commit. A crash at any point leaves the previous manifest and
its generation intact, so the collection always loads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import portalocker
from fathom.core.base import Chunk, Document, content_id
from fathom.core.errors import (
    CollectionLocked,
    CollectionNotFound,
    ConfigError,
    FathomError,
    IndexMismatchError,
    ParseError,
)
from fathom.index.manifest import (
    FORMAT_VERSION,
    DocEntry,
    Manifest,
    file_sha256,
    fsync_dir,
    read_manifest,
    write_manifest,
)
from fathom.index.store import ChunkStore, write_chunks

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Chunker, Embedder
    from fathom.core.config import Config
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Bm25Index

# In each generation: readers hold a shared lock on it while the collection is open, so a
# writer's clean-up leaves a generation in use alone (a later ingest removes it).
READERS = ".readers"


def fathom_version() -> str:
    """The version of the Fathom that writes (recorded in manifests, policies and runs)."""
    from fathom import __version__

    return __version__


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

Progress = Callable[..., None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def collections_root(cfg: Config) -> Path:
    return cfg.home_path() / "collections"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"collection name {name!r}: use letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)"
        )
    return name


def embed_input(chunk: Chunk, title_prefix: bool) -> str:
    """What the embedder and BM25 read for a chunk: its text, headed by title and section."""
    if not title_prefix:
        return chunk.text
    head = [h for h in (chunk.title, chunk.section) if h and not chunk.text.startswith(h)]
    if len(head) == 2 and head[0] == head[1]:
        head = head[:1]
    return (" — ".join(head) + "\n" + chunk.text) if head else chunk.text


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


class Collection:
    """A committed collection, opened read-only. Indexes load on first use."""

    def __init__(self, directory: Path, manifest: Manifest, cfg: Config) -> None:
        self.directory = directory
        self.manifest = manifest
        self.cfg = cfg
        self.data_dir = directory / manifest.data_dir_name
        self._store: ChunkStore | None = None
        self._dense: DenseIndex | None = None
        self._bm25: Bm25Index | None = None
        self._release: weakref.finalize | None = None  # closes the reader lock's fd

    def _hold(self) -> bool:
        """Take the shared reader lock on this generation; False when the generation is gone
        (a writer's clean-up removed it first) and the manifest must be read again."""
        try:
            fd = os.open(self.data_dir / READERS, os.O_RDONLY)
        except FileNotFoundError:
            # A generation written before reader locks existed (still the manifest's: a
            # clean-up never removes the current one), or one a clean-up is removing now.
            current = read_manifest(self.directory)
            return current is not None and current.data_dir_name == self.manifest.data_dir_name
        portalocker.lock(fd, portalocker.LOCK_SH)  # waits only while a clean-up is deciding
        if not (self.data_dir / READERS).exists():
            os.close(fd)
            return False
        # Released by close(), or when the collection is garbage-collected unclosed.
        self._release = weakref.finalize(self, os.close, fd)
        return True

    @property
    def name(self) -> str:
        return self.manifest.name

    @classmethod
    def open(cls, cfg: Config, name: str, expect_embedder: str | None = None) -> Collection:
        """Open ``name``; ``expect_embedder`` (an id) must match the one it was built with."""
        directory = collections_root(cfg) / check_name(name)
        for _attempt in range(3):
            manifest = read_manifest(directory)
            if manifest is None:
                raise CollectionNotFound(
                    f"no collection named {name!r} in {collections_root(cfg)} — "
                    f"create it with `fathom ingest PATH --collection {name}`"
                )
            coll = cls(directory, manifest, cfg)
            if coll.data_dir.is_dir() and coll._hold():
                break
            time.sleep(0.05)  # a writer committed and removed our generation: read again
        else:
            raise IndexMismatchError(
                f"collection {name!r}: manifest names {manifest.data_dir_name}, which is missing — "
                f"re-ingest with `fathom ingest ... --collection {name} --rebuild`"
            )
        if expect_embedder and expect_embedder != manifest.embedder_id:
            raise IndexMismatchError(
                f"collection {name!r} was built with embedder {manifest.embedder_id!r}, but "
                f"{expect_embedder!r} is configured — use --embedder {manifest.embedder_id} or "
                f"re-ingest with `fathom ingest ... --collection {name} --rebuild`"
            )
        return coll

    @property
    def store(self) -> ChunkStore:
        if self._store is None:
            self._store = ChunkStore(self.data_dir)
        return self._store

    @property
    def dense(self) -> DenseIndex:
        if self._dense is None:
            from fathom.index.dense import DenseIndex

            self._dense = DenseIndex.load(self.data_dir, self.cfg.index.hnsw_ef_search)
        return self._dense

    @property
    def bm25(self) -> Bm25Index:
        if self._bm25 is None:
            from fathom.index.sparse import Bm25Index

            self._bm25 = Bm25Index.load(self.data_dir)
        return self._bm25

    def __len__(self) -> int:
        return self.manifest.n_chunks

    def chunks(self, rows: Iterable[int]) -> list[Chunk]:
        return self.store.rows(rows)

    def embed_text(self, chunk: Chunk) -> str:
        return embed_input(chunk, self.manifest.embed_title_prefix)

    def check(self) -> list[str]:
        """Consistency problems (empty when the collection is sound)."""
        import numpy as np

        problems: list[str] = []
        m = self.manifest
        n = m.n_chunks
        if len(self.store) != n:
            problems.append(f"chunk store has {len(self.store)} rows, manifest says {n}")
        if self.dense.size != n:
            problems.append(f"dense index has {self.dense.size} vectors, manifest says {n}")
        if self.dense.dim != m.embedder_dim:
            problems.append(f"dense dim {self.dense.dim} != manifest {m.embedder_dim}")
        if self.bm25.n != n:
            problems.append(f"bm25 has {self.bm25.n} rows, manifest says {n}")
        covered = 0
        for doc in sorted((d for d in m.documents if d.status == "ok"), key=lambda d: d.rows):
            start, end = doc.rows
            if start != covered or end - start != doc.chunks:
                problems.append(f"{doc.path}: rows {doc.rows} do not follow {covered}")
            covered = end
        if covered != n:
            problems.append(f"documents cover {covered} rows of {n}")
        if problems:
            return problems
        chunks = self.store.all()
        ids = [c.chunk_id for c in chunks]
        if len(set(ids)) != len(ids):
            problems.append("duplicate chunk ids")
        for doc in m.documents:
            if doc.status != "ok":
                continue
            for c in chunks[doc.rows[0] : doc.rows[1]]:
                if c.doc_id != doc.doc_id:
                    problems.append(f"row of {c.chunk_id} belongs to {c.doc_id}, not {doc.doc_id}")
                    break
        if n:
            norms = np.linalg.norm(self.dense.vectors(0, min(n, 2048)), axis=1)
            if not np.all(np.abs(norms - 1) < 1e-3):
                problems.append("dense vectors are not unit length")
        return problems

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._release is not None:
            self._release()  # closes the fd: releases the shared lock
            self._release = None


def list_collections(
    cfg: Config, unreadable: list[tuple[str, str]] | None = None
) -> list[Manifest]:
    """The readable collections; each one that cannot be read (another format version, a
    broken manifest) is appended to ``unreadable`` as ``(name, reason)`` when it is given."""
    root = collections_root(cfg)
    out = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                try:
                    manifest = read_manifest(child)
                except IndexMismatchError as exc:
                    if unreadable is not None:
                        unreadable.append((child.name, str(exc)))
                    continue
                if manifest is not None:
                    out.append(manifest)
    return out


def remove_collection(cfg: Config, name: str) -> None:
    directory = collections_root(cfg) / check_name(name)
    if not (directory / "manifest.json").exists() and not directory.is_dir():
        raise CollectionNotFound(f"no collection named {name!r} in {collections_root(cfg)}")
    with writer_lock(directory, timeout=10.0):
        # Uncommit first, so a crash mid-removal never leaves a half collection that looks valid.
        with contextlib.suppress(FileNotFoundError):
            os.remove(directory / "manifest.json")
        fsync_dir(directory)
    shutil.rmtree(directory, ignore_errors=True)


def collection_for(paths: Iterable[str | Path], embedder: str | None = None) -> str:
    """The cached collection name for files/folders, keyed by the sha256 of each file, and by
    the embedder id when it is not the default one (so asking with another ``--embedder``
    builds its own collection instead of taking over, or refusing, the default's)."""
    from fathom import ingestion

    shas = []
    paths = [Path(p) for p in paths]
    for p in paths:
        if p.suffix.lower() == ".jsonl" and p.is_file():  # records, as ingest reads them
            shas.append(file_sha256(p))
    for src in ingestion.discover([p for p in paths if p.suffix.lower() != ".jsonl"]):
        if src.status == "ok":
            try:
                shas.append(file_sha256(Path(src.path)))
            except OSError:
                continue
    if not shas:
        raise FathomError(
            f"{', '.join(map(str, paths))}: no supported documents "
            f"({', '.join(sorted(ingestion.SUPPORTED_SUFFIXES))}, or a docs.jsonl)"
        )
    from fathom.core.config import EmbedderConfig
    from fathom.index.embed import embedder_id_for

    default = embedder_id_for(EmbedderConfig())
    extra = (embedder,) if embedder and embedder != default else ()
    return "auto-" + content_id(*sorted(shas), *extra)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def writer_lock(directory: Path, timeout: float = 600.0, on_wait: Progress | None = None):
    """Exclusive writer lock on a collection (an advisory lock on ``.lock``: ``flock`` on
    Linux and macOS, ``LockFileEx`` on Windows, through portalocker)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise FathomError(
            f"{directory}: cannot write the collection ({exc.strerror or exc}) — set FATHOM_HOME "
            "or `home` in fathom.toml to a writable folder"
        ) from None
    try:
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                portalocker.lock(fd, portalocker.LOCK_EX | portalocker.LOCK_NB)
                break
            except portalocker.AlreadyLocked:
                if not waited and on_wait is not None:
                    on_wait("waiting", collection=directory.name)
                waited = True
                if time.monotonic() >= deadline:
                    raise CollectionLocked(
                        f"collection {directory.name!r} is being written by another process "
                        f"(waited {timeout:g} s) — wait for it to finish, or retry later "
                        "(ingest.lock_timeout_s sets the wait)"
                    ) from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


@dataclass
class FileResult:
    path: str
    status: str  # ok | unchanged | failed | skipped | removed
    reason: str = ""
    pages: int = 0
    chunks: int = 0


@dataclass
class IngestReport:
    collection: str
    generation: int
    committed: bool
    files: list[FileResult] = field(default_factory=list)
    embedded_chunks: int = 0
    total_chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

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
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "files": [f.__dict__ for f in self.files],
        }


@dataclass
class _Pending:
    """A document parsed and chunked in this run, waiting for its vectors."""

    entry: DocEntry
    chunks: list[Chunk]


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
) -> IngestReport:
    """Bring collection ``name`` up to date with ``paths``; commit atomically.

    Unchanged documents (same path and sha256) keep their chunks and vectors; changed ones are
    re-parsed and re-embedded; documents under ``paths`` that are gone, and documents whose file
    no longer exists, are dropped. One bad file is recorded as failed and the rest go on.
    """
    from fathom import ingestion

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
        old_docs = [_canonical(d) for d in old.documents] if old else []
        # An entry indexed ("ok") wins over a failed or skipped one of the same path.
        old_by_path = {d.path: d for d in sorted(old_docs, key=lambda d: d.status == "ok")}

        roots = [_absolute(p) for p in paths]
        report = IngestReport(collection=name, generation=0, committed=False)
        kept: dict[str, DocEntry] = {}  # path -> reused entry (rows refer to the old store)
        pending: list[_Pending] = []
        failed: list[DocEntry] = []
        # Content already indexed (doc_id → path): a copy is skipped, in this run or against a
        # document an earlier run indexed that this one keeps (not under the paths, still there).
        seen_ids: dict[str, str] = {
            d.doc_id: d.path
            for d in old_docs
            if d.status == "ok" and not _under(d, roots) and _file_of(d).exists()
        }
        admitted: set[str] = set()

        def admit(doc: Document, size: int) -> None:
            prev = old_by_path.get(doc.path)
            if doc.path in admitted:  # a .jsonl record whose id repeats an earlier one
                reason = f"record id {doc.source_id!r} repeats an earlier record; not indexed"
                report.files.append(FileResult(doc.path, "skipped", reason))
                emit("file", path=doc.path, status="skipped", reason=reason)
                return
            admitted.add(doc.path)
            if doc.doc_id in seen_ids:
                report.files.append(
                    FileResult(doc.path, "skipped", f"same content as {seen_ids[doc.doc_id]}")
                )
                failed.append(
                    DocEntry(
                        doc.path,
                        "skipped",
                        doc.sha256,
                        doc.doc_id,
                        error=f"duplicate of {seen_ids[doc.doc_id]}",
                    )
                )
                return
            seen_ids[doc.doc_id] = doc.path
            if prev is not None and prev.status == "ok" and prev.sha256 == doc.sha256:
                kept[doc.path] = prev
                report.files.append(FileResult(doc.path, "unchanged", "", prev.pages, prev.chunks))
                emit("file", path=doc.path, status="unchanged", chunks=prev.chunks)
                return
            chunks = chunker.split(doc)
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
            )
            if not chunks:
                entry.status, entry.error = "failed", "no text to index"
                failed.append(entry)
                report.files.append(FileResult(doc.path, "failed", entry.error))
                emit("file", path=doc.path, status="failed", reason=entry.error)
                return
            pending.append(_Pending(entry, chunks))
            report.files.append(FileResult(doc.path, "ok", "", len(doc.pages), len(chunks)))
            emit("file", path=doc.path, status="ok", pages=len(doc.pages), chunks=len(chunks))

        def fail(path: str, reason: str, sha: str = "") -> None:
            if not reason.startswith(path):
                reason = f"{path}: {reason}"
            failed.append(DocEntry(path, "failed", sha, error=reason))
            report.files.append(FileResult(path, "failed", reason))
            emit("file", path=path, status="failed", reason=reason)

        inputs = list(_iter_inputs(roots, cfg.ingest.follow_symlinks))
        emit("discovered", files=sum(1 for k, *_ in inputs if k != "problem"))
        max_bytes = cfg.ingest.max_file_mb << 20
        for kind, path, status, reason in inputs:
            assert path is not None
            if kind == "problem":
                if status == "failed":
                    fail(str(path), reason)
                else:
                    report.files.append(FileResult(str(path), "skipped", reason))
                    emit("file", path=str(path), status="skipped", reason=reason)
                continue
            if kind == "records":
                try:
                    for doc in ingestion.load_records(path):
                        admit(doc, len(doc.text))
                except (ParseError, OSError, ValueError) as exc:
                    fail(str(path), str(exc))
                continue
            spath = str(path)
            try:
                size = path.stat().st_size
                if size > max_bytes:
                    raise ParseError(
                        spath,
                        f"{size >> 20} MiB is over the {cfg.ingest.max_file_mb} MiB limit",
                        "raise ingest.max_file_mb or split the file",
                    )
                sha = file_sha256(path)
            except ParseError as exc:
                fail(spath, str(exc))
                continue
            except OSError as exc:
                fail(spath, f"{spath}: cannot read ({exc.strerror or exc})")
                continue
            prev = old_by_path.get(spath)
            if prev is not None and prev.status == "ok" and prev.sha256 == sha:
                if prev.doc_id in seen_ids:
                    report.files.append(
                        FileResult(spath, "skipped", f"same content as {seen_ids[prev.doc_id]}")
                    )
                    continue
                seen_ids[prev.doc_id] = spath
                kept[spath] = prev
                report.files.append(FileResult(spath, "unchanged", "", prev.pages, prev.chunks))
                emit("file", path=spath, status="unchanged", chunks=prev.chunks)
                continue
            try:
                doc = ingestion.load_document(
                    path,
                    max_bytes=max_bytes,
                    password=password,
                    timeout_s=cfg.ingest.file_timeout_s,
                    max_text_chars=cfg.ingest.max_text_mb << 20,
                )
            except ParseError as exc:
                fail(spath, str(exc), sha)
                continue
            except Exception as exc:  # a parser bug on one file must not sink the batch
                fail(spath, f"{spath}: unexpected parser error ({type(exc).__name__}: {exc})", sha)
                continue
            admit(doc, size)
        timings["parse_chunk"] = time.perf_counter() - t0

        # Old documents not seen this run: dropped if under a given root or gone from disk,
        # else kept (failed and skipped ones too, so a later ingest of another folder keeps
        # saying why they are not indexed).
        seen_paths = {f.path for f in report.files}
        dropped = False
        for doc in old_docs:
            if doc.path in seen_paths:
                continue
            if _under(doc, roots) or not _file_of(doc).exists():
                dropped = True
                if doc.status == "ok":
                    report.files.append(FileResult(doc.path, "removed", "no longer present"))
                    emit("file", path=doc.path, status="removed")
            elif doc.status == "ok":
                kept[doc.path] = doc
            else:
                failed.append(doc)
            seen_paths.add(doc.path)

        old_failed = {(d.path, d.error) for d in old_docs if d.status != "ok"}
        new_failed = {(d.path, d.error) for d in failed}
        changed = (
            old is None
            or bool(pending)
            or dropped
            or new_failed != old_failed
            or any(d.path != c.path for d, c in zip(old.documents, old_docs, strict=True))
        )
        if not changed:
            # A writer killed after its commit but before its clean-up left the previous
            # generation behind; nothing else would ever remove it.
            _collect_garbage(directory, keep=old.data_dir_name)
            report.generation = old.generation
            report.total_chunks = old.n_chunks
            timings["total"] = time.perf_counter() - t0
            report.seconds = timings
            emit("done", committed=False)
            return report

        # Embed new chunks in one stream of batches.
        t1 = time.perf_counter()
        new_chunks = [c for p in pending for c in p.chunks]
        emit("embed_start", total=len(new_chunks))
        new_vecs = _embed_all(embedder, new_chunks, cfg, emit)
        timings["embed"] = time.perf_counter() - t1
        report.embedded_chunks = len(new_chunks)

        t2 = time.perf_counter()
        generation = (old.generation if old else _max_generation(directory)) + 1
        report.generation = generation
        manifest, chunks, vectors = _assemble(
            cfg,
            name,
            generation,
            old,
            old_dir,
            kept,
            pending,
            failed,
            new_vecs,
            embedder,
            chunker_params,
        )
        _write_generation(directory, manifest, chunks, vectors, cfg, emit)
        timings["write"] = time.perf_counter() - t2
        report.committed = True
        report.total_chunks = manifest.n_chunks
        _collect_garbage(directory, keep=manifest.data_dir_name)
    timings["total"] = time.perf_counter() - t0
    report.seconds = timings
    emit("done", committed=True)
    return report


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


def embedder_precision(embedder: Embedder) -> str:
    """The ``embedder.precision`` an embedder (or the one a wrapper such as Ray's holds) runs."""
    return getattr(getattr(embedder, "inner", embedder), "precision", "fp32")


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


def _assemble(
    cfg: Config,
    name: str,
    generation: int,
    old: Manifest | None,
    old_dir: Path | None,
    kept: dict[str, DocEntry],
    pending: list[_Pending],
    failed: list[DocEntry],
    new_vecs: np.ndarray,
    embedder: Embedder,
    chunker_params: dict[str, Any],
) -> tuple[Manifest, list[Chunk], np.ndarray]:
    """Order documents by path, copy kept rows from the old generation, stack the vectors."""
    import numpy as np
    from fathom.index.dense import DenseIndex

    old_chunks: list[Chunk] = []
    old_dense = None
    if kept and old_dir is not None:
        old_store = ChunkStore(old_dir)
        old_chunks = old_store.all()
        old_store.close()
        old_dense = DenseIndex.load(old_dir)
    new_offsets: dict[str, int] = {}
    pos = 0
    for p in pending:
        new_offsets[p.entry.path] = pos
        pos += len(p.chunks)
    by_path: dict[str, tuple[DocEntry, str]] = {k: (v, "old") for k, v in kept.items()}
    by_path.update({p.entry.path: (p.entry, "new") for p in pending})
    pending_by_path = {p.entry.path: p for p in pending}

    chunks: list[Chunk] = []
    vec_parts: list[np.ndarray] = []
    entries: list[DocEntry] = []
    row = 0
    for path in sorted(by_path):
        entry, origin = by_path[path]
        if origin == "old":
            s, e = entry.rows
            doc_chunks = old_chunks[s:e]
            assert old_dense is not None
            vec_parts.append(old_dense.vectors(s, e))
        else:
            doc_chunks = pending_by_path[path].chunks
            s = new_offsets[path]
            vec_parts.append(new_vecs[s : s + len(doc_chunks)])
        entry = DocEntry.from_dict({**entry.__dict__, "rows": (row, row + len(doc_chunks))})
        entries.append(entry)
        chunks.extend(doc_chunks)
        row += len(doc_chunks)
    entries.extend(sorted(failed, key=lambda d: d.path))
    dim = embedder.dim
    vectors = (
        np.concatenate(vec_parts, axis=0).astype(np.float32, copy=False)
        if vec_parts
        else np.zeros((0, dim), dtype=np.float32)
    )
    now = _now()
    manifest = Manifest(
        name=name,
        generation=generation,
        fathom_version=fathom_version(),
        embedder_id=embedder.id,
        embedder_precision=embedder_precision(embedder),
        embedder_dim=dim,
        embed_title_prefix=cfg.embedder.title_prefix,
        chunker=chunker_params,
        dense={},
        bm25={},
        n_chunks=len(chunks),
        documents=entries,
        created=old.created if old else now,
        updated=now,
        format_version=FORMAT_VERSION,
    )
    return manifest, chunks, vectors


def _write_generation(
    directory: Path,
    manifest: Manifest,
    chunks: list[Chunk],
    vectors: np.ndarray,
    cfg: Config,
    emit: Progress,
) -> None:
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Bm25Index

    emit("writing", chunks=len(chunks))
    final = directory / manifest.data_dir_name
    tmp = directory / f".tmp-{manifest.data_dir_name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_chunks(tmp, chunks)
    (tmp / READERS).touch()
    dense = DenseIndex.build(vectors, cfg.index)
    dense.save(tmp)
    texts = [embed_input(c, manifest.embed_title_prefix) for c in chunks]
    bm25 = Bm25Index.build(texts, cfg.index)
    bm25.save(tmp)
    manifest.dense = dense.params(cfg.index)
    manifest.bm25 = bm25.params(cfg.index)
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fsync_dir(tmp / Bm25Index.DIR)
    fsync_dir(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    fsync_dir(directory)
    write_manifest(directory, manifest)  # the commit point


def _max_generation(directory: Path) -> int:
    best = 0
    if directory.is_dir():
        for child in directory.iterdir():
            m = re.match(r"^gen-(\d+)$", child.name)
            if m:
                best = max(best, int(m.group(1)))
    return best


def _collect_garbage(directory: Path, keep: str) -> None:
    """Remove generations and temporary builds other than ``keep`` (caller holds the writer
    lock). A generation a reader still has open is left for a later ingest."""
    for child in directory.iterdir():
        if child.name == keep or not child.is_dir():
            continue
        if child.name.startswith(".tmp-"):
            shutil.rmtree(child, ignore_errors=True)
        elif child.name.startswith("gen-"):
            _remove_unread(child)


def _remove_unread(generation: Path) -> None:
    """Remove ``generation`` unless a reader holds its shared lock."""
    try:
        fd = os.open(generation / READERS, os.O_RDONLY)
    except FileNotFoundError:
        shutil.rmtree(generation, ignore_errors=True)  # no reader lock to respect
        return
    try:
        portalocker.lock(fd, portalocker.LOCK_EX | portalocker.LOCK_NB)
    except portalocker.AlreadyLocked:
        return  # in use
    else:
        # Readers that opened the file but wait for the lock see it gone and re-read.
        (generation / READERS).unlink(missing_ok=True)
        shutil.rmtree(generation, ignore_errors=True)
    finally:
        os.close(fd)


def ingest_paths(
    cfg: Config,
    paths: list[str | Path],
    name: str,
    rebuild: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    password: str | None = None,
) -> IngestReport:
    """``ingest`` with the embedder and chunker that ``cfg`` names (``embedder`` overrides the
    embedder object, e.g. one that embeds on Ray workers; ``password`` opens encrypted PDFs)."""
    from fathom.chunking import make_chunker
    from fathom.index.embed import make_embedder

    embedder = embedder or make_embedder(cfg.embedder, cfg.models_path())
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    report = ingest(
        cfg, paths, name, embedder, chunker, rebuild=rebuild, progress=progress, password=password
    )
    _export_query_model(cfg, getattr(embedder, "inner", embedder), progress)
    return report


def _export_query_model(cfg: Config, embedder: Embedder, progress: Progress | None) -> None:
    """Leave an ONNX export of the embedder for the torch-free query path (once per model)."""
    from fathom.index.embed import SentenceTransformerEmbedder, ensure_onnx_export
    from fathom.index.onnx_embed import onnx_dir, onnx_ready

    if (
        not isinstance(embedder, SentenceTransformerEmbedder)
        or cfg.embedder.query_backend == "torch"
    ):
        return
    if onnx_ready(onnx_dir(cfg.models_path(), embedder.id), embedder.id):
        return
    if progress:
        progress("exporting", model=embedder.id)
    try:
        ensure_onnx_export(embedder, cfg.models_path())
    except Exception as exc:  # the query path falls back to sentence-transformers
        if progress:
            progress(
                "warning",
                message=f"ONNX export of {embedder.id} failed ({exc}); "
                "queries will load sentence-transformers",
            )
