"""Every published number is backed by a results file that says how it was made.

* Every ``docs/results/**/*.json`` is JSON and records the command that made it (``command``,
  or ``commands`` for a file made by several runs) and the machine (``machine``: the CPU model,
  the cores, the memory), at its top or, for a ``fathom eval`` folder's ``summary.json``, in the
  copy of ``run.json`` it carries (``run``). A CPU model that was not recorded when the file was
  made is ``null``, and the file is in ``CPU_UNRECORDED`` with the reason.
* Each number in the README's "Measured" table appears in a results file the row links to:
  the row's own links into ``docs/results/`` when it has any, else the results-file links in
  each docs section the row links to (``docs/page.md#anchor``; a whole page links too much).
  A number written with ``d`` decimals is found when a file holds a number (in its text, or
  a JSON value) that rounds to it at ``d`` decimals; a percentage also matches a fraction
  (``40 %`` ← ``0.398``) and seconds milliseconds (``13 s`` ← ``12633``); the bounds of an
  interval after a percentage are percentages too (``40 % [27, 49]``). Thousands separators,
  typographic minus signs and a leading ``+`` are read as Python would.
  ``UNBACKED`` lists the rows no committed results file backs yet, with the command to run.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"

# Files whose CPU model nobody recorded when they were made (the cores and memory are known).
CPU_UNRECORDED = {
    "squad-extractive/": "a 2-core, 24 GiB machine; re-running the eval takes hours on 2 cores",
    "portfolios/portfolio-": "built on a 2-core, 24 GiB machine (test-coverage.txt)",
}

# README rows (by the start of their "what" cell) whose numbers no committed results file backs,
# with the command that would make one. Both embed about 10,000 chunks, which takes longer than a
# quarter of an hour on 2 shared cores; the docs page gives their numbers and commands.
UNBACKED: dict[str, str] = {}

NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+(?:,\d{3})*(?:\.\d+)?(?: ?%| s\b)?")
TEXT = (".json", ".md", ".txt")
PERCENT_INTERVAL = re.compile(r"% \[([^\]]+)\]")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def results_files() -> list[Path]:
    return sorted(RESULTS.rglob("*.json"))


@pytest.mark.parametrize("path", results_files(), ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_a_results_file_is_json_with_its_command_and_machine(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    if path.name == "summary.json" and "command" not in data:
        data = data.get("run") or {}
    command = data.get("command") or data.get("commands")
    assert command, "no command"
    absolute = [w for w in re.split(r"[\s=\"',]+", json.dumps(command)) if w.startswith("/")]
    assert not absolute, f"the command names this machine's folders: {absolute[:3]}"
    machine = data.get("machine")
    assert isinstance(machine, dict), "no machine"
    assert isinstance(machine.get("cpus"), int) and machine["cpus"] > 0
    assert machine.get("memory_gb"), "no memory"
    assert "cpu" in machine, "no CPU model"
    rel = path.relative_to(RESULTS).as_posix()
    unrecorded = any(rel.startswith(prefix) for prefix in CPU_UNRECORDED)
    assert bool(machine["cpu"]) != unrecorded, "CPU model present iff not in CPU_UNRECORDED"


def test_every_unrecorded_cpu_entry_names_a_file() -> None:
    rels = [p.relative_to(RESULTS).as_posix() for p in results_files()]
    assert all(any(r.startswith(prefix) for r in rels) for prefix in CPU_UNRECORDED)


# --- the README's Measured table ---------------------------------------------------------------


def measured_rows(readme: str) -> list[tuple[str, str]]:
    """``(what, result)`` cells of the README's "Measured" table."""
    section = readme.split("\n## Measured\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[2:]]
    return [(c[0], c[1]) for c in cells]


def _section(text: str, anchor: str) -> str:
    """The part of a Markdown page under the heading whose GitHub anchor is ``anchor``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+) (.*)", line)
        if m and _anchor(m.group(2)) == anchor:
            level = len(m.group(1))
            end = next(
                (j for j in range(i + 1, len(lines))
                 if re.match(rf"#{{1,{level}}} ", lines[j])),
                len(lines),
            )  # fmt: skip
            return "\n".join(lines[i:end])
    raise AssertionError(f"no heading with anchor #{anchor}")


def _anchor(heading: str) -> str:
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def backing_files(row: str, root: Path) -> list[Path]:
    """The results files a README row links to: its own links into ``docs/results/`` when it
    has any, else the results-file links of the docs sections (``page.md#anchor``) it links
    to."""
    results = root / "docs" / "results"
    direct: list[Path] = []
    through: list[Path] = []
    for target in LINK.findall(row):
        path, _, anchor = target.partition("#")
        page = (root / path).resolve()
        if page.is_relative_to(results):
            direct += [page] if page.suffix in TEXT else []
            continue
        if not anchor:  # a whole page links too much to back a number
            continue
        for link in LINK.findall(_section(page.read_text(encoding="utf-8"), anchor)):
            linked = (page.parent / link.partition("#")[0]).resolve()
            if linked.is_relative_to(results) and linked.is_file() and linked.suffix in TEXT:
                through.append(linked)
    return sorted(set(direct or through))


def _value(token: str) -> tuple[float, int, str]:
    """A written number as ``(value, decimals, unit)``; the unit is ``%``, ``s`` or empty."""
    unit = token[-1] if token[-1] in "%s" else ""
    digits = token.rstrip("%s ").replace("−", "-").replace(",", "").lstrip("+")
    decimals = len(digits.partition(".")[2])
    return float(digits), decimals, unit


def _numbers_in(path: Path) -> set[float]:
    """Every number a results file holds: in its text, and its JSON values."""
    text = path.read_text(encoding="utf-8", errors="replace")
    values = {_value(t)[0] for t in NUMBER.findall(text)}
    if path.suffix == ".json":
        stack = [json.loads(text)]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                values.add(float(item))
    return values


def _matches(token: str, held: set[float]) -> bool:
    value, decimals, unit = _value(token)
    scales = {"%": (1.0, 100.0), "s": (1.0, 0.001)}.get(unit, (1.0,))
    tol = 0.5 * 10**-decimals + 1e-9
    return any(
        abs(v * s - value) <= tol or abs(-v * s - value) <= tol for v in held for s in scales
    )


def _percent_bounds(m: re.Match) -> str:
    """``40 % [27, 49]`` → ``40 % [27 %, 49 %]``: an interval's bounds carry its unit."""
    return "% [" + ", ".join(f"{b.strip()} %" for b in m.group(1).split(",")) + "]"


def unbacked_numbers(readme: Path, root: Path) -> dict[str, list[str]]:
    """For each Measured row not in ``UNBACKED``, the numbers of its result cell that no
    results file it links to holds."""
    out: dict[str, list[str]] = {}
    for what, result in measured_rows(readme.read_text(encoding="utf-8")):
        if any(what.startswith(key) for key in UNBACKED):
            continue
        files = backing_files(what + result, root)
        held = set().union(*(_numbers_in(p) for p in files)) if files else set()
        tokens = NUMBER.findall(PERCENT_INTERVAL.sub(_percent_bounds, result))
        missing = [t.strip() for t in tokens if not _matches(t, held)]
        if missing or not files:
            out[what] = missing or ["(links to no results file)"]
    return out


def test_each_measured_number_is_in_a_results_file_its_row_links_to() -> None:
    assert unbacked_numbers(REPO / "README.md", REPO) == {}


def test_the_unbacked_rows_are_in_the_table() -> None:
    whats = [what for what, _ in measured_rows((REPO / "README.md").read_text(encoding="utf-8"))]
    assert len(whats) >= 8
    assert all(any(w.startswith(key) for w in whats) for key in UNBACKED)


def test_a_number_removed_from_its_results_file_is_reported(tmp_path: Path) -> None:
    """Drop the portfolio row's oracle coverage from the file that backs it: the check fails."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    assert unbacked_numbers(tmp_path / "README.md", tmp_path) == {}
    coverage = tmp_path / "docs" / "results" / "portfolios" / "test-coverage.txt"
    text = coverage.read_text(encoding="utf-8")
    assert "0.962 [0.942, 0.980]" in text
    coverage.write_text(text.replace("0.962", "0.9xx"), "utf-8")
    failed = unbacked_numbers(tmp_path / "README.md", tmp_path)
    assert [w for w in failed if w.startswith("retriever portfolio")]
    assert any("0.962" in n for ns in failed.values() for n in ns)
