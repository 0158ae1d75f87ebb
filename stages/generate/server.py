"""What the server backends (Ollama, OpenAI-compatible) share: a limit on a whole request
however slowly its answer trickles in, the errors for a stream cut short or a request refused,
and the short probe their `fathom doctor` checks make."""

from __future__ import annotations

import contextlib
import importlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from fathom.core.errors import BackendUnavailable, FathomError

DOCTOR_TIMEOUT_S = 2.0  # a doctor probe waits no longer for a server
_DEADLINE_SLACK_S = 0.01  # a timeout this close to the total deadline was the deadline's


def first_line(text: str, limit: int = 300) -> str:
    """The first line of a (server) message, shortened for an error."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Deadline:
    """A limit on a whole request, however slowly its answer trickles in.

    Per-read timeouts never fire on a stream that sends a little every few seconds; this does.
    ``check()`` raises ``DeadlinePassed`` between pieces, and a timer calls ``close`` (which
    should close the HTTP client) so a read blocked mid-piece ends too. ``seconds <= 0``: none.
    """

    def __init__(self, seconds: float, close: Callable[[], object]) -> None:
        self.seconds = seconds
        self._close = close
        self._end = math.inf
        self._timer: threading.Timer | None = None
        self.expired = False

    def __enter__(self) -> Deadline:
        if self.seconds > 0:
            self._end = time.monotonic() + self.seconds
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if time.monotonic() >= self._end:
            self.expired = True

    def _expire(self) -> None:
        self.expired = True
        with contextlib.suppress(Exception):  # best effort: check() still ends the loop
            self._close()

    def left(self) -> float:
        """Seconds until the deadline (``inf`` when there is none, 0 once it has passed)."""
        return max(0.0, self._end - time.monotonic())

    def check(self) -> None:
        """Raise ``DeadlinePassed`` once the time is up."""
        if self.expired or time.monotonic() >= self._end:
            self.expired = True
            raise DeadlinePassed


def http_package(client_class: type) -> Any:
    """The package behind an HTTP client class: ``httpx``, or the ``httpx2`` fork that newer
    openai clients are built on (whose errors are not httpx's)."""
    packages = (importlib.import_module(c.__module__.split(".")[0]) for c in client_class.__mro__)
    return next(p for p in packages if hasattr(p, "HTTPTransport"))


def capped_transport(client_class: type, left: Callable[[], float]) -> Any:
    """A transport for ``client_class`` (an httpx ``Client``, or its httpx2 fork that newer
    openai clients use) that shortens each request's timeouts to ``left()`` seconds, so the
    client's own retries cannot run past the caller's total deadline: the retry after a read
    timeout gets what is left of it, and none once it has passed."""
    http = http_package(client_class)
    parts = ("connect", "read", "write", "pool")

    class CappedTransport(http.HTTPTransport):  # type: ignore[name-defined,misc]
        def handle_request(self, request: Any) -> Any:
            seconds = left()
            if seconds <= 0:
                raise PastDeadline
            if seconds < math.inf:
                timeout = dict(request.extensions.get("timeout") or dict.fromkeys(parts))
                request.extensions["timeout"] = {
                    part: seconds if limit is None else min(limit, seconds)
                    for part, limit in timeout.items()
                }
            try:
                return super().handle_request(request)
            except Exception:
                if left() <= _DEADLINE_SLACK_S:  # cut by the deadline, not failed on its own
                    raise PastDeadline from None
                raise

    return CappedTransport()


class PastDeadline(BaseException):
    """A request inside an HTTP client reached the caller's total deadline. A BaseException so
    that a client's retry loop does not catch it, back off and try again."""


class DeadlinePassed(Exception):
    """A request ran past ``generator.total_timeout_s``."""


def incomplete_stream(where: str, received: int) -> FathomError:
    """The error for a stream that ended before the server said the answer was complete."""
    return BackendUnavailable(
        f"{where} ended the answer stream before it was complete ({received} characters "
        "received, no final message) — the server may have crashed or restarted; try again"
    )


def refused(where: str, model: str, message: str, status: int) -> FathomError:
    """The error for a server that refused a generation request with HTTP ``status``: a
    prompt longer than the model's context gets its fix, anything else the server's words."""
    if "context" in message.lower() and status == 400:
        return FathomError(
            f"{where}: the prompt does not fit model {model!r} ({message}) — "
            "lower compress.budget_tokens or generator.context_window"
        )
    return FathomError(f"{where} refused the request for {model!r}: {message} (status {status})")


def probe_json(url: str, key: str = "") -> dict[str, Any]:
    """The JSON object a GET of ``url`` returns (with ``key`` as a bearer token), waiting at most
    ``DOCTOR_TIMEOUT_S``; an ``OSError`` or ``ValueError`` when there is none."""
    import json
    import urllib.request

    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=DOCTOR_TIMEOUT_S) as response:
        data = json.loads(response.read().decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def short_reason(exc: BaseException) -> str:
    """Why a probe failed, in at most 120 characters (a URL error's reason when it has one)."""
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "…"
