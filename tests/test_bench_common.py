"""``bench.common.command_line``: a results file's command says how to run it again, and names
no folder of the machine that ran it."""

from __future__ import annotations

from fathom.bench.common import REPO, command_line


def test_machine_folders_are_stood_in_for_or_left_out() -> None:
    argv = [
        "--sets", "squad_v1.1_dev:500",
        "--reuse",
        "--previous", "/path/to/old-checkout",
        "--work", "/path/to/runs",
        "--data=/path/to/data",
        "--home=/path/to/home",
        "--reader", str(REPO / "index" / "reader"),
        "--out", "docs/results/reader/run",
    ]  # fmt: skip
    assert command_line(argv, str(REPO / "bench" / "extractive.py")) == (
        "python bench/extractive.py --sets squad_v1.1_dev:500 --previous CHECKOUT --home DIR "
        "--reader index/reader --out docs/results/reader/run"
    )
    assert command_line(argv, str(REPO / "bench" / "extractive.py"), leave_out=("--out",)) == (
        "python bench/extractive.py --sets squad_v1.1_dev:500 --previous CHECKOUT --home DIR "
        "--reader index/reader"
    )


def test_other_arguments_are_kept_and_quoted() -> None:
    assert command_line(["--sets", "", "--limit", "400"], str(REPO / "bench" / "reader.py")) == (
        "python bench/reader.py --sets '' --limit 400"
    )


def test_the_mcp_bench_names_no_data_home_or_output_folder_of_this_machine() -> None:
    from fathom.bench import mcp

    argv = ["--data", "/srv/qa", "--queries", "200", "--home", "/srv/h", "--out", "/srv/out"]
    line = mcp.command(argv)
    assert line == "FATHOM_DATA=… python bench/mcp.py --queries 200 --home DIR"
    assert "/srv" not in line
