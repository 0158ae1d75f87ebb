"""Finished ``fathom eval`` runs for the page: the run folders (each with its ``summary.json``)
under the folders ``fathom serve --runs`` names, else ``FATHOM_HOME/eval-runs``; a run's
per-strategy table as ``fathom eval`` prints it, and its plots, the PNG files the run wrote.
Runs are found by name in the listing, never by a path a request gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fathom.core.errors import FathomError

PLOTS = ("pareto.png", "latency_cdf.png", "actions.png", "cost.png")  # what `fathom eval` draws
MAX_RUNS = 200


class RunNotFound(FathomError):
    """No run, or no such plot of a run, by that name (the API answers 404)."""


class EvalRuns:
    """The eval runs in ``folders`` (a folder that is itself a run counts as one)."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = list(folders)

    def _runs(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for folder in self.folders:
            if not folder.is_dir():
                continue
            kids = [folder] if (folder / "summary.json").is_file() else sorted(folder.iterdir())
            for run in kids:
                if (run / "summary.json").is_file() and not run.is_symlink():
                    found.setdefault(run.name, run)
        newest = sorted(found.items(), key=lambda kv: -kv[1].stat().st_mtime)
        return dict(newest[:MAX_RUNS])

    def _run(self, name: str) -> Path:
        run = self._runs().get(name)
        if run is None:
            raise RunNotFound(
                f"no eval run named {name!r} — the page lists the runs it has "
                "(`fathom serve --runs DIR` adds a folder of them)"
            )
        return run

    def list(self) -> list[dict[str, Any]]:
        """Each run: its name, when it finished, its judge, questions and strategies."""
        out = []
        for name, run in self._runs().items():
            try:
                summary = _summary(run)
            except FathomError:
                continue  # a run still writing, or a damaged one: not listed
            info = summary.get("run", {})
            out.append(
                {
                    "name": name,
                    "finished": int(run.stat().st_mtime),
                    "judge": info.get("judge"),
                    "n_questions": summary.get("n_questions"),
                    "strategies": list(summary.get("strategies", {})),
                }
            )
        return out

    def get(self, name: str) -> dict[str, Any]:
        """One run: the table ``fathom eval`` prints (title, columns, rows), its settings, and
        the names of the plots it has."""
        from fathom.evaluation.report import table_data

        run = self._run(name)
        summary = _summary(run)
        title, columns, rows = table_data(summary)
        info = summary.get("run", {})
        return {
            "name": name,
            "title": title,
            "columns": list(columns),
            "rows": rows,
            "run": {
                k: info.get(k)
                for k in ("collection", "judge", "baseline", "slo_ms", "seed", "fathom_version")
            },
            "plots": [p for p in PLOTS if (run / p).is_file()],
        }

    def plot(self, name: str, plot: str) -> bytes:
        """The PNG ``plot`` of run ``name`` (one of ``PLOTS``)."""
        if plot not in PLOTS:
            raise FathomError(f"plot {plot!r}: one of {', '.join(PLOTS)}")
        path = self._run(name) / plot
        if not path.is_file():
            raise RunNotFound(f"run {name!r} has no {plot} — `fathom eval report DIR` redraws it")
        return path.read_bytes()


def _summary(run: Path) -> dict[str, Any]:
    try:
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FathomError(f"run {run.name!r}: summary.json unreadable ({exc})") from None
    if not isinstance(summary, dict):
        raise FathomError(f"run {run.name!r}: summary.json is not an object")
    return summary
