"""Generator backends by name: one ``BackendSpec`` each, in ``BACKENDS``.

Everything that lists backends reads this table: the check of ``generator.backend`` wherever
configuration is read (registered with the configuration on import), the ``--generator``
choices of ``ask``, ``chat``, ``eval`` and ``mcp``, the MCP ``ask`` tool's schema, and
``fathom doctor``'s generator lines. A built-in spec names its factory and its doctor check by
``"module:attribute"`` (``lazy``), so reading the table loads no backend. Adding a backend is
a module in this package (its generator and its ``doctor_check``) and one entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fathom.core.config import register_choices

if TYPE_CHECKING:
    from fathom.core.base import Generator
    from fathom.core.checks import Check
    from fathom.core.config import Config, GeneratorConfig

AUTO = "auto"  # not a backend: the rule in stages/generate/__init__.py that picks one

# Where a backend's model runs; `fathom doctor` lists the backends in this order.
Runs = Literal["server", "process", "none"]
RUNS: tuple[Runs, ...] = ("server", "process", "none")


def lazy(target: str) -> Callable[..., Any]:
    """The callable ``"package.module:attribute"`` names, imported when it is first called."""
    module, _, attribute = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__name__ = call.__qualname__ = target
    return call


@dataclass(frozen=True)
class BackendSpec:
    """One generator backend: everything the rest of Fathom needs to know about it."""

    # What generator.backend, --generator and the MCP ask tool's generator call it.
    name: str
    # The generator for a configuration (its name is ``name``).
    factory: Callable[[GeneratorConfig], Generator]
    # Its `fathom doctor` lines for a configuration, the first named ``name``; the flag says
    # whether slow checks (llama.cpp's child-process build check) may run.
    doctor: Callable[[Config, bool], list[Check]]
    # False when passages leave this machine: the MCP ask tool then takes it only on a server
    # started with it (`fathom mcp --generator NAME`).
    local: bool
    # "server": a model served over HTTP; "process": one loaded in this process; "none": no
    # model at all.
    runs: Runs
    # generator.model when it is empty ("": the packaged SmolLM2 GGUF where a model file is
    # read, or no model).
    default_model: str = ""


_HERE = "fathom.stages.generate"

# The built-in backends, in the order --generator and the configuration's check list them.
BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "llamacpp",
            factory=lazy(f"{_HERE}.llamacpp:LlamaCppGenerator"),
            doctor=lazy(f"{_HERE}.llamacpp:doctor_check"),
            local=True,
            runs="process",
        ),
        BackendSpec(
            "ollama",
            factory=lazy(f"{_HERE}.ollama:OllamaGenerator"),
            doctor=lazy(f"{_HERE}.ollama:doctor_check"),
            local=True,
            runs="server",
            default_model="llama3.2",
        ),
        BackendSpec(
            "openai",
            factory=lazy(f"{_HERE}.openai_backend:OpenAIGenerator"),
            doctor=lazy(f"{_HERE}.openai_backend:doctor_check"),
            local=False,
            runs="server",
            default_model="gpt-4o-mini",
        ),
        BackendSpec(
            "huggingface",
            factory=lazy(f"{_HERE}.hf:HuggingFaceGenerator"),
            doctor=lazy(f"{_HERE}.hf:doctor_check"),
            local=True,
            runs="process",
        ),
        BackendSpec(
            "extractive",
            factory=lazy(f"{_HERE}.extractive:ExtractiveGenerator"),
            doctor=lazy(f"{_HERE}.extractive:doctor_check"),
            local=True,
            runs="none",
        ),
    )
}


def generator_choices() -> tuple[str, ...]:
    """What ``generator.backend`` and ``--generator`` take: ``auto``, then every backend."""
    return (AUTO, *BACKENDS)


def local_choices() -> tuple[str, ...]:
    """What an MCP ask may choose on any server: ``auto`` and the backends that answer on this
    machine."""
    return (AUTO, *(spec.name for spec in BACKENDS.values() if spec.local))


def remote_names() -> tuple[str, ...]:
    """The backends that send passages off this machine."""
    return tuple(spec.name for spec in BACKENDS.values() if not spec.local)


def doctor_order() -> list[BackendSpec]:
    """The backends as `fathom doctor` lists them: served models, then models loaded in
    process, then the ones without a model (the table's order within each)."""
    return sorted(BACKENDS.values(), key=lambda spec: RUNS.index(spec.runs))


register_choices("generator.backend", generator_choices)
