"""``bench.common.command_line``: a results file's command says how to run it again, and names
no folder of the machine that ran it."""

from __future__ import annotations

from fathom.bench.common import REPO, command_line


def test_machine_folders_are_stood_in_for_or_left_out() -> None:
    argv = [
        "--sets", "squad_v1.1_dev:500",
        "--reuse",
        "--previous", "/srv/checkouts/old",
        "--work", "/tmp/runs/ext",
        "--data=/srv/data",
        "--home=/srv/home",
        "--out", "docs/results/reader/run",
    ]  # fmt: skip
    assert command_line(argv, str(REPO / "bench" / "extractive.py")) == (
        "python bench/extractive.py --sets squad_v1.1_dev:500 --previous CHECKOUT --home DIR "
        "--out docs/results/reader/run"
    )


def test_other_arguments_are_kept_and_quoted() -> None:
    assert command_line(["--sets", "", "--limit", "400"], str(REPO / "bench" / "reader.py")) == (
        "python bench/reader.py --sets '' --limit 400"
    )
