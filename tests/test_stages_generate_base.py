"""What every generator backend shares: ``BaseGenerator.generate`` (the prompt, the
context-window check, the draft and its token counts), the server backends' errors and request
limit (``stages/generate/server.py``) and the missing-client error (``import_backend``).

The backend is a stand-in subclass that counts a token per word and answers from a script."""

from __future__ import annotations

import sys
import threading
import time as real_time
from typing import Any

import pytest
from fathom.bench.support.hits import eiffel_hits
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate import server
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.common import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    estimate_prompt_tokens,
    estimate_tokens,
    import_backend,
)
from fathom.stages.generate.prompt import build_messages
from fathom.stages.generate.server import (
    Deadline,
    DeadlinePassed,
    first_line,
    incomplete_stream,
    refused,
)

QUESTION = "Where is the Eiffel Tower?"


class ScriptedGenerator(BaseGenerator):
    """A stand-in backend: a token per word, and ``_complete`` returns ``reply`` (streaming
    its words to ``on_token``); every request it got is kept in ``requests``."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self, reply: Completion, cfg: GeneratorConfig | None = None) -> None:
        super().__init__(cfg or GeneratorConfig())
        self.reply = reply
        self.requests: list[Request] = []

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def _complete(self, req: Request) -> Completion:
        self.requests.append(req)
        if req.on_token is not None:
            for word in self.reply.text.split(" "):
                req.on_token(word + " ")
        return self.reply


class RenderingGenerator(ScriptedGenerator):
    """A backend that renders its own prompt text and counts it exactly (``_encode``)."""

    name = "rendering"

    def __init__(self, reply: Completion, n_prompt: int, **kw: Any) -> None:
        super().__init__(reply, **kw)
        self.n_prompt = n_prompt

    def _encode(self, messages: list[dict[str, str]]) -> tuple[int, Any]:
        return self.n_prompt, "\n".join(f"<{m['role']}>{m['content']}" for m in messages)


def words_prompt_tokens(messages: list[dict[str, str]]) -> int:
    """The default ``_encode`` count for a word-counting backend, computed independently."""
    words = sum(len(m["content"].split()) for m in messages)
    return words + MESSAGE_OVERHEAD * len(messages) + REPLY_OVERHEAD


# ---------------------------------------------------------------------------------------------
# BaseGenerator.generate
# ---------------------------------------------------------------------------------------------


def test_generate_turns_the_completion_into_a_draft() -> None:
    """The draft holds the stripped text, the backend's name and model, the finish reason,
    the log-probabilities and the time the call took."""
    reply = Completion(
        text="  The tower is in Paris [3].\n",
        prompt_tokens=321,
        completion_tokens=9,
        finish_reason="stop",
        logprobs=(-0.1, -0.2),
    )
    d = ScriptedGenerator(reply).generate(QUESTION, eiffel_hits())
    assert d.text == "The tower is in Paris [3]."
    assert d.citations == (3,)
    assert (d.prompt_tokens, d.completion_tokens) == (321, 9)
    assert (d.backend, d.model) == ("scripted", "scripted-1")
    assert d.finish_reason == "stop" and d.logprobs == (-0.1, -0.2)
    assert d.ms >= 0


def test_citations_are_read_in_order_of_first_mention_within_the_sources() -> None:
    """Repeats count once and a number past the sources given is dropped."""
    reply = Completion(text="Paris [3]. Completed in 1889 [1][3]. Painted [9] [2, 1].")
    d = ScriptedGenerator(reply).generate(QUESTION, eiffel_hits())
    assert d.citations == (3, 1, 2)


def test_the_model_the_completion_names_wins() -> None:
    """A server that says which model answered is believed; else the configured model."""
    gen = ScriptedGenerator(Completion(text="Paris.", model="served-model:7b"))
    assert gen.generate(QUESTION, eiffel_hits()).model == "served-model:7b"
    gen.reply = Completion(text="Paris.")
    assert gen.generate(QUESTION, eiffel_hits()).model == "scripted-1"


def test_an_unreported_prompt_count_is_the_encoded_one() -> None:
    """``prompt_tokens`` None (not reported) or 0 (no prompt has none): the count ``_encode``
    gave; a reported count is kept."""
    hits = eiffel_hits()
    expected = words_prompt_tokens(build_messages(QUESTION, hits, GeneratorConfig().framing))
    for reported in (None, 0):
        gen = ScriptedGenerator(Completion(text="Paris [3].", prompt_tokens=reported))
        assert gen.generate(QUESTION, hits).prompt_tokens == expected
    gen = ScriptedGenerator(Completion(text="Paris [3].", prompt_tokens=57))
    assert gen.generate(QUESTION, hits).prompt_tokens == 57


def test_an_unreported_completion_count_is_counted_from_the_text() -> None:
    """``completion_tokens`` None: the backend's ``count_tokens`` of the stripped answer; a
    reported count is kept."""
    gen = ScriptedGenerator(Completion(text="  It is in Paris [3].  ", completion_tokens=None))
    assert gen.generate(QUESTION, eiffel_hits()).completion_tokens == 5

    class CharCounting(ScriptedGenerator):
        def count_tokens(self, texts: list[str]) -> list[int]:
            return [len(t) for t in texts]

    gen = CharCounting(Completion(text="  It is in Paris [3].\n", completion_tokens=None))
    assert gen.generate(QUESTION, eiffel_hits()).completion_tokens == len("It is in Paris [3].")
    gen.reply = Completion(text="It is in Paris [3].", completion_tokens=12)
    assert gen.generate(QUESTION, eiffel_hits()).completion_tokens == 12


def test_the_default_encoding_estimates_the_chat_prompt() -> None:
    """Without its own ``_encode`` a backend's prompt is the messages themselves, counted as
    their contents plus the template overhead; ``prompt_tokens`` gives the same count."""
    hits = eiffel_hits()
    gen = ScriptedGenerator(Completion(text="Paris [3]."))
    messages = build_messages(QUESTION, hits, gen.cfg.framing)
    assert gen.prompt_tokens(QUESTION, hits) == words_prompt_tokens(messages)
    gen.generate(QUESTION, hits)
    assert gen.requests[0].prompt == messages
    assert messages[-1]["content"].count("Mount Fuji is the highest mountain") == 1


def test_the_base_count_is_a_conservative_estimate() -> None:
    """The base class's own ``count_tokens`` is ``estimate_tokens``, and its prompt count the
    estimate of the chat prompt."""
    base = BaseGenerator(GeneratorConfig())
    texts = ["The Eiffel Tower is in Paris.", "getHTTPResponse 12345"]
    assert base.count_tokens(texts) == [estimate_tokens(t) for t in texts]
    hits = eiffel_hits()
    messages = build_messages(QUESTION, hits, base.cfg.framing)
    assert base.prompt_tokens(QUESTION, hits) == estimate_prompt_tokens(messages, base.count_tokens)


def test_the_framing_setting_shapes_the_prompt() -> None:
    """The messages are built with ``generator.framing``."""
    hits = eiffel_hits()
    plain = ScriptedGenerator(Completion(text="Paris."), GeneratorConfig(framing="plain"))
    tagged = ScriptedGenerator(Completion(text="Paris."), GeneratorConfig(framing="tagged"))
    plain.generate(QUESTION, hits)
    tagged.generate(QUESTION, hits)
    assert plain.requests[0].prompt == build_messages(QUESTION, hits, "plain")
    assert tagged.requests[0].prompt == build_messages(QUESTION, hits, "tagged")
    assert plain.requests[0].prompt != tagged.requests[0].prompt


def test_a_backends_own_encoding_is_what_it_completes_and_counts() -> None:
    """A backend's ``_encode`` result is the prompt ``_complete`` reads, and its count stands
    for the prompt when the model reports none."""
    gen = RenderingGenerator(Completion(text="Paris [3]."), n_prompt=222)
    d = gen.generate(QUESTION, eiffel_hits())
    prompt = gen.requests[0].prompt
    assert isinstance(prompt, str) and prompt.startswith("<system>")
    assert QUESTION in prompt
    assert d.prompt_tokens == 222
    assert gen.prompt_tokens(QUESTION, eiffel_hits()) == 222


def test_the_request_carries_the_stream_and_the_time_budget() -> None:
    """``_complete`` gets the token sink, the time budget, and the time ``generate`` began;
    the pieces streamed make up the answer."""
    pieces: list[str] = []
    gen = ScriptedGenerator(Completion(text="The tower is in Paris [3]."))
    before = real_time.perf_counter()
    d = gen.generate(QUESTION, eiffel_hits(), on_token=pieces.append, time_budget_ms=750.0)
    req = gen.requests[0]
    assert req.time_budget_ms == 750.0
    assert before <= req.started <= real_time.perf_counter()
    assert "".join(pieces).strip() == d.text == "The tower is in Paris [3]."
    gen.generate(QUESTION, eiffel_hits())
    assert gen.requests[1].on_token is None and gen.requests[1].time_budget_ms is None


def test_a_prompt_that_does_not_fit_the_context_window_is_refused_before_completing() -> None:
    """Prompt plus answer budget over ``context_window``: a ``FathomError`` naming the
    backend, the model, both counts, the window and the settings to change; the model is
    never run."""
    cfg = GeneratorConfig(context_window=300, max_tokens=100)
    gen = RenderingGenerator(Completion(text="Paris."), n_prompt=201, cfg=cfg)
    with pytest.raises(FathomError) as info:
        gen.generate(QUESTION, eiffel_hits())
    message = str(info.value)
    assert message.startswith("rendering (scripted-1): the prompt needs 201 tokens")
    assert "the answer up to 100" in message and "300-token context window" in message
    assert "compress.budget_tokens" in message and "generator.context_window" in message
    assert gen.requests == []


def test_a_prompt_that_exactly_fills_the_context_window_is_sent() -> None:
    """Prompt plus answer budget equal to the window fits."""
    cfg = GeneratorConfig(context_window=300, max_tokens=100)
    gen = RenderingGenerator(Completion(text="Paris [3]."), n_prompt=200, cfg=cfg)
    assert gen.generate(QUESTION, eiffel_hits()).text == "Paris [3]."


def test_the_context_window_is_checked_with_the_default_encoding_too() -> None:
    """The estimated prompt of a backend without ``_encode`` is checked as well."""
    hits = eiffel_hits()
    gen = ScriptedGenerator(Completion(text="Paris."))
    n_prompt = gen.prompt_tokens(QUESTION, hits)
    gen.cfg = GeneratorConfig(context_window=n_prompt + 10, max_tokens=11)
    with pytest.raises(FathomError, match=f"needs {n_prompt} tokens"):
        gen.generate(QUESTION, hits)
    gen.cfg = GeneratorConfig(context_window=n_prompt + 10, max_tokens=10)
    assert gen.generate(QUESTION, hits).text == "Paris."


def test_a_backend_without_a_model_call_says_so() -> None:
    """The base class itself cannot answer: ``_complete`` is for the backends to write."""
    with pytest.raises(NotImplementedError):
        BaseGenerator(GeneratorConfig()).generate(QUESTION, eiffel_hits())


def test_the_abilities_have_neutral_defaults() -> None:
    """No deadline, no prompt cache, no replayed time, no known or measurable prompt speed,
    no model-free summary; ``forget`` and ``close`` do nothing."""
    gen = ScriptedGenerator(Completion(text=""))
    assert gen.supports_deadline is False and gen.keeps_prompt_cache is False
    assert gen.replayed_ms == 0.0
    assert gen.expected_prefill_ms(1000) is None
    assert gen.measure_prefill(QUESTION, eiffel_hits()) is None
    assert gen.summarize(eiffel_hits()) is None
    assert gen.forget() is None and gen.close() is None
    assert gen.context_window == GeneratorConfig().context_window


# ---------------------------------------------------------------------------------------------
# server.py: first_line, refused, incomplete_stream
# ---------------------------------------------------------------------------------------------


def test_first_line_is_the_first_line_of_the_stripped_message() -> None:
    """Leading blank lines and space go; later lines are dropped."""
    assert first_line("\n\n  model 'x' not found\ntraceback ...\n") == "model 'x' not found"
    assert first_line("one line") == "one line"


def test_first_line_of_an_empty_message_is_empty() -> None:
    """Nothing, or whitespace only, gives an empty line."""
    assert first_line("") == ""
    assert first_line(" \n\t\n ") == ""


def test_first_line_is_shortened_to_the_limit_with_an_ellipsis() -> None:
    """A line over ``limit`` keeps ``limit − 1`` characters and an ellipsis; one of exactly
    ``limit`` stays whole."""
    assert first_line("x" * 300) == "x" * 300
    long = first_line("y" * 301)
    assert long == "y" * 299 + "…" and len(long) == 300
    assert first_line("abcdefghij", limit=5) == "abcd…"
    assert first_line("abcde", limit=5) == "abcde"


def test_a_context_refusal_names_the_settings_to_lower() -> None:
    """HTTP 400 about the context (in any case): the prompt does not fit, with the fix."""
    err = refused("Ollama at http://h:1", "llama3.2", "Input exceeds the CONTEXT length", 400)
    assert type(err) is FathomError
    assert str(err) == (
        "Ollama at http://h:1: the prompt does not fit model 'llama3.2' (Input exceeds the "
        "CONTEXT length) — lower compress.budget_tokens or generator.context_window"
    )


def test_any_other_refusal_gives_the_servers_words_and_status() -> None:
    """Another status, or a 400 about something else: the server's own message and the
    status, without the context-window fix."""
    for message, status in (("invalid temperature", 400), ("context deadline exceeded", 503)):
        err = refused("OpenAI at http://h:2", "gpt-4o-mini", message, status)
        assert type(err) is FathomError
        text = str(err)
        assert text.startswith("OpenAI at http://h:2 refused the request for 'gpt-4o-mini'")
        assert message in text and f"status {status}" in text
        assert "does not fit" not in text and "compress.budget_tokens" not in text


def test_an_incomplete_stream_is_a_backend_failure_with_what_arrived() -> None:
    """A stream cut short: ``BackendUnavailable`` naming the server and the characters
    received, and that trying again may help."""
    err = incomplete_stream("Ollama at http://h:1", 42)
    assert isinstance(err, BackendUnavailable)
    message = str(err)
    assert message.startswith("Ollama at http://h:1 ended the answer stream before it was")
    assert "(42 characters received, no final message)" in message
    assert message.endswith("try again")


# ---------------------------------------------------------------------------------------------
# server.py: Deadline
# ---------------------------------------------------------------------------------------------


class FakeMonotonic:
    """``time`` for the server module: ``monotonic()`` returns ``t``."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def mono(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    fake = FakeMonotonic()
    monkeypatch.setattr(server, "time", fake)
    return fake


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_no_limit_never_passes(mono: FakeMonotonic, seconds: float) -> None:
    """``seconds <= 0``: no limit, however much time goes by; the client is never closed."""
    closed: list[bool] = []
    with Deadline(seconds, lambda: closed.append(True)) as d:
        mono.t += 1e9
        d.check()
    assert d.expired is False and closed == []


