"""``fathom ask --show``, ``fathom chat --show`` and ``/show``, and ``fathom show``: each cited
page written as a PNG and its path printed when stdout is not a terminal, the kitty and iTerm2
escape sequences when asked for, which terminals are taken to draw pictures, a text passage
marked, ``--json``, and the errors."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.terminal.images import ENV, image_protocol, iterm2_sequence, kitty_sequence

REPO = Path(__file__).resolve().parent.parent
QUESTION = "Which exit code does Fathom use when the command line itself is wrong?"
PNG = b"\x89PNG\r\n\x1a\n"
KITTY = re.compile(r"\x1b_G([^;]*);([A-Za-z0-9+/=]*)\x1b\\")
ITERM = re.compile(r"\x1b\]1337;File=([^:]*):([A-Za-z0-9+/=]*)\x07")


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FATHOM_EMBEDDER__NAME", "hashing:64")  # no model to load
    for name in (ENV, "TERM_PROGRAM", "KITTY_WINDOW_ID", "TMUX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    return docgen.make_user_guide_pdf(tmp_path / "guide.pdf")


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli.main, list(args), env=env)


def _chunk_id(collection: str, query: str) -> str:
    res = invoke("search", collection, query, "--mode", "bm25", "-k", "1", "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["hits"][0]["chunk_id"]


def test_ask_show_writes_each_cited_page_and_prints_its_path(guide: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages"
    res = invoke("ask", str(guide), QUESTION, "--generator", "extractive", "--show", str(out))
    assert res.exit_code == 0, res.output
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes().startswith(PNG)
    assert re.search(r"-[0-9a-f]{16}-p3\.png$", pngs[0].name)  # COLLECTION-CHUNK_ID-pPAGE
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("[1] "))
    assert line == f"[1] Fathom User Guide · page 3 (text layer) → {pngs[0]}"
    assert "\x1b_G" not in res.stdout and "\x1b]1337" not in res.stdout  # not a terminal
    assert res.stdout.index("Answer") < res.stdout.index(line)  # the answer comes first

    # --show with no folder: FATHOM_HOME/shown
    res = invoke("ask", str(guide), QUESTION, "--generator", "extractive", "--show")
    assert res.exit_code == 0, res.output
    home = Path(re.search(r"→ (\S+\.png)", res.stdout).group(1))
    assert home.parent == tmp_path / "fathom-home" / "shown" and home.name == pngs[0].name


def test_ask_show_json_is_one_object_with_what_was_shown(guide: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages"
    res = invoke(
        "ask", str(guide), QUESTION, "--generator", "extractive", "--json", "--show", str(out)
    )
    assert res.exit_code == 0, res.output
    answer = json.loads(res.stdout)
    [shown] = answer["shown"]
    cited = answer["citations"][0]
    assert shown["n"] == cited["n"] == 1 and shown["chunk_id"] == cited["chunk_id"]
    assert shown["kind"] == "page" and shown["page"] == 3 and shown["located"] == "text layer"
    assert Path(shown["file"]).parent == out and Path(shown["file"]).is_file()
    assert shown["boxes"] and all(len(b) == 4 for b in shown["boxes"])
    # the span's sentence is marked more strongly, on lines of the passage
    assert answer["span"]["chunk_id"] == cited["chunk_id"] and shown["strong_boxes"]
    assert all(b in shown["boxes"] for b in shown["strong_boxes"])
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "answer.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(answer, schema)
    bad = {**answer, "shown": [{**shown, "kind": "video"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_show_draws_the_page_in_a_terminal_that_asks_for_it(guide: Path, tmp_path: Path) -> None:
    assert invoke("ingest", str(guide), "-c", "guide", "--json").exit_code == 0
    chunk = _chunk_id("guide", "exit code command line wrong")
    target = tmp_path / "exit.png"
    res = invoke("show", "guide", chunk, "--out", str(target), env={ENV: "kitty"})
    assert res.exit_code == 0, res.output
    png = target.read_bytes()
    parts = KITTY.findall(res.stdout)
    assert len(parts) > 1  # a page is sent in chunks of 4096 base64 characters
    assert parts[0][0].startswith("a=T,f=100,") and parts[0][0].endswith("m=1")
    assert [keys for keys, _ in parts[1:-1]] == ["m=1"] * (len(parts) - 2)
    assert parts[-1][0] == "m=0" and base64.b64decode("".join(d for _, d in parts)) == png
    assert f"· page 3 (text layer) → {target}" in res.stdout

    res = invoke("show", "guide", chunk, "--out", str(target), env={ENV: "iterm2"})
    assert res.exit_code == 0, res.output
    [(args, data)] = ITERM.findall(res.stdout)
    assert "inline=1" in args and f"size={len(png)}" in args
    assert base64.b64decode(data) == png

    res = invoke("show", "guide", chunk, "--json")
    shown = json.loads(res.stdout)
    assert shown["collection"] == "guide" and shown["chunk_id"] == chunk
    assert shown["shown"][0]["file"].endswith(f"shown/guide-{chunk}-p3.png")


def chat(guide: Path, lines: list[str], *extra: str):
    res = CliRunner().invoke(
        cli.main,
        ["chat", str(guide), "--generator", "extractive", *extra],
        input="\n".join(lines) + "\n",
    )
    assert res.exit_code == 0, res.output
    return res


def test_chat_show_writes_each_answers_cited_page(guide: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages"
    res = chat(guide, [QUESTION, "Where does Fathom keep its data?"], "--show", str(out))
    pngs = sorted(out.glob("*.png"))
    assert [p.name[-7:] for p in pngs] == ["-p1.png", "-p3.png"]  # one per answer
    assert all(p.read_bytes().startswith(PNG) for p in pngs)
    exit_line = f"[1] Fathom User Guide · page 3 (text layer) → {pngs[1]}"
    data_line = f"[1] Fathom User Guide · page 1 (text layer) → {pngs[0]}"
    lines = res.stdout.splitlines()
    assert exit_line in lines and data_line in lines
    # each answer's page comes after that answer and before the next
    first, second = (m.start() for m in re.finditer("─ Answer ─", res.stdout))
    assert first < res.stdout.index(exit_line) < second < res.stdout.index(data_line)


def test_chat_slash_show_shows_the_last_answers_pages(guide: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages"
    res = chat(guide, ["/show", QUESTION, f"/show {out}", "/show"])
    # before any answer there is nothing to show, and nothing is written
    assert res.stderr.count("nothing to show yet — ask a question first") == 1
    [png] = out.glob("*.png")
    assert png.name.endswith("-p3.png") and png.read_bytes().startswith(PNG)
    assert f"[1] Fathom User Guide · page 3 (text layer) → {png}" in res.stdout.splitlines()
    # /show alone writes into FATHOM_HOME/shown, as ask --show does
    [home] = (tmp_path / "fathom-home" / "shown").glob("*.png")
    assert home.name == png.name
    assert res.stdout.index(str(png)) < res.stdout.index(str(home))


def test_a_page_that_cannot_be_shown_does_not_end_the_chat(
    guide: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fathom import commands
    from fathom.core.errors import FathomError

    def broken(*args: object, **kwargs: object) -> None:
        raise FathomError("the collection cannot be reopened")

    monkeypatch.setattr(commands, "show_answer", broken)
    res = chat(guide, [QUESTION, "Where does Fathom keep its data?"], "--show", str(tmp_path))
    assert res.stderr.count("the collection cannot be reopened") == 2
    assert res.stdout.count("─ Answer ─") == 2  # the second question was still answered


def test_chat_slash_show_before_any_answer_says_so(guide: Path, tmp_path: Path) -> None:
    res = chat(guide, ["/show", "/help"])
    assert "nothing to show yet — ask a question first" in res.stderr
    assert "/show [DIR]" in res.stderr  # /help lists it
    assert "→" not in res.stdout and not (tmp_path / "fathom-home" / "shown").exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_which_terminals_draw_pictures() -> None:
    tty, pipe = _Tty(), io.StringIO()
    assert image_protocol(tty, {"TERM": "xterm-kitty"}) == "kitty"
    assert image_protocol(tty, {"TERM": "xterm", "KITTY_WINDOW_ID": "1"}) == "kitty"
    assert image_protocol(tty, {"TERM_PROGRAM": "ghostty"}) == "kitty"
    assert image_protocol(tty, {"TERM_PROGRAM": "iTerm.app"}) == "iterm2"
    assert image_protocol(tty, {"TERM_PROGRAM": "WezTerm"}) == "iterm2"
    # never into a pipe, never through tmux, never for a terminal that does not say
    assert image_protocol(pipe, {"TERM": "xterm-kitty"}) is None
    assert image_protocol(tty, {"TERM": "xterm-kitty", "TMUX": "/tmp/t,1,0"}) is None
    assert image_protocol(tty, {"TERM": "xterm-256color", "TERM_PROGRAM": "vscode"}) is None
    assert image_protocol(tty, {}) is None
    # FATHOM_IMAGES decides when it is set
    assert image_protocol(pipe, {ENV: "iterm2"}) == "iterm2"
    assert image_protocol(tty, {ENV: "none", "TERM": "xterm-kitty"}) is None


def test_the_escape_sequences() -> None:
    data = bytes(range(256)) * 40  # 13,656 base64 characters: four kitty chunks
    parts = KITTY.findall(kitty_sequence(data, 80))
    assert [k for k, _ in parts] == ["a=T,f=100,c=80,q=2,m=1", "m=1", "m=1", "m=0"]
    assert all(len(d) == 4096 for _, d in parts[:-1])
    assert base64.b64decode("".join(d for _, d in parts)) == data
    [(args, body)] = ITERM.findall(iterm2_sequence(data, 60, "p.png"))
    assert args == f"name=cC5wbmc=;size={len(data)};width=60;preserveAspectRatio=1;inline=1"
    assert base64.b64decode(body) == data


def test_show_marks_a_text_passage(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    docgen.make_docx(folder / "fixture.docx")
    assert invoke("ingest", str(folder), "-c", "words", "--json").exit_code == 0
    chunk = _chunk_id("words", "three settings defaults")
    target = tmp_path / "passage.txt"
    res = invoke("show", "words", chunk, "--out", str(target))
    assert res.exit_code == 0, res.output
    marked = target.read_text(encoding="utf-8")
    assert marked.index("scope covers") < marked.index("⟦Settings") < marked.index("⟧")
    assert marked.index("⟧") < marked.index("page break")
    assert marked.strip() in res.stdout  # not a terminal: the marks, not styles
    assert f"Settings → {target}" in res.stdout


def test_show_errors_are_one_line(guide: Path) -> None:
    assert invoke("ingest", str(guide), "-c", "guide", "--json").exit_code == 0
    res = invoke("show", "guide", "feedfacefeedface")
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [
        "Error: no chunk 'feedfacefeedface' in collection 'guide' — take a chunk id from "
        "`fathom search --json`, `fathom ask --json` or the MCP tools"
    ]
    res = invoke("show", "nope", "feedfacefeedface")
    assert res.exit_code == 1 and "no collection named 'nope'" in res.stderr
    chunk = _chunk_id("guide", "exit code command line wrong")
    guide.unlink()
    res = invoke("show", "guide", chunk)
    assert res.exit_code == 1 and "the file is gone" in res.stderr
    assert "Traceback" not in res.output
    # ask --show still answers from the collection, and says which source it cannot show
    ask = ("ask", "guide", QUESTION, "--generator", "extractive", "--show")
    res = invoke(*ask, "--json")
    assert res.exit_code == 0, res.output
    [gone] = json.loads(res.stdout)["shown"]
    assert gone["kind"] == "none" and gone["file"] == "" and "the file is gone" in gone["note"]
    res = invoke(*ask)
    assert res.exit_code == 0 and "cannot show [1] Fathom User Guide:" in res.stderr
