"""The generator registry: a backend added with one entry in ``BACKENDS`` is offered by
``--generator`` (ask, chat, eval, mcp), passes the configuration's check from the environment
and from fathom.toml, is in the MCP ask tool's schema, and gets its line in ``fathom doctor``;
taken out again, it is refused everywhere. The built-in backends keep their order."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support.fault_server import closed_port
from fathom.core.checks import Check
from fathom.core.config import Config, GeneratorConfig, load_config
from fathom.core.errors import CollectionNotFound, ConfigError, FathomError
from fathom.stages.generate import make_generator
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.registry import (
    BACKENDS,
    BackendSpec,
    doctor_order,
    generator_choices,
    local_choices,
    remote_names,
)

COMMANDS = (("ask",), ("chat",), ("eval",), ("mcp",))
BUILT_IN = ("auto", "llamacpp", "ollama", "openai", "huggingface", "extractive")


class StandInGenerator(BaseGenerator):
    """A backend that is nowhere else in Fathom: it answers with a fixed sentence."""

    name = "standin"
    language_model = False

    def __init__(self, cfg: GeneratorConfig) -> None:
        super().__init__(cfg)
        self.model = cfg.model or "stand-in-1"

    def _complete(self, req: Request) -> Completion:
        return Completion(text="A stand-in answer [1].", completion_tokens=5)


DOCTOR_CALLS: list[tuple[str, bool]] = []


def standin_check(cfg: Config, native_check: bool) -> list[Check]:
    DOCTOR_CALLS.append((cfg.generator.backend, native_check))
    return [Check("generators", "standin", "ok", "stand-in ready (no model)")]


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> BackendSpec:
    """The stand-in, registered with one entry for this test only."""
    spec = BackendSpec(
        "standin", StandInGenerator, standin_check, local=True, runs="none", default_model="s-1"
    )
    monkeypatch.setitem(BACKENDS, spec.name, spec)
    DOCTOR_CALLS.clear()
    return spec


@pytest.fixture(autouse=True)
def no_ambient_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("FATHOM_GENERATOR__BACKEND", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port()}")


def generator_param(path: tuple[str, ...]) -> click.Parameter:
    command: click.Command = cli.main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    (param,) = [p for p in command.params if p.name == "generator"]
    return param


def test_the_built_in_backends_keep_their_order() -> None:
    assert generator_choices() == BUILT_IN
    assert local_choices() == ("auto", "llamacpp", "ollama", "huggingface", "extractive")
    assert remote_names() == ("openai",)
    names = [spec.name for spec in doctor_order()]
    assert names == ["ollama", "openai", "llamacpp", "huggingface", "extractive"]
    for path in COMMANDS:
        assert tuple(generator_param(path).type.choices) == BUILT_IN  # type: ignore[attr-defined]


def test_a_registered_backend_is_offered_by_every_generator_option(standin) -> None:
    for path in COMMANDS:
        param = generator_param(path)
        assert tuple(param.type.choices) == (*BUILT_IN, "standin")  # type: ignore[attr-defined]
        assert param.type.convert("standin", param, None) == "standin"
    res = CliRunner().invoke(cli.main, ["ask", "--help"])
    assert res.exit_code == 0 and "|extractive|standin]" in res.stdout


def test_an_unregistered_backend_is_a_usage_error() -> None:
    res = CliRunner().invoke(cli.main, ["ask", "guide", "why?", "--generator", "standin"])
    assert res.exit_code == 2 and "'standin' is not one of 'auto'" in res.stderr


def test_the_configuration_takes_a_registered_backend(standin, tmp_path: Path) -> None:
    cfg = load_config(env={"FATHOM_GENERATOR__BACKEND": "standin"})
    assert cfg.generator.backend == "standin"
    toml = tmp_path / "fathom.toml"
    toml.write_text('[generator]\nbackend = "standin"\n')
    assert load_config(toml, env={}).generator.backend == "standin"
    res = CliRunner().invoke(
        cli.main, ["config", "show", "--json"], env={"FATHOM_GENERATOR__BACKEND": "standin"}
    )
    assert res.exit_code == 0 and json.loads(res.stdout)["generator"]["backend"] == "standin"
    gen = make_generator(cfg.generator)
    assert isinstance(gen, StandInGenerator) and gen.selection == "configured"


def test_the_configuration_refuses_an_unregistered_backend(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"generator\.backend = 'standin' \(from environment FATHOM_GENERATOR__BACKEND\): "
        r"must be one of auto, llamacpp, ollama, openai, huggingface, extractive$",
    ):
        load_config(env={"FATHOM_GENERATOR__BACKEND": "standin"})
    toml = tmp_path / "fathom.toml"
    toml.write_text('[generator]\nbackend = "standin"\n')
    with pytest.raises(ConfigError, match=r"generator\.backend = 'standin' \(from .*fathom\.toml"):
        load_config(toml, env={})
    with pytest.raises(ConfigError, match=r"generator\.backend = 'standin': unknown"):
        make_generator(GeneratorConfig(backend="standin"))


def ask_schema() -> dict:
    from fathom.mcp_server import build_server
    from fathom.mcp_server.tools import FathomTools

    server = build_server(FathomTools(load_config(env={})))
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    return tools["ask"].input_schema["properties"]["generator"]


def test_the_mcp_ask_tool_offers_a_registered_backend(standin, monkeypatch) -> None:
    pytest.importorskip("mcp")
    (choices,) = [a["enum"] for a in ask_schema()["anyOf"] if "enum" in a]
    assert choices == [*local_choices(), "openai"] and "standin" in choices
    # The tool takes it: the call gets as far as finding no collection to read.
    from fathom.mcp_server.tools import FathomTools

    # the test's own empty FATHOM_HOME, never the machine's default data directory
    tools = FathomTools(load_config(env={"FATHOM_HOME": os.environ["FATHOM_HOME"]}))
    with pytest.raises(CollectionNotFound):
        tools.ask("why?", generator="standin")
    # A backend that sends passages away is listed after the local ones, and a call may
    # choose it only on a server started with it.
    remote = BackendSpec("farside", StandInGenerator, standin_check, local=False, runs="server")
    monkeypatch.setitem(BACKENDS, remote.name, remote)
    (choices,) = [a["enum"] for a in ask_schema()["anyOf"] if "enum" in a]
    assert choices[-2:] == ["openai", "farside"]
    assert (
        "farside only when the server was started with --generator farside"
        in (ask_schema()["description"])
    )
    with pytest.raises(FathomError, match="only a server started with --generator farside"):
        tools.ask("why?", generator="farside")


def test_doctor_runs_a_registered_backends_check(standin, monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_GENERATOR__BACKEND", "standin")
    res = CliRunner().invoke(cli.main, ["doctor", "--json"])
    data = json.loads(res.stdout)
    generators = [c["name"] for c in data["checks"] if c["section"] == "generators"]
    assert generators == [
        "ollama",
        "openai",
        "llamacpp",
        "huggingface",
        "extractive",
        "standin",
        "answers with",
    ]
    assert DOCTOR_CALLS == [("standin", True)]
    (answers,) = [c for c in data["checks"] if c["name"] == "answers with"]
    assert answers["detail"] == "standin (configured)" and answers["status"] == "ok"
    assert res.exit_code == 0 and data["auto"]["backend"] == "standin"
    text = CliRunner().invoke(cli.main, ["doctor"]).stdout
    assert "stand-in ready (no model)" in text


ENTRY_POINTS = {
    "cli": "from fathom import cli\ncli.main(['config', 'show'])",
    "engine": "from fathom.stages.pipeline import Engine\n"
    "from fathom.core.config import load_config\nload_config()",
    "mcp": "from fathom.mcp_server import build_server\n"
    "from fathom.core.config import load_config\nload_config()",
    "eval worker": "from fathom.evaluation.executors import _config_from\n"
    "import os\n_config_from({'generator': {'backend': os.environ['FATHOM_GENERATOR__BACKEND']}})",
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_checks_the_backend_as_it_reads_the_configuration(entry, tmp_path):
    """In a fresh interpreter, as each program starts: the registry's names are registered
    before the configuration is read."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FATHOM_GENERATOR__BACKEND": "nonesuch", "FATHOM_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY_POINTS[entry]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0
    source = "eval worker" if entry == "eval worker" else "environment FATHOM_GENERATOR__BACKEND"
    assert f"generator.backend = 'nonesuch' (from {source}): must be one of auto," in proc.stderr
