"""``fathom mcp``: Fathom as a Model Context Protocol server on stdio, for assistants that reach
local tools through MCP (desktop chat apps, editors, agents).

Built on the official ``mcp`` SDK (``MCPServer``, stdio transport): the SDK speaks the protocol,
this package says what each tool does. ``tools.FathomTools`` holds the work and knows nothing of
MCP (the benchmark calls it in process); ``safety`` keeps paths, secrets and errors in bounds;
``build_server`` here wraps them in tools with JSON schemas and descriptions written for a
model, and in the ``fathom://COLLECTION/CHUNK_ID`` resource (and ``…/page.png``, a passage's
page as a PNG, as the ``show`` tool gives it). The ask tool's generator argument
takes the generator registry's backends (``stages/generate/registry.py``).

What it promises:

* **Only FATHOM_HOME and the ``--root`` folders.** ``ingest`` is offered only with ``--root``;
  its paths are resolved (``..`` refused, a symlink leading out of a root refused) and
  symlinks inside folders are not followed. Searches read only the served collections.
* **Bounded outputs.** At most ``MAX_K`` hits, texts cut at ``cited_text``'s 2,000 characters
  with "…", a chunk at ``CHUNK_CHARS``, the rendered context at ``CONTEXT_CHARS``.
* **Documents are data.** Hits and sources say that their text is untrusted, and their text is
  filtered as ``ask`` filters its sources (``generator.framing``); ``retrieve`` hands over the
  sources exactly as Fathom's generator reads them, in ``<source>`` blocks.
* **No secret in any output or log.** API keys, passwords and tokens from the configuration and
  the environment are replaced by ``***`` in every result, error and log line.
* **Loaded once, safe together, never stale.** One Engine per collection (and generator) stays
  loaded; calls on one Engine take its lock in turn (the SDK runs each call in a worker thread),
  and each call first looks at the collection's manifest: a generation committed since (by this
  server's ``ingest``, ``fathom ingest --watch`` or any other process) is opened before it runs.
* **stdout is the protocol.** The SDK points file descriptor 1 at stderr while it serves; this
  module also points ``sys.stdout`` at stderr, so nothing printed reaches the protocol, even
  when the process exits. Logs go to stderr.
"""

# No `from __future__ import annotations`: the SDK reads the tool functions' annotations (their
# JSON schemas) as objects, and those functions are defined inside the `_add_*` functions.
import contextlib
import logging
import sys
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fathom.core.errors import CollectionNotFound, FathomError
from fathom.mcp_server.safety import RedactingFilter, Redactor, Root, one_line_error
from fathom.mcp_server.tools import MAX_DOC_PATTERNS, MAX_K, MAX_PATHS, UNTRUSTED, FathomTools
from fathom.stages.generate.registry import AUTO, BACKENDS, local_choices, remote_names

if TYPE_CHECKING:
    from fathom.core.config import Config

logger = logging.getLogger("fathom.mcp")

COLLECTION_ARG = "Collection name (see list_collections); may be left out when one is served."
DOC_ARG = (
    "Read only these documents of the collection: each pattern a title or file name (any "
    "case), a glob over the path, file name or title ('*.pdf'), or part of a title; several "
    "select their union. A pattern that selects no document is an error naming the closest "
    "titles. Default: every document."
)

SEARCH_DOC = f"""Search the user's own documents (PDF, scans, images, DOCX, PPTX, HTML, EPUB, TXT
and Markdown indexed by Fathom on this machine) and return the best-matching passages, best
first, each with its document title, file path, pages, section, relevance score, text (at most
2,000 characters) and a uri (fathom://COLLECTION/CHUNK_ID) that reads the whole passage as a
resource. Use it to find where
the documents speak of something; cite passages by title and pages. k is how many passages
(default 10, at most {MAX_K}); mode is hybrid (default: meaning and keywords), dense (meaning)
or bm25 (exact words). {UNTRUSTED}"""

RETRIEVE_DOC = f"""Get the context Fathom would give its own answering model for a question,
without answering: Fathom classifies the question, decides how many passages it needs (k, and
why), reranks them and compresses them into a token budget. Returns the numbered sources in
<source n="…"> blocks (the context), the count of its tokens, each source's title, pages,
section and uri, and instructions for answering from them with [n] citations. Use it to answer
with your own model from a small, well-chosen context. {UNTRUSTED}"""