def test_check_raises_once_the_time_is_up(mono: FakeMonotonic) -> None:
    """Before the end ``check`` passes; from the end on it raises ``DeadlinePassed`` and the
    limit is marked expired."""
    with Deadline(60.0, lambda: None) as d:
        mono.t += 59.9
        d.check()
        assert d.expired is False
        mono.t += 0.1
        with pytest.raises(DeadlinePassed):
            d.check()
        assert d.expired is True


def test_a_request_that_ends_past_the_limit_is_marked_expired(mono: FakeMonotonic) -> None:
    """Leaving the block at or after the end marks the limit expired; before it, not."""
    with Deadline(60.0, lambda: None) as late:
        mono.t += 60.0
    assert late.expired is True
    with Deadline(60.0, lambda: None) as early:
        mono.t += 30.0
    assert early.expired is False


def test_expiry_closes_the_client_and_ends_the_loop() -> None:
    """The timer's expiry closes the client (so a blocked read ends) and ``check`` raises."""
    closed: list[bool] = []
    d = Deadline(60.0, lambda: closed.append(True))
    d._expire()
    assert d.expired is True and closed == [True]
    with pytest.raises(DeadlinePassed):
        d.check()


def test_a_failing_close_at_expiry_is_ignored() -> None:
    """Closing is best effort: an error from it does not escape, and ``check`` still raises."""

    def close() -> None:
        raise OSError("already closed")

    d = Deadline(60.0, close)
    d._expire()
    assert d.expired is True
    with pytest.raises(DeadlinePassed):
        d.check()


