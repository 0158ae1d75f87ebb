"""``fathom serve`` in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright's Python API, which downloads no browser of its own) against the server started as
a subprocess over generated PDFs. Open the page, ask and see the answer stream with its
citations, open a citation's page with the passage highlighted and step to the next page,
ask a follow-up that needs the first turn, upload a file and see it indexed — and a PDF whose
text is script and markup shows as text, with no script run and no dialog opened.

Without the browser these tests skip locally and fail in CI (``CI`` set), where the README's
test command installs it. ``FATHOM_WEB_SCREENSHOTS=DIR`` keeps the run's screenshots there
(docs/web.md's pictures are made so)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fathom.core.config import load_config
from fathom.index.ingest import ingest_paths
from fathom.tests.support import web_support as ws

pytestmark = pytest.mark.slow

WAIT_MS = 180_000  # the first answer loads the models on a loaded 2-core machine

# Set before the page's own script runs: counts text written into an answer while it streams.
WATCH_STREAM = """
window.__streamed = 0;
new MutationObserver((records) => {
  for (const r of records) {
    if (r.target.classList && r.target.classList.contains("streaming") && r.addedNodes.length) {
      window.__streamed += 1;
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


def chromium_path() -> str:
    """The system's Chromium; without it (or Playwright) the test fails in CI, skips elsewhere."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        why = (
            "needs Debian's chromium and playwright (the README's test command installs both: "
            "apt-get install -y chromium; pip install -e '.[dev]')"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture
def server(tmp_path: Path, minilm) -> Iterator[str]:
    """``fathom serve`` over collection ``paper``: the ReAct-shaped paper and the script PDF."""
    docs = tmp_path / "docs"
    docs.mkdir()
    ws.make_react_pdf(docs / "react.pdf")
    ws.make_script_pdf(docs / "probe.pdf")
    ingest_paths(load_config(), [docs], "paper", embedder=minilm)
    args = ("-c", "paper", "--generator", "extractive", "--root", str(docs))
    with ws.serve_process(*args, log=tmp_path / "serve.log") as base:
        yield base


@pytest.fixture
def page(server: str) -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)  # its own default, 5 s, is short on a loaded machine
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.set_default_timeout(WAIT_MS)
            tab.dialogs = []
            tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
            tab.add_init_script(WATCH_STREAM)
            tab.goto(server)
            yield tab
        finally:
            browser.close()


def shoot(page: Any, name: str, tmp_path: Path) -> None:
    """A screenshot of the page as it is, kept under ``FATHOM_WEB_SCREENSHOTS`` when set."""
    folder = Path(os.environ.get("FATHOM_WEB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"))


def ask(page: Any, question: str) -> Any:
    """Ask ``question`` on the page; the new turn once its answer is final."""
    before = page.locator(".turn").count()
    page.fill("#question", question)
    page.click("#ask-button")
    turn = page.locator(".turn").nth(before)
    turn.locator(".answer:not(.streaming)").wait_for()
    turn.locator(".report").wait_for()
    return turn


def test_ask_cite_follow_up_and_upload_in_a_browser(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#collection")).to_have_value("paper")
    first = ask(page, ws.FIRST)
    assert page.evaluate("window.__streamed") >= 1  # the answer was written as it came
    expect(first.locator(".answer")).to_contain_text("reasoning traces and task-specific actions")
    cites = first.locator(".answer a.cite")
    assert cites.count() >= 1
    expect(first.locator(".report")).to_contain_text("Depth")
    expect(first.locator(".report")).to_contain_text("extractive")

    cites.first.click()  # the cited page, the passage highlighted, beside its text
    image = page.locator("#page-image")
    expect(image).to_be_visible()
    expect(image).to_have_attribute("data-located", "text layer")
    expect(page.locator("#page-label")).to_have_text("page 1 of 4")
    expect(page.locator("#passage-text")).to_contain_text("ReAct interleaves")
    assert page.evaluate("document.getElementById('page-image').naturalWidth") > 100
    shoot(page, "answer-and-cited-page", tmp_path)
    page.click("#page-next")
    expect(page.locator("#page-label")).to_have_text("page 2 of 4")
    expect(image).to_have_attribute("data-located", "not found")
    page.click("#page-prev")
    expect(page.locator("#page-label")).to_have_text("page 1 of 4")

    second = ask(page, ws.FOLLOW_UP)  # needs the first turn to know what "it" is
    expect(second.locator(".followup")).to_contain_text("How well does ReAct do on HotpotQA?")
    expect(second.locator(".answer")).to_contain_text("35.1")

    page.click("button[data-view='library-view']")
    expect(page.locator("#documents")).to_contain_text(ws.TITLE)
    pump = tmp_path / "pump.txt"
    pump.write_text("The Zorblax coolant pump impeller is cast from titanium.\n")
    page.set_input_files("#file-input", str(pump))
    expect(page.locator("#ingest-log")).to_contain_text("indexed into paper")
    expect(page.locator("#documents")).to_contain_text("pump.txt")
    shoot(page, "library", tmp_path)
    assert page.dialogs == []


def test_a_pdf_of_script_and_markup_renders_inert(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    turn = ask(page, ws.SCRIPT_QUESTION)
    expect(turn.locator(".answer")).to_contain_text("7741")
    turn.locator(".sources-box summary").click()
    expect(turn.locator(".sources")).to_contain_text("<script>window.__pwned = 1</script>")
    turn.locator(".sources a").first.click()
    passage = page.locator("#passage-text")
    expect(passage).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    expect(passage).to_contain_text("<script>window.__pwned = 1;")
    page.click("button[data-view='library-view']")
    expect(page.locator("#documents")).to_contain_text(ws.SCRIPT_TITLE)
    # shown as text everywhere: no element was made of it, no script ran, no dialog opened
    assert page.locator("#conversation script, #conversation img, #documents script").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == []


def test_the_test_command_installs_the_browser() -> None:
    """The README's test command, which ``.ci/run`` runs exactly, installs Debian's chromium
    when it is missing and Playwright with the ``dev`` extra."""
    repo = Path(__file__).resolve().parents[1]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    command = readme.partition("Run the tests")[2].partition("```bash\n")[2].partition("\n")[0]
    assert "apt-get install -y chromium" in command and 'pip install -e ".[dev]"' in command
    ci = (repo / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == command
    assert '"playwright' in (repo / "pyproject.toml").read_text(encoding="utf-8")
