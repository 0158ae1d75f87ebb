"""``fathom ingest --executor ray``: parsing (OCR included), chunking and embedding as Ray tasks
over files, committed into the collection by the one writer.

The run is a local ingest (``index.ingest``: the writer lock, the manifest, incremental by
sha256, one atomic generation) whose three expensive steps come from Ray instead of this
process: the files it will parse are planned from the manifest and sent to Ray tasks, a few
ahead of the ingest's own walk over its inputs; each task parses one file, splits it with the
configured chunker and embeds its chunks with the configured embedder, loaded once per worker
process from the packaged model (never shipped through the object store). The walk takes each
file's result in input order, so duplicates, progress events and the report are a local
ingest's. Each result is kept in the collection's ``ray-parts/`` (JSON and ``.npy``, keyed by
path, sha256 and the settings) as it arrives, so a run killed before its commit is resumed
without sending those files again; the folder is removed after the commit. Records of a
``.jsonl`` file, and any file the plan missed, are parsed here as a local ingest would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom import __version__
from fathom.core.base import Chunk, Document
from fathom.core.errors import FathomError, ParseError
from fathom.index.collection import check_name, collections_root, embed_input
from fathom.index.manifest import file_sha256, read_manifest
from fathom.ingestion.child import document_from_json

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Chunker, Embedder
    from fathom.core.config import Config
    from fathom.index.ingest import IngestReport, Progress

PARTS = "ray-parts"  # a collection's results from Ray not yet committed
AHEAD_PER_CPU = 4  # files sent to Ray ahead of the walk, per CPU of the cluster


@contextlib.contextmanager
def ray_session(workers: int | None, address: str | None) -> Iterator[Any]:
    """``ray`` initialised: the cluster at ``address``, else a local Ray of ``workers`` CPUs
    (all of them when None); shut down at the end if this call started it. Workers import the
    installed Fathom (``pip install -e .`` for a checkout). ``fathom eval --executor ray`` and
    ``fathom ingest --executor ray`` both start Ray here."""
    try:
        import ray
    except ImportError:
        raise FathomError("--executor ray needs Ray: pip install 'fathom[ray]'") from None
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, workers or os.cpu_count() or 1)
        ray.init(**kwargs)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def ingest_on_ray(
    cfg: Config,
    paths: list[str | Path],
    name: str,
    *,
    rebuild: bool = False,
    progress: Progress | None = None,
    password: str | None = None,
    address: str | None = None,
    workers: int | None = None,
    ship: bool | None = None,
) -> IngestReport:
    """``ingest_paths`` with parsing, chunking and embedding on Ray (a local Ray of
    ``workers`` CPUs without ``address``); the same collection a local ingest builds.

    ``ship``: each file's bytes travel to its worker, which then needs no shared file system
    (by default with ``address``); else workers read the files where they are."""
    from fathom.chunking import make_chunker
    from fathom.index.embed import make_embedder
    from fathom.index.ingest import ingest_paths

    check_name(name)
    parts = Parts(collections_root(cfg) / name / PARTS, settings_key(cfg))
    if rebuild:
        parts.clear()
    embedder = make_embedder(cfg.embedder, cfg.models_path())
    chunker = make_chunker(cfg.chunker, embedder.token_counter())
    with ray_session(workers, address) as ray:
        plan = planned_files(cfg, paths, name, rebuild)
        ship = bool(address) if ship is None else ship
        results = RayResults(ray, cfg, plan, parts, password, ship=ship)
        report = ingest_paths(
            cfg, paths, name, rebuild=rebuild, progress=progress, password=password,
            embedder=PreparedEmbedder(embedder, results), chunker=PreparedChunker(chunker, results),
            load_document=results.load,
        )  # fmt: skip
    if progress is not None:
        progress("ray", tasks=results.remote, resumed=results.resumed)
    parts.clear()  # committed, or nothing changed: either way the parts are in the collection
    return report


def settings_key(cfg: Config) -> str:
    """What a kept result depends on besides its file: Fathom's version and the embedder,
    chunker and parsing settings."""
    import dataclasses

    settings = {
        "fathom": __version__,
        "embedder": dataclasses.asdict(cfg.embedder),
        "chunker": dataclasses.asdict(cfg.chunker),
        "ingest": dataclasses.asdict(cfg.ingest),
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def planned_files(
    cfg: Config, paths: list[str | Path], name: str, rebuild: bool
) -> list[tuple[str, str]]:
    """``(path, sha256)`` of every file under ``paths`` that an ingest of ``name`` would parse
    now, in the order it meets them: those the manifest does not hold with that content. Read
    without the writer lock: the ingest decides again under it, and parses here what this
    plan missed."""
    from fathom.index.ingest import _absolute, _iter_inputs

    old = None if rebuild else read_manifest(collections_root(cfg) / name)
    indexed = {(d.path, d.sha256) for d in old.documents if d.status == "ok"} if old else set()
    moved = {d.sha256 for d in old.documents if d.status == "ok"} if old else set()
    max_bytes = cfg.ingest.max_file_mb << 20
    plan = []
    for kind, path, _status, _reason in _iter_inputs(
        [_absolute(p) for p in paths], cfg.ingest.follow_symlinks
    ):
        if kind != "file" or path is None:
            continue
        try:
            if path.stat().st_size > max_bytes:
                continue  # the ingest fails it without parsing
            sha = file_sha256(path)
        except OSError:
            continue
        if (str(path), sha) not in indexed and sha not in moved:
            plan.append((str(path), sha))
    return plan


# ---------------------------------------------------------------------------------------------
# On the workers
# ---------------------------------------------------------------------------------------------

_TOOLS: dict[str, Any] = {}  # per worker process: the configuration, embedder and chunker


def _tools(cfg_dict: dict[str, Any], models: str | None) -> tuple[Any, Any, Any]:
    """The configuration, embedder and chunker of ``cfg_dict``, built once per worker process
    (the model loads from the packaged files on first use, as in a local ingest)."""
    key = json.dumps([cfg_dict, models], sort_keys=True, default=str)
    if _TOOLS.get("key") != key:
        from fathom.chunking import make_chunker
        from fathom.core.config import Config, apply_mapping
        from fathom.index.embed import make_embedder

        cfg = Config()
        apply_mapping(cfg, cfg_dict, "ray ingest worker")
        embedder = make_embedder(cfg.embedder, Path(models) if models else None)
        chunker = make_chunker(cfg.chunker, embedder.token_counter())
        _TOOLS.update(key=key, tools=(cfg, embedder, chunker))
    return _TOOLS["tools"]


def parse_file(
    cfg_dict: dict[str, Any],
    models: str | None,
    path: str,
    sha: str,
    data: bytes | None,
    password: str | None,
) -> tuple[dict[str, Any], np.ndarray]:
    """One Ray task: the file at ``path`` (or its bytes ``data``, parsed under its own name in
    a temporary folder) parsed, chunked and embedded; ``(part, vectors)`` as ``Parts`` keeps
    them, ``vectors`` ``(chunks, dim) float32``."""
    import numpy as np

    if data is None:
        return _parse_at(cfg_dict, models, path, path, sha, password)
    with tempfile.TemporaryDirectory(prefix="fathom-ray-") as tmp:
        staged = Path(tmp) / Path(path).name
        staged.write_bytes(data)
        part, vectors = _parse_at(cfg_dict, models, str(staged), path, sha, password)
    # Reasons and warnings name the file, not its staging copy.
    text = json.dumps(part).replace(json.dumps(str(staged))[1:-1], json.dumps(path)[1:-1])
    return json.loads(text), np.asarray(vectors, dtype=np.float32)


def _parse_at(
    cfg_dict: dict[str, Any], models: str | None, at: str, path: str, sha: str, pw: str | None
) -> tuple[dict[str, Any], np.ndarray]:
    import numpy as np
    from fathom import ingestion
    from fathom.index.ingest import load_options
    from fathom.ingestion.page_words import words_json

    cfg, embedder, chunker = _tools(cfg_dict, models)
    part: dict[str, Any] = {"path": path, "sha256": sha}
    words: dict[int, Any] = {}
    empty = np.zeros((0, 0), dtype=np.float32)
    try:
        doc = ingestion.load_document(Path(at), load_options(cfg, pw, None, words.__setitem__))
    except ParseError as exc:
        return {**part, "error": str(exc)}, empty
    except Exception as exc:  # a parser bug on one file must not sink the batch
        reason = f"{at}: unexpected parser error ({type(exc).__name__}: {exc})"
        return {**part, "error": reason}, empty
    try:
        chunks = chunker.split(doc)
        texts = [embed_input(c, cfg.embedder.title_prefix) for c in chunks]
        vectors = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)
    except Exception as exc:  # nor a chunker's or an embedder's
        reason = f"{at}: unexpected chunking or embedding error ({type(exc).__name__}: {exc})"
        return {**part, "error": reason}, empty
    part["doc"] = {**doc.to_dict(), "path": path, "text": doc.text}
    part["chunks"] = [c.to_dict() for c in chunks]
    part["words"] = {str(page): words_json(ws) for page, ws in words.items()}
    return part, np.asarray(vectors, dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# On the driver
# ---------------------------------------------------------------------------------------------


class Parts:
    """Results from Ray not yet committed, one ``<key>.json`` (and ``<key>.npy``) per file:
    what a killed run leaves for the next one to take instead of sending the file again."""

    def __init__(self, folder: Path, settings: str) -> None:
        self.folder, self.settings = folder, settings

    def _key(self, path: str, sha: str) -> str:
        return hashlib.sha256(f"{self.settings}\0{path}\0{sha}".encode()).hexdigest()[:32]

    def get(self, path: str, sha: str) -> tuple[dict[str, Any], np.ndarray] | None:
        """The kept result for ``path`` with content ``sha``; None when there is none whole."""
        import numpy as np

        stem = self.folder / self._key(path, sha)
        try:
            part = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
            if "error" in part:
                return part, np.zeros((0, 0), dtype=np.float32)
            return part, np.load(stem.with_suffix(".npy"), allow_pickle=False)
        except (OSError, ValueError):
            return None

    def put(self, part: dict[str, Any], vectors: np.ndarray) -> None:
        """Keep one result: the vectors first, then the JSON that marks it whole."""
        import numpy as np

        self.folder.mkdir(parents=True, exist_ok=True)
        stem = self.folder / self._key(part["path"], part["sha256"])
        if "error" not in part:
            tmp = stem.with_name(stem.name + ".tmp.npy")
            np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, stem.with_suffix(".npy"))
        tmp = stem.with_name(stem.name + ".tmp.json")
        tmp.write_text(json.dumps(part, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, stem.with_suffix(".json"))

    def clear(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


class RayResults:
    """The planned files' results: sent to Ray tasks a window ahead of the ingest's walk and
    taken in its order (``load``), kept in ``Parts`` as they arrive; then the chunks and
    vectors they hold, for ``PreparedChunker`` and ``PreparedEmbedder``."""

    def __init__(
        self,
        ray: Any,
        cfg: Config,
        plan: list[tuple[str, str]],
        parts: Parts,
        password: str | None,
        ship: bool,
    ) -> None:
        self.ray, self.plan, self.parts, self.ship = ray, plan, parts, ship
        # Workers need no secrets (a generator's API key stays here).
        self._args = (cfg.to_dict(), str(cfg.models_path()))
        self.title_prefix = cfg.embedder.title_prefix
        self._password = password
        self._task = ray.remote(num_cpus=1)(parse_file)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.ahead = max(2, AHEAD_PER_CPU * cpus)
        self.index = {path: i for i, (path, _sha) in enumerate(plan)}
        self.futures: dict[str, Any] = {}
        self.shas: dict[str, str] = {}  # each sent file's sha256, for a failed task's record
        self.sent = 0  # files of the plan handed to Ray (or found in Parts)
        self.remote = 0  # files parsed by Ray tasks in this run
        self.resumed = 0  # files whose result an earlier, unfinished run kept
        self.chunks: dict[tuple[str, str], list[Chunk]] = {}
        self.vectors: dict[str, np.ndarray] = {}  # embedded text -> (dim,) float32
        self.dim: int | None = None

    def _send(self, path: str, sha: str) -> None:
        if path in self.futures:
            return
        kept = self.parts.get(path, sha)
        if kept is not None:
            self.futures[path] = kept
            self.resumed += 1
            return
        data = Path(path).read_bytes() if self.ship else None
        ref = self._task.remote(*self._args, path, sha, data, self._password)
        self.futures[path] = ref
        self.shas[path] = sha
        self.remote += 1

    def _send_until(self, stop: int) -> None:
        while self.sent < min(stop, len(self.plan)):
            self._send(*self.plan[self.sent])
            self.sent += 1

    def load(self, path: Path, options: Any) -> Document:
        """``ingestion.load_document`` for the ingest's walk: the result Ray made for
        ``path``, waited for in input order (the words OCR read go to ``options.on_words``)."""
        spath = str(path)
        sha = file_sha256(path)
        if spath not in self.index or self.plan[self.index[spath]][1] != sha:
            self._send(spath, sha)  # not planned (or changed since): one task now
        else:
            self._send_until(self.index[spath] + 1 + self.ahead)
        part, vectors = self._wait_for(spath)
        if part["sha256"] != sha:
            raise ParseError(spath, "changed while it was being ingested", "ingest it again")
        if "error" in part:
            raise RemoteParseError(spath, part["error"])
        return self._take(part, vectors, options)

    def _wait_for(self, path: str) -> tuple[dict[str, Any], np.ndarray]:
        """``path``'s result, keeping every result that arrives meanwhile in ``Parts``. A task
        that failed is its own file's failure, taken at that file's turn (and not kept: the
        next run sends the file again)."""
        import numpy as np

        while not isinstance(self.futures[path], tuple):
            refs = {ref: p for p, ref in self.futures.items() if not isinstance(ref, tuple)}
            done, _ = self.ray.wait(list(refs), num_returns=1)
            for ref in done:
                arrived = refs[ref]
                try:
                    part, vectors = self.ray.get(ref)
                except self.ray.exceptions.RayError as exc:
                    cause = getattr(exc, "cause", None) or exc
                    said = (str(cause).strip().splitlines() or [""])[0]
                    reason = f"{arrived}: its Ray task failed ({type(cause).__name__}: {said})"
                    part = {"path": arrived, "sha256": self.shas[arrived], "error": reason}
                    vectors = np.zeros((0, 0), dtype=np.float32)
                else:
                    self.parts.put(part, vectors)
                self.futures[arrived] = (part, vectors)
        return self.futures.pop(path)

    def _take(self, part: dict[str, Any], vectors: np.ndarray, options: Any) -> Document:
        from fathom.ingestion.page_words import words_from_json

        doc = document_from_json(part["doc"])
        chunks = [Chunk.from_dict(c) for c in part["chunks"]]
        self.chunks[(doc.path, doc.sha256)] = chunks
        if len(chunks):
            self.dim = int(vectors.shape[1])
        for chunk, row in zip(chunks, vectors, strict=True):
            self.vectors[embed_input(chunk, self.title_prefix)] = row
        if options is not None and options.on_words is not None:
            for page, rows in part["words"].items():
                options.on_words(int(page), words_from_json(rows))
        return doc


class RemoteParseError(ParseError):
    """A file a Ray task could not parse, with the reason the task gave (recorded as it is)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.problem, self.fix = path, reason, ""
        FathomError.__init__(self, reason)


class PreparedChunker:
    """The configured chunker, answering with the chunks Ray made for a document when it
    made them (same name and parameters, so the manifest is a local ingest's)."""

    def __init__(self, inner: Chunker, results: RayResults) -> None:
        self.inner, self.results = inner, results
        self.name = inner.name

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    def split(self, doc: Document) -> list[Chunk]:
        made = self.results.chunks.get((doc.path, doc.sha256))
        return made if made is not None else self.inner.split(doc)


class PreparedEmbedder:
    """The configured embedder, answering with the vectors Ray computed for a text when it
    computed them; anything else is embedded here. ``inner`` is the embedder itself (its
    precision and ONNX export are read from it)."""

    def __init__(self, inner: Embedder, results: RayResults) -> None:
        self.inner, self.results = inner, results
        self.id = inner.id

    @property
    def dim(self) -> int:
        return self.results.dim if self.results.dim is not None else self.inner.dim

    def __getattr__(self, name: str) -> Any:  # token_counter(), model_dir(), …
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim) float32``: Ray's rows where it embedded the text."""
        import numpy as np

        known = self.results.vectors
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        fresh = dict(zip(missing, self.inner.embed(missing), strict=True)) if missing else {}
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([known[t] if t in known else fresh[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)
