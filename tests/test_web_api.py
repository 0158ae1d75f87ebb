"""``fathom serve``'s HTTP API through Starlette's TestClient on generated documents: the same
answers as ``fathom ask --json``, streamed as server-sent events, the cited page as a PNG, and
the safety rules — the CSRF token, paths kept under ``--root``, uploads within their limit,
the Host header, the access token with ``--allow-remote`` and errors as one-line JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fathom.cli import main
from fathom.core.config import load_config
from fathom.index.ingest import ingest_paths
from fathom.mcp_server.safety import Root
from fathom.tests.support import web_support as ws
from fathom.web.app import build_app
from fathom.web.guard import Secrets
from fathom.web.library import Library
from starlette.testclient import TestClient

pytestmark = pytest.mark.slow

BASE = "http://127.0.0.1:8765"
HOSTS = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
def paper(tmp_path: Path, minilm) -> Path:
    """The ReAct-shaped paper ingested as collection ``paper``."""
    pdf = ws.make_react_pdf(tmp_path / "react.pdf")
    ingest_paths(load_config(), [pdf], "paper", embedder=minilm)
    return pdf


def client(
    tmp_path: Path,
    *,
    roots: list[Path] = (),
    max_upload: int = 1 << 20,
    keys: Secrets | None = None,
) -> tuple[TestClient, Secrets]:
    keys = keys or Secrets()
    library = Library(load_config(), None, [Root.of(r) for r in roots], max_upload)
    hosts = None if keys.remote else HOSTS
    c = TestClient(build_app(library, keys, hosts), base_url=BASE)
    c.library = library  # type: ignore[attr-defined]
    return c, keys


def per_run(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` without what differs from one run of the same question to the next: times
    (the stages', the total, each round's generation, the decision's own) — measured, so never
    equal twice — and the stage ``open``, which only a one-shot ``fathom ask`` has (it opens
    the collection per question; the server keeps it open)."""
    out = json.loads(json.dumps(answer))
    trace = out["trace"]
    del trace["stages_ms"], trace["total_ms"]
    for r in trace["rounds"]:
        del r["generate_ms"]
    (trace["decision"] or {}).get("scores", {}).pop("decide_ms", None)
    return out


