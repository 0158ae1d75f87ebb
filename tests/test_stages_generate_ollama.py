"""OllamaGenerator against a real HTTP server speaking the Ollama API (replies by SmolLM2)."""

from __future__ import annotations

import json
import random
import time

import pytest
from fathom.bench.support.fault_server import closed_port
from fathom.bench.support.hits import eiffel_hits, make_hit
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.ollama import OllamaGenerator, ollama_host, same_model
from fathom.tests.support.generate_support import CannedServer, FakeOllama, smollm2_path

QUESTION = "Where is the Eiffel Tower?"


@pytest.fixture(scope="module")
def server():
    with FakeOllama(models=["x", "slow"], slow_s=3.0) as fake:
        yield fake


def config(host: str, **kwargs) -> GeneratorConfig:
    base = {"ollama_host": host, "model": "x", "context_window": 3072, "max_tokens": 16}
    return GeneratorConfig(**(base | kwargs))


@pytest.mark.slow
def test_non_streaming_sends_num_ctx_and_fills_the_draft(server: FakeOllama) -> None:
    gen = OllamaGenerator(config(server.host))
    hits = eiffel_hits()
    d = gen.generate(QUESTION, hits)
    body = server.received[-1]
    assert body["stream"] is False
    assert body["options"]["num_ctx"] == 3072
    assert body["options"]["num_predict"] == 16
    assert body["options"]["temperature"] == 0.0 and body["options"]["seed"] == 0
    assert body["messages"][0]["role"] == "system" and QUESTION in body["messages"][1]["content"]
    assert d.text and d.backend == "ollama" and d.model == "x"
    assert 0 < d.completion_tokens <= 16
    assert d.prompt_tokens > 100  # the server's prompt_eval_count
    assert d.prompt_tokens <= gen.prompt_tokens(QUESTION, hits)  # the estimate is conservative
    assert d.finish_reason in ("stop", "length")
    assert all(1 <= n <= len(hits) for n in d.citations)


@pytest.mark.slow
def test_the_prompt_speed_of_each_reply_is_kept_for_the_next_process(
    server: FakeOllama, tmp_path
) -> None:
    """Ollama reports ``prompt_eval_duration`` over ``prompt_eval_count`` with every reply: the
    rate is kept per host and model in the speed file, so the next process prices depth in
    seconds before its first answer; another model is not taken for this one."""
    speeds = tmp_path / "prompt-speed.json"
    gen = OllamaGenerator(config(server.host))
    gen.speed_file = speeds
    assert gen.expected_prefill_ms(1000) is None
    d = gen.generate(QUESTION, eiffel_hits())
    final = server.received[-1]
    assert final["model"] == "x" and d.prompt_tokens >= 64
    rate = gen.prefill_ms_per_token
    assert rate is not None and rate > 0
    assert json.loads(speeds.read_text()) == {f"ollama:{server.host}:x": round(rate, 4)}
    fresh = OllamaGenerator(config(server.host))
    fresh.speed_file = speeds
    assert fresh.expected_prefill_ms(1000) == pytest.approx(1000 * rate, rel=1e-3)
    other = OllamaGenerator(config(server.host, model="slow"))
    other.speed_file = speeds
    assert other.expected_prefill_ms(1000) is None


@pytest.mark.slow
def test_streaming_calls_on_token(server: FakeOllama) -> None:
    gen = OllamaGenerator(config(server.host, context_window=2500))
    pieces: list[str] = []
    d = gen.generate(QUESTION, eiffel_hits(), on_token=pieces.append)
    body = server.received[-1]
    assert body["stream"] is True and body["options"]["num_ctx"] == 2500
    assert len(pieces) > 1 and "".join(pieces).strip() == d.text
    assert d.finish_reason in ("stop", "length") and d.completion_tokens > 0


def test_model_not_pulled_names_the_pull_command(server: FakeOllama) -> None:
    gen = OllamaGenerator(config(server.host, model="nomodel"))
    for on_token in (None, lambda piece: None):
        with pytest.raises(BackendUnavailable, match="ollama pull nomodel") as err:
            gen.generate(QUESTION, eiffel_hits(), on_token=on_token)
        assert "not found" in str(err.value) and server.host in str(err.value)


