"""What every request to ``fathom serve`` passes before a handler sees it (``Guard``, an ASGI
middleware): the Host header is one this server answers to (a page on another site cannot reach
it by rebinding a name to 127.0.0.1); with ``--allow-remote``, the server's access token
(header, cookie or ``?token=``, compared in constant time; 401 without it); and on every
state-changing request the per-server CSRF token in ``X-Fathom-CSRF`` (403 without it). Every
response carries a Content-Security-Policy that runs only the server's own script."""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

TOKEN_COOKIE = "fathom_token"
TOKEN_HEADER = "x-fathom-token"
CSRF_HEADER = "x-fathom-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    host = host.strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_refusal(host: str, allow_remote: bool) -> str | None:
    """Why ``fathom serve --host HOST`` may not start as asked (None: it may): an address
    other machines reach needs ``--allow-remote``."""
    if is_loopback(host) or allow_remote:
        return None
    return (
        f"--host {host} lets other machines reach the server: add --allow-remote (every "
        "request then needs the token it prints), or leave --host out"
    )


@dataclass
class Secrets:
    """The server's CSRF token, always; its access token, with ``--allow-remote``."""

    remote: bool = False
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    token: str | None = None

    def __post_init__(self) -> None:
        if self.remote and self.token is None:
            self.token = secrets.token_urlsafe(32)


class Guard:
    """The ASGI middleware in front of the app (see the module's docstring)."""

    def __init__(self, app: Any, keys: Secrets, hosts: set[str] | None = None) -> None:
        self.app = app
        self.keys = keys
        self.hosts = hosts  # None: any Host header (with --allow-remote)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message = refusal
            await _json(send, status, {"error": message})
            return
        set_cookie = self._cookie_to_set(scope)

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = list(SECURITY_HEADERS)
                if set_cookie:
                    extra.append((b"set-cookie", set_cookie))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: dict[str, Any], headers: dict[str, str]) -> tuple[int, str] | None:
        """``(status, message)`` when the request may not go on, else None."""
        if self.hosts is not None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.strip("[]") not in self.hosts:
                return 400, f"Host {host!r} is not this server — open it at its own address"
        if self.keys.token is not None and not _same(self._token(scope, headers), self.keys.token):
            return 401, (
                "this server needs its access token — open the address `fathom serve` printed "
                "(with ?token=…), or send it as the X-Fathom-Token header"
            )
        if scope["method"] not in SAFE_METHODS and not _same(
            headers.get(CSRF_HEADER), self.keys.csrf
        ):
            return 403, (
                "a request that changes something needs the page's CSRF token in the "
                "X-Fathom-CSRF header (GET /api/v1/csrf gives it)"
            )
        return None

    @staticmethod
    def _token(scope: dict[str, Any], headers: dict[str, str]) -> str | None:
        if TOKEN_HEADER in headers:
            return headers[TOKEN_HEADER]
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0]
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no token
            return None
        morsel = cookie.get(TOKEN_COOKIE)
        return morsel.value if morsel is not None else None

    def _cookie_to_set(self, scope: dict[str, Any]) -> bytes | None:
        """The access token as a cookie, when the page was opened with ``?token=``: the page's
        own requests (its images included) then carry it."""
        if self.keys.token is None or b"token=" not in scope.get("query_string", b""):
            return None
        return f"{TOKEN_COOKIE}={self.keys.token}; HttpOnly; SameSite=Strict; Path=/".encode()


def _same(given: str | None, expected: str) -> bool:
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


async def _json(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body, ensure_ascii=False).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
