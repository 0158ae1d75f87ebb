"""``fathom serve``'s app behind Starlette's TestClient, and the hostile requests the reliability
bench sends it: each must be refused with its status and a one-line JSON error, and write
nothing (no staged upload, no collection). The tests build their clients with ``api_client``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

BASE = "http://127.0.0.1:8765"
HOSTS = {"127.0.0.1", "localhost", "::1"}


def api_client(*, roots: tuple[Path, ...] = (), max_upload: int = 1 << 20, keys: Any = None):
    """``fathom serve``'s app (FATHOM_HOME's collections, ``roots`` as ``--root``, uploads up to
    ``max_upload`` bytes) behind a TestClient at ``BASE``, and its ``Secrets``: loopback Host
    headers only unless ``keys`` is remote. The client's ``library`` is the app's."""
    from fathom.core.config import load_config
    from fathom.mcp_server.safety import Root
    from fathom.web.app import build_app
    from fathom.web.guard import Secrets
    from fathom.web.library import Library
    from starlette.testclient import TestClient

    keys = keys or Secrets()
    library = Library(
        load_config(), None, [Root.of(r) for r in roots], max_upload, remote=keys.remote
    )
    hosts = None if keys.remote else HOSTS
    c = TestClient(build_app(library, keys, hosts), base_url=BASE)
    c.library = library
    return c, keys


def _written(home: Path) -> int:
    """Files under ``home``'s uploads and collections: what a refused request must not add."""
    return sum(
        1 for sub in ("uploads", "collections") for p in (home / sub).rglob("*") if p.is_file()
    )


def hostile_requests(work: Path) -> list[dict[str, Any]]:
    """Every hostile request against a fresh app in ``work`` (its own FATHOM_HOME): the case,
    the status expected and got, the error's line (``work`` written WORK), whether it wrote
    anything, and the time."""
    from fathom.web.guard import Secrets

    home, root, outside = work / "home", work / "root", work / "outside"
    for d in (home, root, outside):
        d.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text("The secret is 42.\n")
    (root / "notes.txt").write_text("Notes.\n")
    os.symlink(outside / "secret.txt", root / "link.txt")
    before = os.environ.get("FATHOM_HOME")
    os.environ["FATHOM_HOME"] = str(home)
    try:
        c, keys = api_client(roots=(root,), max_upload=2000)
        csrf = {"X-Fathom-CSRF": keys.csrf}
        ingest = "/api/v1/ingest"

        def paths(p: str) -> dict:
            return {"json": {"collection": "k", "paths": [p]}, "headers": csrf}

        def stream():  # no Content-Length: the limit must hold while reading
            yield from (b"y" * 1000 for _ in range(5))

        up = "/api/v1/upload?collection=k&name=big.txt"
        cases: list[tuple[str, str, str, dict, int, Any]] = [
            ("CSRF: ask without the token", "post", "/api/v1/ask", {"json": {}}, 403, c),
            ("CSRF: ingest with a wrong token", "post", ingest,
             {"json": {}, "headers": {"X-Fathom-CSRF": "wrong"}}, 403, c),
            ("CSRF: upload without the token", "post", up, {"content": b"x"}, 403, c),
            ("--root: '..'", "post", ingest, paths("../outside/secret.txt"), 400, c),
            ("--root: an absolute path outside", "post", ingest,
             paths(str(outside / "secret.txt")), 400, c),
            ("--root: a symlink out", "post", ingest, paths("link.txt"), 400, c),
            ("upload over the limit (Content-Length)", "post", up,
             {"content": b"x" * 5000, "headers": csrf}, 413, c),
            ("upload over the limit (streamed)", "post", up,
             {"content": stream(), "headers": csrf}, 413, c),
            ("a Host header not this server's", "get", "/api/v1/collections",
             {"headers": {"Host": "attacker.example"}}, 400, c),
        ]  # fmt: skip
        remote, _ = api_client(keys=Secrets(remote=True))
        for path in ("/", "/api/v1/collections", "/static/app.js"):
            cases.append(
                (f"--allow-remote: {path} without the token", "get", path, {}, 401, remote)
            )
        cases.append(
            ("--allow-remote: a wrong token", "get", "/api/v1/collections",
             {"headers": {"X-Fathom-Token": "wrong"}}, 401, remote)
        )  # fmt: skip
        out = []
        with c, remote:
            for name, method, path, kwargs, expected, client in cases:
                files = _written(home)
                t0 = time.perf_counter()
                r = getattr(client, method)(path, **kwargs)
                error = (
                    r.json().get("error", "") if "json" in r.headers.get("content-type", "") else ""
                )
                out.append(
                    {
                        "case": name,
                        "expected": expected,
                        "status": r.status_code,
                        "one_line": bool(error) and "\n" not in error,
                        "wrote": _written(home) - files,
                        "error": error.replace(str(work), "WORK"),  # no machine's paths
                        "seconds": round(time.perf_counter() - t0, 4),
                    }
                )
    finally:
        if before is None:
            os.environ.pop("FATHOM_HOME", None)
        else:
            os.environ["FATHOM_HOME"] = before
    return out