def test_unreachable_server_fails_fast_with_the_fix() -> None:
    host = f"http://127.0.0.1:{closed_port()}"
    gen = OllamaGenerator(config(host))
    for on_token in (None, lambda piece: None):
        t0 = time.perf_counter()
        with pytest.raises(BackendUnavailable) as err:
            gen.generate(QUESTION, eiffel_hits(), on_token=on_token)
        assert time.perf_counter() - t0 < 3
        assert str(err.value) == (
            f"Ollama is not reachable at {host} — start it with `ollama serve` "
            "or set generator.ollama_host"
        )


def test_timeout_is_named(server: FakeOllama) -> None:
    gen = OllamaGenerator(config(server.host, model="slow", timeout_s=0.5))
    with pytest.raises(BackendUnavailable, match=r"timeout_s = 0\.5 s"):
        gen.generate(QUESTION, eiffel_hits())


def test_prompt_that_cannot_fit_is_refused_before_sending(server: FakeOllama) -> None:
    before = len(server.received)
    gen = OllamaGenerator(config(server.host, context_window=300, max_tokens=64))
    hits = [make_hit(i, "The tower is made of wrought iron. " * 10) for i in (1, 2)]
    with pytest.raises(FathomError, match="300-token context window"):
        gen.generate(QUESTION, hits)
    assert len(server.received) == before


def test_counts_are_conservative_estimates_without_a_tokenizer() -> None:
    gen = OllamaGenerator(GeneratorConfig())
    assert gen.model == "llama3.2" and gen.context_window == 4096
    words = "The Eiffel Tower was completed in 1889."
    assert gen.count_tokens([words, ""])[0] >= 9 and gen.count_tokens([""]) == [0]

    class Words:
        def count(self, texts: list[str]) -> list[int]:
            return [len(t.split()) for t in texts]

    assert OllamaGenerator(GeneratorConfig(), token_counter=Words()).count_tokens([words]) == [7]


def test_host_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert ollama_host(GeneratorConfig()) == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:12345")
    assert ollama_host(GeneratorConfig()) == "http://127.0.0.1:12345"
    assert ollama_host(GeneratorConfig(ollama_host="https://gpu-box/")) == "https://gpu-box:443"
    assert ollama_host(GeneratorConfig(ollama_host="gpu-box")) == "http://gpu-box:11434"
    assert same_model("llama3.2", "llama3.2:latest") and not same_model("llama3.2", "llama3.2:1b")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_reply_that_is_not_a_json_object_is_named_malformed(stream: bool) -> None:
    kind = "application/x-ndjson" if stream else "application/json"
    with CannedServer(b"[1, 2]\n", chunks=[b"[1]\n"] if stream else None, content_type=kind) as s:
        gen = OllamaGenerator(config(s.url, model="m", retries=0, timeout_s=5))
        on_token = (lambda piece: None) if stream else None
        with pytest.raises(BackendUnavailable, match="malformed reply for model 'm'") as err:
            gen.generate(QUESTION, eiffel_hits(), on_token=on_token)
    assert s.url in str(err.value) and "Ollama server" in str(err.value)


def test_a_prompt_that_passes_the_check_fits_the_real_context() -> None:
    """Sources that tokenize badly (DNA) must not pass the check and then be cut by Ollama."""
    from fathom.core.config import GeneratorConfig as Cfg
    from fathom.stages.generate.llamacpp import LlamaCppGenerator

    rng = random.Random(0)
    dna = [" ".join("".join(rng.choice("ACGT") for _ in range(60)) for _ in range(3))]
    hits = [make_hit(i, f"Sample {i}. {dna[0]}.") for i in range(1, 17)]
    question = "Which sample contains the motif GATTACA?"
    gen = OllamaGenerator(config("http://127.0.0.1:9", context_window=2048, max_tokens=256))
    real = LlamaCppGenerator(Cfg(backend="llamacpp", model=str(smollm2_path())))
    assert gen.prompt_tokens(question, hits) >= real.prompt_tokens(question, hits) > 1700
