"""A loopback HTTP server that speaks the Ollama and OpenAI chat APIs and misbehaves on purpose.

``FaultServer(mode)`` answers ``/api/chat`` (Ollama, NDJSON streams) and
``/v1/chat/completions`` (OpenAI, server-sent events) with a canned answer, broken as ``mode``
says:

- ``ok``: a correct reply; ``slow``: a correct reply after ``delay`` seconds
- ``hang``: reads the request and never answers (until the server stops)
- ``drip``: a stream that sends a piece every ``delay`` seconds and never ends
- ``bytedrip``: a stream that sends one byte every ``delay`` seconds, never finishing a line
- ``malformed``: 200 with a body that is not JSON (or a stream line that is not)
- ``truncated``: a stream that stops after three pieces (clean end of body, no final message)
- ``cut``: a chunked stream whose connection drops in the middle of a chunk
- ``context``: 400 "context length exceeded" in the API's own error format
- ``busy``: the first ``fail_first`` requests get ``status`` (429 or 503) with Retry-After
- ``echo401``: 401 whose message echoes the Authorization header (the API key)

Every request's path, headers and JSON body are kept in ``requests`` with its arrival time.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "The Eiffel Tower is in Paris [3]."
PIECES = ["The", " Eiffel", " Tower", " is", " in", " Paris", " [3]."]


class FaultServer:
    """A real HTTP server on 127.0.0.1 that fails in one chosen way."""

    def __init__(
        self, mode: str = "ok", delay: float = 0.0, fail_first: int = 0, status: int = 429
    ) -> None:
        self.mode = mode
        self.delay = delay
        self.fail_first = fail_first
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def _ollama_piece(model: str, text: str, done: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": text},
        "done": done,
    }
    if done:
        part |= {"done_reason": "stop", "prompt_eval_count": 50, "eval_count": 9}
    return part


def _openai_chunk(model: str, text: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": text} if text is not None else {}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _openai_full(model: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
    }


def _handler(fake: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            if status in (429, 503):
                self.send_header("Retry-After", "0.2")
            self.end_headers()
            self.wfile.write(payload)

        def _error(self, status: int, message: str, openai: bool) -> None:
            body = (
                {"error": {"message": message, "type": "error"}} if openai else {"error": message}
            )
            self._send(status, json.dumps(body).encode())

        def _line(self, openai: bool, data: dict[str, Any] | str) -> bytes:
            text = data if isinstance(data, str) else json.dumps(data)
            return f"data: {text}\n\n".encode() if openai else (text + "\n").encode()

        def do_GET(self) -> None:
            self._send(200, json.dumps({"models": [], "data": []}).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            fake.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": body, "t": time.time()}
            )
            openai = self.path.endswith("/chat/completions")
            stream = bool(body.get("stream", not openai))  # Ollama streams unless told not to
            model = body.get("model", "m")
            mode = fake.mode
            if mode == "hang":
                fake.stop.wait(120)
                return
            if mode == "slow":
                time.sleep(fake.delay)
            if mode == "busy" and len(fake.requests) <= fake.fail_first:
                self._error(fake.status, "server busy, try again", openai)
                return
            if mode == "context":
                message = (
                    "This model's maximum context length is 2048 tokens. However, your messages "
                    "resulted in 9000 tokens."
                    if openai
                    else "input length exceeds the context length"
                )
                self._error(400, message, openai)
                return
            if mode == "echo401":
                auth = self.headers.get("Authorization", "")
                self._error(401, f"Incorrect API key provided: {auth}", openai)
                return
            if mode == "malformed" and not stream:
                self._send(200, b'{"model": "m", "message": {"content": "half')
                return
            if not stream:
                full = _openai_full(model) if openai else _ollama_piece(model, ANSWER, done=True)
                self._send(200, json.dumps(full).encode())
                return
            self._stream(openai, model, mode)

        def _stream(self, openai: bool, model: str, mode: str) -> None:
            chunked = mode == "cut"
            if chunked:
                self.protocol_version = "HTTP/1.1"
            self.send_response(200)
            self.send_header(
                "Content-Type", "text/event-stream" if openai else "application/x-ndjson"
            )
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def write(data: bytes) -> None:
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                else:
                    self.wfile.write(data)
                self.wfile.flush()

            def piece(text: str) -> bytes:
                return self._line(
                    openai, _openai_chunk(model, text) if openai else _ollama_piece(model, text)
                )

            if mode == "bytedrip":
                while not fake.stop.wait(fake.delay):
                    try:
                        write(b" ")
                    except OSError:
                        return
                return
            if mode == "drip":
                i = 0
                while not fake.stop.wait(fake.delay):
                    try:
                        write(piece(PIECES[i % len(PIECES)]))
                    except OSError:
                        return
                    i += 1
                return
            for n, text in enumerate(PIECES):
                if mode == "malformed" and n == 2:
                    write(self._line(openai, '{"model": "m", "message": {"content": '))
                    return
                if mode in ("truncated", "cut") and n == 3:
                    if mode == "cut":  # announce a chunk, send half of it, drop the connection
                        data = piece(text)
                        self.wfile.write(b"%x\r\n%s" % (len(data), data[: len(data) // 2]))
                        self.wfile.flush()
                        self.close_connection = True
                    return
                write(piece(text))
            if openai:
                write(self._line(True, _openai_chunk(model, None, "stop")))
                write(b"data: [DONE]\n\n")
            else:
                write(self._line(False, _ollama_piece(model, "", done=True)))
            if chunked:
                self.wfile.write(b"0\r\n\r\n")

    return Handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A port nothing listens on (bound and released; the OS does not hand it out again soon)."""
    return free_port()
