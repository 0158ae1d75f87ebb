"""Hostile files: seeded fuzzing, bombs, huge and odd files — no crash, one clear line per file.

``FATHOM_FUZZ_N`` raises the number of fuzzed variants (default 60 here; the bench runs more).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli, ingestion
from fathom.bench.support import docgen
from fathom.bench.support.reliability_support import run_cli
from fathom.core.config import load_config
from fathom.core.errors import ParseError
from fathom.index.collection import Collection
from fathom.ingestion.word import DocxLoader

FUZZ_N = int(os.environ.get("FATHOM_FUZZ_N", "60"))
GOOD = "Solar panels convert sunlight into electricity using photovoltaic cells."


def _ingest(folder: Path, *extra: str, name: str = "hostile"):
    return CliRunner().invoke(
        cli.main,
        ["ingest", str(folder), "-c", name, "--embedder", "hashing:64", "--json", *extra],
    )


def _files(result) -> dict[str, dict]:
    assert result.exit_code == 0, result.output
    return {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}


def _assert_clear(exc: ParseError, path: Path) -> None:
    """One line that names the file."""
    message = str(exc)
    assert message.startswith(str(path)), message
    assert "\n" not in message and len(message) < 500, message


def _bases(folder: Path) -> dict[str, bytes]:
    return {
        "sample.pdf": docgen.make_sample_pdf(folder / "base-sample.pdf", toc=True).read_bytes(),
        "many.pdf": docgen.make_many_page_pdf(folder / "base-many.pdf", pages=30).read_bytes(),
        "doc.docx": docgen.make_docx(folder / "base.docx").read_bytes(),
        "note.md": docgen.MARKDOWN_TEXT.encode(),
    }


def test_fuzzed_files_never_crash_the_loaders(tmp_path: Path) -> None:
    """Truncated, byte-flipped and zeroed variants: a Document or one clear ParseError."""
    bases = _bases(tmp_path)
    outcomes = {"loaded": 0, "refused": 0}
    for seed in range(FUZZ_N):
        name = list(bases)[seed % len(bases)]
        data, how = docgen.mutate(bases[name], seed)
        path = tmp_path / f"v{seed:04d}-{name}"
        path.write_bytes(data)
        t0 = time.perf_counter()
        try:
            doc = ingestion.load_document(path, ingestion.LoadOptions(timeout_s=30))
        except ParseError as exc:
            _assert_clear(exc, path)
            outcomes["refused"] += 1
        except Exception as exc:  # the failure message names the variant to rebuild
            pytest.fail(f"seed {seed} ({name}, {how}): {type(exc).__name__}: {exc}")
        else:
            assert doc.text.strip()
            outcomes["loaded"] += 1
        assert time.perf_counter() - t0 < 30
    # Both outcomes occur: the fuzzing reaches the parsers, not just the header check.
    assert outcomes["loaded"] and outcomes["refused"], outcomes


def test_fuzzed_batch_keeps_the_collection_consistent(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    bases = _bases(tmp_path)
    for seed in range(min(FUZZ_N, 24)):
        name = list(bases)[seed % len(bases)]
        (folder / f"v{seed:04d}-{name}").write_bytes(docgen.mutate(bases[name], seed)[0])
    files = _files(_ingest(folder))
    assert files["good.txt"]["status"] == "ok"
    for f in files.values():
        assert f["status"] in ("ok", "failed", "skipped"), f
        if f["status"] == "failed":
            assert f["reason"].startswith(f["path"]) and "\n" not in f["reason"], f
            assert "unexpected parser error" not in f["reason"], f
    coll = Collection.open(load_config(), "hostile")
    assert coll.check() == []
    ok = sum(1 for f in files.values() if f["status"] == "ok")
    assert coll.manifest.counts()["documents"] == ok


def test_pdfplumber_close_on_a_damaged_page_tree_does_not_lose_the_file(tmp_path: Path) -> None:
    """Regression (found by fuzzing, seed 37): a MediaBox with a name in it made pdfplumber's
    close() raise, which escaped the loader as an unexpected error."""
    base = docgen.make_many_page_pdf(tmp_path / "m.pdf", pages=30).read_bytes()
    path = tmp_path / "badbox.pdf"
    path.write_bytes(docgen.mutate(base, 37)[0])
    try:
        doc = ingestion.load_document(path)
    except ParseError as exc:
        _assert_clear(exc, path)
    else:
        assert doc.text


def test_zip_bomb_named_docx_is_refused_without_unpacking(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    bomb = docgen.make_zip_bomb_docx(folder / "bomb.docx", parts=3, part_mb=20)
    assert bomb.stat().st_size < 200_000
    m = run_cli(
        ["ingest", str(folder), "-c", "b", "--embedder", "hashing:64", "--json"],
        tmp_path / "home",
        timeout=120,
    )
    assert m.returncode == 0, m.stderr
    files = {Path(f["path"]).name: f for f in json.loads(m.stdout)["files"]}
    assert files["bomb.docx"]["status"] == "failed"
    assert "zip bomb" in files["bomb.docx"]["reason"]
    assert m.peak_mb < 250, m.peak_mb  # 60 MiB unpacked would have been held several times


def test_docx_unpacked_total_is_capped(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "ok.docx")
    with pytest.raises(ParseError, match=r"unpacks to .* \(over the .* limit") as err:
        DocxLoader(max_unpacked_bytes=10_000).load(path)
    _assert_clear(err.value, path)
    assert DocxLoader().load(path).text  # the default limit lets real documents through


@pytest.mark.parametrize(
    "part", ["word/document.xml", "word/styles.xml", "[Content_Types].xml", "_rels/.rels"]
)
def test_docx_with_a_missing_part(tmp_path: Path, part: str) -> None:
    path = docgen.make_docx_without(tmp_path / "missing.docx", part)
    with pytest.raises(ParseError, match="cannot be opened") as err:
        ingestion.load_document(path)
    _assert_clear(err.value, path)


def test_docx_that_is_a_damaged_zip(tmp_path: Path) -> None:
    data = docgen.make_docx(tmp_path / "d.docx").read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match=r"not a valid zip|cannot be opened") as err:
        ingestion.load_document(path)
    _assert_clear(err.value, path)
    # Not a zip at all, and a zip that is not a DOCX.
    for name, payload in (("text.docx", b"PK but not really"), ("other.docx", _plain_zip())):
        other = tmp_path / name
        other.write_bytes(payload)
        with pytest.raises(ParseError) as err:
            ingestion.load_document(other)
        _assert_clear(err.value, other)


def _plain_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("readme.txt", "hello")
    return buf.getvalue()


def test_zero_page_pdf(tmp_path: Path) -> None:
    path = docgen.make_zero_page_pdf(tmp_path / "zero.pdf")
    with pytest.raises(ParseError, match="zero pages") as err:
        ingestion.load_document(path)
    _assert_clear(err.value, path)


def test_five_thousand_page_pdf_loads_with_every_page(tmp_path: Path) -> None:
    path = docgen.make_many_page_pdf(tmp_path / "big.pdf", pages=5000)
    doc = ingestion.load_document(path, ingestion.LoadOptions(timeout_s=120))
    assert len(doc.pages) == 5000
    last = doc.pages[-1]
    assert doc.text[last.start : last.end].startswith("page5000 ")


def test_time_limit_holds_when_a_library_swallows_the_alarm() -> None:
    """PyMuPDF runs Python callbacks from C and drops their exceptions: an alarm landing in one
    is lost and the parse goes on to the end. The file must still fail, late as it is."""
    from fathom.core.errors import ParseError
    from fathom.ingestion import time_limit

    with pytest.raises(ParseError, match="file_timeout_s"), time_limit("slow.pdf", 0.05):
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            # What such a callback wrapper does with any exception raised inside it.
            with contextlib.suppress(BaseException):
                time.sleep(0.01)
    with time_limit("quick.pdf", 5.0):  # within the limit: nothing happens
        time.sleep(0.01)


def test_per_file_time_limit(tmp_path: Path) -> None:
    """A file that takes too long is refused with the setting to raise; the batch goes on."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    # 30,000 pages take seconds to parse on any machine here; 5,000 sometimes fit in 0.2 s.
    docgen.make_many_page_pdf(folder / "slow.pdf", pages=30000)
    t0 = time.perf_counter()
    files = _files(
        CliRunner().invoke(
            cli.main,
            ["ingest", str(folder), "-c", "t", "--embedder", "hashing:64", "--json"],
            env={"FATHOM_INGEST__FILE_TIMEOUT_S": "0.2"},
        )
    )
    assert time.perf_counter() - t0 < 20
    assert files["good.txt"]["status"] == "ok"
    assert files["slow.pdf"]["status"] == "failed"
    assert "took longer than 0.2 s" in files["slow.pdf"]["reason"]
    assert "ingest.file_timeout_s" in files["slow.pdf"]["reason"]
    assert Collection.open(load_config(), "t").check() == []


