"""Whether this machine's llama.cpp build can evaluate a batched prompt: checked once, in a child.

A natively compiled llama-cpp-python can die on a CPU whose flags promise instructions the build
then cannot run (seen on cloud VMs reporting AVX-512 and AMX, by SIGILL "Illegal instruction" or
by SIGSEGV): a one-token prompt works, the first batched prompt kills the process without a word.
Before a model is first loaded in this process, ``ensure_build_runs`` evaluates a prompt of
``PROMPT_TOKENS`` tokens with the same model, context and batch size in a child process. A child
killed by a signal becomes one clear line (``NativeBackendCrash``) instead of a silent death;
a success is remembered in ``FATHOM_HOME/models/llamacpp-check.json``, keyed by the
llama-cpp-python version, its library files and the CPU flags, so the check runs once per build,
model and machine.

The child runs this file as a script (``python native_check.py MODEL N_CTX N_BATCH THREADS``): it
needs only the standard library and llama_cpp, not the ``fathom`` package.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import platform
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

CHECK_FILE = "llamacpp-check.json"
PROMPT_TOKENS = 1500
TIMEOUT_S = 300.0
REBUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" python -m pip install --force-reinstall --no-cache-dir '
    "--no-binary llama-cpp-python llama-cpp-python"
)


def child_command(model: Path, n_ctx: int, n_batch: int, threads: int) -> list[str]:
    """The command that runs the check (tests put a stand-in here)."""
    script = str(Path(__file__).resolve())
    return [sys.executable, script, str(model), str(n_ctx), str(n_batch), str(threads)]


def build_key(model: Path) -> str:
    """What the check's verdict depends on: the llama-cpp-python version and library files,
    the CPU's flags and the model file."""
    parts: dict[str, Any] = {"python": sys.version.split()[0], "machine": platform.machine()}
    try:
        parts["llama_cpp"] = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        parts["llama_cpp"] = None
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        parts["libraries"] = sorted(
            (p.name, p.stat().st_size, int(p.stat().st_mtime))
            for p in root.rglob("*")
            if p.is_file() and p.suffix in (".so", ".dylib", ".dll")
        )
    parts["cpu"] = hashlib.sha256(cpu_flags().encode()).hexdigest()[:16]
    stat = model.stat()
    parts["model"] = (str(model.resolve()), stat.st_size, int(stat.st_mtime))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def cpu_flags() -> str:
    """The CPU's feature flags as the OS reports them ("" when it does not)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return " ".join(sorted(line.partition(":")[2].split()))
        return ""
    if sys.platform == "darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return platform.processor()


_PASSED: set[str] = set()  # keys checked in this process


class NativeBackendCrash(Exception):
    """The llama.cpp build died by a signal evaluating a prompt (message: one line)."""


def ensure_build_runs(
    model: Path,
    n_ctx: int,
    n_batch: int,
    threads: int,
    cache_dir: Path | None,
    timeout_s: float = TIMEOUT_S,
) -> None:
    """Return when this build evaluates a batched prompt with ``model`` (checked in a child the
    first time, remembered under ``cache_dir``); raise ``NativeBackendCrash`` when the child
    dies by a signal, ``RuntimeError`` when it fails otherwise."""
    key = build_key(model)
    if key in _PASSED:
        return
    record = cache_dir / CHECK_FILE if cache_dir is not None else None
    known = _read(record)
    if known.get(key) == "ok":
        _PASSED.add(key)
        return
    command = child_command(model, n_ctx, n_batch, threads)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"the llama.cpp check did not finish in {timeout_s:g} s evaluating a "
            f"{PROMPT_TOKENS}-token prompt with {model.name}"
        ) from None
    if proc.returncode < 0:
        raise NativeBackendCrash(crash_message(-proc.returncode, model))
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise RuntimeError(
            f"the llama.cpp check failed with {model.name} (exit {proc.returncode}: "
            f"{lines[-1].strip() if lines else 'no message'})"
        )
    _PASSED.add(key)
    if record is not None:
        known[key] = "ok"
        try:
            record.parent.mkdir(parents=True, exist_ok=True)
            tmp = record.with_suffix(".tmp")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
            tmp.replace(record)
        except OSError:
            pass  # a read-only home: the check runs again next time, nothing worse


def crash_message(signum: int, model: Path) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    what = {
        "SIGILL": "an illegal instruction: the build uses CPU instructions this machine cannot run",
        "SIGSEGV": "a segmentation fault",
        "SIGBUS": "a bus error",
        "SIGABRT": "an abort",
    }.get(name, "a crash")
    return (
        f"llama.cpp died by {name} ({what}) evaluating a {PROMPT_TOKENS}-token prompt with "
        f"{model.name} — rebuild it for this CPU with {REBUILD}, or answer with "
        "--generator ollama or --generator extractive"
    )


def _read(record: Path | None) -> dict[str, str]:
    if record is None or not record.is_file():
        return {}
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _evaluate(model: str, n_ctx: int, n_batch: int, threads: int) -> None:
    """The child: load ``model`` and evaluate a prompt of up to ``PROMPT_TOKENS`` tokens."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    words = " ".join(f"word{i} and" for i in range(PROMPT_TOKENS))
    tokens = llm.tokenize(words.encode())[: max(8, min(PROMPT_TOKENS, n_ctx - 8))]
    llm.eval(tokens)
    print(json.dumps({"ok": True, "tokens": len(tokens)}))


if __name__ == "__main__":
    _evaluate(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
