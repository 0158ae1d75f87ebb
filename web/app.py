"""The Starlette app of ``fathom serve``: the page (one Jinja2 template, autoescaped, and the
plain script and stylesheet in ``static/``) and the HTTP API under ``/api/v1`` that the page
itself uses. Handlers parse a request, hand the work to ``Library`` in a worker thread, and
return its data as JSON (or a PNG, or server-sent events); they render nothing themselves.

A request's failure is JSON ``{"error": MESSAGE}``: a ``FathomError`` with the one line the
command line prints (status 400, 404 for what does not exist, 413 for an upload too large), an
unexpected exception as a 500 whose message names no more than its type — its traceback goes to
the server's log, never to the client."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fathom.core.errors import CollectionNotFound, FathomError
from fathom.web.evals import RunNotFound
from fathom.web.guard import CSRF_HEADER, Guard, Secrets
from fathom.web.library import AskRequest, Emit, Library
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

logger = logging.getLogger("fathom.web")

HERE = Path(__file__).resolve().parent
MAX_JSON_BYTES = 1 << 20  # a request's JSON body
Handler = Callable[[Request], Awaitable[Response]]


class ClientError(FathomError):
    """A request the API cannot take as it is (its status given)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def one_line(exc: BaseException) -> str:
    """The message the command line prints for ``exc`` (escape sequences removed)."""
    from fathom.core.text import safe_terminal_text

    return safe_terminal_text(str(exc))


def error_response(exc: BaseException) -> JSONResponse:
    """``exc`` as the API's JSON error."""
    if isinstance(exc, ClientError):
        status = exc.status
    elif isinstance(exc, CollectionNotFound | RunNotFound):
        status = 404
    elif isinstance(exc, FathomError):
        status = 400
    else:
        logger.error("unexpected error", exc_info=exc)
        return JSONResponse(
            {"error": f"internal error ({type(exc).__name__}) — see the server's log"}, 500
        )
    return JSONResponse({"error": one_line(exc)}, status)