def test_time_limit_cannot_be_swallowed_by_a_loader(tmp_path: Path) -> None:
    """Loaders catch Exception per page; the alarm must still end the file."""
    from fathom.ingestion import time_limit

    with pytest.raises(ParseError, match="took longer"), time_limit("x.pdf", 0.05):
        for _ in range(200):
            try:
                time.sleep(0.01)
            except Exception:  # what a loader's per-page guard does
                continue


def test_encrypted_pdf_with_and_without_password(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    docgen.make_encrypted_pdf(folder / "locked.pdf", password="s3cret")
    files = _files(_ingest(folder))
    assert files["locked.pdf"]["status"] == "failed"
    assert "password" in files["locked.pdf"]["reason"]
    wrong = _files(_ingest(folder, "--password", "nope"))
    assert wrong["locked.pdf"]["status"] == "failed"
    assert "password is wrong" in wrong["locked.pdf"]["reason"]
    assert "nope" not in json.dumps(wrong)
    right = _files(_ingest(folder, "--password", "s3cret"))
    assert right["locked.pdf"]["status"] == "ok", right["locked.pdf"]
    coll = Collection.open(load_config(), "hostile")
    assert any("behind a password" in c.text for c in coll.store.all())
    assert coll.check() == []


def test_paths_with_spaces_non_ascii_and_escapes(tmp_path: Path) -> None:
    folder = tmp_path / "my docs — été 東京"
    folder.mkdir()
    (folder / "notes with spaces.txt").write_text(GOOD)
    (folder / "résumé ✓.md").write_text("# Titre\n\nCafé naïve résumé, en été.\n")
    (folder / "bad\x1b[31mred\x1b[0m.txt").write_bytes(b"\x00\x01binary")
    files = _files(_ingest(folder))
    assert files["notes with spaces.txt"]["status"] == "ok"
    assert files["résumé ✓.md"]["status"] == "ok"
    # The human-readable report keeps the failure but not the escape sequence.
    result = CliRunner().invoke(
        cli.main, ["ingest", str(folder), "-c", "hostile2", "--embedder", "hashing:64"]
    )
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "binary data" in result.output
    assert "red[0m" not in result.output


def test_binary_and_undecodable_text_and_symlink_chain(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    (folder / "random.txt").write_bytes(os.urandom(20_000))
    (folder / "latin.txt").write_bytes(b"caf\xe9 cr\xe8me " * 20)  # cp1252: decodes with a warning
    os.symlink(folder / "self.txt", folder / "self.txt")
    files = _files(_ingest(folder))
    assert files["random.txt"]["status"] == "failed"
    assert files["latin.txt"]["status"] == "ok"
    assert files["self.txt"]["status"] == "failed" and "loop" in files["self.txt"]["reason"]
    assert Collection.open(load_config(), "hostile").check() == []


def test_text_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    docgen.write_large_text(folder / "big.txt", megabytes=3)
    docgen.write_large_text(folder / "small.md", megabytes=1)
    files = _files(
        CliRunner().invoke(
            cli.main,
            ["ingest", str(folder), "-c", "t", "--embedder", "hashing:64", "--json"],
            env={"FATHOM_INGEST__MAX_TEXT_MB": "2"},
        )
    )
    assert files["small.md"]["status"] == "ok"
    assert files["big.txt"]["status"] == "failed"
    assert "over the 2 MiB limit (ingest.max_text_mb)" in files["big.txt"]["reason"]


@pytest.mark.slow
def test_200_mb_text_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 200 MiB text file is over the default 64 MiB text limit: refused by its size, quickly,
    without reading it (ingesting it whole takes about 4.5 GB and 7 minutes: see the bench)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text(GOOD)
    docgen.write_large_text(folder / "huge.txt", megabytes=200)
    m = run_cli(
        ["ingest", str(folder), "-c", "huge", "--embedder", "hashing:64", "--json"],
        tmp_path / "home",
        timeout=300,
    )
    assert not m.hung and m.returncode == 0, m.stderr[-2000:]
    files = {Path(f["path"]).name: f for f in json.loads(m.stdout)["files"]}
    assert files["good.txt"]["status"] == "ok"
    assert files["huge.txt"]["status"] == "failed"
    assert "ingest.max_text_mb" in files["huge.txt"]["reason"]
    assert m.peak_mb < 250, m.peak_mb


def test_ask_opens_an_encrypted_pdf_with_its_password(tmp_path: Path, minilm) -> None:
    pdf = docgen.make_encrypted_pdf(tmp_path / "locked.pdf", password="s3cret")
    base = ["ask", str(pdf), "What is behind the password?", "--generator", "extractive",
            "--json"]  # fmt: skip
    r = CliRunner().invoke(cli.main, base)
    assert r.exit_code == 1 and "password" in r.output  # nothing could be indexed
    r = CliRunner().invoke(cli.main, [*base, "--password", "s3cret"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["sources"] and "s3cret" not in r.stdout


def test_the_time_limit_holds_off_the_main_thread(tmp_path: Path) -> None:
    """Off the main thread SIGALRM cannot interrupt a parse: the file is parsed in a child
    process that is killed at the limit, and a file within the limit loads exactly as it does
    on the main thread."""
    import threading

    from fathom.ingestion import LoadOptions, load_document

    slow = docgen.make_many_page_pdf(tmp_path / "slow.pdf", pages=30000)
    good = docgen.make_sample_pdf(tmp_path / "good.pdf")
    results: dict[str, object] = {}

    def work() -> None:
        for name, path, limit in (("slow", slow, 0.5), ("good", good, 60.0)):
            t0 = time.perf_counter()
            try:
                results[name] = load_document(path, LoadOptions(timeout_s=limit))
            except ParseError as exc:
                results[name] = exc
            results[f"{name}_s"] = time.perf_counter() - t0

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(120)
    assert not thread.is_alive()
    assert isinstance(results["slow"], ParseError)
    assert "took longer than 0.5 s" in str(results["slow"]) and str(slow) in str(results["slow"])
    assert results["slow_s"] < 15  # killed, not parsed to the end
    assert results["good"] == load_document(good)  # the same document, text, pages, sections
