"""What ``fathom serve`` adds to an answer, on a cached collection: the time from the request to
the first streamed byte of the answer over the Engine's own time to its first token, the page's
weight, and 20 concurrent asks from a loopback load generator against the same asks one at a
time.

The server is ``fathom serve``'s app (``web.app.build_app`` over a ``Library``) on uvicorn, in a
thread of this process so that each request's own Engine time is measured where it happens: from
the handler's call into ``Library.ask`` to the Engine's first token. The overhead is, request by
request, the load generator's time from sending ``POST /api/v1/ask`` (``stream``) to reading the
first answer token as a server-sent event, minus that Engine time: HTTP, routing, the hand-off
to a worker thread and the event stream. P50 and P95 over every ask. Target: P50 ≤ 50 ms.

    python bench/serve.py [--docs examples/fathom-user-guide.pdf] [--generator extractive]
                          [--rounds 3] [--concurrent 20] [--home DIR] [--out DIR]

Writes ``results.json`` and ``results.md`` to ``--out`` (default ``docs/results/serve``).
``--home`` keeps the ingested collection for later runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as `python bench/serve.py`, this folder comes first on sys.path, and its scripts'
    # names (mcp.py) would shadow the libraries they are named for.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

from fathom.bench.common import (
    REPO,
    bench_config,
    fmt,
    log,
    percentiles,
    print_table,
    temp_home,
    write_results,
)

COLLECTION = "served"
# Questions the user guide answers (the bundled example).
QUESTIONS = [
    "Which exit code does Fathom use when the command line itself is wrong?",
    "Where does Fathom keep its collections?",
    "Which file formats does Fathom read?",
    "How do I check the installation?",
    "What happens when a PDF has no extractable text?",
    "Which Python version does Fathom need?",
    "What does the manifest.json file hold?",
    "How does Fathom search a collection?",
    "What does fathom config show print?",
    "Does anything leave the computer?",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", default=str(REPO / "examples" / "fathom-user-guide.pdf"))
    ap.add_argument("--generator", default="extractive")
    ap.add_argument("--rounds", type=int, default=3, help="times each question is asked")
    ap.add_argument("--concurrent", type=int, default=20)
    ap.add_argument("--home", default=None, help="FATHOM_HOME to keep the collection in")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "serve"))
    return ap.parse_args(argv)


def free_port() -> int:
    from fathom.bench.support.fault_server import free_port as port

    return port()


class Server:
    """``fathom serve``'s app on uvicorn in a thread of this process, over the collection, with
    each ask's own time to its first token recorded (``own``: seconds, in request order) as
    ``Library.ask`` sees it: from the handler's call to the Engine's first token."""

    def __init__(self, cfg: Any) -> None:
        import threading

        import uvicorn
        from fathom.web.app import build_app
        from fathom.web.guard import LOOPBACK_NAMES, Secrets
        from fathom.web.library import Library

        self.library = Library(cfg, [COLLECTION])
        self.own: list[float] = []
        ask = self.library.ask

        def timed(req: Any, emit: Any = None) -> dict[str, Any]:
            t0, first = time.perf_counter(), []

            def tap(event: str, data: Any) -> None:
                if event == "token" and not first:
                    first.append(time.perf_counter())
                emit(event, data)

            out = ask(req, tap if emit is not None else None)
            if emit is not None:
                self.own.append((first[0] if first else time.perf_counter()) - t0)
            return out

        self.library.ask = timed  # type: ignore[method-assign]
        port = free_port()
        app = build_app(self.library, Secrets(), set(LOOPBACK_NAMES))
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{port}"
        while not self.server.started:
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def csrf(base: str) -> dict[str, str]:
    import httpx

    return {"X-Fathom-CSRF": httpx.get(f"{base}/api/v1/csrf").json()["csrf"]}


def ask_streamed(client: Any, base: str, headers: dict[str, str], question: str) -> dict[str, Any]:
    """One streamed ask through HTTP: seconds to the response's first byte, to the first
    answer token, and to the end."""
    body = {"collection": COLLECTION, "question": question, "stream": True}
    t0 = time.perf_counter()
    first_byte = first_token = None
    with client.stream("POST", f"{base}/api/v1/ask", json=body, headers=headers) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            now = time.perf_counter()
            first_byte = first_byte or now
            if line == "event: token" and first_token is None:
                first_token = now
            if line.startswith("event: error"):
                raise RuntimeError(f"{question}: the server answered with an error")
    end = time.perf_counter()
    return {
        "first_byte": first_byte - t0,
        "first_token": (first_token or end) - t0,
        "total": end - t0,
    }


def first_byte_overhead(server: Server, rounds: int) -> dict[str, Any]:
    """Each question asked through HTTP ``rounds`` times, one at a time: the client's time to
    the first answer token against the Engine's own, request by request."""
    import httpx

    headers = csrf(server.base)
    with httpx.Client(timeout=300) as client:
        for q in QUESTIONS[:2]:  # warm: models loaded, caches filled
            ask_streamed(client, server.base, headers, q)
        server.own.clear()
        http = [
            ask_streamed(client, server.base, headers, QUESTIONS[i % len(QUESTIONS)])
            for i in range(rounds * len(QUESTIONS))
        ]
    own = server.own
    ms = lambda xs: percentiles([1000 * x for x in xs])  # noqa: E731
    return {
        "asks": len(http),
        "engine_first_token_ms": ms(own),
        "http_first_token_ms": ms([h["first_token"] for h in http]),
        "http_first_byte_ms": ms([h["first_byte"] for h in http]),
        "overhead_first_token_ms": ms(
            [h["first_token"] - o for h, o in zip(http, own, strict=True)]
        ),
    }


