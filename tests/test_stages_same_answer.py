"""The bundled guide's answers are pinned: ``fathom ask examples/fathom-user-guide.pdf "…"
--json --generator extractive`` gives the answer, sources and depth decision recorded in
``tests/support/guide_answers.json`` (``guide_answers.avx2.json`` on a CPU without VNNI: the
reader's int8 kernels differ there, ``tests/support/int8_pins.py``). A change to how the
Engine is put together must not change what it answers; a change that means to (a new scorer,
a retrained forest) rewrites the file with ``python -m fathom.tests.test_stages_same_answer``
(on a CPU of each kind) and says why in its commit."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.tests.support.int8_pins import pinned_file

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "examples" / "fathom-user-guide.pdf"
# one file per int8 kernel family of the CPU (tests/support/int8_pins.py)
PINNED = pinned_file(ROOT / "tests" / "support" / "guide_answers.json")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def essentials(answer: dict[str, Any]) -> dict[str, Any]:
    """What must not change of an ``ask --json`` answer: the text, the sources and citations,
    the query type, the depth decision and the budget it set."""
    trace = answer["trace"]
    decision = trace["decision"]
    return {
        "answer": answer["answer"],
        "citations": [[c["n"], c["chunk_id"], c["pages"]] for c in answer["citations"]],
        "sources": [[s["chunk_id"], s["pages"], s["section"]] for s in answer["sources"]],
        "query_type": trace["query_type"],
        "decision": {
            "k": decision["k"],
            "policy": decision["policy"],
            "reason": decision["reason"],
            "scores": {k: v for k, v in decision["scores"].items() if k != "decide_ms"},
        },
        "budget": trace["budget"],
        "reranker": trace["reranker"],
        "rounds": [[r["k"], r["sources"]] for r in trace["rounds"]],
    }


def _ask(question: str) -> dict[str, Any]:
    res = CliRunner().invoke(
        cli.main, ["ask", str(GUIDE), question, "--json", "--generator", "extractive"]
    )
    assert res.exit_code == 0, res.output
    return essentials(json.loads(res.stdout))


def _same_reason(got: str, want: str) -> bool:
    """The same words; each number within 0.02 of the pinned one (a probability's last
    digit may differ between CPUs' float kernels)."""
    if NUMBER.sub("#", got) != NUMBER.sub("#", want):
        return False
    pairs = zip(NUMBER.findall(got), NUMBER.findall(want), strict=True)
    return all(
        abs(float(a.replace(",", "")) - float(b.replace(",", "")))
        <= 0.02 * max(1, abs(float(b.replace(",", ""))))
        for a, b in pairs
    )


@pytest.mark.slow
@pytest.mark.parametrize("question", sorted(json.loads(PINNED.read_text(encoding="utf-8"))))
def test_the_guide_answers_as_pinned(question: str, fathom_home: Path) -> None:
    want = json.loads(PINNED.read_text(encoding="utf-8"))[question]
    got = _ask(question)
    got_decision, want_decision = got.pop("decision"), want.pop("decision")
    assert got == want
    assert (got_decision["k"], got_decision["policy"]) == (
        want_decision["k"],
        want_decision["policy"],
    )
    assert _same_reason(got_decision["reason"], want_decision["reason"]), got_decision["reason"]
    assert got_decision["scores"].keys() == want_decision["scores"].keys()
    for key, value in want_decision["scores"].items():
        assert got_decision["scores"][key] == pytest.approx(value, abs=0.02), key


def test_the_comparison_can_fail() -> None:
    """A reason whose words or numbers moved is not the pinned one."""
    want = "forest: k = 5 (P = 0.95 at ~666 tokens); runner-up k = 8"
    assert _same_reason("forest: k = 5 (P = 0.96 at ~667 tokens); runner-up k = 8", want)
    assert not _same_reason("forest: k = 3 (P = 0.95 at ~666 tokens); runner-up k = 8", want)
    assert not _same_reason("forest: k = 5 (P = 0.95 at ~666 tokens); runner-up k = 12", want)
    assert not _same_reason("forest: k = 5 (P = 0.90 at ~666 tokens); runner-up k = 8", want)


if __name__ == "__main__":  # rewrite the pinned answers from this tree
    import os
    import tempfile

    os.environ["FATHOM_HOME"] = tempfile.mkdtemp()
    questions = sys.argv[1:] or sorted(json.loads(PINNED.read_text(encoding="utf-8")))
    pinned = {q: _ask(q) for q in questions}
    PINNED.write_text(json.dumps(pinned, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
