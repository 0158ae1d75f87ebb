"""Generation through a local Ollama server with the official ``ollama`` client (chat API).

Every request sends ``options.num_ctx``: Ollama's default context is small (2048-4096 tokens
depending on the version) and it drops the start of a longer prompt silently, which is where
the instructions are. The prompt is checked against ``context_window`` first with a
conservative estimate, or with a local tokenizer when one is given.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fathom.core.base import TokenCounter
from fathom.core.checks import Check
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.common import estimate_tokens, import_backend
from fathom.stages.generate.registry import BACKENDS
from fathom.stages.generate.server import (
    Deadline,
    first_line,
    incomplete_stream,
    probe_json,
    refused,
    short_reason,
)

if TYPE_CHECKING:
    from fathom.core.config import Config

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_MODEL = BACKENDS["ollama"].default_model


def ollama_host(cfg: GeneratorConfig) -> str:
    """``generator.ollama_host``, else ``OLLAMA_HOST``, else the local default, as a URL."""
    raw = (cfg.ollama_host or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST).strip().rstrip("/")
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):  # a bind-all address as `ollama serve` takes it
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or (443 if parts.scheme == "https" else 11434)
    return f"{parts.scheme}://{host}:{port}{parts.path}"


def same_model(wanted: str, available: str) -> bool:
    """Whether Ollama's ``available`` name is ``wanted`` (a missing tag means ``:latest``)."""

    def norm(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"

    return norm(wanted) == norm(available)


class OllamaGenerator(BaseGenerator):
    """Answers with a model served by Ollama; the client is created on first use."""

    name = "ollama"
    concurrent_requests = True

    def __init__(self, cfg: GeneratorConfig, token_counter: TokenCounter | None = None) -> None:
        super().__init__(cfg)
        self.model = cfg.model or DEFAULT_MODEL
        self.host = ollama_host(cfg)
        self._counter = token_counter
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OllamaGenerator(host={self.host!r}, model={self.model!r})"

    def count_tokens(self, texts: list[str]) -> list[int]:
        """With the local tokenizer when one was given, else ``estimate_tokens`` (conservative)."""
        if self._counter is not None:
            return self._counter.count(texts)
        return [estimate_tokens(t) for t in texts]

    def options(self) -> dict[str, Any]:
        """The ``options`` sent with every chat request."""
        return {
            "num_ctx": self.cfg.context_window,
            "num_predict": self.cfg.max_tokens,
            "temperature": self.cfg.temperature,
            "seed": self.cfg.seed,
        }

    def _load(self) -> Any:
        if self._client is None:
            ollama = import_backend("ollama", "the ollama client", "ollama")
            self._client = ollama.Client(host=self.host, timeout=self.cfg.timeout_s)
        return self._client

    def _complete(self, req: Request) -> Completion:
        client = self._load()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": req.prompt,
            "options": self.options(),
        }
        if "logprobs" in inspect.signature(client.chat).parameters:  # newer clients only
            kwargs["logprobs"] = True
        total = self.cfg.total_timeout_s
        end = time.monotonic() + total if total > 0 else math.inf  # the whole call's limit
        for attempt in range(max(self.cfg.retries, 0) + 1):
            try:
                text, final, logprobs = self._request(client, kwargs, req.on_token, end)
                break
            except _Busy as busy:  # nothing was streamed yet: safe to ask again
                wait = min(BACKOFF_S * 2**attempt, 8.0)
                if attempt >= self.cfg.retries or time.monotonic() + wait >= end:
                    raise busy.error from None
                time.sleep(wait)
        text = text.strip()
        self._note_speed(final)
        return Completion(
            text=text,
            prompt_tokens=getattr(final, "prompt_eval_count", None),
            completion_tokens=getattr(final, "eval_count", None) or estimate_tokens(text),
            finish_reason=getattr(final, "done_reason", None) or "",
            logprobs=tuple(logprobs) or None,
        )

    def _note_speed(self, final: Any) -> None:
        """Keep the prompt speed Ollama reports with every reply (``prompt_eval_duration`` in
        ns over ``prompt_eval_count``). A prompt mostly served from Ollama's prompt cache
        evaluates few tokens, and its rate says little: only prompts of some length count."""
        n = getattr(final, "prompt_eval_count", None) or 0
        ns = getattr(final, "prompt_eval_duration", None) or 0
        if n >= MIN_MEASURED_PROMPT and ns > 0:
            self._record_speed(ns / 1e6 / n)

    def _speed_key(self) -> str:
        return f"ollama:{self.host}:{self.model}"

    def _request(
        self,
        client: Any,
        kwargs: dict[str, Any],
        on_token: Callable[[str], Any] | None,
        end: float = math.inf,
    ) -> tuple[str, Any, list[float]]:
        """``(text, final part, logprobs)`` of one chat request, within what is left of the
        call's total deadline (``end``, on ``time.monotonic``'s clock)."""
        pieces: list[str] = []
        logprobs: list[float] = []
        final: Any = None
        seconds = max(end - time.monotonic(), 1e-3) if end < math.inf else 0.0  # 0: no limit
        deadline = Deadline(seconds, self._close_client)
        with _ollama_errors(self, deadline, pieces), deadline:
            if on_token is None:
                final = client.chat(stream=False, **kwargs)
                pieces.append(final.message.content or "")
                logprobs += [lp.logprob for lp in getattr(final, "logprobs", None) or ()]
            else:
                for part in client.chat(stream=True, **kwargs):
                    deadline.check()
                    piece = part.message.content or ""
                    if piece:
                        pieces.append(piece)
                        on_token(piece)
                    logprobs += [lp.logprob for lp in getattr(part, "logprobs", None) or ()]
                    if part.done:
                        final = part
                if final is None:
                    raise incomplete_stream(f"Ollama at {self.host}", len("".join(pieces)))
        return "".join(pieces), final, logprobs

    def close(self) -> None:
        self._close_client()

    def _close_client(self) -> None:
        """Close the HTTP connections (ends a read blocked on a stream past its deadline)."""
        client, self._client = self._client, None
        inner = getattr(client, "_client", None)  # ollama.Client keeps its httpx.Client here
        if inner is not None:
            inner.close()


