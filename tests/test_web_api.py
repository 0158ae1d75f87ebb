"""``fathom serve``'s HTTP API through Starlette's TestClient on generated documents: the same
answers as ``fathom ask --json``, streamed as server-sent events, the cited page as a PNG, the
library, history and stats, and errors as one-line JSON. The safety rules (the CSRF token,
``--root``, uploads, the Host header, ``--allow-remote``) are in test_reliability_web.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fathom.cli import main
from fathom.core.config import load_config
from fathom.index.ingest import ingest_paths
from fathom.tests.support import web_support as ws

pytestmark = pytest.mark.slow


@pytest.fixture
def paper(tmp_path: Path, minilm) -> Path:
    """The ReAct-shaped paper ingested as collection ``paper``."""
    pdf = ws.make_react_pdf(tmp_path / "react.pdf")
    ingest_paths(load_config(), [pdf], "paper", embedder=minilm)
    return pdf


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
    c, keys = ws.api_client()
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
    c, keys = ws.api_client()
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
    c, keys = ws.api_client()
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


def _no_local_path(data: Any, *local: str) -> None:
    """No ``path`` value of ``data`` (JSON) is absolute, and no string in it names ``local``."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "path" and isinstance(value, str):
                assert not Path(value).is_absolute(), value
            _no_local_path(value, *local)
    elif isinstance(data, list):
        for value in data:
            _no_local_path(value, *local)
    elif isinstance(data, str):
        assert not any(place in data for place in local), data


def test_a_server_others_reach_hands_out_no_absolute_paths(paper: Path, tmp_path: Path) -> None:
    """With ``--allow-remote`` a document's path is relative to its ``--root`` (or its bare
    name), in the library, in search hits, in a shown passage, in an answer (plain and
    streamed) and in an ingest's report (by path or uploaded, streamed or not); on loopback
    the answer is the CLI's, with the path."""
    from fathom.web.guard import Secrets

    home = str(load_config().home_path())
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "pump.txt").write_text("The Zorblax pump is cast from titanium.\n")
    c, keys = ws.api_client(roots=(tmp_path,), keys=Secrets(remote=True))
    auth = {"Authorization": f"Bearer {keys.token}", "X-Fathom-CSRF": keys.csrf}
    with c:
        docs = c.get("/api/v1/documents?collection=paper", headers=auth).json()["documents"]
        assert [d["path"] for d in docs] == ["react.pdf"]
        found = c.get("/api/v1/search?collection=paper&q=ReAct&k=2", headers=auth).json()
        assert found["hits"] and {h["path"] for h in found["hits"]} == {"react.pdf"}
        chunk = found["hits"][0]["chunk_id"]
        shown = c.get(f"/api/v1/show?collection=paper&chunk={chunk}", headers=auth).text
        assert str(tmp_path) not in shown

        body = {"collection": "paper", "question": ws.FIRST, "generator": "extractive"}
        asked = c.post("/api/v1/ask", json=body, headers=auth)
        assert asked.status_code == 200, asked.text
        assert {s["path"] for s in asked.json()["sources"]} == {"react.pdf"}
        assert {s["path"] for s in asked.json()["citations"]} == {"react.pdf"}
        _no_local_path(asked.json(), str(tmp_path), home)
        with c.stream("POST", "/api/v1/ask", json={**body, "stream": True}, headers=auth) as r:
            events = sse_events(r.read().decode())
        assert events[-1][0] == "answer" and events[-1][1]["citations"]
        _no_local_path(events, str(tmp_path), home)

        up = "/api/v1/upload?collection=k&name=manual.txt"
        text = b"The Zorblax probe lands on Europa.\n"
        assert c.post(up, content=text, headers=auth).status_code == 200
        req = {"collection": "k", "paths": ["notes/pump.txt"], "uploads": ["manual.txt"]}
        report = c.post("/api/v1/ingest", json=req, headers=auth)
        assert report.status_code == 200, report.text
        assert report.json()["counts"]["ok"] == 2
        assert sorted(f["path"] for f in report.json()["files"]) == ["manual.txt", "notes/pump.txt"]
        _no_local_path(report.json(), str(tmp_path), home)
        with c.stream("POST", "/api/v1/ingest", json={**req, "stream": True}, headers=auth) as r:
            events = sse_events(r.read().decode())
        assert events[-1][0] == "report" and events[-1][1]["counts"]["unchanged"] == 2
        _no_local_path(events, str(tmp_path), home)
        for path in ("/api/v1/history?limit=5", "/api/v1/documents?collection=k"):
            _no_local_path(c.get(path, headers=auth).json(), str(tmp_path), home)
    c, keys = ws.api_client()
    with c:
        docs = c.get("/api/v1/documents?collection=paper").json()["documents"]
        assert [d["path"] for d in docs] == [str(paper.resolve())]
        asked = c.post("/api/v1/ask", json=body, headers={"X-Fathom-CSRF": keys.csrf}).json()
        assert {s["path"] for s in asked["sources"]} == {str(paper.resolve())}


