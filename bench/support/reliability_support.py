"""Run the CLI in a child process and measure it (exit code, output, peak RSS, wall time, hang),
and scan source code for unpickling.

Shared by the reliability tests and ``bench/reliability.py``. Peak memory is the child's own
high-water mark, ``VmHWM`` from ``/proc/self/status``, written at exit: ``ru_maxrss`` would not
do, since Linux carries it over from the parent through fork and exec, so a child of a large
test process would report the parent's size.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs cli.main() and writes the process's peak RSS (KiB) to argv[1] at exit.
_MEASURED_CLI = """
import atexit, re, resource, sys
out = sys.argv.pop(1)
def _dump():
    try:
        with open("/proc/self/status") as fh:
            kib = re.search(r"VmHWM:\\s+(\\d+)", fh.read()).group(1)
    except (OSError, AttributeError):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(out, "w") as fh:
        fh.write(str(kib))
atexit.register(_dump)
sys.argv[0] = "fathom"
from fathom import cli
cli.main()
"""


@dataclass(frozen=True, slots=True)
class Measured:
    """One CLI run: ``hung`` when it had to be killed at the timeout (``returncode`` is then -9)."""

    returncode: int
    stdout: str
    stderr: str
    peak_mb: float
    seconds: float
    hung: bool


def run_cli(args: list[str], home: Path, timeout: float = 300.0, **env: str) -> Measured:
    """``fathom ARGS`` in a child process with ``FATHOM_HOME=home``, measured."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss", delete=False) as fh:
        rss_path = fh.name
    home.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "FATHOM_HOME": str(home), **env}
    cmd = [sys.executable, "-c", _MEASURED_CLI, rss_path, *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=home.parent,
    )
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        proc.kill()
        out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    try:
        peak_mb = int(Path(rss_path).read_text() or 0) / 1024
    except (OSError, ValueError):
        peak_mb = float("nan")
    finally:
        Path(rss_path).unlink(missing_ok=True)
    return Measured(proc.returncode, out, err, peak_mb, seconds, hung)


PICKLING_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve"}
PICKLING_CALLS = {"read_pickle", "to_pickle"}  # pandas


def pickle_uses(source: str, filename: str = "<source>") -> list[str]:
    """Every place ``source`` can unpickle: pickling modules imported, ``torch.load`` without
    ``weights_only=True``, ``numpy.load(..., allow_pickle=True)``, pandas' pickle functions."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PICKLING_MODULES:
                    found.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[0]
            if module in PICKLING_MODULES:
                found.append(f"{where}: from {node.module} import …")
            if module == "torch" and any(a.name == "load" for a in node.names):
                found.append(f"{where}: from torch import load (cannot check weights_only)")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if name == "load" and owner == "torch":
                weights_only = keywords.get("weights_only")
                if not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                    found.append(f"{where}: torch.load without weights_only=True")
            if name == "load" and owner in ("np", "numpy"):
                allow = keywords.get("allow_pickle")
                if allow is not None and not (
                    isinstance(allow, ast.Constant) and allow.value is False
                ):
                    found.append(f"{where}: numpy.load with allow_pickle={ast.unparse(allow)}")
            if name in PICKLING_CALLS:
                found.append(f"{where}: {name}()")
    return found


def python_files() -> list[Path]:
    """Every .py file of the repository (not virtual environments or caches)."""
    skip = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".ruff_cache"}
    return sorted(p for p in REPO.rglob("*.py") if not skip.intersection(p.relative_to(REPO).parts))