def ask_doc() -> str:
    """The ask tool's description; the backends that use a local model are the registry's."""
    with_model = [AUTO, *(s.name for s in BACKENDS.values() if s.local and s.runs != "none")]
    listed = " and ".join(filter(None, [", ".join(with_model[:-1]), with_model[-1]]))
    return f"""Answer a question from the user's documents with Fathom's own answering model on
this machine. Returns the answer with [n] citations, the cited sources (title, path, pages,
section, text), a confidence score, and a report of the decision (k and why), latency, tokens
and cost. generator picks the answering backend (default: the server's): extractive gives the
exact span Fathom's reader finds (starting "Unsure:" when the reader is not sure) and the
sentences that support it, without a language model; {listed} use a local model.
{UNTRUSTED}"""


def generator_arg_doc() -> str:
    """The ask tool's generator argument: which backends a call may not choose on its own."""
    remote = [f"{n} only when the server was started with --generator {n}" for n in remote_names()]
    return f"Answering backend (default: the server's{''.join('; ' + r for r in remote)})."


SHOW_DOC = f"""Show a passage where it stands in its document, to check a citation by eye: for
a PDF, a scanned page or an image, each page the passage is on as a PNG image with the passage
highlighted in yellow (found by the page's text layer, or by OCR on a scan: "located" says
which, "not found" leaves the page unmarked); for DOCX, PPTX, HTML, EPUB, text and Markdown, the
passage in the text around it, marked ⟦like this⟧. chunk_id is a passage's id from search,
retrieve or ask (their citations and sources). The page is also the resource
fathom://COLLECTION/CHUNK_ID/page.png. {UNTRUSTED}"""

LIST_DOC = """List the document collections this server searches, with how many documents and
chunks each holds, when it was last updated, and whether this server may ingest files."""

INGEST_DOC = """Index files or folders (PDF, scans and images by OCR, DOCX, PPTX, HTML, EPUB, TXT,
MD, or a docs.jsonl) into a collection,
incrementally: new and changed files are read, unchanged ones kept, files gone from a folder
dropped; one atomic update. Paths must lie inside the folders the server was started with
(absolute, or relative to one of them; no '..'; symlinks leading out are refused). Returns
what happened to each file and the collection's new size."""


def build_server(tools: FathomTools, redactor: Redactor | None = None) -> Any:
    """An ``MCPServer`` offering ``tools`` as MCP tools and chunks as resources."""
    redactor = redactor or Redactor(tools.cfg)
    server = _new_server(tools, redactor)
    run = _runner(redactor)
    _add_search_tools(server, tools, run)
    _add_ask_tool(server, tools, run)
    _add_show_tool(server, tools, redactor)
    if tools.roots:
        _add_ingest_tool(server, tools, run)
    _add_chunk_resource(server, tools, redactor)
    _add_page_resource(server, tools, redactor)
    return server


def _new_server(tools: FathomTools, redactor: Redactor) -> Any:
    """The server, its instructions, stdout kept off the protocol while it serves, and the
    SDK's own tool errors made one redacted line."""
    from fathom import __version__
    from mcp.server.mcpserver import MCPServer

    @asynccontextmanager
    async def stdout_to_stderr(_server: Any):
        # The SDK already points fd 1 at stderr while it serves; Python's own sys.stdout would
        # still buffer a stray print and flush it onto the protocol once fd 1 is restored.
        saved = sys.stdout
        sys.stdout = sys.stderr
        try:
            yield {}
        finally:
            sys.stdout = saved
            tools.close()

    async def tidy_errors(ctx: Any, call_next: Any) -> Any:
        # Errors the SDK writes itself (arguments that fail the schema) become one line, as
        # Fathom's own are, without echoing the arguments back; none carries a secret.
        result = await call_next(ctx)
        if ctx.method == "tools/call" and isinstance(result, dict) and result.get("isError"):
            for block in result.get("content") or ():
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    block["text"] = redactor.text(one_line_error(block["text"]))
        return result

    server = MCPServer(
        "fathom",
        version=__version__,
        instructions=(
            "Fathom searches and answers from the user's own documents on this machine, with "
            "page citations. Use search to find passages, retrieve to get a compact, cited "
            "context for your own answer, ask for Fathom's answer, show to see a passage on "
            "its page (an image), list_collections to see what is indexed. "
            f"{UNTRUSTED}"
        ),
        log_level="WARNING",
        lifespan=stdout_to_stderr,
    )
    server.middleware.append(tidy_errors)
    return server


