"""Generation through the OpenAI API or any OpenAI-compatible server, with the ``openai`` client.

``generator.base_url`` points the client at vLLM, the llama.cpp server, LM Studio or Ollama's
``/v1``; such servers get a placeholder key when none is configured. The API key never appears
in a repr or an error message: server messages are scrubbed of it before they are raised.

Token counts: tiktoken's encoding for the model when it has the BPE file (cached, or
downloadable); for a model tiktoken does not know (a local server's model) the larger of
``o200k_base`` and the conservative byte estimate, since its real tokenizer is unknown; without
tiktoken's BPE file, the byte estimate (``common.estimate_tokens``).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fathom.core.checks import Check
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.common import estimate_tokens, import_backend
from fathom.stages.generate.registry import BACKENDS
from fathom.stages.generate.server import (
    Deadline,
    PastDeadline,
    capped_transport,
    first_line,
    http_package,
    incomplete_stream,
    probe_json,
    refused,
    short_reason,
)

if TYPE_CHECKING:
    from fathom.core.config import Config

DEFAULT_MODEL = BACKENDS["openai"].default_model
PLACEHOLDER_KEY = "sk-no-key"  # local servers ignore the key, the client insists on one
TIKTOKEN_LOAD_S = 3.0  # tiktoken downloads its BPE file without a timeout; do not wait longer

# Error texts from servers that reject an optional parameter we send (then retried without).
_OPTIONAL_HINTS = ("logprob", "stream_options", "include_usage")

_encodings: dict[str, Any] = {}
_encodings_lock = threading.Lock()


def _tiktoken_encoding(model: str) -> tuple[Any, bool]:
    """``(encoding or None, model known to tiktoken)``; cached per model, loaded at most once."""
    with _encodings_lock:
        if model in _encodings:
            return _encodings[model]
    try:
        import tiktoken
    except ImportError:
        result: tuple[Any, bool] = (None, False)
    else:
        try:
            name, known = tiktoken.encoding_name_for_model(model), True
        except KeyError:
            name, known = "o200k_base", False
        box: list[Any] = []

        def load() -> None:
            with contextlib.suppress(Exception):  # offline: any network or file error
                box.append(tiktoken.get_encoding(name))

        loader = threading.Thread(target=load, daemon=True, name="tiktoken-load")
        loader.start()
        loader.join(TIKTOKEN_LOAD_S)
        result = (box[0] if box else None, known)
    with _encodings_lock:
        _encodings[model] = result
    return result


def api_key(cfg: GeneratorConfig) -> str:
    """``generator.api_key``, else ``OPENAI_API_KEY`` (empty when neither is set)."""
    return cfg.api_key or os.environ.get("OPENAI_API_KEY", "")


def doctor_check(cfg: Config, native_check: bool = True) -> list[Check]:
    """`fathom doctor`'s line: whether the configured server answers and takes the key (with
    no ``generator.base_url``, whether a key is there for OpenAI's API)."""
    import urllib.error

    g = cfg.generator

    def line(status: str, detail: str, fix: str = "") -> list[Check]:
        return [Check("generators", "openai", status, detail, fix)]

    key = "an API key is set" if api_key(g) else "no API key"
    if not g.base_url:
        status = "problem" if g.backend == "openai" and not api_key(g) else "ok"
        return line(
            status,
            f"no generator.base_url (OpenAI's API when chosen with --generator openai); {key}",
            "set OPENAI_API_KEY or generator.api_key" if status == "problem" else "",
        )
    try:
        probe_json(g.base_url.rstrip("/") + "/models", api_key(g))
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return line(
                "problem",
                f"{g.base_url}: rejected the key (status {exc.code}); {key}",
                "check generator.api_key",
            )
        return line("ok", f"{g.base_url}: answers (status {exc.code}); {key}")
    except (OSError, ValueError) as exc:
        return line(
            "problem",
            f"{g.base_url}: not reachable ({short_reason(exc)}); {key}",
            "start the server, or fix generator.base_url",
        )
    return line("ok", f"{g.base_url}: answers; {key}")