def page_weight(base: str) -> dict[str, int]:
    """Bytes of the page as a browser loads it, uncompressed: HTML, script, stylesheet."""
    import httpx

    parts = {"html": "/", "js": "/static/app.js", "css": "/static/app.css"}
    sizes = {name: len(httpx.get(base + path).content) for name, path in parts.items()}
    return {**sizes, "total": sum(sizes.values())}


def concurrency(base: str, n: int) -> dict[str, Any]:
    """``n`` asks at once from one asyncio client, then the same ``n`` one at a time."""
    import httpx

    headers = csrf(base)
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]

    async def one(client: httpx.AsyncClient, q: str) -> tuple[float, str | None]:
        t0 = time.perf_counter()
        body = {"collection": COLLECTION, "question": q}
        try:
            r = await client.post(f"{base}/api/v1/ask", json=body, headers=headers)
            error = None if r.status_code == 200 and "answer" in r.json() else r.text[:200]
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        return time.perf_counter() - t0, error

    async def run(together: bool) -> list[tuple[float, str | None]]:
        async with httpx.AsyncClient(timeout=600) as client:
            if together:
                return await asyncio.gather(*(one(client, q) for q in questions))
            return [await one(client, q) for q in questions]

    t0 = time.perf_counter()
    at_once = asyncio.run(run(True))
    wall_at_once = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = asyncio.run(run(False))
    wall_alone = time.perf_counter() - t0
    return {
        "n": n,
        "errors": [e for _, e in at_once + alone if e],
        "concurrent_ms": percentiles([1000 * t for t, _ in at_once]),
        "one_at_a_time_ms": percentiles([1000 * t for t, _ in alone]),
        "wall_s": {"concurrent": round(wall_at_once, 3), "one_at_a_time": round(wall_alone, 3)},
    }


def _row(label: str, p: dict[str, float], digits: int = 1) -> str:
    return f"| {label} | {fmt(p['p50'], digits)} | {fmt(p['p95'], digits)} |"


