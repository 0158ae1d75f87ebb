"""LlamaCppGenerator with the packaged SmolLM2 GGUF (loaded once for the module)."""

from __future__ import annotations

import json

import pytest
from fathom.bench.support.hits import eiffel_hits, make_hit
from fathom.core.base import Generator
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.llamacpp import LlamaCppGenerator
from fathom.stages.generate.prompt import build_messages
from fathom.tests.support.generate_support import smollm2_path

QUESTION = "Where is the Eiffel Tower?"
TEXTS = ["Hello world", "", "Ünïcödé façade — naïve café", "東京 1889 [3]", "<|im_end|> x"]


@pytest.fixture(scope="module")
def gen() -> LlamaCppGenerator:
    # One thread: on a loaded 2-core machine two OpenMP threads wait on each other (~20x slower).
    return LlamaCppGenerator(GeneratorConfig(max_tokens=24, context_window=2048, threads=1))


@pytest.fixture(scope="module")
def reference_vocab():
    """An independent vocabulary-only load of the same GGUF."""
    from llama_cpp import Llama

    vocab = Llama(str(smollm2_path()), vocab_only=True, verbose=False)
    yield vocab
    vocab.close()


def test_constructor_is_cheap_and_names_the_model() -> None:
    g = LlamaCppGenerator(GeneratorConfig())
    assert g._llm is None and g._vocab is None
    assert g.name == "llamacpp" and g.model == smollm2_path().name
    assert isinstance(g, Generator)


def test_count_tokens_uses_the_gguf_tokenizer(reference_vocab) -> None:
    g = LlamaCppGenerator(GeneratorConfig())
    expected = [
        len(reference_vocab.tokenize(t.encode(), add_bos=False, special=False)) for t in TEXTS
    ]
    assert g.count_tokens(TEXTS) == expected
    assert g._llm is None  # counted with a vocabulary-only load
    assert g.count_tokens([]) == []


def test_close_frees_every_load_and_the_exit_hook_closes_what_is_left() -> None:
    from fathom.stages.generate import llamacpp

    g = LlamaCppGenerator(GeneratorConfig())
    counted = g.count_tokens(TEXTS)
    assert g._vocab is not None
    g.close()
    assert g._llm is None and g._vocab is None
    assert g.count_tokens(TEXTS) == counted  # loads again after a close
    # A generator still holding a load at exit is closed by the atexit hook, before the
    # interpreter's teardown would free it from Llama.__del__ with the bindings gone.
    assert g in llamacpp._OPEN
    llamacpp._close_open()
    assert g._vocab is None


def test_context_window_is_capped_by_the_trained_context() -> None:
    assert LlamaCppGenerator(GeneratorConfig(context_window=1024)).context_window == 1024
    big = LlamaCppGenerator(GeneratorConfig(context_window=1_000_000))
    assert big.trained_context() == 8192
    assert big.context_window == 8192


@pytest.mark.slow
def test_answers_with_streaming_and_fills_the_draft(gen: LlamaCppGenerator) -> None:
    hits = eiffel_hits()
    pieces: list[str] = []
    d = gen.generate(QUESTION, hits, on_token=pieces.append)
    assert d.text and "paris" in d.text.lower()
    assert len(pieces) > 1 and "".join(pieces).strip() == d.text
    assert d.backend == "llamacpp" and d.model == smollm2_path().name
    assert d.prompt_tokens == gen.prompt_tokens(QUESTION, hits)
    assert 0 < d.completion_tokens <= 24
    assert d.finish_reason in ("stop", "length")
    if d.finish_reason == "length":
        assert d.completion_tokens == 24
    assert d.logprobs is not None and len(d.logprobs) == d.completion_tokens
    assert all(lp <= 0 for lp in d.logprobs)
    assert all(1 <= n <= len(hits) for n in d.citations)
    assert d.ms > 0
    assert gen.context_window == 2048  # the loaded context

    # Without streaming, reusing the prompt's KV cache (logits differ slightly from a batched
    # evaluation, so only the substance is compared).
    again = gen.generate(QUESTION, hits)
    assert "paris" in again.text.lower() and again.prompt_tokens == d.prompt_tokens


def test_prompt_tokens_include_the_chat_template(gen: LlamaCppGenerator) -> None:
    hits = eiffel_hits()
    n = gen.prompt_tokens(QUESTION, hits)
    contents = sum(gen.count_tokens([h.chunk.text for h in hits] + [QUESTION]))
    assert n > contents + 20  # system prompt, source headers, template tokens


def test_prompt_that_cannot_fit_raises_before_generating() -> None:
    g = LlamaCppGenerator(GeneratorConfig(context_window=256, max_tokens=64))
    long_hits = [make_hit(i, "The tower is made of wrought iron. " * 20) for i in range(1, 4)]
    with pytest.raises(FathomError, match="context window") as err:
        g.generate(QUESTION, long_hits)
    assert "256" in str(err.value) and "compress.budget_tokens" in str(err.value)
    assert g._llm is None  # refused before loading the model


