"""Every bad input: one clear line naming the file, recorded as failed, the batch goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.index.collection import Collection

GOOD = "Solar panels convert sunlight into electricity using photovoltaic cells."


def _ingest_json(folder: Path, *extra: str):
    result = CliRunner().invoke(
        cli.main, ["ingest", str(folder), "-c", "bad", "--embedder", "hashing:64", "--json", *extra]
    )
    return result


def _assert_one_failure(folder: Path, bad: Path, needle: str) -> dict:
    result = _ingest_json(folder)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    by_name = {Path(f["path"]).name: f for f in report["files"]}
    assert by_name["good.txt"]["status"] == "ok"
    failed = by_name[bad.name]
    assert failed["status"] == "failed"
    assert str(bad) in failed["reason"] and needle in failed["reason"].lower(), failed["reason"]
    assert "\n" not in failed["reason"]
    # Recorded in the manifest; the collection stays valid and searchable.
    from fathom.core.config import load_config

    coll = Collection.open(load_config(), "bad")
    entries = {Path(d.path).name: d for d in coll.manifest.documents}
    assert entries[bad.name].status == "failed" and entries[bad.name].error
    assert coll.check() == []
    assert coll.manifest.counts()["documents"] == 1
    strict = _ingest_json(folder, "--strict", "--rebuild")
    assert strict.exit_code == 1
    return failed


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.txt").write_text(GOOD)
    return d


def test_empty_file(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_empty_file(folder / "empty.txt"), "empty")


def test_empty_pdf_file(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_empty_file(folder / "empty.pdf"), "empty")


def test_truncated_pdf(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_truncated_pdf(folder / "cut.pdf"), "pdf")


def test_corrupt_pdf_garbage(folder: Path) -> None:
    bad = folder / "garbage.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    _assert_one_failure(folder, bad, "pdf")


def test_encrypted_pdf(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_encrypted_pdf(folder / "locked.pdf"), "password")


def test_image_only_pdf(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_image_only_pdf(folder / "scan.pdf"), "no extractable")


def test_binary_named_txt(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_binary_text(folder / "blob.txt"), "binary")


def test_invalid_utf8(folder: Path) -> None:
    _assert_one_failure(folder, docgen.make_invalid_text(folder / "bad.txt"), "decode")


def test_docx_not_a_zip(folder: Path) -> None:
    bad = folder / "fake.docx"
    bad.write_bytes(b"this is not a zip archive at all")
    _assert_one_failure(folder, bad, "docx")


def test_unsupported_type_is_reported_not_fatal(folder: Path) -> None:
    (folder / "image.gif").write_bytes(b"GIF89a")
    (folder / ".hidden.txt").write_text("secret")
    result = _ingest_json(folder, "--strict")
    assert result.exit_code == 0, result.output  # skipped is not failed
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert (
        files["image.gif"]["status"] == "skipped" and "unsupported" in files["image.gif"]["reason"]
    )
    assert files[".hidden.txt"]["status"] == "skipped"


def test_symlink_loop(folder: Path) -> None:
    os.symlink(folder / "loop_b.txt", folder / "loop_a.txt")
    os.symlink(folder / "loop_a.txt", folder / "loop_b.txt")
    result = _ingest_json(folder)
    assert result.exit_code == 0, result.output
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert files["loop_a.txt"]["status"] == "failed"
    assert (
        "symbolic link" in files["loop_a.txt"]["reason"].lower()
        or "loop" in files["loop_a.txt"]["reason"].lower()
    )
    from fathom.core.config import load_config

    assert Collection.open(load_config(), "bad").check() == []


@pytest.mark.skipif(not hasattr(os, "setuid"), reason="POSIX only")
def test_unreadable_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run the ingest as an unprivileged user (root reads everything) on a mode-000 file."""
    # pytest's base temp dir is private to root; this test needs one the other user can enter.
    tmp_path = Path(tempfile.mkdtemp(prefix="fathom-unreadable-"))
    tmp_path.chmod(0o777)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    secret = folder / "secret.txt"
    secret.write_text("you cannot read me")
    secret.chmod(0o000)
    home = tmp_path / "home"
    for p in (tmp_path, folder, folder / "good.txt"):
        p.chmod(0o777 if p.is_dir() else 0o644)
    # Warm every lazy import as root first (the interpreter lives under /root, which the
    # unprivileged user cannot read), then drop privileges and ingest for real.
    code = (
        "import os, sys, encodings.cp1252, encodings.utf_16; from fathom import cli; "
        "from click.testing import CliRunner; "
        "os.environ['FATHOM_HOME'] = sys.argv[3]; "
        "CliRunner().invoke(cli.main, ['ingest', sys.argv[2], '-c', 'w', '--embedder', "
        "'hashing:64']); "
        "os.environ['FATHOM_HOME'] = sys.argv[4]; "
        "os.setgid(65534) if os.getuid() == 0 else None; "
        "os.setuid(65534) if os.getuid() == 0 else None; "
        "sys.argv = ['fathom', 'ingest', sys.argv[1], '-c', 'u', '--embedder', 'hashing:64', "
        "'--json']; cli.main()"
    )
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "w.txt").write_text(GOOD)
    repo = Path(cli.__file__).parent
    home.mkdir()
    home.chmod(0o777)
    env = {**os.environ, "FATHOM_HOME": str(home), "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(warm), str(tmp_path / "h0"), str(home)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    files = {Path(f["path"]).name: f for f in json.loads(proc.stdout)["files"]}
    assert files["good.txt"]["status"] == "ok"
    assert files["secret.txt"]["status"] == "failed"
    assert "permission denied" in files["secret.txt"]["reason"].lower()
    assert str(secret) in files["secret.txt"]["reason"]