Runner = Callable[[str, Callable[[], dict[str, Any]]], Any]


def _runner(redactor: Redactor) -> Runner:
    """``run(what, fn)``: ``fn()``'s result redacted, or a FathomError as one redacted error
    result (logged)."""
    from mcp_types import CallToolResult, TextContent

    def run(what: str, fn: Callable[[], dict[str, Any]]) -> Any:
        try:
            return redactor.data(fn())
        except FathomError as exc:
            message = redactor.text(str(exc))
            logger.info("%s: %s", what, message)
            return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)

    return run


def _collection_arg() -> Any:
    from pydantic import Field

    return Annotated[str | None, Field(description=COLLECTION_ARG)]


def _doc_arg() -> Any:
    from pydantic import Field

    return Annotated[
        list[str] | None,
        Field(description=DOC_ARG, json_schema_extra={"maxItems": MAX_DOC_PATTERNS}),
    ]


def _add_search_tools(server: Any, tools: FathomTools, run: Runner) -> None:
    """``search`` and ``retrieve``: read-only, over the served collections."""
    from mcp_types import ToolAnnotations
    from pydantic import Field

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    Collection, Doc = _collection_arg(), _doc_arg()

    @server.tool(description=SEARCH_DOC, annotations=read_only)
    def search(
        query: Annotated[str, Field(description="What to look for, in words.")],
        collection: Collection = None,
        k: Annotated[
            int | None,
            Field(
                ge=1,
                description="How many passages (default 10).",
                json_schema_extra={"maximum": MAX_K},
            ),
        ] = None,
        mode: Annotated[
            Literal["hybrid", "dense", "bm25"] | None,
            Field(description="hybrid (default), dense or bm25."),
        ] = None,
        doc: Doc = None,
    ) -> dict[str, Any]:
        return run("search", lambda: tools.search(query, collection, k, mode, doc))

    @server.tool(description=RETRIEVE_DOC, annotations=read_only)
    def retrieve(
        question: Annotated[str, Field(description="The question to gather context for.")],
        collection: Collection = None,
        doc: Doc = None,
    ) -> dict[str, Any]:
        return run("retrieve", lambda: tools.retrieve(question, collection, doc))


