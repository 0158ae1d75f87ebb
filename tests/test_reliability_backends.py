"""Backend faults against real loopback servers, through the official ollama and openai clients:
down, hanging, slow, dripping, malformed, truncated, cut, over-context, busy — a clear error
within the configured time (or an answer), never a hang, never the API key."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import ollama  # noqa: F401  (imported here, not inside a timed call)
import openai  # noqa: F401
import pytest
from fathom.bench.support.fault_server import ANSWER, FaultServer, closed_port
from fathom.bench.support.hits import eiffel_hits
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.ollama import OllamaGenerator
from fathom.stages.generate.openai_backend import OpenAIGenerator

SECRET = "sk-test-SECRET-0123456789abcdef"
QUESTION = "Where is the Eiffel Tower?"
BACKENDS = ["ollama", "openai"]
STREAMS = [False, True]


def make(backend: str, url: str, **cfg: Any):
    base: dict[str, Any] = {
        "model": "m",
        "timeout_s": 1.0,
        "total_timeout_s": 2.0,
        "retries": 1,
        "context_window": 4096,
        "max_tokens": 32,
    }
    base |= cfg
    if backend == "ollama":
        return OllamaGenerator(GeneratorConfig(ollama_host=url, **base))
    return OpenAIGenerator(GeneratorConfig(base_url=url + "/v1", api_key=SECRET, **base))


def run(gen, stream: bool, limit: float = 20.0) -> tuple[Any, float]:
    """``(draft or exception, seconds)``; fails the test if the call is still running at ``limit``
    (a hang), instead of hanging the suite."""
    box: dict[str, Any] = {}
    on_token: Callable[[str], None] | None = (lambda piece: None) if stream else None

    def call() -> None:
        try:
            box["out"] = gen.generate(QUESTION, eiffel_hits(), on_token=on_token)
        except BaseException as exc:  # returned to the test
            box["out"] = exc

    t0 = time.perf_counter()
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        pytest.fail(f"{gen!r} still running after {limit} s: a hang")
    return box["out"], time.perf_counter() - t0


def failure(out: Any, kind: type[BaseException] = FathomError) -> str:
    """The message of the expected Fathom error (one line, no key), failing on anything else."""
    assert isinstance(out, kind), f"expected {kind.__name__}, got {out!r}"
    message = str(out)
    assert "\n" not in message and SECRET not in message and SECRET not in repr(out)
    return message


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_server_down(backend: str, stream: bool) -> None:
    out, seconds = run(make(backend, f"http://127.0.0.1:{closed_port()}"), stream)
    assert "not reachable" in failure(out, BackendUnavailable)
    assert seconds < 5


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_server_hangs(backend: str, stream: bool) -> None:
    with FaultServer("hang") as server:
        out, seconds = run(make(backend, server.url), stream)
    message = failure(out, BackendUnavailable)
    # Ollama: one attempt, ended by the read timeout (1 s). OpenAI: the client retries
    # (retries = 1) after its short backoff, and that retry is cut at the total deadline (2 s).
    if backend == "ollama":
        assert "generator.timeout_s = 1 s" in message
    else:
        assert "total_timeout_s = 2 s" in message
    assert seconds < 3.0, seconds  # 2 s, the total deadline, with room for a busy host


@pytest.mark.parametrize("stream", STREAMS)
def test_the_openai_clients_retries_end_at_the_total_deadline(stream: bool) -> None:
    """Three retries of 1 s reads would take over 4 s; the total deadline (1.5 s) ends them."""
    with FaultServer("hang") as server:
        gen = make("openai", server.url, retries=3, total_timeout_s=1.5)
        out, seconds = run(gen, stream)
    assert "total_timeout_s = 1.5 s" in failure(out, BackendUnavailable)
    assert seconds < 2.5, seconds  # not a retry after the deadline: its backoff alone is ~1 s


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_slow_server_within_the_timeout_answers(backend: str, stream: bool) -> None:
    with FaultServer("slow", delay=0.6) as server:
        out, _ = run(make(backend, server.url), stream)
    assert not isinstance(out, BaseException), out
    assert out.text == ANSWER and out.citations == (3,) and out.finish_reason == "stop"


@pytest.mark.parametrize("mode", ["drip", "bytedrip"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_that_never_ends_stops_at_the_total_timeout(backend: str, mode: str) -> None:
    """Each piece arrives within the read timeout, so only the total deadline can end it."""
    with FaultServer(mode, delay=0.3) as server:
        out, seconds = run(make(backend, server.url), stream=True)
    assert "generator.total_timeout_s = 2 s" in failure(out, BackendUnavailable)
    assert 1.9 < seconds < 4, seconds
    gen = make(backend, server.url)
    assert gen._client is None  # a closed client is rebuilt on the next request


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_reply(backend: str, stream: bool) -> None:
    with FaultServer("malformed") as server:
        out, seconds = run(make(backend, server.url), stream)
    assert "malformed reply" in failure(out, BackendUnavailable)
    assert seconds < 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_stream_is_not_taken_for_an_answer(backend: str) -> None:
    """The body ends cleanly after three pieces: 'The Eiffel Tower' must not be taken for the
    whole answer."""
    with FaultServer("truncated") as server:
        out, _ = run(make(backend, server.url), stream=True)
    message = failure(out, BackendUnavailable)
    assert "before it was complete" in message and "16 characters" in message


@pytest.mark.parametrize("backend", BACKENDS)
def test_connection_cut_mid_chunk_is_named(backend: str) -> None:
    with FaultServer("cut") as server:
        out, _ = run(make(backend, server.url), stream=True)
    assert "dropped the connection in the middle of the answer" in failure(out, BackendUnavailable)


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_context_length_rejection_names_the_fix(backend: str, stream: bool) -> None:
    with FaultServer("context") as server:
        out, _ = run(make(backend, server.url), stream)
        assert len(server.requests) == 1  # not retried: the same prompt cannot fit next time
    message = failure(out)
    assert "does not fit" in message and "compress.budget_tokens" in message


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("backend", BACKENDS)
def test_busy_server_is_retried_with_backoff(backend: str, status: int) -> None:
    with FaultServer("busy", fail_first=2, status=status) as server:
        out, _ = run(make(backend, server.url, retries=2), stream=True)
        times = [r["t"] for r in server.requests]
    assert not isinstance(out, BaseException), out
    assert out.text == ANSWER and len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 0.15 for g in gaps), gaps  # waited (Retry-After 0.2 s / backoff)


@pytest.mark.parametrize("backend", BACKENDS)
def test_busy_server_gives_up_after_the_retries(backend: str) -> None:
    with FaultServer("busy", fail_first=100, status=429) as server:
        out, seconds = run(make(backend, server.url, retries=2), stream=False)
        assert len(server.requests) == 3
    message = failure(out, BackendUnavailable)
    assert "429" in message and seconds < 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_busy_servers_retries_end_at_the_total_deadline(backend: str) -> None:
    """Retries of a busy server wait 0.2 s (Retry-After) or 0.5, 1, 2 s (backoff); the call's
    total deadline (1 s) ends them, and the error still says the server was busy or ran out
    of time, not something else."""
    with FaultServer("busy", fail_first=100, status=503) as server:
        out, seconds = run(make(backend, server.url, retries=6, total_timeout_s=1.0), False)
    message = failure(out, BackendUnavailable)
    assert "503" in message or "total_timeout_s = 1 s" in message, message
    assert seconds < 2.0, seconds  # six retries' backoff would take over 10 s


@pytest.mark.parametrize("stream", STREAMS)
def test_openai_401_echoing_the_key_never_shows_it(stream: bool) -> None:
    with FaultServer("echo401") as server:
        out, _ = run(make("openai", server.url), stream)
        headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
        assert headers["authorization"] == f"Bearer {SECRET}"  # the server did see the key
    assert "rejected the API key" in failure(out, BackendUnavailable)
