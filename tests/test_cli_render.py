"""The command line's two halves: ``fathom.terminal.render`` and ``fathom.terminal.tables`` draw
(and import nothing heavy, and nothing of Fathom above its core but ``tables`` the helpers of
``render``), the commands call one function of the layer that owns the work; ``policy show`` reads a
policy by the kind its metadata records."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("module", "allowed"),
    [("render", {"fathom", "fathom.terminal", "fathom.terminal.render"}),
     ("tables", {"fathom", "fathom.terminal", "fathom.terminal.render", "fathom.terminal.tables"})],
)  # fmt: skip
def test_importing_render_loads_no_rich_and_no_fathom_above_core(module, allowed) -> None:
    code = (
        f"import sys, json\nimport fathom.terminal.{module}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('rich', 'fathom'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [m for m in loaded if m.startswith("rich")]
    assert set(loaded) <= allowed


@pytest.mark.parametrize(
    ("module", "beside_core"),
    [("render", {"fathom.terminal.images"}), ("tables", {"fathom.terminal.render"})],
)
def test_render_imports_only_fathom_core(module, beside_core) -> None:
    tree = ast.parse((REPO / "terminal" / f"{module}.py").read_text(encoding="utf-8"))
    own = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fathom")
    ]
    own += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("fathom")
    ]
    assert own and all(m.startswith("fathom.core.") or m in beside_core for m in own), own


def test_portfolio_path_for_a_bare_name_or_a_path(cfg) -> None:
    from fathom.learn.portfolio_build import portfolio_path

    assert portfolio_path(cfg, "mine") == cfg.home_path() / "portfolios" / "mine.json"
    assert portfolio_path(cfg, "out/p") == Path("out/p.json")
    assert portfolio_path(cfg, "p.json") == Path("p.json")


def _utility_policy(path: Path) -> Path:
    from fathom.router.utility import UtilityPolicy

    prior = {"quality": 0.5, "latency_ms": 100.0, "tokens": 200.0, "n": 30}
    policy = UtilityPolicy(
        {"skip": 0, "light": 2},
        {"*": {"skip": {**prior, "quality": 0.1}, "light": prior}},
        latency_scale=100.0,
        token_scale=200.0,
        meta={"judge": "recall"},
    )
    return policy.save(path)


def test_policy_show_reads_the_kind_from_the_metadata_not_its_spacing(tmp_path: Path) -> None:
    """A utility policy whose JSON is written compactly (``"kind":"utility"``) is still shown
    as one: the kind comes from the parsed metadata."""
    saved = _utility_policy(tmp_path / "u")
    compact = json.dumps(json.loads(saved.read_text()), separators=(",", ":"))
    saved.write_text(compact)
    for target in ("u", "u.json"):
        res = CliRunner().invoke(cli.main, ["policy", "show", str(tmp_path / target)])
        assert res.exit_code == 0, res.output
        lines = res.stdout.splitlines()
        assert lines[:2] == ['kind: "utility"', 'preset: "balanced"']
        assert lines[2] == 'bundles: {"skip": 0, "light": 2}'
        assert 'judge: "recall"' in lines and lines[-1].startswith("utilities: ")
    res = CliRunner().invoke(cli.main, ["policy", "show", str(tmp_path / "u"), "--json"])
    shown = json.loads(res.stdout)
    assert shown["kind"] == "utility" and shown["priors"]["*"]["light"]["n"] == 30
    assert shown["utilities"]["*"]["light"] > shown["utilities"]["*"]["skip"]


def test_policy_show_errors_name_the_files_the_kind_needs(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(cli.main, ["policy", "show", str(tmp_path / "none.safetensors")])
    assert res.exit_code == 1 and "no reinforce policy here" in res.stderr
    res = runner.invoke(cli.main, ["policy", "show", str(tmp_path / "none")])
    assert res.exit_code == 1 and "no forest policy here" in res.stderr
    (tmp_path / "odd.json").write_text('{"kind": "oracle"}')
    res = runner.invoke(cli.main, ["policy", "show", str(tmp_path / "odd")])
    assert res.exit_code == 1 and "a policy of kind 'oracle'" in res.stderr
    assert "Traceback" not in res.output


def test_render_portfolio_eval_prints_the_table_and_the_differences(capsys) -> None:
    from fathom.terminal.tables import render_portfolio_eval

    ci = {"mean": 0.5, "lo": 0.25, "hi": 0.75}
    result = {
        "portfolio": "p.json", "questions": "q.jsonl", "split": "test", "n_questions": 12,
        "score": "docs", "top_n": 10, "members": ["bm25"],
        "coverage": {"best single (bm25)": ci}, "differences": {"portfolio − best single": ci},
    }  # fmt: skip
    render_portfolio_eval(result)
    out = capsys.readouterr().out
    title = " ".join(out.split("┏")[0].split())  # the title wraps to the table's width
    assert title == "coverage on 12 test questions (s = docs in the top 10)"
    assert "best single (bm25)" in out and "0.500 [0.250, 0.750]" in out
    assert "portfolio − best single: +0.500 [+0.250, +0.750] (paired bootstrap)" in out
    render_portfolio_eval(result, as_json=True)
    assert json.loads(capsys.readouterr().out) == result
    docs = {"mean": 0.5, "lo": 0.1, "hi": 0.9}
    result["coverage_documents"] = {"best single (bm25)": docs}
    result["differences_documents"] = {"portfolio − best single": docs}
    render_portfolio_eval(result)
    out = " ".join(capsys.readouterr().out.split())  # the line wraps at the console's width
    assert "[0.100, 0.900]" in out
    assert "(paired bootstrap; by document [+0.100, +0.900])" in out


def test_tables_never_cut_a_name_a_user_types_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an 80-column terminal a collection's full name stays on one line (the other columns
    give way), so it can be copied into `search`."""
    from types import SimpleNamespace

    from fathom.terminal.tables import render_collections

    monkeypatch.setenv("COLUMNS", "80")
    name = "auto-e6d39d3f0a1b2c3d4e5f6a7b"
    manifest = SimpleNamespace(
        name=name,
        embedder_id="sentence-transformers/all-MiniLM-L6-v2",
        updated="2026-12-02T01:23:45+00:00",
        counts=lambda: {"documents": 12, "failed": 0, "chunks": 3456},
    )
    render_collections([manifest], [])
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert any(name in line for line in out.splitlines()), out
    assert "…" not in out