def test_history_and_stats_are_the_served_collections(tmp_path: Path) -> None:
    """``fathom serve -c a -c b`` shows the asks of ``a`` and ``b`` only, in the history (the
    most recent ``limit`` of theirs) and in the stats; serving every collection shows all."""
    from fathom.stages.history import History
    from fathom.web.app import build_app
    from fathom.web.guard import Secrets
    from fathom.web.library import Library
    from starlette.testclient import TestClient

    cfg = load_config()
    log = History(cfg.home_path() / "history.db")
    asked = [("a", 10.0), ("secret", 20.0), ("b", 30.0), ("secret", 40.0), ("secret", 50.0)]
    for i, (collection, ms) in enumerate(asked):
        row = {"question": f"q{i} {collection}", "target": collection, "total_ms": ms}
        log.record({**row, "collection": collection, "k": 2, "ts": 1000.0 + i})
    keys = Secrets()
    served = Library(cfg, ["a", "b"])
    with TestClient(build_app(served, keys, {"testserver"})) as c:
        history = c.get("/api/v1/history?limit=2").json()
        assert [h["question"] for h in history] == ["q2 b", "q0 a"]
        stats = c.get("/api/v1/stats?slo_ms=25").json()
        assert stats["asks"] == 2 and stats["latency_ms"]["mean"] == 20.0
        assert stats["slo_compliance"] == 0.5
    every = Library(cfg)
    with TestClient(build_app(every, keys, {"testserver"})) as c:
        assert len(c.get("/api/v1/history?limit=50").json()) == 5
        assert c.get("/api/v1/stats").json()["asks"] == 5


def test_errors_are_one_line_json(paper: Path, tmp_path: Path) -> None:
    c, keys = ws.api_client()
    csrf = {"X-Fathom-CSRF": keys.csrf}
    with c:
        missing = c.get("/api/v1/documents?collection=nope")
        assert missing.status_code == 404
        assert missing.json() == {
            "error": "no collection named 'nope' — served: paper "
            "(see the collections in the library)"
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


def test_a_finished_eval_run_its_table_and_plots(tmp_path: Path) -> None:
    """A run folder under FATHOM_HOME/eval-runs (summary.json, a plot) is listed, its table is
    ``fathom eval``'s, its plot comes back as the PNG it wrote; a name or plot that is not in
    the listing is 404, never a path."""
    import base64

    from fathom.core.config import load_config

    run = load_config().home_path() / "eval-runs" / "tiny"
    run.mkdir(parents=True)
    quality = {"mean": 0.5, "lo": 0.0, "hi": 1.0, "n": 2}
    summary = {
        "format": 1,
        "run": {"judge": "contains", "baseline": "fixed:1", "collection": "c"},
        "n_questions": 2,
        "strategies": {
            "fixed:1": {"n": 2, "metrics": {"quality": quality}},
            "<b>gap</b>": {"n": 2, "metrics": {"quality": quality}},
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    (run / "pareto.png").write_bytes(png)
    (run.parent / "not-a-run").mkdir()
    c, _ = ws.api_client()
    with c:
        runs = c.get("/api/v1/evals").json()
        assert [(r["name"], r["n_questions"], r["judge"]) for r in runs] == [
            ("tiny", 2, "contains")
        ]
        got = c.get("/api/v1/evals/tiny").json()
        assert got["title"] == "Fathom eval — judge: contains, 2 questions"
        assert [row[0] for row in got["rows"]] == ["fixed:1", "<b>gap</b>"]
        assert got["columns"][0] == "strategy" and got["plots"] == ["pareto.png"]
        plot = c.get("/api/v1/evals/tiny/pareto.png")
        assert plot.status_code == 200 and plot.content == png
        assert plot.headers["content-type"] == "image/png"
        for path in ("/api/v1/evals/nope", "/api/v1/evals/tiny/cost.png"):
            missing = c.get(path)
            assert missing.status_code == 404 and "\n" not in missing.json()["error"]
        assert c.get("/api/v1/evals/tiny/summary.json").status_code == 400
        assert c.get("/api/v1/evals/..%2F..%2Fetc/pareto.png").status_code == 404
        page = c.get("/").text
        assert 'data-view="evals-view"' in page