def _add_ask_tool(server: Any, tools: FathomTools, run: Runner) -> None:
    """``ask``, whose generator argument takes the registry's backends (the local ones first),
    and ``list_collections``."""
    from mcp_types import ToolAnnotations
    from pydantic import Field

    Collection, Doc = _collection_arg(), _doc_arg()
    backends = (*local_choices(), *remote_names())
    Backend = Literal[backends]  # type: ignore[valid-type]

    @server.tool(
        description=ask_doc(),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        ),
    )
    def ask(
        question: Annotated[str, Field(description="The question to answer.")],
        collection: Collection = None,
        generator: Annotated[Backend | None, Field(description=generator_arg_doc())] = None,
        doc: Doc = None,
    ) -> dict[str, Any]:
        return run("ask", lambda: tools.ask(question, collection, generator, doc))

    @server.tool(
        description=LIST_DOC,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def list_collections() -> dict[str, Any]:
        return run("list_collections", tools.list_collections)


def _add_show_tool(server: Any, tools: FathomTools, redactor: Redactor) -> None:
    """``show``: a chunk's pages as image content (PNG) after their description, or its
    passage in context as text."""
    import json

    from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
    from pydantic import Field

    Collection = _collection_arg()

    @server.tool(
        description=SHOW_DOC,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def show(
        chunk_id: Annotated[
            str, Field(description="The passage's chunk_id (from search, retrieve or ask).")
        ],
        collection: Collection = None,
    ) -> CallToolResult:
        try:
            data = tools.show(chunk_id, collection)
        except FathomError as exc:
            message = redactor.text(str(exc))
            logger.info("show: %s", message)
            return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
        # The pictures leave the JSON before redaction: base64 is not text to search for secrets.
        pngs = [item.pop("png_base64") for item in data["shown"] if "png_base64" in item]
        data = redactor.data(data)
        content: list[Any] = [TextContent(type="text", text=json.dumps(data, ensure_ascii=False))]
        content += [ImageContent(type="image", data=png, mime_type="image/png") for png in pngs]
        return CallToolResult(content=content, structured_content=data)


def _add_ingest_tool(server: Any, tools: FathomTools, run: Runner) -> None:
    """``ingest``, offered only when the server has ``--root`` folders."""
    from mcp_types import ToolAnnotations
    from pydantic import Field

    @server.tool(
        description=INGEST_DOC,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def ingest(
        paths: Annotated[
            list[str],
            Field(
                description="Files or folders under the server's --root folders.",
                min_length=1,
                max_length=MAX_PATHS,
            ),
        ],
        collection: Annotated[
            str | None,
            Field(
                description="Collection to create or update (required unless the "
                "server serves exactly one)."
            ),
        ] = None,
    ) -> dict[str, Any]:
        return run("ingest", lambda: tools.ingest(paths, collection))


def _add_chunk_resource(server: Any, tools: FathomTools, redactor: Redactor) -> None:
    """``fathom://COLLECTION/CHUNK_ID``: a passage in full."""
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

    @server.resource(
        "fathom://{collection}/{chunk_id}",
        name="chunk",
        description="A passage of a document in full: its text, title, path, pages and "
        f"section. {UNTRUSTED}",
        mime_type="application/json",
    )
    def chunk(collection: str, chunk_id: str) -> str:
        import json

        try:
            data = redactor.data(tools.chunk(collection, chunk_id))
        except CollectionNotFound as exc:
            raise ResourceNotFoundError(redactor.text(str(exc))) from None
        except FathomError as exc:
            raise ResourceError(redactor.text(str(exc))) from None
        return json.dumps(data, ensure_ascii=False)


def _add_page_resource(server: Any, tools: FathomTools, redactor: Redactor) -> None:
    """``fathom://COLLECTION/CHUNK_ID/page.png``: the first page of a passage, highlighted."""
    import base64

    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

    @server.resource(
        "fathom://{collection}/{chunk_id}/page.png",
        name="page",
        description="The page a passage of a PDF, scan or image is on, as a PNG with the "
        "passage highlighted (its first page; the show tool gives every page).",
        mime_type="image/png",
    )
    def page(collection: str, chunk_id: str) -> bytes:
        try:
            data = tools.show(chunk_id, collection)
        except CollectionNotFound as exc:
            raise ResourceNotFoundError(redactor.text(str(exc))) from None
        except FathomError as exc:
            raise ResourceError(redactor.text(str(exc))) from None
        first = data["shown"][0]
        if "png_base64" not in first:
            raise ResourceError(
                f"chunk {chunk_id} is from a document without pages (not a PDF, scan or "
                f"image): read fathom://{collection}/{chunk_id}, or call show for its context"
            )
        return base64.b64decode(first["png_base64"])


def serve(
    cfg: "Config",
    collections: list[str] | None = None,
    roots: list[str | Path] | None = None,
) -> None:
    """``fathom mcp``: serve over stdio until the client closes the connection."""
    tools = FathomTools(cfg, collections, [Root.of(r) for r in roots or ()])
    redactor = Redactor(cfg)
    # One plain line per record on stderr (set before the SDK's own set-up, which then keeps
    # it): Fathom's lines from INFO, every library's from WARNING.
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("fathom").setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter(redactor))
    server = build_server(tools, redactor)
    served = ", ".join(tools.allowed) if tools.allowed else "every collection"
    where = ", ".join(str(r.path) for r in tools.roots) or "off (no --root)"
    logger.info(
        "fathom mcp: %s in %s; generator %s; ingest %s",
        served,
        tools._root(),
        cfg.generator.backend,
        where,
    )
    # Ctrl-C in a terminal: the client is gone, there is nothing to report.
    with contextlib.suppress(KeyboardInterrupt):
        server.run("stdio")
