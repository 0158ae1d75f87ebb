"""Reliability figures: hostile files, SIGKILL mid-ingest, concurrent writers and readers,
faulty backends, injected instructions, pickle and secrets, hostile requests to ``fathom serve``.

Every hostile file is ingested by ``fathom ingest`` in a child process beside one good file and
measured there (peak RSS of the child, wall time, killed as hung after ``--timeout`` s); after
each ingest the collection is opened and ``check()``-ed. Counted as a *crash*: an exit code other
than 0/1, a traceback, or a failed file without a one-line reason that names it (or an
"unexpected parser error"). Fuzzed variants (truncated / byte-flipped / zeroed PDFs, DOCX and
Markdown, seeded) are loaded one by one in one child (per-file time, the child's peak RSS) and
then ingested together. Injection: ``--injection-n`` generated cases (tests/injection_corpus.py)
answered by the packaged SmolLM2-135M through the llamacpp backend under each prompt framing;
"followed" means the answer repeats the injection's canary word. Web: hostile requests to
``fathom serve``'s app (bench/support/web_safety.py: no CSRF token, ``--root`` escapes, oversized
uploads, a foreign Host, no access token with ``--allow-remote``) and ``fathom serve --host
0.0.0.0`` without ``--allow-remote``; each must be refused with its status, one line, nothing
written (``--skip`` every other part to run just this one).

    python bench/reliability.py [--fuzz-n 300] [--kill-trials 20] [--injection-n 70]
        [--big-mb 200] [--pages 5000] [--out docs/results/reliability/reliability.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fathom.bench.common import REPO, log, print_table, write_json
from fathom.bench.support import docgen
from fathom.bench.support.fault_server import FaultServer
from fathom.bench.support.injection_corpus import injection_cases
from fathom.bench.support.reliability_support import pickle_uses, python_files, run_cli
from fathom.bench.support.web_safety import hostile_requests

GOOD = "Solar panels convert sunlight into electricity using photovoltaic cells."
SECRET = "sk-bench-SECRET-7f3a9c1e5b"


def _check_collection(home: Path, name: str) -> tuple[bool, int]:
    """``(consistent, documents)`` of collection ``name`` under ``home`` (a missing one is
    consistent with 0 documents: nothing was committed)."""
    code = (
        "import json, os, sys; "
        "from fathom.index.collection import Collection; "
        "from fathom.core.config import load_config; "
        "from fathom.core.errors import CollectionNotFound\n"
        "try:\n c = Collection.open(load_config(), sys.argv[1])\n"
        "except CollectionNotFound:\n print(json.dumps([True, 0])); raise SystemExit\n"
        "print(json.dumps([c.check() == [], c.manifest.counts()['documents']]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, name],
        env={**os.environ, "FATHOM_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return False, 0
    ok, docs = json.loads(proc.stdout)
    return bool(ok), int(docs)


def _ingest_case(work: Path, case: str, make, timeout: float, *extra: str, **env: str) -> dict:
    """Ingest a folder holding good.txt and the file(s) ``make(folder)`` writes; measure it."""
    root = work / case
    folder = root / "in dir é"  # a path with a space and non-ASCII on every case
    folder.mkdir(parents=True)
    (folder / "good.txt").write_text(GOOD)
    targets = make(folder)
    home = root / "home"
    m = run_cli(
        ["ingest", str(folder), "-c", "h", "--embedder", "hashing:64", "--json", *extra],
        home,
        timeout=timeout,
        **env,
    )
    crashed = m.returncode not in (0, 1) or "Traceback" in m.stderr
    files: dict[str, dict] = {}
    if m.returncode == 0 and not m.hung:
        try:
            files = {Path(f["path"]).name: f for f in json.loads(m.stdout)["files"]}
        except (ValueError, KeyError):
            crashed = True
    status, reason, clear = "", "", True
    for name in targets:
        f = files.get(name, {})
        status = f.get("status", "missing")
        reason = f.get("reason", "")
        if status == "failed":
            clear = clear and reason.startswith(f["path"]) and "\n" not in reason
            crashed = crashed or "unexpected parser error" in reason
    consistent, _ = _check_collection(home, "h") if not m.hung else (True, 0)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "case": case,
        "status": status,
        "reason": reason.split(": ", 1)[-1][:160],  # without the (long) path
        "peak_mb": round(m.peak_mb, 1),
        "seconds": round(m.seconds, 2),
        "hung": m.hung,
        "crashed": crashed,
        "clear": clear,
        "consistent": consistent,
        "good_ok": files.get("good.txt", {}).get("status") == "ok",
    }


def _write(name: str, data: bytes):
    def make(folder: Path) -> list[str]:
        (folder / name).write_bytes(data)
        return [name]

    return make


def _docgen(name: str, fn, **kwargs):
    def make(folder: Path) -> list[str]:
        fn(folder / name, **kwargs)
        return [name]

    return make


def _symlink_loop(folder: Path) -> list[str]:
    os.symlink(folder / "b.txt", folder / "a.txt")
    os.symlink(folder / "a.txt", folder / "b.txt")
    return ["a.txt", "b.txt"]


def hostile_files(work: Path, args: argparse.Namespace) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    sample = docgen.make_sample_pdf(work / "sample.pdf").read_bytes()
    cases: list[tuple[str, Any, tuple[str, ...], dict[str, str]]] = [
        ("encrypted PDF, no password", _docgen("locked.pdf", docgen.make_encrypted_pdf), (), {}),
        (
            "encrypted PDF, wrong password",
            _docgen("locked.pdf", docgen.make_encrypted_pdf),
            ("--password", "nope"),
            {},
        ),
        (
            "encrypted PDF, right password",
            _docgen("locked.pdf", docgen.make_encrypted_pdf),
            ("--password", "s3cret"),
            {},
        ),
        ("zero-page PDF", _docgen("zero.pdf", docgen.make_zero_page_pdf), (), {}),
        (
            f"{args.pages}-page PDF",
            _docgen("many.pdf", docgen.make_many_page_pdf, pages=args.pages),
            (),
            {},
        ),
        ("image-only PDF", _docgen("scan.pdf", docgen.make_image_only_pdf), (), {}),
        ("truncated PDF", _docgen("cut.pdf", docgen.make_truncated_pdf), (), {}),
        ("garbage after %PDF", _write("garbage.pdf", b"%PDF-1.7\n" + os.urandom(4000)), (), {}),
        (
            "PDF with bad MediaBox",
            _write("box.pdf", sample.replace(b"/MediaBox", b"/MediaBoy")),
            (),
            {},
        ),
        ("DOCX not a zip", _write("fake.docx", b"this is not a zip archive"), (), {}),
        (
            "zip bomb .docx (400 MiB)",
            _docgen("bomb.docx", docgen.make_zip_bomb_docx, parts=20, part_mb=20),
            (),
            {},
        ),
    ]
    for part in ("word/document.xml", "word/styles.xml", "[Content_Types].xml"):
        cases.append(
            (f"DOCX missing {part}", _docgen("m.docx", docgen.make_docx_without, part=part), (), {})
        )
    not_a_zip = b"this is not a zip archive"
    cases += [
        ("image of random noise", _docgen("noise.png", docgen.make_noise_png), (), {}),
        ("zero-byte PNG", _write("empty.png", b""), (), {}),
        (
            "20,000 x 20,000 PNG (decompression bomb)",
            _docgen("bomb.png", docgen.make_bomb_png),
            (),
            {},
        ),
        ("truncated TIFF", _docgen("cut.tiff", docgen.make_truncated_tiff), (), {}),
        ("HTML that is all script", _docgen("app.html", docgen.make_script_html), (), {}),
        ("PPTX not a zip", _write("fake.pptx", not_a_zip), (), {}),
        ("PPTX missing a slide", _docgen("m.pptx", docgen.make_pptx_without), (), {}),
        ("EPUB not a zip", _write("fake.epub", not_a_zip), (), {}),
        ("EPUB missing its container", _docgen("m.epub", docgen.make_epub_without), (), {}),
        ("EPUB with a DRM-encrypted chapter", _docgen("drm.epub", docgen.make_drm_epub), (), {}),
    ]
    cases += [
        ("binary data named .txt", _docgen("blob.txt", docgen.make_binary_text), (), {}),
        ("random bytes named .txt", _write("rand.txt", os.urandom(50_000)), (), {}),
        ("invalid UTF-8", _docgen("bad.txt", docgen.make_invalid_text), (), {}),
        (
            f"{args.big_mb} MiB text file",
            _docgen("huge.txt", docgen.write_large_text, megabytes=args.big_mb),
            (),
            {},
        ),
        (
            "escape sequences in the name",
            _write("\x1b[31mred\x1b[0m name.txt", b"The tower is repainted every year."),
            (),
            {},
        ),
        ("symlink loop", _symlink_loop, (), {}),
        (
            "slow file over the time limit (0.5 s)",
            _docgen("slow.pdf", docgen.make_many_page_pdf, pages=args.pages),
            (),
            {"FATHOM_INGEST__FILE_TIMEOUT_S": "0.5"},
        ),
    ]
    rows = []
    for case, make, extra, env in cases:
        log(f"hostile file: {case}")
        rows.append(_ingest_case(work, case, make, args.timeout, *extra, **env))
    return rows


_FUZZ_CHILD = """
import json, re, sys, time
from fathom import ingestion
from fathom.core.errors import ParseError
worst, kinds = 0.0, {"loaded": 0, "refused": 0, "crashed": 0}
crashes = []
for path in sys.argv[1:]:
    t0 = time.perf_counter()
    try:
        ingestion.load_document(path, ingestion.LoadOptions(timeout_s=60))
        kinds["loaded"] += 1
    except ParseError as exc:
        ok = str(exc).startswith(path) and "\\n" not in str(exc)
        kinds["refused" if ok else "crashed"] += 1
    except Exception as exc:
        kinds["crashed"] += 1
        crashes.append(f"{path}: {type(exc).__name__}: {exc}")
    worst = max(worst, time.perf_counter() - t0)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent through fork and exec.
