"""What ``fathom serve``'s handlers do, without HTTP (``Library``): the collections served, one
warm Engine per collection kept by the same pool ``fathom mcp`` uses (``FathomTools``), and each
request's work through the layers that own it — answers by ``Engine.ask`` with the follow-up
rewriting of ``chat`` and ``ask --session``, the history and stats by ``commands``, pages by the
renderer behind ``--show``. Everything returned is JSON-shaped data or PNG bytes: the page
renders it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import FathomError
from fathom.mcp_server.safety import Root, resolve_under
from fathom.mcp_server.tools import FathomTools, doc_patterns

if TYPE_CHECKING:
    from fathom.core.config import Config

Emit = Callable[[str, dict[str, Any]], None]

PREFER = ("quality", "balanced", "fast")
MAX_QUESTION_CHARS = 10_000
MAX_SESSION_CHARS = 100
MAX_K = 200  # as `ask --k`
UPLOADS = "uploads"  # under FATHOM_HOME: where uploaded files are staged, one folder per collection
_SESSION = re.compile(r"^[\w.:-]+$")
_FILE_NAME = re.compile(r"^[\w][\w .,()+\-]*$")


@dataclasses.dataclass(frozen=True)
class AskRequest:
    """One ``POST /api/v1/ask`` body, checked: the same options as ``fathom ask``."""

    question: str
    collection: str | None = None
    generator: str | None = None
    k: int | None = None
    prefer: str | None = None
    doc: tuple[str, ...] = ()
    session: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> AskRequest:
        """The request ``body`` holds; a ``FathomError`` naming the field that is wrong."""
        known = {f.name for f in dataclasses.fields(cls)} | {"stream"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise FathomError(f"unknown field {unknown[0]!r}: give {', '.join(sorted(known))}")
        question = body.get("question")
        if not isinstance(question, str) or not question.strip():
            raise FathomError("question: give the question to answer, a few words at least")
        if len(question) > MAX_QUESTION_CHARS:
            raise FathomError(f"question: keep it under {MAX_QUESTION_CHARS:,} characters")
        k = body.get("k")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= MAX_K):
            raise FathomError(f"k = {k!r}: give an integer from 0 to {MAX_K}")
        prefer = body.get("prefer")
        if prefer is not None and prefer not in PREFER:
            raise FathomError(f"prefer {prefer!r}: one of {', '.join(PREFER)}")
        session = body.get("session")
        if session is not None and (
            not isinstance(session, str)
            or not _SESSION.match(session)
            or len(session) > MAX_SESSION_CHARS
        ):
            raise FathomError(
                f"session: letters, digits, '.', '_', ':' or '-', at most {MAX_SESSION_CHARS}"
            )
        return cls(
            question=question.strip(),
            collection=_optional_str(body, "collection"),
            generator=_optional_str(body, "generator"),
            k=k,
            prefer=prefer,
            doc=doc_patterns(body.get("doc")),
            session=session,
        )


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise FathomError(f"{key}: give a string")
    return value or None


class _PageTools(FathomTools):
    """The Engine pool, with errors that point a web page's user at the page and
    ``fathom serve``'s flags instead of MCP's tools."""

    LIST_HINT = "the collections in the library"
    SERVED_HINT = "fathom serve -c NAME serves more"
    INGEST_HINT = "drop files on the library"
    NAME_HINT = "the collection field"


class Library:
    """The collections ``fathom serve`` serves (all in FATHOM_HOME, or ``collections``), with
    warm Engines, ingest from the ``roots`` folders and from uploads staged under
    ``FATHOM_HOME/uploads``."""

    def __init__(
        self,
        cfg: Config,
        collections: list[str] | None = None,
        roots: list[Root] | None = None,
        max_upload_bytes: int = 64 << 20,
        remote: bool = False,
        runs: list[Path] | None = None,
    ) -> None:
        from fathom.web.evals import EvalRuns

        self.cfg = cfg
        self.evals = EvalRuns(runs or [cfg.home_path() / "eval-runs"])
        self.roots = list(roots or [])
        self.max_upload_bytes = max_upload_bytes
        self.remote = remote  # others may reach the server: no absolute paths in answers
        self.tools = _PageTools(cfg, collections, self.roots)
        self._by_prefer: dict[str, FathomTools] = {}
        self._lock = threading.Lock()
        self._ingest_lock = threading.Lock()
        self._embedder: Any = None

    def close(self) -> None:
        for tools in (self.tools, *self._by_prefer.values()):
            tools.close()

    def _tools(self, prefer: str | None) -> FathomTools:
        """The Engine pool for ``prefer`` (the configured one: ``self.tools``)."""
        if prefer is None or prefer == self.cfg.retrieval.prefer:
            return self.tools
        with self._lock:
            if prefer not in self._by_prefer:
                retrieval = dataclasses.replace(self.cfg.retrieval, prefer=prefer)
                cfg = dataclasses.replace(self.cfg, retrieval=retrieval)
                self._by_prefer[prefer] = _PageTools(cfg, self.tools.allowed, self.roots)
            return self._by_prefer[prefer]

    # -- reading ------------------------------------------------------------------------------

    def collections(self) -> list[dict[str, Any]]:
        """The served collections with their counts (``name`` first)."""
        return self.tools.list_collections()["collections"]

    def documents(self, collection: str | None) -> dict[str, Any]:
        """The documents of a served collection: title, file, format, pages, chunks, status
        and what each says about itself (``meta``). With ``remote``, ``path`` is relative to
        its ``--root`` folder, or the bare file name: another machine learns no local path."""
        from fathom import commands

        name = self.tools.served(collection)
        manifest = commands.collection_manifest(self.cfg, name)
        docs = [
            {
                "doc_id": d.get("doc_id", ""),
                "title": d.get("title", ""),
                "file": Path(d.get("path", "")).name,
                "path": d.get("path", ""),
                "format": d.get("format", ""),
                "pages": d.get("pages", 0),
                "chunks": d.get("chunks", 0),
                "status": d.get("status", ""),
                "error": d.get("error", ""),
                "meta": d.get("meta") or {},
            }
            for d in manifest.get("documents", [])
        ]
        return self.shown(
            {"collection": name, "generation": manifest.get("generation"), "documents": docs}
        )

    def shown(self, data: Any) -> Any:
        """``data`` (JSON-shaped) as this server hands it out. With ``remote``, every ``path``
        value is relative to its ``--root`` folder, or the bare file name (an upload's too),
        and any other string that names one of those paths (a failed file's reason, a
        warning) names it so: another machine learns no local path. Else ``data`` itself."""
        if not self.remote:
            return data
        found: dict[str, str] = {}

        def collect(item: Any) -> None:
            if isinstance(item, dict):
                for key, value in item.items():
                    if key == "path" and isinstance(value, str) and value:
                        found[value] = self._shown_path(value)
                    else:
                        collect(value)
            elif isinstance(item, list | tuple):
                for value in item:
                    collect(value)

        collect(data)
        named = sorted(found, key=len, reverse=True)  # a path before the folders holding it

        def rewrite(item: Any, key: str = "") -> Any:
            if isinstance(item, dict):
                return {k: rewrite(v, k) for k, v in item.items()}
            if isinstance(item, list | tuple):
                return [rewrite(v) for v in item]
            if isinstance(item, str):
                if key == "path":
                    return found.get(item, item)
                for path in named:
                    item = item.replace(path, found[path])
            return item

        return rewrite(data)

    def _shown_path(self, path: str) -> str:
        if not self.remote or not path:
            return path
        real = Path(path)
        if self.cfg.home_path() / UPLOADS in real.parents:
            return real.name  # staged as the upload it was
        for root in self.roots:
            if root.holds(real):
                return real.relative_to(root.real).as_posix()
        return real.name

    def search(
        self, query: str, collection: str | None, k: int | None, mode: str | None, doc: Any = None
    ) -> dict[str, Any]:
        """The best passages for ``query`` (the MCP search tool's result)."""
        return self.shown(self.tools.search(query, collection, k, mode, doc_patterns(doc) or None))

    def history(self, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` most recent asks of the served collections (``fathom history``'s
        when every collection is served)."""
        from fathom import commands

        if self.tools.allowed is None:
            return self.shown(commands.history(self.cfg, limit))
        return self.shown(self._served_history().recent(limit))

    def stats(self, days: float | None, slo_ms: float | None) -> dict[str, Any]:
        """The statistics of the served collections' asks (``fathom stats``'s when every
        collection is served), over the last ``days`` when given."""
        import time

        from fathom import commands

        if self.tools.allowed is None:
            return commands.stats(self.cfg, days, slo_ms)
        since = time.time() - days * 86400 if days is not None else None
        return self._served_history().stats(since=since, slo_ms=slo_ms)

    def _served_history(self) -> Any:
        """The ask log as this server shows it: the asks of the served collections only."""
        from fathom.stages.history import History

        class Served(History):
            """Each connection reads ``asks`` through a temporary view of that name, which
            SQLite finds before the table: the served collections' rows, for every query."""

            only: list[str] | None = None  # None while opening: the migrations alter the table

            @contextlib.contextmanager
            def _connect(self) -> Iterator[sqlite3.Connection]:
                with super()._connect() as conn:
                    if self.only is not None:
                        names = ", ".join("'" + n.replace("'", "''") + "'" for n in self.only)
                        conn.execute(
                            "CREATE TEMP VIEW asks AS SELECT * FROM main.asks "
                            f"WHERE collection IN ({names or 'NULL'})"
                        )
                    yield conn

        log = Served(self.cfg.home_path() / "history.db")
        log.only = list(self.tools.allowed or [])
        return log

    # -- answering ----------------------------------------------------------------------------

    def ask(self, req: AskRequest, emit: Emit | None = None) -> dict[str, Any]:
        """The answer to ``req`` as ``fathom ask --json`` prints it, recorded in the history
        (in conversation ``req.session``, whose last turns complete a follow-up, as ``ask
        --session`` does). ``emit(event, data)`` hears the follow-up's rewrite, the depth
        decision and the answer's text as it is written (``token``)."""
        from fathom.stages.followup import LOOKBACK
        from fathom.stages.history import History, record_ask

        self._check_generator(req.generator)
        turns = None
        if req.session is not None:
            turns = History(self.cfg.home_path() / "history.db").turns(req.session, LOOKBACK)
        on_token = on_event = None
        if emit is not None:
            on_token = lambda text: emit("token", {"text": text})  # noqa: E731
            on_event = _event_relay(emit)
        with self._tools(req.prefer).engine(req.collection, req.generator) as (engine, _slot):
            answer = engine.ask(
                req.question,
                k=req.k,
                docs=req.doc,
                turns=turns,
                on_token=on_token,
                on_event=on_event,
            )
        record_ask(self.cfg, answer.trace.collection, answer, session=req.session)
        return self.shown(answer.to_dict())

    def _check_generator(self, generator: str | None) -> None:
        """As the MCP ask tool: ``auto`` or a backend that answers on this machine; one that
        sends passages off it only on a server started with it."""
        from fathom.stages.generate.registry import generator_choices, local_choices, remote_names

        local = local_choices()
        if generator in remote_names() and generator != self.cfg.generator.backend:
            raise FathomError(
                f"generator {generator!r} sends passages off this machine: only a server started "
                f"with --generator {generator} uses it — choose one of {', '.join(local)}"
            )
        if generator is not None and generator not in generator_choices():
            raise FathomError(f"generator {generator!r}: one of {', '.join(local)}")

    # -- pages --------------------------------------------------------------------------------

    def page(
        self, collection: str | None, chunk_id: str, number: int | None = None
    ) -> tuple[bytes, dict[str, Any]]:
        """Page ``number`` (default: the chunk's first) of the document chunk ``chunk_id`` is
        in, as a PNG with the passage highlighted where it stands on that page (the ``--show``
        renderer), and ``{"page", "pages", "located", "note", "chunk_pages"}``."""
        from fathom.index.grounding import PAGE_FORMATS, find_chunk, ocr_settings, show_chunk
        from fathom.ingestion.page_image import render_page

        if not chunk_id or len(chunk_id) > 64:
            raise FathomError("give the chunk id of a passage that search or ask gave")
        with self.tools.engine(collection) as (engine, _slot):
            coll = engine.collection
            chunk, _row, entry = find_chunk(coll, chunk_id)
            if entry.format not in PAGE_FORMATS:
                raise FathomError(
                    f"{Path(entry.path).name}: a {entry.format} document has no pages — its "
                    "passage is shown in its text (/api/v1/show)"
                )
            number = chunk.page_start if number is None else number
            if not 1 <= number <= max(entry.pages, chunk.page_end):
                raise FathomError(f"page {number}: {Path(entry.path).name} has {entry.pages}")
            ocr = ocr_settings(self.cfg)
            shown = []
            if chunk.page_start <= number <= chunk.page_end:
                shown = [s for s in show_chunk(coll, chunk_id, ocr=ocr) if s.image is not None]
            image = next((s.image for s in shown if s.image.number == number), None)
            note = next((s.note for s in shown if s.image.number == number), "")
            if image is None:  # a page before or after the passage: shown unmarked
                if not Path(entry.path).is_file():
                    gone = self._shown_path(entry.path)
                    raise FathomError(f"{gone}: the file is gone — re-ingest it")
                image = render_page(entry.path, entry.format, number, "", ocr=ocr)
                note = f"page {number}: the passage is on page {chunk.pages}"
        info = {
            "page": number,
            "pages": entry.pages,
            "chunk_pages": chunk.pages,
            "located": image.located,
            "note": note,
        }
        return image.png, info

    def show(self, collection: str | None, chunk_id: str) -> dict[str, Any]:
        """A passage where it stands (the MCP show tool's result, without the pictures: the
        page comes from ``page``)."""
        data = self.tools.show(chunk_id, collection)
        for item in data["shown"]:
            item.pop("png_base64", None)
        return self.shown(data)

    # -- adding documents ---------------------------------------------------------------------

    def staging(self, collection: str) -> Path:
        """The folder uploads to ``collection`` are staged in."""
        from fathom.index.collection import check_name

        return self.cfg.home_path() / UPLOADS / check_name(collection)

    def stage_upload(self, collection: str, filename: str, data: bytes) -> str:
        """Write an uploaded file, already read within the size limit, into the collection's
        staging folder (replacing one of the same name); the name it was stored under."""
        from fathom.ingestion import SUPPORTED_SUFFIXES

        self._check_target(collection)
        if len(data) > self.max_upload_bytes:
            raise FathomError(self.too_large(len(data)))
        name = Path(filename.replace("\\", "/")).name.strip()
        if not name or not _FILE_NAME.match(name) or len(name) > 200:
            raise FathomError(
                f"{filename!r}: name the file with letters, digits, spaces, '.', '-', '_' or "
                "'()', without folders"
            )
        suffix = Path(name).suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            raise FathomError(
                f"{name}: {suffix or 'no suffix'} is not a format Fathom reads — one of "
                f"{', '.join(sorted(SUPPORTED_SUFFIXES))}"
            )
        folder = self.staging(collection)
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{name}.part"
        partial.write_bytes(data)
        os.replace(partial, folder / name)
        return name

    def too_large(self, size: int | None) -> str:
        limit = self.max_upload_bytes / (1 << 20)
        told = f"{size / (1 << 20):.1f} MB" if size is not None else "larger than that"
        return (
            f"the upload is {told}: files up to {limit:g} MB are accepted here — ingest a "
            "larger one by path under --root, or start `fathom serve --max-upload-mb N`"
        )

    def _check_target(self, collection: str) -> str:
        from fathom.index.collection import check_name

        name = check_name(collection or "")
        allowed = self.tools.allowed
        if allowed is not None and name not in allowed:
            raise FathomError(
                f"collection {name!r} is not served here — one of {', '.join(allowed)} "
                "(fathom serve -c)"
            )
        return name

    def ingest(
        self,
        collection: str,
        paths: list[str] | None = None,
        uploads: list[str] | None = None,
        emit: Emit | None = None,
    ) -> dict[str, Any]:
        """Ingest ``paths`` (under the ``--root`` folders) and staged ``uploads`` into
        ``collection``, incrementally; ``emit("progress", …)`` hears each step. The ingest
        report, as ``fathom ingest --json`` prints it."""
        from fathom.index.embed import make_embedder
        from fathom.index.ingest import ingest_paths

        name = self._check_target(collection)
        resolved = self._ingest_paths(name, paths or [], uploads or [])
        # Symlinks inside the folders are not followed: they could lead out of the roots.
        cfg = dataclasses.replace(
            self.cfg, ingest=dataclasses.replace(self.cfg.ingest, follow_symlinks=False)
        )

        def progress(event: str, **info: Any) -> None:
            if emit is not None:
                emit("progress", self.shown({"event": event, **_plain(info)}))

        with self._ingest_lock:
            if self._embedder is None:
                self._embedder = make_embedder(cfg.embedder, cfg.models_path())
            report = ingest_paths(cfg, resolved, name, embedder=self._embedder, progress=progress)
        return self.shown(report.to_dict())

    def _ingest_paths(self, name: str, paths: list[str], uploads: list[str]) -> list[str | Path]:
        if not paths and not uploads:
            raise FathomError("nothing to ingest — give paths under --root, or upload files")
        if paths and not self.roots:
            raise FathomError(
                "ingest by path is off — start `fathom serve --root FOLDER` to allow it, or "
                "upload the files"
            )
        if any(not isinstance(p, str) for p in [*paths, *uploads]):
            raise FathomError("paths and uploads: give a list of strings")
        allow = "start `fathom serve --root FOLDER` with its folder"
        resolved: list[str | Path] = [resolve_under(p, self.roots, allow) for p in paths]
        folder = self.staging(name)
        for upload in uploads:
            staged = folder / Path(upload).name
            if Path(upload).name != upload or not staged.is_file():
                raise FathomError(f"{upload!r}: no such upload for {name!r} — upload it first")
            resolved.append(staged)
        return resolved


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    """An ingest progress event's fields as JSON values (paths as strings)."""
    plain = (str, int, float, bool, type(None))
    return {k: v if isinstance(v, plain) else str(v) for k, v in info.items()}


def _event_relay(emit: Emit) -> Callable[..., None]:
    """The Engine's events (``Engine.ask``'s ``on_event``) as JSON for the page: the
    follow-up's rewrite, the depth decision, a retry deeper."""

    def on_event(event: str, **info: Any) -> None:
        if event == "followup":
            emit("followup", dict(info["followup"]))
        elif event == "decision":
            d = info["decision"]
            emit("decision", {"k": d.k, "reason": d.reason, "query_type": info["query_type"]})
        elif event == "escalate":
            emit("escalate", {"k": info.get("k"), "confidence": info.get("confidence")})

    return on_event