def cli_answer(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(main, ["ask", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_the_api_answers_exactly_as_the_cli(paper: Path, tmp_path: Path) -> None:
    c, keys = client(tmp_path)
    csrf = {"X-Fathom-CSRF": keys.csrf}
    with c:
        cases = [
            ({}, []),
            ({"k": 2, "prefer": "fast", "doc": ["react*"]}, ["--k", "2", "--prefer", "fast"]),
        ]
        for body, flags in cases:
            args = ["paper", ws.FIRST, "--generator", "extractive", *flags]
            if "doc" in body:
                args += ["--doc", "react*"]
            want = cli_answer(*args)
            req = {"collection": "paper", "question": ws.FIRST, "generator": "extractive", **body}
            got = c.post("/api/v1/ask", json=req, headers=csrf)
            assert got.status_code == 200, got.text
            assert per_run(got.json()) == per_run(want)
            assert "reasoning traces and task-specific actions" in got.json()["answer"]
        # a conversation: the follow-up rewritten from the first turn, as `ask --session` does
        for question in (ws.FIRST, ws.FOLLOW_UP):
            want = cli_answer("paper", question, "--generator", "extractive", "--session", "cli")
            req = {"collection": "paper", "question": question, "generator": "extractive"}
            got = c.post("/api/v1/ask", json={**req, "session": "web-1"}, headers=csrf).json()
            assert per_run(got) == per_run(want)
        assert got["followup"]["question"] == "How well does ReAct do on HotpotQA?"
        assert "35.1" in got["answer"] and got["citations"][0]["pages"] == str(ws.HOTPOT_PAGE)


def sse_events(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_a_streamed_answer_and_its_cited_page(paper: Path, tmp_path: Path) -> None:
    c, keys = client(tmp_path)
    csrf = {"X-Fathom-CSRF": keys.csrf}
    with c:
        body = {"collection": "paper", "question": ws.FIRST, "generator": "extractive"}
        plain = c.post("/api/v1/ask", json=body, headers=csrf).json()
        with c.stream("POST", "/api/v1/ask", json={**body, "stream": True}, headers=csrf) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            events = sse_events(r.read().decode())
        names = [e for e, _ in events]
        assert names[0] == "decision" and "token" in names and names[-1] == "answer"
        streamed = "".join(d["text"] for e, d in events if e == "token")
        answer = events[-1][1]
        assert streamed == answer["answer"] and per_run(answer) == per_run(plain)

        cited = answer["citations"][0]
        q = f"/api/v1/page?collection=paper&chunk={cited['chunk_id']}"
        page = c.get(q)
        assert page.status_code == 200 and page.headers["content-type"] == "image/png"
        assert page.content.startswith(b"\x89PNG")
        assert page.headers["x-fathom-page"] == cited["pages"]
        assert page.headers["x-fathom-located"] == "text layer"
        assert page.headers["x-fathom-pages"] == str(len(ws.PAGES))
        after = c.get(q + f"&page={int(cited['pages']) + 1}")
        assert after.status_code == 200 and after.headers["x-fathom-located"] == "not found"
        beyond = c.get(q + "&page=99")
        assert beyond.status_code == 400 and "has 4" in beyond.json()["error"]


def test_the_library_search_history_and_stats(paper: Path, tmp_path: Path) -> None:
    c, keys = client(tmp_path)
    with c:
        assert [x["name"] for x in c.get("/api/v1/collections").json()] == ["paper"]
        docs = c.get("/api/v1/documents?collection=paper").json()["documents"]
        assert docs[0]["title"] == ws.TITLE and docs[0]["pages"] == 4 and docs[0]["chunks"] > 0
        hits = c.get("/api/v1/search", params={"collection": "paper", "q": "ALFWorld", "k": 2})
        assert hits.json()["hits"][0]["pages"] == "4"
        body = {"collection": "paper", "question": ws.FIRST, "generator": "extractive"}
        c.post("/api/v1/ask", json=body, headers={"X-Fathom-CSRF": keys.csrf})
        assert c.get("/api/v1/history?limit=5").json()[0]["question"] == ws.FIRST
        stats = c.get("/api/v1/stats?slo_ms=60000").json()
        assert stats["asks"] == 1 and stats["slo_compliance"] == 1.0
        page = c.get("/")
        assert page.status_code == 200 and 'content="' + keys.csrf + '"' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_state_changing_requests_need_the_csrf_token(tmp_path: Path) -> None:
    c, keys = client(tmp_path)
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
    c, keys = client(tmp_path, roots=(root,))
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
    c, keys = client(tmp_path)  # no --root: ingest by path is off
    with c:
        body = {"collection": "k", "paths": ["notes.txt"]}
        r = c.post("/api/v1/ingest", json=body, headers={"X-Fathom-CSRF": keys.csrf})
        assert r.status_code == 400 and "--root" in r.json()["error"]


def test_uploads_are_limited_and_staged(tmp_path: Path, minilm) -> None:
    c, keys = client(tmp_path, max_upload=2000)
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


def test_errors_are_one_line_json(paper: Path, tmp_path: Path) -> None:
    c, keys = client(tmp_path)
    csrf = {"X-Fathom-CSRF": keys.csrf}
    with c:
        missing = c.get("/api/v1/documents?collection=nope")
        assert missing.status_code == 404
        assert missing.json() == {
            "error": "no collection named 'nope' — served: paper (see list_collections)"
        }
        bad = c.post("/api/v1/ask", content=b"{not json", headers=csrf)
        assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
        odd = c.post("/api/v1/ask", json={"question": "x", "depth": 3}, headers=csrf)
        assert odd.status_code == 400 and "unknown field 'depth'" in odd.json()["error"]
        k = c.post("/api/v1/ask", json={"question": "x", "k": 999}, headers=csrf)
        assert k.status_code == 400 and "k = 999" in k.json()["error"]
        assert c.get("/api/v1/nothing").status_code == 404

        def broken(*_a: Any) -> None:
            raise RuntimeError("a detail that must not leak")

        c.library.collections = broken  # type: ignore[attr-defined]
        crash = c.get("/api/v1/collections")
        assert crash.status_code == 500
        assert crash.json() == {"error": "internal error (RuntimeError) — see the server's log"}


def test_the_host_header_must_be_this_server(tmp_path: Path) -> None:
    c, _ = client(tmp_path)
    with c:
        assert c.get("/api/v1/collections").status_code == 200
        r = c.get("/api/v1/collections", headers={"Host": "attacker.example"})
        assert r.status_code == 400 and "not this server" in r.json()["error"]


def test_allow_remote_needs_the_token_on_every_request(tmp_path: Path) -> None:
    keys = Secrets(remote=True)
    c, _ = client(tmp_path, keys=keys)
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