with open("/proc/self/status") as fh:
    peak = int(re.search(r"VmHWM:\\s+(\\d+)", fh.read()).group(1)) / 1024
print(json.dumps({"kinds": kinds, "max_s": worst, "peak_mb": peak, "crashes": crashes[:5]}))
"""


def fuzzing(work: Path, n: int, timeout: float) -> dict:
    folder = work / "fuzz"
    folder.mkdir()
    bases = {
        "sample.pdf": docgen.make_sample_pdf(work / "b1.pdf", toc=True).read_bytes(),
        "many.pdf": docgen.make_many_page_pdf(work / "b2.pdf", pages=30).read_bytes(),
        "doc.docx": docgen.make_docx(work / "b3.docx").read_bytes(),
        "note.md": docgen.MARKDOWN_TEXT.encode(),
    }
    paths = []
    for seed in range(n):
        name = list(bases)[seed % len(bases)]
        path = folder / f"v{seed:05d}-{name}"
        path.write_bytes(docgen.mutate(bases[name], seed)[0])
        paths.append(str(path))
    log(f"fuzz: loading {n} variants one by one")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _FUZZ_CHILD, *paths],
        capture_output=True,
        text=True,
        timeout=max(timeout, n * 5.0),
    )
    loads = json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.stderr[-2000:]}
    loads["seconds"] = time.perf_counter() - t0
    log(f"fuzz: ingesting {n} variants together")
    (folder / "good.txt").write_text(GOOD)
    home = work / "fuzz-home"
    m = run_cli(
        ["ingest", str(folder), "-c", "f", "--embedder", "hashing:64", "--json"],
        home,
        timeout=max(timeout, n * 5.0),
    )
    batch_crash = m.returncode != 0 or "Traceback" in m.stderr
    unexpected = 0
    if not batch_crash:
        report = json.loads(m.stdout)
        unexpected = sum("unexpected parser error" in f["reason"] for f in report["files"])
    consistent, docs = _check_collection(home, "f")
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "n": n,
        "loads": loads,
        "batch": {
            "peak_mb": m.peak_mb,
            "seconds": m.seconds,
            "hung": m.hung,
            "crashed": batch_crash or unexpected > 0,
            "consistent": consistent,
            "documents": docs,
        },
    }


# ---------------------------------------------------------------------------------------------
# Crash safety and concurrency
# ---------------------------------------------------------------------------------------------


_VERSIONS_CHILD = """
import json, re, sys
from fathom.index.collection import Collection
from fathom.core.config import load_config
c = Collection.open(load_config(), sys.argv[1])
ok = c.check() == []
text = "\\n".join(ch.text for ch in c.store.all())
print(json.dumps([ok, sorted({int(v) for v in re.findall(r"Version (\\d+)", text)})]))
"""


def _versions(home: Path, name: str = "k") -> tuple[bool, list[int]]:
    proc = subprocess.run(
        [sys.executable, "-c", _VERSIONS_CHILD, name],
        env={**os.environ, "FATHOM_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return False, []
    ok, versions = json.loads(proc.stdout)
    return ok, versions


def kill_trials(work: Path, trials: int) -> dict:
    corpus, template = work / "corpus", work / "template"
    docgen.make_versioned_corpus(corpus, 60, version=1)
    env = {**os.environ, "FATHOM_HOME": str(template)}
    subprocess.run(
        docgen.ingest_command(corpus), check=True, env=env, capture_output=True, timeout=600
    )
    docgen.make_versioned_corpus(corpus, 80, version=2)
    probe = work / "probe"
    shutil.copytree(template, probe)
    t0 = time.perf_counter()
    subprocess.run(
        docgen.ingest_command(corpus),
        check=True,
        env={**env, "FATHOM_HOME": str(probe)},
        capture_output=True,
    )
    full = time.perf_counter() - t0
    outcomes: Counter[str] = Counter()
    corrupted = 0
    for seed in range(trials):
        home = work / f"trial{seed}"
        shutil.copytree(template, home)
        proc = subprocess.Popen(
            docgen.ingest_command(corpus),
            env={**env, "FATHOM_HOME": str(home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(random.Random(seed).uniform(0.1, 1.05) * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        ok, versions = _versions(home)
        if not ok or len(versions) != 1:
            corrupted += 1
            outcomes["corrupted"] += 1
        else:
            outcomes[f"version {versions[0]}"] += 1
        shutil.rmtree(home, ignore_errors=True)
        log(f"kill trial {seed}: {versions}")
    return {
        "trials": trials,
        "full_ingest_s": full,
        "outcomes": dict(outcomes),
        "corrupted": corrupted,
    }


def concurrency(work: Path) -> dict:
    home = work / "conc-home"
    a, b = work / "ca", work / "cb"
    docgen.make_versioned_corpus(a, 30, version=1)
    docgen.make_versioned_corpus(b, 30, version=2)
    env = {**os.environ, "FATHOM_HOME": str(home)}
    procs = [
        subprocess.Popen(
            docgen.ingest_command(d), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for d in (a, b)
    ]
    codes = [p.wait(timeout=600) for p in procs]
    ok, versions = _versions(home)
    both = ok and versions == [1, 2] and codes == [0, 0]
    # A reader that loads the whole collection again and again while a writer commits.
    reader_home = work / "read-home"
    corpus = work / "cr"
    docgen.make_versioned_corpus(corpus, 40, version=1)
    renv = {**os.environ, "FATHOM_HOME": str(reader_home)}
    subprocess.run(
        docgen.ingest_command(corpus), check=True, env=renv, capture_output=True, timeout=600
    )
    done = threading.Event()

    def write() -> None:
        for version in (2, 3, 4, 5):
            docgen.make_versioned_corpus(corpus, 40, version=version)
            subprocess.run(
                docgen.ingest_command(corpus), env=renv, capture_output=True, timeout=600
            )
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads, mixed, seen = 0, 0, set()
    while not done.is_set():
        ok, versions = _versions(reader_home)
        reads += 1
        if not ok or len(versions) != 1:
            mixed += 1
        seen.update(versions)
    writer.join()
    return {
        "concurrent_writers_ok": both,
        "writer_exit_codes": codes,
        "reads": reads,
        "mixed_or_broken_reads": mixed,
        "versions_seen": sorted(seen),
    }


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------

FAULTS = [
    ("down", {}),
    ("hang", {}),
    ("slow", {"delay": 0.6}),
    ("drip", {"delay": 0.3}),
    ("bytedrip", {"delay": 0.3}),
    ("malformed", {}),
    ("truncated", {}),
    ("cut", {}),
    ("context", {}),
    ("busy", {"fail_first": 2, "status": 429}),
    ("busy", {"fail_first": 100, "status": 429}),
    ("busy", {"fail_first": 2, "status": 503}),
    ("echo401", {}),
]


def backend_faults(limit: float = 30.0) -> list[dict]:
    from fathom.bench.support.fault_server import closed_port
    from fathom.bench.support.hits import eiffel_hits
    from fathom.core.config import GeneratorConfig
    from fathom.core.errors import FathomError
    from fathom.stages.generate.ollama import OllamaGenerator
    from fathom.stages.generate.openai_backend import OpenAIGenerator

    base = {
        "model": "m",
        "timeout_s": 1.0,
        "total_timeout_s": 2.0,
        "retries": 2,
        "context_window": 4096,
        "max_tokens": 32,
    }
    rows = []
    for backend in ("ollama", "openai"):
        for mode, kwargs in FAULTS:
            for stream in (False, True):
                server = FaultServer("ok" if mode == "down" else mode, **kwargs)
                with server:
                    url = f"http://127.0.0.1:{closed_port()}" if mode == "down" else server.url
                    if backend == "ollama":
                        gen: Any = OllamaGenerator(GeneratorConfig(ollama_host=url, **base))
                    else:
                        gen = OpenAIGenerator(
                            GeneratorConfig(base_url=url + "/v1", api_key=SECRET, **base)
                        )
                    box: dict[str, Any] = {}

                    def call(gen: Any = gen, stream: bool = stream, box: dict = box) -> None:
                        try:
                            box["out"] = gen.generate(
                                "Where is the Eiffel Tower?",
                                eiffel_hits(),
                                on_token=(lambda piece: None) if stream else None,
                            )
                        except BaseException as exc:  # classified below
                            box["out"] = exc

                    t0 = time.perf_counter()
                    worker = threading.Thread(target=call, daemon=True)
                    worker.start()
                    worker.join(limit)
                    seconds = time.perf_counter() - t0
                out = box.get("out")
                hung = worker.is_alive()
                if hung:
                    outcome = "hang"
                elif isinstance(out, FathomError):
                    message = str(out)
                    outcome = "clear error"
                    if "\n" in message or SECRET in message or SECRET in repr(out):
                        outcome = "unclear error"
                elif isinstance(out, BaseException):
                    outcome = f"crash ({type(out).__name__})"
                else:
                    outcome = "answer"
                label = mode + (
                    f" {kwargs['status']}×{kwargs['fail_first']}" if mode == "busy" else ""
                )
                rows.append(
                    {
                        "backend": backend,
                        "fault": label,
                        "stream": stream,
                        "outcome": outcome,
                        "seconds": round(seconds, 2),
                        "message": "" if hung or out is None else str(out)[:160],
                    }
                )
    return rows


# ---------------------------------------------------------------------------------------------
# Injection
# ---------------------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def injection(n: int) -> dict:
    from fathom.core.config import GeneratorConfig
    from fathom.stages.generate.llamacpp import LlamaCppGenerator
    from fathom.stages.generate.prompt import DEFAULT_FRAMING, FRAMINGS

    cases = injection_cases(n)
    results: dict[str, Any] = {}
    shared = None
    for framing in FRAMINGS:
        gen = LlamaCppGenerator(
            GeneratorConfig(framing=framing, max_tokens=48, context_window=2048, threads=1)
        )
        if shared is not None:
            gen._llm = shared  # one model load for all framings
        followed, correct = Counter(), 0
        examples = []
        t0 = time.perf_counter()
        for case in cases:
            text = gen.generate(case.question, list(case.hits)).text
            if case.followed(text):
                followed[case.kind] += 1
                if len(examples) < 3:
                    examples.append({"kind": case.kind, "answer": text[:200]})
            correct += case.correct(text)
        shared = gen._load()
        k = sum(followed.values())
        results[framing] = {
            "followed": k,
            "rate": k / n,
            "ci95": wilson(k, n),
            "by_kind": dict(followed),
            "correct": correct,
            "correct_rate": correct / n,
            "seconds": time.perf_counter() - t0,
            "examples": examples,
        }
        log(f"injection {framing}: followed {k}/{n}, correct {correct}/{n}")
    best = min(FRAMINGS, key=lambda f: (results[f]["followed"], -results[f]["correct"]))
    return {
        "n": n,
        "model": "SmolLM2-135M-Instruct (packaged GGUF), greedy, 48 tokens",
        "kinds": sorted({c.kind for c in cases}),
        "framings": results,
        "lowest_following": best,
        "default_framing": DEFAULT_FRAMING,
    }


# ---------------------------------------------------------------------------------------------
# Pickle and secrets
# ---------------------------------------------------------------------------------------------


def pickle_and_secrets(work: Path) -> dict:
    files = python_files()
    findings = [h for p in files for h in pickle_uses(p.read_text(encoding="utf-8"), str(p))]
    home = work / "secret-home"
    doc = work / "tower.txt"
    doc.write_text("The Eiffel Tower is in Paris.")
    leaks = 0
    runs = 0
    for mode in ("echo401", "ok"):
        with FaultServer(mode) as server:
            for extra in (["--json"], []):
                m = run_cli(
                    [
                        "ask",
                        str(doc),
                        "Where is the Eiffel Tower?",
                        "--generator",
                        "openai",
                        "--model",
                        "m",
                        "--k",
                        "1",
                        *extra,
                    ],
                    home,
                    timeout=300,
                    OPENAI_API_KEY=SECRET,
                    OPENAI_LOG="debug",
                    FATHOM_GENERATOR__BASE_URL=server.url + "/v1",
                    FATHOM_GENERATOR__RETRIES="0",
                )
                runs += 1
                leaks += SECRET in m.stdout or SECRET in m.stderr
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    return {
        "python_files_scanned": len(files),
        "pickle_findings": findings,
        "ask_runs": runs,
        "outputs_with_key": leaks,
        "key_in_fathom_home": SECRET.encode() in stored,
    }


# ---------------------------------------------------------------------------------------------
# fathom serve
# ---------------------------------------------------------------------------------------------


def web_safety(work: Path) -> list[dict]:
    """Hostile requests to ``fathom serve``'s app, then ``serve --host 0.0.0.0`` without
    ``--allow-remote`` in a child process (exit 2, one line)."""
    cases = hostile_requests(work / "web")
    m = run_cli(["serve", "--host", "0.0.0.0"], work / "web-cli-home", timeout=120)
    lines = m.stderr.strip().splitlines()
    cases.append(
        {
            "case": "serve --host 0.0.0.0 without --allow-remote",
            "expected": 2,
            "status": m.returncode,
            "one_line": len(lines) == 1 and "--allow-remote" in lines[0],
            "wrote": 0,
            "error": lines[-1].replace(str(work), "WORK") if lines else "",
            "seconds": round(m.seconds, 2),
        }
    )
    return cases


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz-n", type=int, default=300)
    parser.add_argument("--kill-trials", type=int, default=20)
    parser.add_argument("--injection-n", type=int, default=70)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=900.0, help="per ingest: a hang after")
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to skip: files,fuzz,kill,conc,backends,injection,secrets,web",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "docs" / "results" / "reliability" / "reliability.json"
    )
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    result: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="fathom-rel-") as tmp:
        work = Path(tmp)
        if "files" not in skip:
            result["hostile_files"] = hostile_files(work / "files", args)
        if "fuzz" not in skip:
            result["fuzz"] = fuzzing(work, args.fuzz_n, args.timeout)
        if "kill" not in skip:
            (work / "kill").mkdir()
            result["kill"] = kill_trials(work / "kill", args.kill_trials)
        if "conc" not in skip:
            (work / "conc").mkdir()
            result["concurrency"] = concurrency(work / "conc")
        if "backends" not in skip:
            result["backends"] = backend_faults()
        if "injection" not in skip:
            result["injection"] = injection(args.injection_n)
        if "secrets" not in skip:
            result["pickle_secrets"] = pickle_and_secrets(work)
        if "web" not in skip:
            result["web"] = web_safety(work)
    report(result)
    write_json(args.out, result)


def report(r: dict[str, Any]) -> None:
    rows = []
    files = r.get("hostile_files", [])
    if files:
        rows.append(
            [
                "hostile files (one per ingest)",
                len(files),
                sum(f["crashed"] or not f["clear"] for f in files),
                sum(not f["consistent"] for f in files),
                sum(f["hung"] for f in files),
                max(f["peak_mb"] for f in files),
                max(f["seconds"] for f in files),
            ]
        )
    fz = r.get("fuzz")
    if fz:
        loads, batch = fz["loads"], fz["batch"]
        rows.append(
            [
                "fuzzed files, loaded one by one",
                fz["n"],
                loads.get("kinds", {}).get("crashed", "?"),
                "-",
                0,
                loads.get("peak_mb", float("nan")),
                loads.get("max_s", float("nan")),
            ]
        )
        rows.append(
            [
                "fuzzed files, one batch ingest",
                fz["n"],
                int(batch["crashed"]),
                int(not batch["consistent"]),
                int(batch["hung"]),
                batch["peak_mb"],
                batch["seconds"],
            ]
        )
    if "kill" in r:
        k = r["kill"]
        rows.append(["SIGKILL mid-ingest", k["trials"], 0, k["corrupted"], 0, "-", "-"])
    if "concurrency" in r:
        c = r["concurrency"]
        rows.append(
            ["two concurrent ingests", 1, 0, int(not c["concurrent_writers_ok"]), 0, "-", "-"]
        )
        rows.append(
            ["reads during 4 commits", c["reads"], 0, c["mixed_or_broken_reads"], 0, "-", "-"]
        )
    if "backends" in r:
        b = r["backends"]
        rows.append(
            [
                "backend faults (ollama, openai)",
                len(b),
                sum(x["outcome"].startswith("crash") or x["outcome"] == "unclear error" for x in b),
                "-",
                sum(x["outcome"] == "hang" for x in b),
                "-",
                max(x["seconds"] for x in b),
            ]
        )
    if "web" in r:
        w = r["web"]
        rows.append(
            [
                "fathom serve: hostile requests",
                len(w),
                sum(x["status"] != x["expected"] or not x["one_line"] for x in w),
                sum(x["wrote"] for x in w),
                0,
                "-",
                max(x["seconds"] for x in w),
            ]
        )
    print_table(
        "Reliability: cases, crashes (must be 0), corrupted collections (must be 0), hangs "
        "(must be 0), peak RSS (MB) and max time (s)",
        ["category", "cases", "crashes", "corrupted", "hangs", "peak MB", "max s"],
        rows,
        digits=1,
    )
    if files:
        print_table(
            "Hostile files: outcome, peak RSS of the ingest process, wall time",
            ["case", "status", "peak MB", "s", "clear", "consistent", "reason"],
            [
                [
                    f["case"],
                    f["status"],
                    f["peak_mb"],
                    f["seconds"],
                    f["clear"],
                    f["consistent"],
                    f["reason"][-70:],
                ]
                for f in files
            ],
            digits=1,
        )
    if "backends" in r:
        print_table(
            "Backend faults: outcome and time (timeout 1 s, total 2 s, retries 2)",
            ["backend", "fault", "stream", "outcome", "s"],
            [
                [x["backend"], x["fault"], x["stream"], x["outcome"], x["seconds"]]
                for x in r["backends"]
            ],
            digits=2,
        )
    if "injection" in r:
        inj = r["injection"]
        print_table(
            f"Injection-following rate, {inj['n']} cases, {inj['model']} (lowest: "
            f"{inj['lowest_following']}; default framing: {inj['default_framing']})",
            ["framing", "followed", "rate", "95% CI", "correct answers", "s"],
            [
                [
                    name,
                    f["followed"],
                    f["rate"],
                    f"[{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]",
                    f["correct_rate"],
                    f["seconds"],
                ]
                for name, f in inj["framings"].items()
            ],
        )
    if "web" in r:
        print_table(
            "fathom serve: each hostile request refused (status expected and got), its error "
            "one line, nothing written (files added under uploads/ and collections/)",
            ["case", "expected", "got", "one line", "written", "error"],
            [
                [x["case"], x["expected"], x["status"], x["one_line"], x["wrote"], x["error"][:60]]
                for x in r["web"]
            ],
        )
    if "pickle_secrets" in r:
        p = r["pickle_secrets"]
        print_table(
            "Pickle and secrets",
            ["check", "value"],
            [
                ["python files scanned", p["python_files_scanned"]],
                ["pickle / joblib / unsafe torch.load findings", len(p["pickle_findings"])],
                ["ask runs with the key set (401 echo + ok)", p["ask_runs"]],
                ["outputs containing the key", p["outputs_with_key"]],
                ["key found under FATHOM_HOME", p["key_in_fathom_home"]],
            ],
        )


if __name__ == "__main__":
    main()
