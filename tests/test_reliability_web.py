"""The safety rules of ``fathom serve``, part of the reliability suite: a state-changing request
without the per-server CSRF token is refused (403); ingest by path stays under ``--root`` (``..``,
absolute paths and symlinks out are refused, nothing is indexed); an oversized upload is refused
(413) without a byte written, with or without a Content-Length; a Host header that is not this
server is refused; ``--host 0.0.0.0`` without ``--allow-remote`` exits 2 with one line; with it,
a request without the access token is refused (401). That a script in a document stays inert in
the page is test_web_browser.py's (a real browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom.cli import main
from fathom.core.config import load_config
from fathom.tests.support import web_support as ws
from fathom.web.guard import Secrets

pytestmark = pytest.mark.slow


def test_state_changing_requests_need_the_csrf_token(tmp_path: Path) -> None:
    c, keys = ws.api_client()
    with c:
        for headers in ({}, {"X-Fathom-CSRF": "wrong"}):
            for path in ("/api/v1/ask", "/api/v1/ingest", "/api/v1/upload?collection=a&name=a.txt"):
                refused = c.post(path, json={"question": "x"}, headers=headers)
                assert refused.status_code == 403, path
                assert "CSRF" in refused.json()["error"]
        assert c.get("/api/v1/csrf").json()["csrf"] == keys.csrf


def test_ingest_by_path_stays_under_the_root(tmp_path: Path, minilm) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("The Zorblax pump is cast from titanium.\n")
    (outside / "secret.txt").write_text("The secret is 42.\n")
    os.symlink(outside / "secret.txt", root / "link.txt")
    c, keys = ws.api_client(roots=(root,))
    csrf = {"X-Fathom-CSRF": keys.csrf}
    refused = {
        "../outside/secret.txt": "'..' is not allowed",
        str(outside / "secret.txt"): "outside the folders this server may read",
        "link.txt": "leads through a symlink",
    }
    with c:
        for raw, problem in refused.items():
            r = c.post("/api/v1/ingest", json={"collection": "k", "paths": [raw]}, headers=csrf)
            assert r.status_code == 400 and problem in r.json()["error"], r.text
            assert "\n" not in r.json()["error"]
        assert not (load_config().home_path() / "collections" / "k").exists()
        ok = c.post(
            "/api/v1/ingest", json={"collection": "k", "paths": ["notes.txt"]}, headers=csrf
        )
        assert ok.status_code == 200 and ok.json()["counts"]["ok"] == 1
    c, keys = ws.api_client()  # no --root: ingest by path is off
    with c:
        body = {"collection": "k", "paths": ["notes.txt"]}
        r = c.post("/api/v1/ingest", json=body, headers={"X-Fathom-CSRF": keys.csrf})
        assert r.status_code == 400 and "--root" in r.json()["error"]


def test_uploads_are_limited_and_staged(tmp_path: Path, minilm) -> None:
    c, keys = ws.api_client(max_upload=2000)
    csrf = {"X-Fathom-CSRF": keys.csrf}
    staging = load_config().home_path() / "uploads" / "k"
    with c:
        big = c.post("/api/v1/upload?collection=k&name=big.txt", content=b"x" * 5000, headers=csrf)
        assert big.status_code == 413 and "up to" in big.json()["error"]

        def chunks():  # no Content-Length: the limit holds while reading
            for _ in range(5):
                yield b"y" * 1000

        streamed = c.post(
            "/api/v1/upload?collection=k&name=big.txt", content=chunks(), headers=csrf
        )
        assert streamed.status_code == 413
        assert not staging.exists() or list(staging.iterdir()) == []
        bad = c.post("/api/v1/upload?collection=k&name=run.exe", content=b"MZ", headers=csrf)
        assert bad.status_code == 400 and "not a format" in bad.json()["error"]
        text = b"The Zorblax pump is cast from titanium.\n"
        up = c.post("/api/v1/upload?collection=k&name=../pump.txt", content=text, headers=csrf)
        assert up.status_code == 200 and up.json()["upload"] == "pump.txt"
        assert [p.name for p in staging.iterdir()] == ["pump.txt"]
        body = {"collection": "k", "uploads": ["pump.txt"]}
        done = c.post("/api/v1/ingest", json=body, headers=csrf)
        assert done.status_code == 200 and done.json()["counts"]["ok"] == 1
        docs = c.get("/api/v1/documents?collection=k").json()["documents"]
        assert [d["file"] for d in docs] == ["pump.txt"]


def test_the_host_header_must_be_this_server(tmp_path: Path) -> None:
    c, _ = ws.api_client()
    with c:
        assert c.get("/api/v1/collections").status_code == 200
        r = c.get("/api/v1/collections", headers={"Host": "attacker.example"})
        assert r.status_code == 400 and "not this server" in r.json()["error"]


def test_allow_remote_needs_the_token_on_every_request(tmp_path: Path) -> None:
    keys = Secrets(remote=True)
    c, _ = ws.api_client(keys=keys)
    with c:
        for path in ("/", "/api/v1/collections", "/static/app.js"):
            assert c.get(path).status_code == 401, path
        assert c.get("/api/v1/collections", headers={"X-Fathom-Token": "wrong"}).status_code == 401
        ok = c.get("/api/v1/collections", headers={"Authorization": f"Bearer {keys.token}"})
        assert ok.status_code == 200
        opened = c.get(f"/?token={keys.token}")
        assert opened.status_code == 200 and "fathom_token" in opened.headers["set-cookie"]
        assert c.get("/static/app.js").status_code == 200  # the cookie now carries it


def test_serve_refuses_another_host_without_allow_remote() -> None:
    done = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-remote" in lines[0]
