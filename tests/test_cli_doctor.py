"""`fathom doctor`: every section, ok and problem cases per backend, the exit code, the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support.fault_server import closed_port
from fathom.tests.support.generate_support import FakeOllama

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "doctor.schema.json").read_text())
SECTIONS = ["home", "embedder", "reranker", "generators", "policies", "collections", "ray", "ocr"]
SECRET = "sk-doctor-secret-42"


@pytest.fixture(autouse=True)
def no_ambient_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port()}")


def doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    res = CliRunner().invoke(cli.main, ["doctor", "--json", *args], env=env)
    data = json.loads(res.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, SCHEMA)
    return res.exit_code, data, res.output


def check(data: dict, name: str) -> dict:
    (found,) = [c for c in data["checks"] if c["name"] == name]
    return found


def test_a_fresh_home_can_answer_and_every_section_is_reported(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code, data, output = doctor()
    assert code == 0 and data["ok"] is True
    assert [s for s in SECTIONS if any(c["section"] == s for c in data["checks"])] == SECTIONS
    assert check(data, "FATHOM_HOME")["status"] == "ok"
    assert (
        check(data, "ollama")["status"] == "warning"
        and "ollama serve" in check(data, "ollama")["fix"]
    )
    answers = check(data, "answers with")
    assert data["auto"]["backend"] == "extractive" and answers["status"] == "ok"
    assert "--generator openai" in data["auto"]["note"]  # a key alone never chooses OpenAI
    assert "an API key is set" in check(data, "openai")["detail"]
    assert SECRET not in output
    # The terminal report has the same lines and the verdict.
    res = CliRunner().invoke(cli.main, ["doctor"])
    assert res.exit_code == 0 and "ask can answer here" in res.stdout
    assert all(f"{s}\n" in res.stdout for s in SECTIONS)


def test_ollama_with_and_without_the_model(monkeypatch) -> None:
    with FakeOllama(models=["llama3.2"]) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.host)
        code, data, _ = doctor()
        assert code == 0 and check(data, "ollama")["status"] == "ok"
        assert "llama3.2" in check(data, "ollama")["detail"]
        assert data["auto"]["backend"] == "ollama"
    with FakeOllama(models=["qwen2.5"]) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.host)
        code, data, _ = doctor()
        ollama = check(data, "ollama")
        assert ollama["status"] == "warning" and ollama["fix"] == "ollama pull llama3.2"
        assert code == 0 and data["auto"]["backend"] == "extractive"


def test_a_configured_server_that_does_not_answer_is_a_problem_and_exit_1(monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_GENERATOR__BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    code, data, _ = doctor()
    assert code == 1 and data["ok"] is False
    assert check(data, "openai")["status"] == "problem"
    assert data["auto"]["backend"] == "openai"
    assert check(data, "answers with")["status"] == "problem"
    res = CliRunner().invoke(cli.main, ["doctor"])
    assert res.exit_code == 1 and "ask cannot answer" in res.stdout


def test_llama_cpp_pythons_openai_server_answers(llama_server: str, monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_GENERATOR__BASE_URL", llama_server)
    code, data, _ = doctor()
    assert code == 0 and check(data, "openai")["status"] == "ok"
    assert data["auto"]["backend"] == "openai"


def test_a_missing_extra_names_the_install_and_a_configured_one_fails(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def without_llama(name, *args, **kwargs):
        return None if name == "llama_cpp" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_llama)
    code, data, _ = doctor()
    llama = check(data, "llamacpp")
    assert llama["status"] == "warning" and "fathom[llamacpp]" in llama["fix"]
    assert code == 0  # auto does not need it
    monkeypatch.setenv("FATHOM_GENERATOR__BACKEND", "llamacpp")
    code, data, _ = doctor()
    assert code == 1 and check(data, "answers with")["status"] == "problem"


def test_ocr_is_reported_with_its_install(monkeypatch) -> None:
    from fathom.ingestion import ocr

    code, data, _ = doctor()
    line = check(data, "OCR")
    if ocr.ocr_problem() is None:
        assert line["status"] == "ok" and "rapidocr" in line["detail"]
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "rapidocr" else real(name, *a, **k),
    )
    code, data, _ = doctor()
    line = check(data, "OCR")
    assert line["status"] == "warning" and line["fix"] == "pip install 'fathom[ocr]'"
    assert "scanned PDF pages and images" in line["detail"]
    assert code == 0  # asking does not need OCR
    monkeypatch.setenv("FATHOM_INGEST__OCR", "never")
    _, data, _ = doctor()
    assert check(data, "OCR")["status"] == "ok" and "never" in check(data, "OCR")["detail"]


def test_a_model_that_is_not_a_gguf_is_a_problem(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model at all")
    monkeypatch.setenv("FATHOM_GENERATOR__MODEL", str(fake))
    code, data, _ = doctor()
    llama = check(data, "llamacpp")
    assert llama["status"] == "problem" and "not a GGUF" in llama["detail"]
    assert code == 1  # auto goes to llama.cpp for a .gguf model, which cannot answer


def test_a_home_that_cannot_be_written_is_a_problem(tmp_path: Path, monkeypatch) -> None:
    """A home under a regular file can be neither made nor written (a read-only home is the
    same check; root may write anywhere, so the test uses what root cannot do either)."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("FATHOM_HOME", str(blocker / "home"))
    code, data, _ = doctor()
    home = check(data, "FATHOM_HOME")
    assert home["status"] == "problem" and "FATHOM_HOME" in home["fix"]
    assert code == 1


class HangingServer:
    """A loopback server that accepts connections and never answers (an Ollama that hangs)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.held: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.held.append(conn)  # read nothing, answer nothing
            except OSError:
                continue

    def __enter__(self) -> str:
        self._thread.start()
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_an_ollama_that_hangs_is_reported_and_auto_answers_without_it(monkeypatch) -> None:
    import threading

    with HangingServer() as host:
        monkeypatch.setenv("OLLAMA_HOST", host)
        result: dict = {}
        names = ("code", "data", "out")
        run = threading.Thread(target=lambda: result.update(zip(names, doctor(), strict=True)))
        run.start()
        run.join(timeout=60)  # a hang detector, not a speed check: the probes time out
        assert not run.is_alive(), "doctor hung on an Ollama that never answers"
        ollama = check(result["data"], "ollama")
        assert ollama["status"] == "warning" and "not reachable" in ollama["detail"]
        assert "timed out" in ollama["detail"]
        assert result["data"]["auto"]["backend"] == "extractive" and result["code"] == 0
