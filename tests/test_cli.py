"""The command line: exit codes, stderr vs stdout, --json, and a light --help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli, options

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "faiss", "sentence_transformers", "fitz", "pymupdf", "transformers", "llama_cpp")
HEAVY += ("rapidocr", "cv2", "onnxruntime", "PIL", "pptx", "ebooklib", "trafilatura", "lxml")


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys, json; sys.argv = ['fathom', '--help']\n"
        "from fathom import cli\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert "click" in modules
    assert not {m for m in modules if m.split(".")[0] in HEAVY}


def test_python_cli_and_console_script_are_the_same_app(tmp_path: Path) -> None:
    """`python cli.py` from the checkout runs the checkout's package as `fathom`, whatever the
    working directory; the console script points at the same function."""
    import tomllib

    import fathom

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fathom": "fathom.cli:main"}
    code = (
        "import runpy, sys; sys.argv = ['cli.py', '--version']; "
        f"runpy.run_path({str(REPO / 'cli.py')!r}, run_name='__main__')"
    )
    for cmd in ([sys.executable, str(REPO / "cli.py"), "--version"], [sys.executable, "-c", code]):
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"fathom, version {fathom.__version__}"
    where = subprocess.run(
        [sys.executable, str(REPO / "cli.py"), "config", "show", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    shown = json.loads(where.stdout)
    assert shown["generator"]["backend"] == "auto" and shown["home"]
    probe = (
        "import sys, runpy; sys.argv = ['cli.py', '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(REPO / 'cli.py')!r}, run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "import fathom; print(fathom.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip().splitlines()[-1]) == REPO / "__init__.py"


def test_python_m_fathom_is_the_same_app() -> None:
    import fathom

    proc = subprocess.run(
        [sys.executable, "-m", "fathom", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"fathom, version {fathom.__version__}"


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tea.md").write_text(
        "# Tea\n\nGreen tea is made from unoxidised leaves.\n\n# Coffee\n\n"
        "Espresso is brewed by forcing hot water through finely ground coffee."
    )
    (folder / "notes.txt").write_text("Meeting notes: the budget review moved to Thursday.")
    return folder


def test_ingest_search_show_list_remove_json(tmp_path: Path, minilm) -> None:
    runner = CliRunner()
    folder = _corpus(tmp_path)
    res = runner.invoke(cli.main, ["ingest", str(folder), "-c", "drinks", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["counts"]["ok"] == 2 and report["committed"] is True

    res = runner.invoke(
        cli.main, ["search", "drinks", "espresso brewed with hot water", "-k", "2", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mode"] == "hybrid" and len(out["hits"]) == 2
    top = out["hits"][0]
    assert "Espresso" in top["text"] and top["section"] == "Coffee" and top["pages"] == "1"
    assert set(top) >= {"chunk_id", "doc_id", "score", "ranks", "scores", "title"}

    res = runner.invoke(cli.main, ["search", "drinks", "budget", "--mode", "bm25", "--json"])
    assert json.loads(res.stdout)["hits"][0]["title"] == "notes"

    res = runner.invoke(cli.main, ["collections", "show", "drinks", "--json"])
    manifest = json.loads(res.stdout)
    assert manifest["counts"]["documents"] == 2 and manifest["embedder_dim"] == 384

    res = runner.invoke(cli.main, ["collections", "list", "--json"])
    assert [c["name"] for c in json.loads(res.stdout)] == ["drinks"]

    res = runner.invoke(cli.main, ["ingest", str(folder), "-c", "drinks", "--json"])
    again = json.loads(res.stdout)
    assert again["counts"]["unchanged"] == 2 and again["embedded_chunks"] == 0

    res = runner.invoke(cli.main, ["collections", "remove", "drinks"])
    assert res.exit_code == 0
    res = runner.invoke(cli.main, ["collections", "list", "--json"])
    assert json.loads(res.stdout) == []


def test_expected_failure_is_one_line_exit_1(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli.main, ["search", "nope", "anything"])
    assert res.exit_code == 1
    assert "no collection named 'nope'" in res.stderr and "fathom ingest" in res.stderr
    assert "Traceback" not in res.output and res.stdout == ""


def test_bad_usage_exit_2() -> None:
    res = CliRunner().invoke(cli.main, ["search", "only-one-arg"])
    assert res.exit_code == 2
    res = CliRunner().invoke(cli.main, ["search", "c", "q", "--mode", "fuzzy"])
    assert res.exit_code == 2


def test_config_error_names_source(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_RETRIEVAL__K", "lots")
    res = CliRunner().invoke(cli.main, ["config", "show"])
    assert res.exit_code == 1 and "FATHOM_RETRIEVAL__K" in res.stderr


def test_config_show_json(tmp_path: Path, fathom_home: Path) -> None:
    (tmp_path / "fathom.toml").write_text("[retrieval]\nk = 4\n")
    res = CliRunner().invoke(cli.main, ["config", "show", "--json"])
    data = json.loads(res.stdout)
    assert data["retrieval"]["k"] == 4 and data["home"] == str(fathom_home)


def test_auto_collection_name_is_keyed_by_content(tmp_path: Path) -> None:
    from fathom.index.collection import collection_for

    folder = _corpus(tmp_path)
    name = collection_for([folder])
    assert name.startswith("auto-") and name == collection_for([folder])
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in folder.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert collection_for([copy]) == name
    (copy / "notes.txt").write_text("changed")
    assert collection_for([copy]) != name


def test_a_bad_budget_list_is_a_usage_error(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"qid": "a", "question": "x?"}\n')
    for budgets, problem in (("0,a", "'a' in '0,a' is not an integer"), ("0,-1", "below 0"),
                             (",", "at least one")):  # fmt: skip
        res = CliRunner().invoke(
            cli.main,
            ["policy", "sweep", "--docs", str(tmp_path), "--questions", str(questions),
             "--budgets", budgets, "--out", str(tmp_path / "s")],
        )  # fmt: skip
        assert res.exit_code == 2, (budgets, res.output)
        assert "--budgets" in res.stderr and problem in res.stderr
        assert "Traceback" not in res.output and not (tmp_path / "s").exists()
    assert options.IntList(low=0).convert(" 0, 1,3 ", None, None) == [0, 1, 3]


def test_policy_show_prints_a_reinforce_policy(tmp_path: Path) -> None:
    import numpy as np
    from fathom.router.features import FEATURE_NAMES
    from fathom.router.reinforce import ReinforcePolicy

    rng = np.random.default_rng(0)
    weights = {f"{n}.{p}": rng.normal(size=(2, 2)).astype(np.float32)
               for n in ("proj", "h1", "h2", "out") for p in ("w", "b")}  # fmt: skip
    n = len(FEATURE_NAMES)
    meta = {"judge": "recall", "embedder": "minilm-test", "lambda": 0.3, "n_train": 40,
            "training_data": {"questions": "q.jsonl", "n_questions": 40},
            "curves": [{"epoch": 0, "reward": 0.1, "action_shares": [0.5, 0.5]},
                       {"epoch": 1, "reward": 0.4, "action_shares": [0.2, 0.8]}]}  # fmt: skip
    ReinforcePolicy((0, 4), FEATURE_NAMES, weights, np.zeros(n), np.ones(n), meta).save(
        tmp_path / "rl"
    )
    for target in ("rl.safetensors", "rl"):
        res = CliRunner().invoke(cli.main, ["policy", "show", str(tmp_path / target), "--json"])
        assert res.exit_code == 0, res.output
        shown = json.loads(res.stdout)
        assert shown["kind"] == "reinforce" and shown["format"] == 1
        assert shown["budgets"] == [0, 4] and shown["feature_names"] == list(FEATURE_NAMES)
        assert shown["judge"] == "recall" and shown["lambda"] == 0.3
        assert shown["embedder"] == "minilm-test"
        assert shown["training_data"]["n_questions"] == 40 and len(shown["curves"]) == 2
    res = CliRunner().invoke(cli.main, ["policy", "show", str(tmp_path / "rl.safetensors")])
    assert res.exit_code == 0, res.output
    assert 'kind: "reinforce"' in res.stdout and "lambda: 0.3" in res.stdout
    assert 'embedder: "minilm-test"' in res.stdout and "2 epochs" in res.stdout
    (tmp_path / "rl.json").unlink()
    res = CliRunner().invoke(cli.main, ["policy", "show", str(tmp_path / "rl.safetensors")])
    assert res.exit_code == 1 and "no reinforce policy here" in res.stderr


def test_policy_show_after_policy_train_reinforce(tmp_path: Path, monkeypatch) -> None:
    """The reviewer's path: `policy train --kind reinforce --out P/rl`, then `policy show`."""
    pytest.importorskip("torch")
    from fathom.bench.support.docgen import make_qa_set

    monkeypatch.setenv("FATHOM_RERANK__ENABLED", "false")
    monkeypatch.setenv("FATHOM_EMBEDDER__NAME", "hashing:64")  # no model to load
    docs, questions = make_qa_set(tmp_path / "qa", n_docs=6)
    runner = CliRunner()
    res = runner.invoke(
        cli.main,
        ["policy", "sweep", "--docs", str(docs), "--questions", str(questions), "--generator",
         "extractive", "--budgets", "0,2", "--split", "all", "--out", str(tmp_path / "sw")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        cli.main,
        ["policy", "train", "--kind", "reinforce", "--sweep", str(tmp_path / "sw"), "--epochs",
         "2", "--out", str(tmp_path / "P" / "rl")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        cli.main, ["policy", "show", str(tmp_path / "P" / "rl.safetensors"), "--json"]
    )
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    assert shown["kind"] == "reinforce" and shown["budgets"] == [0, 2]
    assert shown["embedder"] == "hashing:64" and shown["lambda"] == 0.1
    assert shown["training_data"]["n_questions"] == 18 and shown["n_train"] == 18


def test_ask_into_a_pipe_prints_the_final_answer_once_not_a_stream(tmp_path: Path, minilm) -> None:
    """Streaming is for a terminal: redirected, the output is the answer panel (with the
    final answer only), not the drafts of every round as they were generated."""
    from fathom.bench.support import docgen

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    res = CliRunner().invoke(
        cli.main,
        ["ask", str(pdf), "What are documents split into?", "--generator", "extractive"],
        env={"FATHOM_HOME": str(tmp_path / "home"), "COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "╭─" in res.stdout and " Answer" in res.stdout.split("╭─", 1)[1].splitlines()[0]
    assert res.stdout.count("chunks that keep their page numbers") == 1


def test_collections_list_warns_about_a_collection_it_cannot_read(tmp_path: Path, minilm) -> None:
    runner = CliRunner()
    env = {"FATHOM_HOME": str(tmp_path / "home")}
    folder = _corpus(tmp_path)
    for name in ("good", "broken"):
        res = runner.invoke(cli.main, ["ingest", str(folder), "-c", name, "--json"], env=env)
        assert res.exit_code == 0, res.output
    (tmp_path / "home" / "collections" / "broken" / "manifest.json").write_text("{not json")
    res = runner.invoke(cli.main, ["collections", "list", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert [c["name"] for c in json.loads(res.stdout)] == ["good"]
    assert "'broken' cannot be read" in res.stderr and "not valid JSON" in res.stderr


def test_flags_that_mean_nothing_alone_are_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"FATHOM_HOME": str(tmp_path / "home")}
    res = runner.invoke(cli.main, ["ask", "somewhere", "q?", "--portfolio-mode", "select"], env=env)
    assert res.exit_code == 2 and "need a portfolio" in res.stderr
    res = runner.invoke(
        cli.main,
        ["eval", "--docs", "d", "--collection", "c", "--questions", "q.jsonl"],
        env=env,
    )
    assert res.exit_code == 2 and "not both" in res.stderr