def markdown(res: dict[str, Any]) -> str:
    fb, pw, cc = res["first_byte"], res["page_weight"], res["concurrency"]
    ratio = cc["concurrent_ms"]["p95"] / cc["one_at_a_time_ms"]["p95"]
    rows = "\n".join(
        [
            _row("the Engine's own time to its first token", fb["engine_first_token_ms"]),
            _row("through HTTP: the first answer token", fb["http_first_token_ms"]),
            _row(
                "**the server's overhead to the first answer token**", fb["overhead_first_token_ms"]
            ),
            _row("through HTTP: the stream's first byte", fb["http_first_byte_ms"]),
        ]
    )
    load = "\n".join(
        [
            _row("at once", cc["concurrent_ms"], 0) + f" {cc['wall_s']['concurrent']} |",
            _row("one at a time", cc["one_at_a_time_ms"], 0)
            + f" {cc['wall_s']['one_at_a_time']} |",
        ]
    )
    machine = res["machine"]
    return f"""# `fathom serve`: what the web server adds

`{res["command"]}` on {machine["cpu"]} ({machine["cpus"]} cores); the collection:
{res["docs"]} ({res["chunks"]} chunks); generator `{res["generator"]}`.

## First streamed byte of an answer

{fb["asks"]} asks one at a time through `fathom serve`'s app on uvicorn (`POST /api/v1/ask` with
`stream`, read as server-sent events). The Engine's own time is measured inside each request
(from the handler's call to the Engine's first token); the overhead is, ask by ask, the
client's time to the first answer token minus it.

| | P50 ms | P95 ms |
| --- | --- | --- |
{rows}

## Page weight

HTML {pw["html"]:,} B + script {pw["js"]:,} B + stylesheet {pw["css"]:,} B =
**{pw["total"]:,} B** uncompressed (limit 300 kB).

## {cc["n"]} concurrent asks

{cc["n"]} asks at once from one loopback client (httpx, asyncio), then the same {cc["n"]} one at
a time: {len(cc["errors"])} errors. Asks on one collection take its Engine in turn, so at once
they queue: P95 at once / one at a time {ratio:.1f}×.

| | P50 ms | P95 ms | wall s |
| --- | --- | --- | --- |
{load}
"""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from fathom.bench.common import command_line, machine_info
    from fathom.index.ingest import ingest_paths

    with temp_home("serve") as tmp:
        home = Path(args.home).resolve() if args.home else tmp
        cfg = bench_config(home, {"generator.backend": args.generator})
        report = ingest_paths(cfg, [Path(args.docs)], COLLECTION)  # unchanged files: cached
        log(f"collection {COLLECTION}: {report.total_chunks} chunks")
        server = Server(cfg)
        base = server.base
        try:
            res: dict[str, Any] = {
                "docs": Path(args.docs).name,
                "chunks": report.total_chunks,
                "generator": args.generator,
                "machine": machine_info(),
                "command": command_line(argv),
            }
            log("page weight")
            res["page_weight"] = page_weight(base)
            log(f"first byte: {args.rounds} rounds of {len(QUESTIONS)} questions")
            res["first_byte"] = first_byte_overhead(server, args.rounds)
            log(f"{args.concurrent} concurrent asks")
            res["concurrency"] = concurrency(base, args.concurrent)
        finally:
            server.stop()
    fb, cc = res["first_byte"], res["concurrency"]
    measured = {
        "engine first token ms": fb["engine_first_token_ms"],
        "overhead to first token ms": fb["overhead_first_token_ms"],
        "concurrent ask ms": cc["concurrent_ms"],
        "one-at-a-time ask ms": cc["one_at_a_time_ms"],
    }
    rows = [[name, p["p50"], p["p95"]] for name, p in measured.items()]
    print_table("fathom serve", ["measure", "P50", "P95"], rows, digits=1)
    print(json.dumps({"page_bytes": res["page_weight"]["total"], "errors": len(cc["errors"])}))
    write_results(Path(args.out), res, markdown(res))


if __name__ == "__main__":
    main()
