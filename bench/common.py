"""Helpers shared by the bench scripts: data path, temporary config, timing, tables, JSON out
(``write_json`` records the machine and the command line in every results file).

Benchmarks run the contender and its baseline in the same run on the same data and report
ratios next to absolute numbers; they assert nothing about time.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.machine import cpu_model, memory_gb
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    from fathom.core.config import Config

out_console = Console(soft_wrap=False, width=160)  # tables: stdout
err_console = Console(stderr=True)  # progress: stderr


def data_dir(arg: str | None) -> Path:
    """``--data``, else ``FATHOM_DATA``, else ``<repo>/../shared/data``; absolute, so a run in
    another folder (a previous checkout's ``fathom eval``) finds it too."""
    path = Path(arg or os.environ.get("FATHOM_DATA") or REPO.parent / "shared" / "data")
    if not path.is_dir():
        raise SystemExit(f"data folder not found: {path} (pass --data or set FATHOM_DATA)")
    return path.resolve()


def default_out(name: str) -> Path:
    return REPO / "bench" / "results" / f"{name}.json"


def log(msg: str) -> None:
    """One progress line on stderr, with a timestamp."""
    err_console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}", highlight=False)


@contextlib.contextmanager
def temp_home(prefix: str) -> Iterator[Path]:
    """A throwaway FATHOM_HOME, so a bench never reads or writes the user's collections."""
    with tempfile.TemporaryDirectory(prefix=f"fathom-bench-{prefix}-") as tmp:
        yield Path(tmp)


def bench_config(home: Path, overrides: dict[str, Any] | None = None) -> Config:
    """Default configuration with ``home`` set; ignores ./fathom.toml and FATHOM_* variables.

    (``load_config(path=None)`` would read a ``fathom.toml`` in the working directory.)
    """
    from fathom.core.config import Config, apply_overrides

    cfg = Config()
    cfg.home = str(home)
    if overrides:
        apply_overrides(cfg, overrides, source="bench")
    return cfg


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``["chunker.target_tokens=230", ...]`` → ``{"chunker.target_tokens": "230"}``; the
    values are strings, coerced to each field's type like environment variables."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise SystemExit(f"--set {item!r}: expected SECTION.KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def st_model(embedder: Any) -> Any:
    """The already-loaded ``SentenceTransformer`` inside a Fathom embedder (loads it if needed),
    so a baseline encodes with the very same model object."""
    return embedder._load()


def progress_printer(label: str, every: float = 5.0):
    """An ingest ``progress`` callback: embed progress on stderr, at most every ``every`` s."""
    last = [0.0]

    def emit(event: str, **info: Any) -> None:
        now = time.perf_counter()
        if event == "embedded" and now - last[0] >= every:
            last[0] = now
            log(f"{label}: embedded {info['done']}/{info['total']} chunks")
        elif event in ("discovered", "embed_start", "writing", "done"):
            log(f"{label}: {event} {info}")

    return emit


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def percentiles(values: Sequence[float], ps: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50", "p95", "p99", "mean"}`` of ``values`` (numpy's linear interpolation)."""
    import numpy as np

    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {f"p{p:g}": float("nan") for p in ps} | {"mean": float("nan")}
    out = {f"p{p:g}": float(np.percentile(arr, p)) for p in ps}
    out["mean"] = float(arr.mean())
    return out


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def print_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3
) -> None:
    """A rich table on stdout; floats printed with ``digits`` decimals."""
    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(fmt(v, digits) for v in row))
    out_console.print(table)


def machine_info() -> dict[str, Any]:
    """Context for the JSON: CPU model, cores, memory, OS, load, versions (numbers compare only
    within a run)."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "os": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "memory_gb": memory_gb(),
        "cpu": cpu_model(),
    }
    for mod in ("torch", "sentence_transformers", "faiss", "bm25s", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # a missing library is reported, not fatal
            info[mod] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return info


# Options whose values are this machine's folders: a results file names what they stand for
# (``--home DIR``, ``--previous CHECKOUT``), or leaves out what a rerun does not need (where
# the data, the intermediate runs and their reuse happen to be).
STAND_INS = {"--home": "DIR", "--previous": "CHECKOUT"}
LEFT_OUT = ("--data", "--work")
LEFT_OUT_FLAGS = ("--reuse",)


def command_line(
    argv: Sequence[str] | None = None, script: str | None = None, leave_out: Sequence[str] = ()
) -> str:
    """The command that made a results file, quoted so a shell takes it back unchanged:
    ``python bench/NAME.py ARGS`` (``script`` or ``sys.argv[0]``, relative to the repository;
    ``argv`` or ``sys.argv[1:]``). This machine's folders are stood in for or left out as
    ``STAND_INS``, ``LEFT_OUT`` (and ``leave_out``) and ``LEFT_OUT_FLAGS`` say, and a path inside
    the repository is written relative to it. An empty argument is written ``''``."""
    path = Path(script or sys.argv[0]).resolve()
    with contextlib.suppress(ValueError):
        path = path.relative_to(REPO)
    dropped = (*LEFT_OUT, *leave_out)
    kept: list[str] = []
    args = iter(sys.argv[1:] if argv is None else argv)
    for arg in args:
        name, eq, _ = arg.partition("=")
        if arg in LEFT_OUT_FLAGS:
            continue
        if name in dropped or name in STAND_INS:
            if not eq:
                next(args, None)
            kept += [name, STAND_INS[name]] if name in STAND_INS else []
            continue
        kept.append(_in_repo(arg))
    return shlex.join(["python", path.as_posix(), *kept])


def _in_repo(arg: str) -> str:
    """``arg`` relative to the repository when it is an absolute path inside it."""
    if arg.startswith("/"):
        with contextlib.suppress(ValueError):
            return Path(arg).resolve().relative_to(REPO).as_posix()
    return arg


def write_results(out: Path, results: dict[str, Any], markdown: str) -> None:
    """A bench's ``out``/results.json (``write_json``) and results.md (``markdown``)."""
    write_json(out / "results.json", results)
    (out / "results.md").write_text(markdown, encoding="utf-8")


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON, with the machine and the command line unless it has them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data.setdefault("machine", machine_info())
    data.setdefault("command", command_line())
    if hasattr(os, "getloadavg"):
        data["machine"]["loadavg_end"] = os.getloadavg()
    path.write_text(json.dumps(data, indent=2, default=float) + "\n", encoding="utf-8")
    log(f"wrote {path}")


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds`` (wall, perf_counter) and ``sw.cpu``
    (this process's CPU seconds over all threads: less sensitive to other processes' load)."""

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        self.seconds = 0.0
        self.cpu = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu_start


def profile_to(path: Path, fn, *args, top: int = 25, **kwargs):
    """Run ``fn`` under cProfile, save stats to ``path`` and print the top entries to stderr."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    result = prof.runcall(fn, *args, **kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.dump_stats(str(path))
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print(buf.getvalue(), file=sys.stderr)
    log(f"profile saved to {path}")
    return result