class OpenAIGenerator(BaseGenerator):
    """Answers with a chat model behind the OpenAI API; the client is created on first use."""

    name = "openai"
    concurrent_requests = True

    def __init__(self, cfg: GeneratorConfig) -> None:
        super().__init__(cfg)
        self.model = cfg.model or DEFAULT_MODEL
        self.base_url = cfg.base_url.rstrip("/")
        self._client: Any = None
        self._send_logprobs = True
        self._send_usage = True
        self._deadline = threading.local()  # each thread's request's total deadline

    def __repr__(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"OpenAIGenerator(base_url={where!r}, model={self.model!r})"

    def count_tokens(self, texts: list[str]) -> list[int]:
        """tiktoken counts, or the conservative estimate (see the module docstring)."""
        encoding, known = _tiktoken_encoding(self.model)
        if encoding is None:
            return [estimate_tokens(t) for t in texts]
        counts = [len(ids) for ids in encoding.encode_ordinary_batch(texts)]
        if known:
            return counts
        return [max(n, estimate_tokens(t)) for n, t in zip(counts, texts, strict=True)]

    def _where(self) -> str:
        return f"the OpenAI-compatible server at {self.base_url}" if self.base_url else "OpenAI"

    def _load(self) -> Any:
        if self._client is None:
            openai = import_backend("openai", "the openai client", "openai")
            key = api_key(self.cfg)
            if not key and not self.base_url:
                raise BackendUnavailable(
                    "no OpenAI API key — set OPENAI_API_KEY or generator.api_key, "
                    "or generator.base_url for an OpenAI-compatible server"
                )
            self._client = openai.OpenAI(
                api_key=key or PLACEHOLDER_KEY,
                base_url=self.base_url or None,
                max_retries=self.cfg.retries,
                timeout=self.cfg.timeout_s,
                http_client=openai.DefaultHttpxClient(
                    transport=capped_transport(openai.DefaultHttpxClient, self._left)
                ),
            )
        return self._client

    def _left(self) -> float:
        """Seconds left of this thread's request's total deadline (``inf``: no request)."""
        deadline = getattr(self._deadline, "now", None)
        return math.inf if deadline is None else deadline.left()

    def _params(self, messages: list[dict[str, str]], stream: bool) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.cfg.temperature,
            "seed": self.cfg.seed,
        }
        # OpenAI's reasoning models reject max_tokens; compatible servers often only know it.
        budget_key = "max_tokens" if self.base_url else "max_completion_tokens"
        params[budget_key] = self.cfg.max_tokens
        if self._send_logprobs:
            params |= {"logprobs": True, "top_logprobs": 1}
        if stream:
            params["stream"] = True
            if self._send_usage:
                params["stream_options"] = {"include_usage": True}
        return params

    def _complete(self, req: Request) -> Completion:
        client = self._load()
        for attempt in (1, 2):
            pieces: list[str] = []
            deadline = Deadline(self.cfg.total_timeout_s, self._close_client)
            self._deadline.now = deadline
            try:
                with self._errors(), self._stream_errors(deadline, pieces), deadline:
                    result = self._chat(client, req.prompt, req.on_token, deadline, pieces)
                break
            except _OptionalParamRejected:
                if attempt == 2:
                    raise
                self._send_logprobs = self._send_usage = False
            finally:
                self._deadline.now = None
        text, usage, finish, logprobs, model = result
        return Completion(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None) or None,
            finish_reason=finish or "",
            logprobs=tuple(logprobs) or None,
            model=model or "",
        )

    def _chat(
        self,
        client: Any,
        messages: list[dict[str, str]],
        on_token: Callable[[str], Any] | None,
        deadline: Deadline,
        pieces: list[str],
    ) -> tuple[str, Any, str | None, list[float], str]:
        """``(text, usage or None, finish_reason, logprobs, model)`` of one request; streamed
        pieces are appended to ``pieces`` as they arrive."""
        logprobs: list[float] = []
        if on_token is None:
            response = client.chat.completions.create(**self._params(messages, stream=False))
            choices = getattr(response, "choices", None)
            if not isinstance(choices, list) or not choices:
                what = "no choices" if isinstance(choices, list) else "no list of choices"
                raise self._malformed(what if hasattr(response, "choices") else "not an object")
            choice = choices[0]
            if getattr(choice, "message", None) is None:
                raise self._malformed("a choice without a message")
            if choice.logprobs and choice.logprobs.content:
                logprobs = [t.logprob for t in choice.logprobs.content]
            return (
                choice.message.content or "",
                response.usage,
                choice.finish_reason,
                logprobs,
                response.model,
            )
        usage: Any = None
        finish: str | None = None
        model = ""
        for chunk in client.chat.completions.create(**self._params(messages, stream=True)):
            deadline.check()
            if not isinstance(getattr(chunk, "choices", None), list):
                raise self._malformed("a stream chunk without a list of choices")
            model = chunk.model or model
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                piece = choice.delta.content if choice.delta else None
                if piece:
                    pieces.append(piece)
                    on_token(piece)
                if choice.logprobs and choice.logprobs.content:
                    logprobs += [t.logprob for t in choice.logprobs.content]
                finish = choice.finish_reason or finish
        if finish is None:  # every server sends a finish_reason last; a cut stream does not
            raise incomplete_stream(self._where(), len("".join(pieces)))
        return "".join(pieces), usage, finish, logprobs, model

    def _malformed(self, problem: str) -> BackendUnavailable:
        """The error for a reply that is JSON but not the shape of the chat completions API."""
        return BackendUnavailable(
            f"{self._where()} sent a malformed reply for model {self.model!r} ({problem}) — "
            "check that generator.base_url is an OpenAI-compatible API"
        )

    def close(self) -> None:
        self._close_client()

    def _close_client(self) -> None:
        """Close the HTTP connections (ends a read blocked on a stream past its deadline)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    @contextlib.contextmanager
    def _stream_errors(self, deadline: Deadline, pieces: list[str]) -> Iterator[None]:
        """Name the failures the client leaves raw or vague: past the total deadline, a reply
        that is not JSON, a connection dropped in the middle of the answer."""
        import openai

        httpx = http_package(openai.DefaultHttpxClient)
        where = self._where()
        try:
            yield
        except FathomError:
            raise
        except (Exception, PastDeadline) as exc:
            got = len("".join(pieces))
            if deadline.expired or isinstance(exc, PastDeadline):
                raise BackendUnavailable(
                    f"{where} did not finish the answer within generator.total_timeout_s = "
                    f"{self.cfg.total_timeout_s:g} s ({got} characters received) — raise it, "
                    "lower generator.max_tokens, or check the server"
                ) from None
            if isinstance(exc, ValueError):  # json.JSONDecodeError: not the API's JSON
                raise BackendUnavailable(
                    f"{where} sent a malformed reply ({type(exc).__name__}) — check that "
                    "generator.base_url is an OpenAI-compatible API"
                ) from None
            if got and isinstance(exc, openai.APIConnectionError | httpx.HTTPError):
                raise BackendUnavailable(
                    f"{where} dropped the connection in the middle of the answer ({got} "
                    "characters received) — try again"
                ) from None
            raise

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Map the client's exceptions to Fathom's, with the API key scrubbed from every text."""
        import openai

        where, key = self._where(), api_key(self.cfg)

        def scrub(text: str) -> str:
            return first_line(text.replace(key, "***") if key else text)

        try:
            yield
        except openai.APITimeoutError:
            raise BackendUnavailable(
                f"{where} did not answer within generator.timeout_s = {self.cfg.timeout_s:g} s "
                f"({self.cfg.retries} retries) — raise the timeout or try again later"
            ) from None
        except openai.APIConnectionError:
            fix = "check generator.base_url and that the server is running"
            raise BackendUnavailable(
                f"{where} is not reachable — {fix if self.base_url else 'check the network'}"
            ) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise BackendUnavailable(
                f"{where} rejected the API key (status {exc.status_code}) — "
                "set generator.api_key or OPENAI_API_KEY"
            ) from None
        except openai.NotFoundError as exc:
            raise BackendUnavailable(
                f"{where} has no model {self.model!r} ({scrub(exc.message)}) — set generator.model"
            ) from None
        except openai.RateLimitError as exc:
            raise BackendUnavailable(
                f"{where}: rate limit or quota exceeded ({scrub(exc.message)}) — try again later"
            ) from None
        except openai.APIStatusError as exc:
            message = scrub(exc.message)
            sent_optional = self._send_logprobs or self._send_usage
            if sent_optional and (
                exc.status_code == 422 or any(h in message.lower() for h in _OPTIONAL_HINTS)
            ):
                raise _OptionalParamRejected from None
            raise refused(where, self.model, message, exc.status_code) from None
        except openai.OpenAIError as exc:
            raise FathomError(f"{where}: {scrub(str(exc))}") from None


class _OptionalParamRejected(Exception):
    """The server rejected ``logprobs`` or ``stream_options``: retry without them."""