def test_the_timer_fires_and_closes_the_client() -> None:
    """With a short limit the timer itself closes the client."""
    closed = threading.Event()
    with Deadline(0.01, closed.set) as d:
        assert closed.wait(timeout=10)
        with pytest.raises(DeadlinePassed):
            d.check()
    assert d.expired is True


def test_leaving_in_time_cancels_the_timer() -> None:
    """A request done before its limit stops the timer: the client is never closed."""
    closed: list[bool] = []
    with Deadline(60.0, lambda: closed.append(True)) as d:
        d.check()
    assert d._timer is not None
    d._timer.join(timeout=10)
    assert not d._timer.is_alive()
    assert closed == [] and d.expired is False


# ---------------------------------------------------------------------------------------------
# common.py: import_backend
# ---------------------------------------------------------------------------------------------


def test_an_installed_client_is_imported() -> None:
    """An importable module is returned as imported."""
    import fathom.core.errors

    assert import_backend("fathom.core.errors", "errors", "fathom") is fathom.core.errors


def test_a_missing_client_names_what_to_install() -> None:
    """A missing module: ``BackendUnavailable`` naming the library and its ``pip install``."""
    with pytest.raises(BackendUnavailable) as info:
        import_backend("fathom_no_such_client_lib", "llama-cpp-python", "'fathom[llamacpp]'")
    assert str(info.value) == "llama-cpp-python is not installed — pip install 'fathom[llamacpp]'"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_the_llamacpp_backend_names_its_extra_when_its_library_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Without llama-cpp-python, the llama.cpp backend asks for ``fathom[llamacpp]``."""
    from fathom.stages.generate.llamacpp import LlamaCppGenerator

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    gen = LlamaCppGenerator(GeneratorConfig(model=str(gguf)))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    with pytest.raises(BackendUnavailable, match=r"pip install 'fathom\[llamacpp\]'"):
        gen._import()