MIN_MEASURED_PROMPT = 64  # prompt tokens a reply must have evaluated for its speed to count
BACKOFF_S = 0.5  # first wait before retrying a busy server; doubles per retry


class _Busy(Exception):
    """The server said it is busy (429/503) before answering: worth another try."""

    def __init__(self, error: FathomError) -> None:
        super().__init__(str(error))
        self.error = error


@contextlib.contextmanager
def _ollama_errors(
    gen: OllamaGenerator, deadline: Deadline | None = None, pieces: list[str] | None = None
) -> Iterator[None]:
    """Turn the client's exceptions into ``BackendUnavailable`` / ``FathomError`` with a fix.

    ``deadline``: the request's total deadline (an error after it passed is reported as such);
    ``pieces``: what was streamed so far (a dropped connection mid-answer is named as one).
    """
    received = pieces if pieces is not None else []
    try:
        yield
    except FathomError:
        raise
    except Exception as exc:
        error = _client_error(gen, exc, deadline, received)
        if error is None:
            raise
        raise error from None


def _client_error(
    gen: OllamaGenerator, exc: Exception, deadline: Deadline | None, received: list[str]
) -> Exception | None:
    """What ``_ollama_errors`` raises for ``exc``: a connection, time or protocol failure, the
    server's refusal, or a malformed reply (None: not the client's, raised as it is)."""
    import httpx
    import ollama
    import pydantic

    host = gen.host
    if deadline is not None and deadline.expired and not isinstance(exc, httpx.TimeoutException):
        return BackendUnavailable(
            f"Ollama at {host} did not finish the answer within generator.total_timeout_s = "
            f"{gen.cfg.total_timeout_s:g} s ({len(''.join(received))} characters received) "
            "— raise it, lower generator.max_tokens, or check the server"
        )
    if isinstance(exc, httpx.TimeoutException):
        return BackendUnavailable(
            f"Ollama at {host} did not answer within generator.timeout_s = "
            f"{gen.cfg.timeout_s:g} s — raise it, or use a smaller model"
        )
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and received:
        return BackendUnavailable(
            f"Ollama at {host} dropped the connection in the middle of the answer "
            f"({len(''.join(received))} characters received) — try again"
        )
    if isinstance(exc, ConnectionError | httpx.ConnectError | httpx.RemoteProtocolError):
        # The client maps a refused connection to ConnectionError, except while streaming.
        return BackendUnavailable(
            f"Ollama is not reachable at {host} — start it with `ollama serve` "
            "or set generator.ollama_host"
        )
    if isinstance(exc, ollama.ResponseError):
        return _refusal(gen, exc, received)
    # JSONDecodeError is a ValueError; the client raises TypeError or AttributeError when
    # it unpacks JSON that is not an object (a list, a number).
    malformed = ValueError | pydantic.ValidationError | TypeError | AttributeError | KeyError
    if isinstance(exc, malformed):
        return BackendUnavailable(
            f"Ollama at {host} sent a malformed reply for model {gen.model!r} "
            f"({type(exc).__name__}: {first_line(str(exc), 120)}) — is "
            "generator.ollama_host an Ollama server?"
        )
    if isinstance(exc, httpx.HTTPError):
        return BackendUnavailable(f"Ollama at {host}: {first_line(str(exc))}")
    return None


def _refusal(gen: OllamaGenerator, exc: Any, received: list[str]) -> Exception:
    """The error for the server's ``ResponseError``: a missing model, a busy server (``_Busy``,
    retried while nothing was streamed), or its own words."""
    host, model = gen.host, gen.model
    message = first_line(str(exc.error))
    if exc.status_code == 404 or "not found" in message.lower():
        return BackendUnavailable(
            f"Ollama at {host} has no model {model!r} ({message}) — "
            f"run `ollama pull {model}` or set generator.model"
        )
    if exc.status_code in (429, 503) and not received:
        return _Busy(
            BackendUnavailable(
                f"Ollama at {host} is busy ({message}, status {exc.status_code}; "
                f"{gen.cfg.retries} retries) — try again later"
            )
        )
    return refused(f"Ollama at {host}", model, message, exc.status_code)


def doctor_check(cfg: Config, native_check: bool = True) -> list[Check]:
    """`fathom doctor`'s line: whether the Ollama server answers and lists the model."""
    host = ollama_host(cfg.generator)
    model = cfg.generator.model or DEFAULT_MODEL
    try:
        data = probe_json(f"{host}/api/tags")
    except (OSError, ValueError) as exc:
        return [
            Check(
                "generators",
                "ollama",
                "warning",
                f"{host}: not reachable ({short_reason(exc)})",
                "start Ollama (`ollama serve`) to answer with a local model",
            )
        ]
    names = [str(m.get("name") or m.get("model") or "") for m in data.get("models", [])]
    listed = ", ".join(names) or "no models"
    if any(same_model(model, n) for n in names):
        return [Check("generators", "ollama", "ok", f"{host}: {listed}")]
    return [
        Check(
            "generators",
            "ollama",
            "warning",
            f"{host}: has {listed}, not {model}",
            f"ollama pull {model}",
        )
    ]
