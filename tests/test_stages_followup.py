"""The follow-up rule of ``stages.followup`` on many phrasings (and standalone questions left
alone), and the model's rewrite against a loopback OpenAI-compatible server, with the fall
back to the rule when the server fails or answers nonsense."""

from __future__ import annotations

import json

import pytest
from fathom.bench.support.fault_server import closed_port
from fathom.core.config import GeneratorConfig
from fathom.stages.followup import Turn, needs_context, resolve, rewrite, rewrite_messages
from fathom.stages.generate.openai_backend import OpenAIGenerator
from fathom.tests.support.generate_support import CannedServer

REACT = Turn(
    "Which two abilities does ReAct interleave?",
    "Which two abilities does ReAct interleave?",
    cited=("ReAct: Synergizing Reasoning and Acting in Language Models",),
    answer="reasoning traces and task-specific actions",
)


@pytest.mark.parametrize(
    ("follow", "standalone"),
    [
        ("How well does it do on HotpotQA?", "How well does ReAct do on HotpotQA?"),
        ("What about HotpotQA?", "What about HotpotQA for ReAct?"),
        ("And its failure modes?", "ReAct's failure modes?"),
        ("And on ALFWorld?", "On ALFWorld for ReAct?"),
        ("Who wrote this paper?", "Who wrote the ReAct paper?"),
        ("What are the limits of this approach?", "What are the limits of the ReAct approach?"),
        ("Is that true?", "Is ReAct true?"),
        ("When was it published?", "When was ReAct published?"),
        ("Who proposed them?", "Who proposed ReAct?"),
        ("Why do they fail?", "Why do ReAct fail?"),
        ("It was tested where?", "ReAct was tested where?"),
    ],
)
def test_the_rule_makes_follow_ups_standalone(follow: str, standalone: str) -> None:
    assert needs_context(follow)
    out = resolve(follow, [REACT])
    assert out.question == standalone and out.method == "rule" and out.subject == "ReAct"


@pytest.mark.parametrize(
    "question",
    [
        "Which NFL team won Super Bowl 50?",
        "What is it called when water boils?",
        "What did Tesla say about his father?",
        "Who founded the team that won the cup?",
        "Why is it important to sleep?",
        "How do you find the acceleration of a rope when two people pull it from both ends?",
        "What did the engineers fear would be difficult in space due to it being new?",
        "Which abilities does WebShop test?",
    ],
)
def test_standalone_questions_are_left_alone(question: str) -> None:
    assert not needs_context(question)
    out = resolve(question, [REACT])
    assert out.question == question and out.method == "unchanged"


def test_the_subject_carries_over_and_comes_from_the_cited_title() -> None:
    second = resolve("How well does it do on HotpotQA?", [REACT])
    turn = Turn(second.asked, second.question, second.subject, REACT.cited)
    # the subject stays ReAct, not HotpotQA, the newest name
    assert resolve("And on ALFWorld?", [REACT, turn]).question == "On ALFWorld for ReAct?"
    # no name in the question: the cited document's title is the subject
    crisis = Turn(
        "When did the crisis begin?", "When did the crisis begin?", cited=("1973 oil crisis",)
    )
    assert resolve("Who ended it?", [crisis]).question == "Who ended 1973 oil crisis?"
    # the title picks among the question's names: "Super Bowl 50", not "NFL"
    bowl = Turn("q", "Which NFL team won Super Bowl 50?", cited=("Super Bowl 50",))
    assert resolve("Where was it played?", [bowl]).subject == "Super Bowl 50"
    # no earlier turn, or a question naming the subject: unchanged
    assert resolve("Where was it played?", []).method == "unchanged"
    named = resolve("What about ReAct's limits?", [REACT])
    assert named.method == "unchanged" and named.reason == "names its subject already"


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
        }
    ).encode()


def _generator(url: str) -> OpenAIGenerator:
    cfg = GeneratorConfig(backend="openai", base_url=url, model="m", retries=0, timeout_s=5)
    return OpenAIGenerator(cfg)


def test_a_language_model_rewrites_the_follow_up() -> None:
    reply = "Standalone question: How does the ReAct method perform on the HotpotQA benchmark?\n"
    with CannedServer(_completion(reply)) as server:
        out = rewrite("How well does it do on HotpotQA?", [REACT], _generator(server.url + "/v1"))
    assert out.method == "model"
    assert out.question == "How does the ReAct method perform on the HotpotQA benchmark?"
    assert out.asked == "How well does it do on HotpotQA?" and server.paths == [
        "/v1/chat/completions"
    ]


def test_a_standalone_question_never_reaches_the_model() -> None:
    with CannedServer(_completion("nonsense")) as server:
        out = rewrite("Which abilities does WebShop test?", [REACT], _generator(server.url + "/v1"))
    assert out.method == "unchanged" and server.paths == []


@pytest.mark.parametrize("kind", ["closed", "malformed", "empty", "rambling"])
def test_the_rule_stands_in_when_the_model_fails(kind: str) -> None:
    follow = "How well does it do on HotpotQA?"
    if kind == "closed":
        out = rewrite(follow, [REACT], _generator(f"http://127.0.0.1:{closed_port()}/v1"))
    else:
        body = {
            "malformed": b"[1, 2]",
            "empty": _completion("   "),
            "rambling": _completion("Well, " + "let me think about it. " * 40),
        }[kind]
        with CannedServer(body) as server:
            out = rewrite(follow, [REACT], _generator(server.url + "/v1"))
    assert out.method == "rule" and out.question == "How well does ReAct do on HotpotQA?"
    assert out.reason.endswith("rule used")


def test_the_prompt_is_short_and_holds_the_turns() -> None:
    messages = rewrite_messages("And on ALFWorld?", [REACT] * 5)
    user = messages[-1]["content"]
    assert user.count("User: ") == 3  # the last three turns only
    assert "ReAct: Synergizing" in user and user.endswith(
        "Follow-up: And on ALFWorld?\nStandalone question:"
    )
