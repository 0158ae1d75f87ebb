"""OpenAIGenerator against llama-cpp-python's OpenAI-compatible server running SmolLM2, plus a
small HTTP server for the error paths (a rejected key, a rejected optional parameter)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any, ClassVar

import pytest
from fathom.bench.support.fault_server import closed_port
from fathom.bench.support.hits import eiffel_hits, make_hit
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.openai_backend import OpenAIGenerator
from fathom.tests.support.generate_support import CannedServer, send_json

QUESTION = "Where is the Eiffel Tower?"
SECRET = "sk-secret-123"


def config(base_url: str, **kwargs: Any) -> GeneratorConfig:
    base = {"base_url": base_url, "model": "smollm2", "max_tokens": 16, "context_window": 2048}
    return GeneratorConfig(**(base | kwargs))


@pytest.mark.slow
def test_non_streaming_fills_usage_and_logprobs(llama_server: str) -> None:
    gen = OpenAIGenerator(config(llama_server))
    hits = eiffel_hits()
    d = gen.generate(QUESTION, hits)
    assert d.text and d.backend == "openai" and d.model == "smollm2"
    assert d.prompt_tokens > 100 and 0 < d.completion_tokens <= 16  # the server's usage
    assert d.prompt_tokens <= gen.prompt_tokens(QUESTION, hits)  # our estimate is conservative
    assert d.finish_reason in ("stop", "length")
    assert d.logprobs is not None and len(d.logprobs) == d.completion_tokens
    assert all(1 <= n <= len(hits) for n in d.citations)


@pytest.mark.slow
def test_streaming_calls_on_token_and_counts_tokens(llama_server: str) -> None:
    gen = OpenAIGenerator(config(llama_server))
    pieces: list[str] = []
    d = gen.generate(QUESTION, eiffel_hits(), on_token=pieces.append)
    assert len(pieces) > 1 and "".join(pieces).strip() == d.text
    # This server sends no usage chunk: the counts are ours, never zero.
    assert d.prompt_tokens > 100 and d.completion_tokens > 0
    assert d.finish_reason in ("stop", "length")


def test_api_key_never_appears_in_errors_or_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gen = OpenAIGenerator(
        config(f"http://127.0.0.1:{closed_port()}/v1", api_key=SECRET, retries=0, timeout_s=5)
    )
    t0 = time.perf_counter()
    with pytest.raises(BackendUnavailable, match="not reachable") as err:
        gen.generate(QUESTION, eiffel_hits())
    assert time.perf_counter() - t0 < 5
    assert SECRET not in str(err.value) and SECRET not in repr(err.value)
    assert SECRET not in repr(gen) and SECRET not in str(gen)


class _Canned(BaseHTTPRequestHandler):
    """An OpenAI-style endpoint: 401 echoing the key for bad keys, 400 echoing it for model
    "echo", 400 for ``logprobs`` when the model is "nologprobs", else a canned completion."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, data: dict[str, Any]) -> None:
        send_json(self, status, data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        auth = self.headers.get("Authorization", "")
        if auth != "Bearer sk-good":
            self._send(401, {"error": {"message": f"Incorrect API key provided: {auth}"}})
        elif body["model"] == "echo":
            self._send(400, {"error": {"message": f"bad request from {auth}"}})
        elif body["model"] == "nologprobs" and "logprobs" in body:
            self._send(400, {"error": {"message": "logprobs are not supported"}})
        else:
            self._send(
                200,
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "In Paris [3]."},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
                },
            )


@pytest.fixture
def canned() -> Iterator[str]:
    _Canned.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_rejected_key_is_scrubbed_from_server_messages(canned: str) -> None:
    gen = OpenAIGenerator(config(canned, api_key=SECRET, retries=0))
    with pytest.raises(BackendUnavailable, match="rejected the API key") as err:
        gen.generate(QUESTION, eiffel_hits())
    assert SECRET not in str(err.value)
    echo = OpenAIGenerator(config(canned, api_key="sk-good", model="echo", retries=0))
    with pytest.raises(FathomError, match="status 400") as err:
        echo.generate(QUESTION, eiffel_hits())
    assert "sk-good" not in str(err.value) and "***" in str(err.value)


def test_a_rejected_optional_parameter_is_dropped_and_retried(canned: str) -> None:
    gen = OpenAIGenerator(config(canned, api_key="sk-good", model="nologprobs", retries=0))
    d = gen.generate(QUESTION, eiffel_hits())
    assert d.text == "In Paris [3]." and d.citations == (3,)
    assert (d.prompt_tokens, d.completion_tokens, d.logprobs) == (7, 5, None)
    assert "logprobs" in _Canned.bodies[0] and "logprobs" not in _Canned.bodies[1]
    assert _Canned.bodies[1]["max_tokens"] == 16  # compatible servers get max_tokens
    gen.generate(QUESTION, eiffel_hits())  # remembered: no second rejection
    assert len(_Canned.bodies) == 3


def test_missing_key_and_oversized_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendUnavailable, match="OPENAI_API_KEY"):
        OpenAIGenerator(GeneratorConfig()).generate(QUESTION, eiffel_hits())
    gen = OpenAIGenerator(config("http://127.0.0.1:9/v1", context_window=200, max_tokens=50))
    long_hits = [make_hit(1, "The tower is made of wrought iron. " * 30)]
    with pytest.raises(FathomError, match="200-token context window"):
        gen.generate(QUESTION, long_hits)


def test_token_counts_without_tiktoken_files_are_conservative() -> None:
    gen = OpenAIGenerator(GeneratorConfig(model="gpt-4o-mini"))
    assert gen.model == "gpt-4o-mini" and gen.context_window == 4096
    text = "The Eiffel Tower was completed on 31 March 1889."
    (n,) = gen.count_tokens([text])
    assert n >= 12  # o200k_base gives 12; the offline estimate is higher
    assert gen.prompt_tokens(QUESTION, []) > sum(gen.count_tokens([QUESTION]))


def _completion(**fields: Any) -> bytes:
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 0, **fields}).encode()


def _sse(*events: dict[str, Any]) -> list[bytes]:
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_completion(model="m", choices=[]), "no choices"),
        (_completion(model="m"), "no list of choices"),
        (b"[1, 2]", "not an object"),
        (
            _completion(
                model="m", choices=[{"index": 0, "message": None, "finish_reason": "stop"}]
            ),
            "a choice without a message",
        ),
    ],
    ids=["empty-choices", "no-choices", "json-list", "null-message"],
)
def test_a_reply_of_the_wrong_shape_is_named_malformed(body: bytes, problem: str) -> None:
    with CannedServer(body) as server:
        gen = OpenAIGenerator(config(server.url + "/v1", model="m", retries=0, timeout_s=5))
        with pytest.raises(BackendUnavailable) as err:
            gen.generate(QUESTION, eiffel_hits())
    message = str(err.value)
    assert "malformed reply" in message and f"({problem})" in message
    assert server.url in message and "'m'" in message


def test_a_stream_chunk_of_the_wrong_shape_is_named_malformed() -> None:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    stream = _sse(chunk | {"choices": None})
    with CannedServer(chunks=stream, content_type="text/event-stream") as server:
        gen = OpenAIGenerator(config(server.url + "/v1", model="m", retries=0, timeout_s=5))
        with pytest.raises(BackendUnavailable, match="malformed reply for model 'm'") as err:
            gen.generate(QUESTION, eiffel_hits(), on_token=lambda piece: None)
    assert "stream chunk without a list of choices" in str(err.value)