def eval_rows_by_qid(out: Path, strategy: str = "fixed:4") -> dict[str, dict[str, Any]]:
    """The rows of a ``fathom eval --out`` folder's log for ``strategy``, by question id."""
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line]
    return {r["qid"]: r for r in rows if r.get("strategy") == strategy}


def format_ci(c: dict[str, Any] | None, signed: bool = False, mean: bool = True) -> str:
    """``mean [lo, hi]`` of a ``bootstrap_ci`` result to three decimals (``–`` for none);
    ``[lo, hi]`` alone without ``mean``."""
    if not c:
        return "–"
    f = "{:+.3f}" if signed else "{:.3f}"
    interval = f"[{f.format(c['lo'])}, {f.format(c['hi'])}]"
    return f"{f.format(c['mean'])} {interval}" if mean else interval


def paired_metrics(
    rows: dict[str, dict[str, dict[str, Any]]], metrics: Sequence[str], baseline: str
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``(shared qids, {label: entry})`` for eval rows by label and qid: each metric's mean with
    a bootstrap interval on the questions every label answered, and for each label but
    ``baseline`` the paired difference against it (interval, and win / tie / loss shares).
    Every interval has a twin over documents (``…_documents``: documents resampled with their
    questions kept together)."""
    from fathom.evaluation.metrics import (
        bootstrap_ci,
        cluster_bootstrap_ci,
        document_of,
        paired_compare,
    )

    shared = sorted(set.intersection(*(set(r) for r in rows.values())))
    docs = [document_of(rows[baseline][q]) for q in shared]
    out: dict[str, dict[str, Any]] = {}
    for label, by_qid in rows.items():
        entry: dict[str, Any] = {}
        for m in metrics:
            values = [float(by_qid[q]["metrics"][m] or 0.0) for q in shared]
            entry[m] = bootstrap_ci(values)
            entry[f"{m}_documents"] = cluster_bootstrap_ci(values, docs)
            if label != baseline:
                base = [float(rows[baseline][q]["metrics"][m] or 0.0) for q in shared]
                diff = [a - b for a, b in zip(values, base, strict=True)]
                entry[f"{m}_minus_{baseline}"] = bootstrap_ci(diff)
                entry[f"{m}_minus_{baseline}_documents"] = cluster_bootstrap_ci(diff, docs)
                entry[f"{m}_paired"] = paired_compare(values, base)
        out[label] = entry
    return shared, out


def tree_env(tree: Path, work: Path, overrides: bool = True) -> dict[str, str]:
    """The environment another Fathom checkout's own code runs in: a folder under ``work``
    holding a link named ``fathom`` to ``tree``, alone on ``PYTHONPATH`` (ahead of the installed
    package), and ``FATHOM_HOME`` under ``work``; the rest of the environment as it is, less
    this shell's ``FATHOM_<SECTION>__<KEY>`` settings unless ``overrides`` (the configuration
    is then the default one)."""
    link_dir = work / "pythonpath"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "fathom"
    if link.is_symlink() and link.resolve() != tree.resolve():
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(tree.resolve(), target_is_directory=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if overrides or not (k.startswith("FATHOM_") and "__" in k)
    }
    env["PYTHONPATH"] = str(link_dir)
    env["FATHOM_HOME"] = str(work / "home")
    return env


def check_tree(env: dict[str, str], tree: Path, cwd: Path) -> Path:
    """Where ``fathom`` imports from in ``env``; a SystemExit when that is not ``tree``."""
    out = subprocess.run(
        [sys.executable, "-c", "import fathom; print(fathom.__file__)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    found = Path(out.stdout.strip()).resolve().parent
    if found != tree.resolve():
        raise SystemExit(f"fathom imports from {found}, not from the tree under test {tree}")
    return found