def test_missing_model_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(BackendUnavailable, match="no such GGUF file"):
        LlamaCppGenerator(GeneratorConfig(model=str(tmp_path / "nope.gguf")))
    with pytest.raises(BackendUnavailable, match=r"no \.gguf file"):
        LlamaCppGenerator(GeneratorConfig(model=str(tmp_path)))


def test_a_gguf_without_a_chat_template_gets_its_familys_format() -> None:
    """A Gemma GGUF with no ``tokenizer.chat_template`` (base models, older conversions) is
    prompted in Gemma's turns, not ChatML, which Gemma reads as plain text."""
    from fathom.stages.generate.common import CHATML_TEMPLATE, chat_template_for
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    messages = [
        {"role": "system", "content": "Answer from the sources."},
        {"role": "user", "content": "Who wrote it?"},
    ]
    template, source = chat_template_for({"general.architecture": "gemma3"})
    assert "gemma3" in source
    prompt = Jinja2ChatFormatter(template, eos_token="<eos>", bos_token="<bos>")(
        messages=messages
    ).prompt
    assert prompt == (
        "<bos><start_of_turn>user\nAnswer from the sources.\n\nWho wrote it?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    # The file's own template wins; an unknown family falls back to ChatML, and says so.
    assert (
        chat_template_for({"tokenizer.chat_template": "X", "general.architecture": "gemma3"})[0]
        == "X"
    )
    template, source = chat_template_for({"general.architecture": "mystery"})
    assert template == CHATML_TEMPLATE and "ChatML" in source


@pytest.mark.slow
def test_forget_drops_the_kv_cache(gen: LlamaCppGenerator) -> None:
    hits = eiffel_hits()
    gen.generate(QUESTION, hits[:1])
    assert gen._llm is not None and gen._llm.n_tokens > 0
    gen.forget()
    assert gen._llm.n_tokens == 0
    LlamaCppGenerator(GeneratorConfig()).forget()  # nothing loaded: nothing to drop


@pytest.mark.slow
def test_an_answer_past_the_total_timeout_is_an_error() -> None:
    """generator.total_timeout_s bounds a whole in-process answer, as it does for the servers:
    a prompt of four sources cannot be evaluated in a millisecond."""
    g = LlamaCppGenerator(
        GeneratorConfig(max_tokens=24, context_window=2048, threads=1, total_timeout_s=0.001)
    )
    with pytest.raises(BackendUnavailable, match=r"total_timeout_s = 0\.001 s \(1 of at most 24"):
        g.generate(QUESTION, eiffel_hits())
    # An answer that ends within its token budget is kept, even past the deadline.
    one = LlamaCppGenerator(
        GeneratorConfig(max_tokens=1, context_window=2048, threads=1, total_timeout_s=0.001)
    )
    assert one.generate(QUESTION, eiffel_hits()).completion_tokens == 1


@pytest.mark.slow
def test_a_time_budget_stops_sampling_with_a_deadline_finish(gen: LlamaCppGenerator) -> None:
    hits = eiffel_hits()
    gen.forget()
    full = gen.generate(QUESTION, hits)
    gen.forget()
    cut = gen.generate(QUESTION, hits, time_budget_ms=0.0)  # spent before the first token
    assert cut.finish_reason == "deadline" and cut.completion_tokens == 1
    assert full.text.startswith(cut.text) and full.completion_tokens > 1
    gen.forget()
    roomy = gen.generate(QUESTION, hits, time_budget_ms=600_000)
    assert roomy.text == full.text and roomy.finish_reason != "deadline"


@pytest.mark.slow
def test_prompt_evaluation_speed_is_measured_from_cold_prompts_only(
    gen: LlamaCppGenerator,
) -> None:
    gen.forget()
    gen.prefill_ms_per_token = None
    assert gen.expected_prefill_ms(100) is None
    gen.generate(QUESTION, eiffel_hits()[:1])
    rate = gen.prefill_ms_per_token
    assert rate is not None and rate > 0
    assert gen.expected_prefill_ms(100) == pytest.approx(100 * rate)
    gen.generate(QUESTION, eiffel_hits())  # shares the prefix: not a full evaluation
    assert gen.prefill_ms_per_token == rate


@pytest.mark.slow
def test_a_measure_on_the_prompts_shared_start_is_kept_and_reused_by_the_answer() -> None:
    """measure_prefill evaluates the start every prompt of this question shares (instructions
    and first source), keeps the speed, and leaves that start in the KV cache: the answer
    that follows, with any number of sources, evaluates only the rest."""
    gen = LlamaCppGenerator(GeneratorConfig(max_tokens=4, context_window=2048, threads=1))
    hits = eiffel_hits()
    assert gen.expected_prefill_ms(10) is None
    ms = gen.measure_prefill(QUESTION, hits)
    rate = gen.prefill_ms_per_token
    assert ms > 0 and rate is not None and rate > 0
    shared = gen._llm.n_tokens
    one = gen._prompt_ids(build_messages(QUESTION, hits[:1], gen.cfg.framing))
    two = gen._prompt_ids(build_messages(QUESTION, hits[:2], gen.cfg.framing))
    assert 0 < shared < len(one) and one[:shared] == two[:shared]
    gen.generate(QUESTION, hits[:2])  # not a cold prompt: the measure stands
    assert gen.prefill_ms_per_token == rate


@pytest.mark.slow
def test_prompt_evaluation_speed_carries_over_to_the_next_process(tmp_path) -> None:
    """The measure is kept in a speed file (the engine's FATHOM_HOME/models/…), so a fresh
    generator, as in a one-question ask, knows it before its first prompt."""
    speeds = tmp_path / "llamacpp-speed.json"
    first = LlamaCppGenerator(GeneratorConfig(max_tokens=4, context_window=2048, threads=1))
    first.speed_file = speeds
    first.generate(QUESTION, eiffel_hits()[:1])
    rate = first.prefill_ms_per_token
    assert rate is not None and speeds.is_file()
    fresh = LlamaCppGenerator(GeneratorConfig(max_tokens=4, context_window=2048, threads=1))
    fresh.speed_file = speeds
    assert fresh.expected_prefill_ms(10) == pytest.approx(10 * rate, rel=1e-3)
    other = LlamaCppGenerator(GeneratorConfig(max_tokens=4, context_window=2048, threads=2))
    other.speed_file = speeds
    assert other.expected_prefill_ms(10) is None  # another thread count: not the same speed
    speeds.write_text("not json")
    broken = LlamaCppGenerator(GeneratorConfig(threads=1))
    broken.speed_file = speeds
    assert broken.expected_prefill_ms(10) is None


# -- the native-build check -------------------------------------------------------------------


def test_the_build_check_evaluates_a_batched_prompt_once_and_remembers_it(tmp_path, monkeypatch):
    """The child evaluates a real batched prompt with the packaged model; the verdict is kept
    in the models folder, so a later process does not run the child again."""
    import subprocess

    from fathom.stages.generate import native_check

    monkeypatch.setattr(native_check, "_PASSED", set())
    native_check.ensure_build_runs(smollm2_path(), 2048, 512, 1, tmp_path)
    record = json.loads((tmp_path / native_check.CHECK_FILE).read_text())
    assert list(record.values()) == ["ok"]

    def no_child(*args, **kwargs):
        raise AssertionError("the check ran again")

    monkeypatch.setattr(native_check, "_PASSED", set())  # as in a new process
    monkeypatch.setattr(subprocess, "run", no_child)
    native_check.ensure_build_runs(smollm2_path(), 2048, 512, 1, tmp_path)


@pytest.mark.parametrize("signame", ["SIGILL", "SIGSEGV"])
def test_a_build_that_dies_by_a_signal_is_one_clear_error(signame, tmp_path, monkeypatch):
    """A stand-in child kills itself as a native build would on a CPU it was not built for:
    `ask` prints what happened and how to fix it, and exits 1 instead of dying."""
    import sys

    from click.testing import CliRunner
    from fathom import cli
    from fathom.bench.support import docgen
    from fathom.stages.generate import native_check

    def dying(model, n_ctx, n_batch, threads):
        code = f"import os, signal; os.kill(os.getpid(), signal.{signame})"
        return [sys.executable, "-c", code]

    monkeypatch.setattr(native_check, "child_command", dying)
    monkeypatch.setattr(native_check, "_PASSED", set())
    monkeypatch.setenv("FATHOM_EMBEDDER__CACHE_DIR", str(tmp_path / "models"))
    with pytest.raises(native_check.NativeBackendCrash, match=f"died by {signame}"):
        native_check.ensure_build_runs(smollm2_path(), 2048, 512, 1, tmp_path)
    assert not (tmp_path / native_check.CHECK_FILE).exists()  # a crash is not remembered

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    res = CliRunner().invoke(
        cli.main, ["ask", str(pdf), "What are documents split into?", "--generator", "llamacpp"]
    )
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("Error:")]  # after the indexing progress
    assert errors == lines[-1:] and "Traceback" not in res.stderr, res.stderr
    assert f"died by {signame}" in errors[0] and "GGML_NATIVE=OFF" in errors[0]


def test_auto_gives_way_to_the_fallback_when_the_build_would_crash(tmp_path, monkeypatch):
    """With a GGUF configured, auto checks the build before answering; a build that dies gives
    the extractive answerer, and the selection says why."""
    import sys

    from fathom.bench.support.fault_server import closed_port
    from fathom.stages.generate import make_generator, native_check

    def dying(model, n_ctx, n_batch, threads):
        return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]

    monkeypatch.setattr(native_check, "child_command", dying)
    monkeypatch.setattr(native_check, "_PASSED", set())
    cfg = GeneratorConfig(model=str(smollm2_path()), ollama_host=f"127.0.0.1:{closed_port()}")
    gen = make_generator(cfg, tmp_path)
    assert gen.name == "extractive"
    assert "GGUF" in gen.selection and "died by SIGILL" in gen.selection
    # Asked for by name, llama.cpp is not replaced: its first load says what happened.
    named = make_generator(GeneratorConfig(backend="llamacpp", model=str(smollm2_path())), tmp_path)
    assert named.name == "llamacpp"
    with pytest.raises(BackendUnavailable, match="died by SIGILL"):
        named.generate(QUESTION, eiffel_hits())
