"""Follow-ups in ``fathom chat`` and ``fathom ask --session``: the follow-up is made standalone
from the earlier turns before retrieval, the report shows how, and the chat's slash commands.

The document is generated with the shape of the ReAct paper: page 1 says what ReAct
interleaves, page 2 reports a baseline on HotpotQA, page 3 ReAct's HotpotQA results, pages 4
and 5 ALFWorld and WebShop; so "How well does it do on HotpotQA?" needs to know what "it" is.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_pdf
from fathom.cli import main
from fathom.stages.history import History
from fathom.tests.support.react_pages import PAGES, TITLE

HOTPOT_PAGE = "3"


@pytest.fixture
def react_pdf(tmp_path: Path) -> Path:
    return make_pdf(tmp_path / "react.pdf", PAGES, title=TITLE)


def chat(target: Path, lines: list[str], *extra: str) -> str:
    out = CliRunner().invoke(
        main, ["chat", str(target), "--generator", "extractive", *extra], input="\n".join(lines)
    )
    assert out.exit_code == 0, out.output
    # the panel and the report wrap at the terminal's width
    return " ".join(out.output.replace("│", " ").split())


def test_printf_follow_up_is_answered_from_the_hotpotqa_results(react_pdf: Path) -> None:
    output = chat(
        react_pdf,
        ["Which two abilities does ReAct interleave?", "How well does it do on HotpotQA?"],
    )
    first, _, second = output.partition("? How well does it do on HotpotQA?")
    assert "reasoning traces and task-specific actions" in first
    assert "35.1" in second.partition("Sources")[0]  # the answer, from the results page
    # the report shows the rewritten question
    rewritten = "How well does it do on HotpotQA? → asked as How well does ReAct do on HotpotQA?"
    assert f"Follow-up {rewritten} (rule, subject ReAct)" in second


REWRITTEN = (
    "Follow-up How well does it do on HotpotQA? → asked as How well does ReAct do on HotpotQA? "
    "(rule, subject ReAct)"
)


@pytest.fixture
def streaming(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers stream as on a terminal (CliRunner's stdout is not one)."""
    from fathom.terminal import render

    class Streaming(render.AnswerStream):
        def __init__(self, enabled: bool) -> None:
            super().__init__(enabled=True)

    monkeypatch.setattr(render, "AnswerStream", Streaming)


def test_the_rewrite_is_said_once_before_the_answer_streams(react_pdf: Path, streaming) -> None:
    output = chat(
        react_pdf,
        ["Which two abilities does ReAct interleave?", "How well does it do on HotpotQA?"],
    )
    assert "─ Answer ─" not in output  # streamed, not drawn in a panel
    second = output.partition("? How well does it do on HotpotQA?")[2]
    assert output.count("Follow-up") == 1 and REWRITTEN in second
    # the line, then the streamed answer, then its sources
    assert second.index(REWRITTEN) < second.index("35.1") < second.index("Sources")


def test_ask_session_says_the_rewrite_before_the_answer_streams(react_pdf: Path, streaming) -> None:
    runner = CliRunner()
    opts = ["--generator", "extractive", "--session", "paper"]
    one = runner.invoke(
        main, ["ask", str(react_pdf), "Which two abilities does ReAct interleave?", *opts]
    )
    assert one.exit_code == 0, one.output
    assert "Follow-up" not in one.stdout  # the first turn: nothing to rewrite
    two = runner.invoke(main, ["ask", str(react_pdf), "How well does it do on HotpotQA?", *opts])
    assert two.exit_code == 0, two.output
    out = " ".join(two.stdout.replace("│", " ").split())
    assert out.count("Follow-up") == 1
    assert out.index(REWRITTEN) < out.index("35.1") < out.index("Sources")


def test_follow_up_cites_the_results_page_and_json_carries_both_questions(
    react_pdf: Path, fathom_home: Path
) -> None:
    runner = CliRunner()
    first = ["ask", str(react_pdf), "Which two abilities does ReAct interleave?"]
    follow = ["ask", str(react_pdf), "How well does it do on HotpotQA?"]
    opts = ["--generator", "extractive", "--json", "--session", "paper"]
    # two processes' worth: each ask opens the history afresh
    one = runner.invoke(main, [*first, *opts])
    assert one.exit_code == 0, one.output
    two = runner.invoke(main, [*follow, *opts])
    assert two.exit_code == 0, two.output
    data = json.loads(two.output)
    assert data["followup"]["asked"] == "How well does it do on HotpotQA?"
    assert data["question"] == data["followup"]["question"] == "How well does ReAct do on HotpotQA?"
    assert data["followup"]["method"] == "rule" and data["followup"]["subject"] == "ReAct"
    assert [c["pages"] for c in data["citations"]][:1] == [HOTPOT_PAGE]
    # another session, or none, knows nothing of these turns
    alone = runner.invoke(main, [*follow, "--generator", "extractive", "--json"])
    assert "followup" not in json.loads(alone.output)
    other = runner.invoke(main, [*follow, *opts[:-1], "other"])
    assert json.loads(other.output)["followup"]["method"] == "unchanged"
    rows = History(fathom_home / "history.db").turns("paper", 5)
    assert [t.asked for t in rows] == [first[2], follow[2]]
    assert rows[1].question == "How well does ReAct do on HotpotQA?" and rows[1].subject == "ReAct"


def test_history_migrates_a_version_1_database(tmp_path: Path) -> None:
    from fathom.stages.history import MIGRATIONS

    path = tmp_path / "history.db"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    conn.execute(
        "INSERT INTO asks (ts, question, target, collection, answer) VALUES (1, 'q', 't', 'c', 'a')"
    )
    conn.commit()
    conn.close()
    history = History(path)
    assert history.version == len(MIGRATIONS) == 2
    assert history.recent(1)[0]["question"] == "q" and history.recent(1)[0]["session"] is None
    history.record({"question": "q2", "target": "t", "collection": "c", "session": "s"})
    history.record({"question": "q3", "target": "t", "collection": "c", "session": "x"})
    assert [t.question for t in history.turns("s", 5)] == ["q2"]


def test_slash_commands(react_pdf: Path) -> None:
    output = chat(
        react_pdf,
        [
            "/help",
            "/sources",
            "Which two abilities does ReAct interleave?",
            "/sources",
            "/doc nosuchpaper",
            "/doc react",
            "/doc",
            "/clear",
            "How well does it do on HotpotQA?",
            "/frobnicate",
        ],
    )
    assert "/doc PATTERN" in output and "no sources yet" in output
    assert output.count("Sources") >= 2  # the answer's table and /sources'
    assert "no document matches 'nosuchpaper'" in output
    assert f"reading restricted to 1 of 1 document: {TITLE}" in output
    assert "reading every document" in output
    assert "forgot 1 turn(s)" in output
    # after /clear the follow-up has nothing to lean on: asked as it is
    assert "How well does ReAct do on HotpotQA?" not in output
    assert "unknown command /frobnicate" in output


def test_ctrl_c_stops_the_answer_not_the_session(
    react_pdf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fathom import commands

    real = commands.Chat.ask
    calls = []

    def interrupted(self, question, **opts):
        calls.append(question)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(self, question, **opts)

    monkeypatch.setattr(commands.Chat, "ask", interrupted)
    output = chat(react_pdf, ["Which two abilities does ReAct interleave?", "What is WebShop?"])
    assert "stopped" in output and len(calls) == 2
    assert "40" in output.partition("stopped")[2]
