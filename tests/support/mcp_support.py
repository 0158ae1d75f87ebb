"""Talking to ``fathom mcp`` the way an MCP client does: the server as a subprocess, the SDK's own
stdio client and session. The server inherits the test's environment (its FATHOM_HOME)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@asynccontextmanager
async def mcp_session(
    *args: str, log: Path, env: dict[str, str] | None = None
) -> AsyncIterator[Any]:
    """An initialized ``ClientSession`` with ``fathom mcp ARGS`` (its stderr in ``log``)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fathom", "mcp", *args],
        env={**os.environ, **(env or {})},
    )
    with log.open("w", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=120) as session,
        ):
            await session.initialize()
            yield session


def run(body: Callable[[], Awaitable[T]], timeout: float = 240) -> T:
    """Run an async test body under a time limit (a server that never answers fails the test)."""
    import anyio

    async def limited() -> T:
        with anyio.fail_after(timeout):
            return await body()

    return anyio.run(limited)


def result(res: Any) -> dict[str, Any]:
    """A tool call's structured result, which must not be an error."""
    assert not res.is_error, res.content[0].text
    assert res.structured_content is not None
    return res.structured_content


def error(res: Any) -> str:
    """A tool call's error message, which must be one."""
    assert res.is_error, res.structured_content
    return res.content[0].text