def test_ingest_progress_shows_file_names_as_they_are_never_as_markup(monkeypatch) -> None:
    """A scan named ``[red]scan.png`` or ``notes [b] 2.png``: the progress bar shows the name
    as written, not styled text with the brackets gone."""
    import io

    from fathom.terminal import render
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120, color_system=None)
    monkeypatch.setattr(render, "stderr_console", lambda: console)
    with render.IngestProgress(enabled=True) as progress:
        progress("discovered", files=2)
        for name in ("[red]scan.png", "notes [b] 2.png"):
            progress("ocr_page", path=f"/scans/{name}", done=1, total=2, rate=0.5)
            progress.progress.refresh()
            progress("file", path=f"/scans/{name}", status="ok", pages=2, chunks=3)
    shown = buf.getvalue()
    assert "OCR [red]scan.png" in shown
    assert "OCR notes [b] 2.png" in shown


def test_an_ingest_that_embeds_nothing_shows_no_embedding_bar(monkeypatch) -> None:
    """A moved or unchanged file embeds nothing: no empty "embedding 0/0" bar."""
    import io

    from fathom.terminal import render
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120, color_system=None)
    monkeypatch.setattr(render, "stderr_console", lambda: console)
    for total in (0, 3):
        with render.IngestProgress(enabled=True) as progress:
            progress("discovered", files=1)
            progress("file", path="/docs/a.pdf", status="unchanged", chunks=3)
            progress("embed_start", total=total)
        assert ("embedding" in buf.getvalue()) == bool(total), total


def test_the_report_says_whose_confidence_it_states_and_marks_an_unsure_span() -> None:
    from types import SimpleNamespace

    from fathom.terminal.render import _answerer_note

    def answer(span, answerer=0.62):
        return SimpleNamespace(span=span, confidence={"answerer": answerer, "abstained": False})

    assert _answerer_note(answer({"probability": 0.9, "sure": True}, 0.9)) == (
        " · span 90% over no answer"
    )
    assert _answerer_note(answer({"probability": 0.41, "sure": False})) == (
        " · span 41% over no answer, unsure · quote 62% likely to answer"
    )
    assert _answerer_note(answer(None)) == " · quote 62% likely to answer"
    assert _answerer_note(answer(None, None)) == ""


def test_an_unsure_answer_is_titled_so_and_framed_yellow() -> None:
    from types import SimpleNamespace

    from fathom.terminal.render import answer_title

    def answer(span, passes=1):
        return SimpleNamespace(span=span, trace=SimpleNamespace(passes=passes))

    assert answer_title(answer(None)) == ("Answer", "none")
    assert answer_title(answer({"sure": True}, 2)) == ("Answer (after 2 rounds)", "none")
    assert answer_title(answer({"sure": False})) == ("Answer, unsure", "yellow")
    assert answer_title(answer({"sure": False}, 3)) == ("Answer, unsure (after 3 rounds)", "yellow")
