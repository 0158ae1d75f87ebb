"""What the ``fathom serve`` tests share: the documents they generate (a paper shaped like
ReAct's, where a follow-up needs the first turn, and a PDF whose text is script and markup),
``fathom serve`` started as a subprocess on a free port, and (``api_client``, the reliability
bench's) its app behind Starlette's TestClient."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fathom.bench.support.docgen import make_pdf
from fathom.bench.support.web_safety import api_client as api_client  # the tests build theirs here
from fathom.tests.support.react_pages import PAGES as REACT_PAGES
from fathom.tests.support.react_pages import TITLE

PAGES = REACT_PAGES[:4]  # the page, its citations and the browser test count on four pages
FIRST = "Which two abilities does ReAct interleave?"
FOLLOW_UP = "How well does it do on HotpotQA?"
HOTPOT_PAGE = 3

SCRIPT_TITLE = "Probe <script>window.__pwned = 1</script> manual"
SCRIPT_TEXT = (
    'The Zorblax probe launch code is 7741. <script>window.__pwned = 1; alert("pwned")</script> '
    '<img src=x onerror="window.__pwned = 2"> The probe lands on Europa.'
)
SCRIPT_QUESTION = "What is the Zorblax probe launch code?"


def make_react_pdf(path: Path) -> Path:
    return make_pdf(path, PAGES, title=TITLE)


def make_script_pdf(path: Path) -> Path:
    """A PDF whose title and text are script and markup: shown, they must stay text."""
    pages = [[("h1", "Zorblax probe"), ("p", SCRIPT_TEXT)]]
    return make_pdf(path, pages, title=SCRIPT_TITLE)


def free_port() -> int:
    from fathom.bench.support.fault_server import free_port as port

    return port()


@contextmanager
def serve_process(*args: str, log: Path, timeout: float = 120) -> Iterator[str]:
    """``fathom serve ARGS`` on a free loopback port (the test's FATHOM_HOME); yields its base
    URL once it answers, and stops it after."""
    port = free_port()
    command = [sys.executable, "-m", "fathom", "serve", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/v1/collections", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fathom serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
