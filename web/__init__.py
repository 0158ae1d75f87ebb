"""``fathom serve``: Fathom's answers in a local web page, over the same commands as the
terminal and MCP.

``library.Library`` holds the work (warm Engines, answers, pages, ingest; no HTTP), ``app`` the
Starlette app — the page (a Jinja2 template, autoescaped, with the plain script and stylesheet
in ``static/``) and the API under ``/api/v1`` — and ``guard`` what every request passes: the
Host header, the access token with ``--allow-remote``, the CSRF token on every request that
changes something. ``serve`` here runs it on uvicorn. docs/web.md documents the API and the
safety model.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fathom.core.config import Config

logger = logging.getLogger("fathom.web")


MAX_UPLOAD_MB = 64  # the largest file the page takes as an upload


def serve(
    cfg: Config,
    collections: tuple[str, ...] = (),
    roots: tuple[Path, ...] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    open_browser: bool = False,
    max_upload_mb: float = MAX_UPLOAD_MB,
    runs: tuple[Path, ...] = (),
) -> None:
    """Serve the page and the API on ``host:port`` until interrupted. ``collections``: the
    collections served (empty: every one); ``roots``: folders ingest may read by path; ``runs``:
    folders of ``fathom eval`` runs to show (empty: FATHOM_HOME/eval-runs)."""
    import uvicorn
    from fathom.mcp_server.safety import Root
    from fathom.web.app import build_app
    from fathom.web.guard import LOOPBACK_NAMES, Secrets, is_loopback
    from fathom.web.library import Library

    remote = allow_remote and not is_loopback(host)
    keys = Secrets(remote=remote)
    served = list(dict.fromkeys(collections)) or None
    library = Library(
        cfg,
        served,
        [Root.of(r) for r in roots],
        int(max_upload_mb * (1 << 20)),
        remote=remote,
        runs=list(runs) or None,
    )
    hosts = None if remote else {*LOOPBACK_NAMES, host.strip("[]")}
    app = build_app(library, keys, hosts)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={keys.token}" if keys.token else "")
    print(f"fathom serve: {url}", file=sys.stderr, flush=True)
    print(
        f"serving {', '.join(served) if served else 'every collection'}; ingest by path "
        + (", ".join(str(r) for r in roots) if roots else "off (no --root)")
        + (" — anyone who has the address with its token can use it" if remote else ""),
        file=sys.stderr,
        flush=True,
    )
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
