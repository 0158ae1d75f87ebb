"""Answer generators: one module per backend, chosen by name from ``[generator]`` config.

``make_generator(cfg)`` builds the configured backend; ``"auto"`` stays on this machine and
picks the first usable one:

1. llama.cpp, when ``generator.model`` is a GGUF file;
2. Ollama, when its server answers ``GET /api/tags`` within 0.5 s and lists the configured
   model (default ``llama3.2``);
3. an OpenAI-compatible server, only when ``generator.base_url`` names one;
4. otherwise the extractive answerer, which needs no model (``OFFLINE_FALLBACK``; see
   docs/configuration.md for the measurement behind the choice).

An API key in the environment never selects a remote service by itself: with one set and
nothing else configured, ``opt_in_note`` says how to choose it (``--generator openai``).
The backends themselves are listed once, in ``registry.BACKENDS``. Backend libraries are imported
only when a generator is built or first used, so importing this package is cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, ConfigError
from fathom.stages.generate.registry import BACKENDS

if TYPE_CHECKING:
    from fathom.core.base import Generator

__all__ = ["OFFLINE_FALLBACK", "make_generator", "opt_in_note", "resolve_backend"]

OLLAMA_PROBE_S = 0.5


def _ollama_models(host: str, timeout: float = OLLAMA_PROBE_S) -> list[str] | None:
    """Model names the Ollama server at ``host`` lists, or ``None`` when it does not answer."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{host}/api/tags", timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError):  # refused, timed out, not HTTP, not JSON
        return None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    return [str(m.get("name") or m.get("model") or "") for m in models if isinstance(m, dict)]


def _is_gguf(model: str) -> bool:
    return model.endswith(".gguf") and Path(model).expanduser().is_file()


OFFLINE_FALLBACK = "extractive"


def resolve_backend(cfg: GeneratorConfig) -> tuple[str, str]:
    """``(backend, reason)``: the configured backend, or the one ``"auto"`` resolves to."""
    if cfg.backend != "auto":
        return cfg.backend, "configured"
    if _is_gguf(cfg.model):
        return "llamacpp", f"generator.model is a GGUF file ({cfg.model})"
    from fathom.stages.generate.ollama import DEFAULT_MODEL, ollama_host, same_model

    host = ollama_host(cfg)
    model = cfg.model or DEFAULT_MODEL
    listed = _ollama_models(host)
    if listed is not None and any(same_model(model, name) for name in listed):
        return "ollama", f"Ollama at {host} has {model}"
    why = f"Ollama at {host} " + ("has no " + model if listed is not None else "is not reachable")
    if cfg.base_url:
        return "openai", f"{why}; generator.base_url is {cfg.base_url}"
    return OFFLINE_FALLBACK, f"{why} and no GGUF model or generator.base_url is configured"


def opt_in_note(cfg: GeneratorConfig, backend: str) -> str | None:
    """A note for ``auto`` passing over an API key: documents go to a remote service only when
    asked for. None when no key is set, or the backend was configured."""
    from fathom.stages.generate.openai_backend import api_key

    if cfg.backend != "auto" or backend == "openai" or not api_key(cfg):
        return None
    return (
        "an OpenAI API key is set, but auto answers on this machine: to send passages to "
        'OpenAI, use --generator openai (or generator.backend = "openai" in fathom.toml)'
    )


SPEED_FILE = "prompt-speed.json"  # measured prompt speeds, in the models folder


def make_generator(cfg: GeneratorConfig, models_dir: Path | None = None) -> Generator:
    """The generator ``cfg`` names (``"auto"`` resolved); its ``name`` and ``model`` say which
    backend and model answer, and ``selection`` why it was chosen. ``models_dir``
    (``FATHOM_HOME/models``) keeps a backend's measured prompt speed."""
    backend, reason = resolve_backend(cfg)
    spec = BACKENDS.get(backend)
    if spec is None:
        raise ConfigError(
            f"generator.backend = {backend!r}: unknown — use auto or one of "
            f"{', '.join(sorted(BACKENDS))}"
        )
    generator = spec.factory(cfg)
    generator.selection = reason
    if models_dir is not None:
        generator.speed_file = models_dir / SPEED_FILE  # type: ignore[attr-defined]
    if cfg.backend == "auto" and backend == "llamacpp":
        # auto must answer: a llama.cpp build that cannot run here gives way to the fallback.
        try:
            generator.check_build()  # type: ignore[attr-defined]
        except BackendUnavailable as exc:
            fallback = BACKENDS[OFFLINE_FALLBACK].factory(cfg)
            fallback.selection = f"{reason}, but {exc}; the {OFFLINE_FALLBACK} answerer answers"
            return fallback
    return generator