def sse(event: str, data: Any) -> bytes:
    """One server-sent event: its name and its data as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Api:
    """The handlers, over one ``Library``; blocking work runs in ``executor``."""

    def __init__(self, library: Library, keys: Secrets, executor: ThreadPoolExecutor) -> None:
        self.library = library
        self.keys = keys
        self.executor = executor

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def stream(self, work: Callable[[Emit], dict[str, Any]], last: str) -> StreamingResponse:
        """``work(emit)`` in a worker thread, its events sent as they come and its result as
        the event ``last``; a failure as the event ``error`` (the JSON error's body)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()

        def emit(event: str, data: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (event, data))

        def run() -> None:
            try:
                emit(last, work(emit))
            except Exception as exc:
                emit("error", json.loads(error_response(exc).body))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        async def events() -> AsyncIterator[bytes]:
            done = loop.run_in_executor(self.executor, run)
            yield b": fathom\n\n"  # the stream is open: headers and a first byte go out now
            while (item := await queue.get()) is not None:
                yield sse(*item)
            await done

        headers = {"x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    # -- the page -----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        from fathom import __version__

        collections = await self.run(self.library.collections)
        html = _template("index.html").render(
            csrf=self.keys.csrf,
            version=__version__,
            collections=collections,
            ingest_by_path=bool(self.library.roots),
            max_upload_mb=self.library.max_upload_bytes / (1 << 20),
        )
        return HTMLResponse(html)

    async def csrf(self, request: Request) -> Response:
        return JSONResponse({"csrf": self.keys.csrf, "header": CSRF_HEADER})

    # -- reading ------------------------------------------------------------------------------

    async def collections(self, request: Request) -> Response:
        return JSONResponse(await self.run(self.library.collections))

    async def documents(self, request: Request) -> Response:
        name = request.query_params.get("collection")
        return JSONResponse(await self.run(self.library.documents, name))

    async def search(self, request: Request) -> Response:
        q = request.query_params
        k = _int(q.get("k"), "k")
        docs = q.getlist("doc") or None
        data = await self.run(
            self.library.search, q.get("q", ""), q.get("collection"), k, q.get("mode"), docs
        )
        return JSONResponse(data)

    async def history(self, request: Request) -> Response:
        limit = _int(request.query_params.get("limit"), "limit") or 50
        if not 1 <= limit <= 10_000:
            raise ClientError("limit: give 1 to 10000")
        return JSONResponse(await self.run(self.library.history, limit))

    async def stats(self, request: Request) -> Response:
        q = request.query_params
        slo, days = _float(q.get("slo_ms"), "slo_ms"), _float(q.get("days"), "days")
        return JSONResponse(await self.run(self.library.stats, days, slo))

    async def page(self, request: Request) -> Response:
        q = request.query_params
        number = _int(q.get("page"), "page")
        png, info = await self.run(
            self.library.page, q.get("collection"), q.get("chunk", ""), number
        )
        headers = {f"x-fathom-{k.replace('_', '-')}": _header(v) for k, v in info.items()}
        return Response(png, media_type="image/png", headers=headers)

    async def show(self, request: Request) -> Response:
        q = request.query_params
        return JSONResponse(
            await self.run(self.library.show, q.get("collection"), q.get("chunk", ""))
        )

    async def evals(self, request: Request) -> Response:
        return JSONResponse(await self.run(self.library.evals.list))

    async def eval_run(self, request: Request) -> Response:
        return JSONResponse(await self.run(self.library.evals.get, request.path_params["name"]))

    async def eval_plot(self, request: Request) -> Response:
        p = request.path_params
        png = await self.run(self.library.evals.plot, p["name"], p["plot"])
        return Response(png, media_type="image/png")

    # -- changing -----------------------------------------------------------------------------

    async def ask(self, request: Request) -> Response:
        body = await _json_body(request)
        req = AskRequest.of(body)
        if body.get("stream"):
            return self.stream(lambda emit: self.library.ask(req, emit), "answer")
        return JSONResponse(await self.run(self.library.ask, req))

    async def ingest(self, request: Request) -> Response:
        body = await _json_body(request)
        unknown = sorted(set(body) - {"collection", "paths", "uploads", "stream"})
        if unknown:
            raise ClientError(f"unknown field {unknown[0]!r}: give collection, paths, uploads")
        args = (body.get("collection") or "", body.get("paths"), body.get("uploads"))
        for value in args[1:]:
            if value is not None and not isinstance(value, list):
                raise ClientError("paths and uploads: give a list of strings")
        if body.get("stream"):
            return self.stream(lambda emit: self.library.ingest(*args, emit=emit), "report")
        return JSONResponse(await self.run(self.library.ingest, *args))

    async def upload(self, request: Request) -> Response:
        """The request's body is the file (``?collection=C&name=FILE``): read up to the size
        limit, refused (413) past it before anything is written."""
        q = request.query_params
        limit = self.library.max_upload_bytes
        declared = _int(request.headers.get("content-length"), "Content-Length")
        if declared is not None and declared > limit:
            raise ClientError(self.library.too_large(declared), 413)
        data = bytearray()
        async for block in request.stream():
            data += block
            if len(data) > limit:
                raise ClientError(self.library.too_large(None), 413)
        args = (q.get("collection", ""), q.get("name", ""), bytes(data))
        name = await self.run(self.library.stage_upload, *args)
        return JSONResponse({"collection": q.get("collection"), "upload": name, "bytes": len(data)})


@functools.cache
def _template(name: str) -> Any:
    """The template ``name``, parsed once per process (one Environment for the page)."""
    return _templates().get_template(name)


@functools.cache
def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader

    return Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)


def _header(value: Any) -> str:
    """A header value: ASCII on one line (a note may hold a file's name)."""
    text = str(value if value is not None else "")
    return text.encode("ascii", "replace").decode().replace("\r", " ").replace("\n", " ")


def _int(raw: str | None, what: str) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ClientError(f"{what} = {raw!r}: give an integer") from None


def _float(raw: str | None, what: str) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ClientError(f"{what} = {raw!r}: give a number") from None


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_JSON_BYTES:
        raise ClientError("the request body is over 1 MB — send a question, not a document", 413)
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise ClientError("the request body is not JSON — send a JSON object") from None
    if not isinstance(body, dict):
        raise ClientError("the request body must be a JSON object")
    return body


def _guarded(handler: Handler) -> Handler:
    """``handler`` with its failures made the API's JSON errors."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return error_response(exc)

    return wrapped


def build_app(library: Library, keys: Secrets, hosts: set[str] | None = None) -> Any:
    """The ASGI app: the page, the API, the static files, behind the ``Guard``."""
    executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="fathom-web")
    api = Api(library, keys, executor)
    routes = [
        Route("/", _guarded(api.index)),
        Route("/api/v1/csrf", _guarded(api.csrf)),
        Route("/api/v1/collections", _guarded(api.collections)),
        Route("/api/v1/documents", _guarded(api.documents)),
        Route("/api/v1/search", _guarded(api.search)),
        Route("/api/v1/history", _guarded(api.history)),
        Route("/api/v1/stats", _guarded(api.stats)),
        Route("/api/v1/page", _guarded(api.page)),
        Route("/api/v1/show", _guarded(api.show)),
        Route("/api/v1/evals", _guarded(api.evals)),
        Route("/api/v1/evals/{name}", _guarded(api.eval_run)),
        Route("/api/v1/evals/{name}/{plot}", _guarded(api.eval_plot)),
        Route("/api/v1/ask", _guarded(api.ask), methods=["POST"]),
        Route("/api/v1/ingest", _guarded(api.ingest), methods=["POST"]),
        Route("/api/v1/upload", _guarded(api.upload), methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return JSONResponse({"error": f"{request.url.path}: {detail}"}, status)

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:  # the Engines close with the server
            executor.shutdown(wait=False, cancel_futures=True)
            library.close()

    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: http_error},
        lifespan=lifespan,
    )
    return Guard(app, keys, hosts)
