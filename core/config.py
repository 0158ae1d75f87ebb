"""One configuration: dataclass defaults → fathom.toml → FATHOM_<SECTION>__<KEY> env → flags.

Later sources win. An unknown key, a wrongly typed value or one out of range is a ``ConfigError``
naming the key, the value and where it came from. A setting that names something a layer above
owns (``generator.backend``: the generator registry's backends) is checked against the names
that layer registers with ``register_choices``. Leaf module: stdlib only.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import tomllib
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fathom.core.errors import ConfigError

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"  # resolved to the packaged copy when installed


@dataclass
class EmbedderConfig:
    name: str = DEFAULT_EMBEDDER
    batch_size: int = 64
    device: str = "cpu"
    # Prepend the document title to every chunk's embedding input (context for short chunks).
    title_prefix: bool = True
    # Query-time backend: "auto" uses the ONNX export when one exists (no torch import), else
    # sentence-transformers; "onnx" requires the export; "torch" always uses sentence-transformers.
    query_backend: Literal["auto", "onnx", "torch"] = "auto"
    # Weights the ONNX path runs: "fp32" (the model as published) or "int8" (ONNX Runtime's
    # dynamic int8 quantization: 0.6x the ingest CPU and 0.57-0.79x the query P95 on 2 cores,
    # 0-0.7 points less recall@5; docs/results/peers/). Recorded in the collection: its
    # queries must use the precision its chunks were embedded with.
    precision: Literal["fp32", "int8"] = "fp32"
    # Where exported query-path models live (default: FATHOM_HOME/models).
    cache_dir: str = ""


@dataclass
class ChunkerConfig:
    name: str = "semantic"
    target_tokens: int = 180
    min_tokens: int = 48
    max_tokens: int = 250
    overlap_tokens: int = 32


@dataclass
class IndexConfig:
    # Exact inner-product search up to this many vectors in a segment, approximate above it
    # (``ann``: "ivf", an inverted file trained from the segment's vectors, or "hnsw").
    hnsw_threshold: int = 250_000
    ann: Literal["ivf", "hnsw"] = "ivf"
    ivf_nlist: int = 0  # inverted lists; 0: about 4·√n, a power of two
    ivf_nprobe: int = 512  # lists a query scans
    ivf_refine: int = 32  # candidates re-scored exactly from the stored vectors, per hit
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 128
    # Open the dense index (FAISS's in-place read) and the BM25 arrays memory-mapped: a cold
    # open reads no vectors or postings, and a query process holds only the pages its searches
    # touch, shared with the page cache.
    mmap: bool = True
    bm25_stemmer: str = "english"
    bm25_stopwords: str = "en"
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # Segments (``index/segments.py``): a segment holding fewer live rows than this many times
    # the rows an ingest writes is merged into its new segment; one whose share of removed
    # rows would pass ``max_dead`` is merged whatever its size.
    merge_factor: float = 4.0
    max_dead: float = 0.3


@dataclass
class RetrievalConfig:
    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    k: int = 10
    # Hybrid fusion: a convex combination of min-max normalised scores, or reciprocal rank
    # fusion (index/retrieve.py says why convex is the default).
    fusion: Literal["convex", "rrf"] = "convex"
    dense_weight: float = 0.5  # convex: the dense list's weight; BM25 gets the rest
    rrf_k: int = 60
    # Each retriever's depth before fusion (at least k).
    candidates: int = 100
    # Depth policy when --k is not given: "auto" (the shipped learned policy when installed,
    # else the router's per-type strategy), "strategy", "cascade" (start shallow, deepen while
    # the answer's confidence is low: router/cascade.py), or a policy file (.npz).
    policy: str = "auto"
    # What one point of answer recall is worth when the depth policy prices its choice
    # (router/cost.py): quality 5 s / 0.1 cents, balanced 1 s / 0.02 cents, fast 0.25 s /
    # 0.005 cents — seconds for a local model of measured speed, cents for a priced API; in
    # context tokens otherwise (quality: the policy's own λ, balanced 4×, fast 10×).
    prefer: Literal["quality", "balanced", "fast"] = "balanced"
    # Retriever portfolio (`fathom portfolio build`): a portfolio file, or a name under
    # FATHOM_HOME/portfolios; empty = the collection's own retriever. Its router picks
    # `portfolio_ell` members per question; `fuse` ranks their results together (RRF), `select`
    # answers from each and lets the generator pick or merge the answers.
    portfolio: str = ""
    portfolio_mode: Literal["fuse", "select"] = "fuse"
    portfolio_ell: int = 2


@dataclass
class GeneratorConfig:
    # "auto" or a backend of the generator registry (stages/generate/registry.py), which
    # registers the names this is checked against.
    backend: str = "auto"
    # Backend default when empty: the packaged SmolLM2 GGUF for llamacpp and huggingface,
    # "llama3.2" for ollama, "gpt-4o-mini" for openai.
    model: str = ""
    base_url: str = ""  # OpenAI-compatible server (vLLM, llama.cpp server, LM Studio, Ollama /v1)
    api_key: str = field(default="", repr=False)  # else OPENAI_API_KEY; never printed
    ollama_host: str = ""  # else OLLAMA_HOST, else http://127.0.0.1:11434
    context_window: int = 4096  # tokens: llama.cpp n_ctx, Ollama num_ctx (always sent)
    max_tokens: int = 256  # completion budget
    temperature: float = 0.0
    repeat_penalty: float = 1.1  # llama.cpp: greedy decoding of small models loops without it
    # How sources are framed in the prompt (stages/generate/prompt.py); "filtered" followed the
    # fewest injected instructions in bench/reliability.py.
    framing: Literal["plain", "tagged", "sandwich", "filtered"] = "filtered"
    # The extractive answerer when its reader's best span is under the reader's bar: "mark"
    # gives that span, starting "Unsure:", before the quotes that support it; "abstain" says
    # the sources do not answer (docs/reader.md measures both).
    unsure: Literal["mark", "abstain"] = "mark"
    timeout_s: float = 120.0  # per connect / read: a server that goes silent
    total_timeout_s: float = 600.0  # a whole answer, however it trickles in; 0 = no limit
    retries: int = 2
    seed: int = 0
    threads: int = 0  # 0: half the machine's cores
    # An end-to-end latency budget for one answer, in ms (0: none). The in-process backends
    # (llama.cpp, transformers) stop generating when the ask has taken this long, and the
    # report says the answer was cut; no feedback round starts past it.
    deadline_ms: float = 0.0


@dataclass
class RerankConfig:
    enabled: bool = True
    # "fathom-reader" (the reader shipped in the package), "embedding" (the embedding
    # reranker), or any CrossEncoder name or path
    model: str = "fathom-reader"
    candidates: int = 20  # hits sent to the reranker
    # hits the embedding fallback reads when no cross-encoder loads (it embeds every sentence
    # of each; its gain is the same at 8 as at 20 on held-out SQuAD and COVID-QA)
    embedding_candidates: int = 8
    batch_size: int = 32


@dataclass
class CompressConfig:
    # Context budget in the generator's tokens; 0: decided with the depth — a policy's or
    # --k's k chunks up to the window's room, the query type's budget (router/strategy.py)
    # when its strategy chose the depth.
    budget_tokens: int = 0
    dedupe_threshold: float = 0.9  # shingle Jaccard above which a chunk is a near-duplicate
    mmr_lambda: float = 0.7  # relevance vs diversity
    sentence_select_over: int = 300  # chunks longer than this (tokens) keep relevant sentences
    condense_to: int = 120  # over budget, chunks are condensed to this, lowest-ranked first


def _default_prices() -> dict[str, list[float]]:
    # Input and output price per million tokens. Editable defaults: check your provider's page.
    return {
        "gpt-4o-mini": [0.15, 0.60],
        "gpt-4o": [2.50, 10.00],
        "gpt-4.1-mini": [0.40, 1.60],
        "gpt-4.1": [2.00, 8.00],
    }


@dataclass
class PricesConfig:
    currency: str = "USD"
    # model -> [input, output] per million tokens; models not listed (local ones) cost 0.
    models: dict[str, list[float]] = field(default_factory=_default_prices)


@dataclass
class FeedbackConfig:
    enabled: bool = True
    threshold: float = 0.45  # below this confidence, retrieve deeper and regenerate
    max_rounds: int = 2  # extra rounds after the first
    growth: float = 2.0  # k multiplier per round


@dataclass
class IngestConfig:
    strict: bool = False
    max_file_mb: int = 512
    follow_symlinks: bool = True
    file_timeout_s: float = 300.0  # per file; 0 = no limit
    max_text_mb: int = 64  # text one document may hold (memory is ~20x this while indexing)
    lock_timeout_s: float = 600.0  # how long an ingest waits for another one to finish
    # `ingest --watch`: a batch of changes is ingested once the paths have been quiet this long,
    # and a file still changing size or time is waited for until it holds still this long.
    watch_debounce_ms: int = 500
    watch_stable_ms: int = 1000
    # Pages without a text layer (scans) and image files are read by OCR (the `ocr` extra):
    # "auto" reads the PDF pages that have no text, "always" every PDF page, "never" none.
    ocr: Literal["auto", "always", "never"] = "auto"
    # A page OCR reads with a lower mean character confidence is recorded as unreadable
    # instead of indexing noise.
    ocr_min_confidence: float = 0.75
    ocr_dpi: int = 200  # resolution a PDF page is rendered at for OCR
    # Each page OCR reads adds this to its file's ingest.file_timeout_s (a scan is slow, not
    # hostile: 300 s would stop a 60-page scan on a busy 2-core machine).
    ocr_page_timeout_s: float = 60.0


@dataclass
class Config:
    home: str = ""
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    chunker: ChunkerConfig = field(default_factory=ChunkerConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    compress: CompressConfig = field(default_factory=CompressConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    prices: PricesConfig = field(default_factory=PricesConfig)

    def home_path(self) -> Path:
        """FATHOM_HOME: config ``home``, else the platform data dir."""
        if self.home:
            return Path(self.home).expanduser()
        return default_home()

    def models_path(self) -> Path:
        """Folder of exported query-path models."""
        if self.embedder.cache_dir:
            return Path(self.embedder.cache_dir).expanduser()
        return self.home_path() / "models"

    def to_dict(self, mask_secrets: bool = True) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if mask_secrets and data["generator"]["api_key"]:
            data["generator"]["api_key"] = "***"
        return data


def default_home() -> Path:
    """The platform data directory for Fathom (XDG on Linux)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "fathom"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "fathom"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fathom"


def _coerce(value: Any, typ: Any, key: str, source: str) -> Any:
    """Convert ``value`` to the field type ``typ``; strings from the environment are parsed."""
    origin = typing.get_origin(typ)
    if origin is dict:
        return _coerce_table(value, typ, key, source)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {shown(key, value)} (from {source}): expected a list")
        (item_type,) = typing.get_args(typ) or (Any,)
        return [_coerce(v, item_type, key, source) for v in value]
    if origin is Literal:
        _check_choice(key, value, typing.get_args(typ), source)
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("", "none")):
            return None
        return _coerce(value, args[0], key, source)
    try:
        return _coerce_scalar(value, typ)
    except (TypeError, ValueError):
        expected = getattr(typ, "__name__", typ)
        raise ConfigError(
            f"{key} = {shown(key, value)} (from {source}): expected {expected}"
        ) from None


def _coerce_table(value: Any, typ: Any, key: str, source: str) -> dict[str, Any]:
    """A ``dict[str, X]`` setting: a TOML table, or a JSON object from the environment."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(
                f"{key} = {value!r} (from {source}): expected a JSON object"
            ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{key} = {value!r} (from {source}): expected a table")
    _, value_type = typing.get_args(typ) or (str, Any)
    return {str(k): _coerce(v, value_type, f'{key}."{k}"', source) for k, v in value.items()}


def _coerce_scalar(value: Any, typ: Any) -> Any:
    """``value`` as a bool, int, float or str (``typ``); a ``ValueError`` when it is not one.
    Strings from the environment are parsed; a bool is never taken for a number."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError
    if typ is int:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if typ is float:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise ValueError
        return value
    return value


def _check_choice(key: str, value: Any, allowed: Sequence[Any], source: str) -> None:
    if value not in allowed:
        raise ConfigError(
            f"{key} = {value!r} (from {source}): must be one of {', '.join(map(str, allowed))}"
        )


# Settings whose values a layer above this one enumerates: key -> the names it allows, asked
# each time a value is applied (a registry can grow after it registered).
_CHOICES: dict[str, Callable[[], Sequence[str]]] = {}


def register_choices(key: str, names: Callable[[], Sequence[str]]) -> None:
    """From now on, check setting ``key`` (``"generator.backend"``) against ``names()`` wherever
    configuration is read, with the message a wrong ``Literal`` value gets. The layer that owns
    a registry registers its names when it is imported (the generator registry does), so this
    module never imports upwards."""
    _CHOICES[key] = names


# Numeric settings whose type allows values that make no sense: (lowest, highest, lowest
# excluded). A zero or negative count would otherwise slice from the end or loop forever.
_RANGES: dict[str, tuple[float, float | None, bool]] = {
    "embedder.batch_size": (1, None, False),
    "chunker.target_tokens": (1, None, False),
    "chunker.min_tokens": (0, None, False),
    "chunker.max_tokens": (1, None, False),
    "chunker.overlap_tokens": (0, None, False),
    "index.hnsw_threshold": (0, None, False),
    "index.hnsw_m": (1, None, False),
    "index.hnsw_ef_construction": (1, None, False),
    "index.hnsw_ef_search": (1, None, False),
    "index.ivf_nlist": (0, None, False),
    "index.ivf_nprobe": (1, None, False),
    "index.ivf_refine": (1, None, False),
    "index.merge_factor": (1, None, False),
    "index.max_dead": (0, 1, False),
    "index.bm25_k1": (0, None, False),
    "index.bm25_b": (0, 1, False),
    "retrieval.k": (1, None, False),
    "retrieval.dense_weight": (0, 1, False),
    "retrieval.rrf_k": (0, None, False),
    "retrieval.candidates": (1, None, False),
    "retrieval.portfolio_ell": (1, None, False),
    "generator.context_window": (1, None, False),
    "generator.max_tokens": (1, None, False),
    "generator.temperature": (0, None, False),
    "generator.repeat_penalty": (0, None, True),
    "generator.timeout_s": (0, None, True),
    "generator.total_timeout_s": (0, None, False),
    "generator.retries": (0, None, False),
    "generator.threads": (0, None, False),
    "generator.deadline_ms": (0, None, False),
    "rerank.candidates": (1, None, False),
    "rerank.embedding_candidates": (1, None, False),
    "rerank.batch_size": (1, None, False),
    "compress.budget_tokens": (0, None, False),
    "compress.dedupe_threshold": (0, 1, False),
    "compress.mmr_lambda": (0, 1, False),
    "compress.sentence_select_over": (1, None, False),
    "compress.condense_to": (1, None, False),
    "feedback.threshold": (0, 1, False),
    "feedback.max_rounds": (0, None, False),
    "feedback.growth": (1, None, False),
    "ingest.max_file_mb": (1, None, False),
    "ingest.file_timeout_s": (0, None, False),
    "ingest.max_text_mb": (1, None, False),
    "ingest.lock_timeout_s": (0, None, False),
    "ingest.watch_debounce_ms": (1, None, False),
    "ingest.watch_stable_ms": (0, None, False),
    "ingest.ocr_min_confidence": (0, 1, False),
    "ingest.ocr_dpi": (50, 600, False),
    "ingest.ocr_page_timeout_s": (0, None, False),
}


def _check_range(name: str, value: Any, source: str) -> None:
    """A ``ConfigError`` naming the key when ``value`` is outside the setting's range (or, for
    ``prices.models``, an entry is not ``[input, output]`` prices)."""
    if name == "prices.models":
        for model, entry in value.items():
            if len(entry) != 2 or any(not math.isfinite(p) or p < 0 for p in entry):
                raise ConfigError(
                    f'{name}."{model}" = {entry!r} (from {source}): expected [input, output], '
                    "two prices per million tokens, neither negative"
                )
        return
    if name not in _RANGES or value is None:
        return
    low, high, open_low = _RANGES[name]
    if (
        not math.isfinite(value)
        or value < low
        or (open_low and value == low)
        or (high is not None and value > high)
    ):
        if high is not None:
            wanted = f"within {low:g}–{high:g}"
        else:
            wanted = f"above {low:g}" if open_low else f"at least {low:g}"
        raise ConfigError(f"{name} = {value!r} (from {source}): must be {wanted}")


_SECRET_NAME = re.compile(r"key|secret|passw|token$", re.IGNORECASE)


def shown(name: str, value: Any) -> str:
    """``value`` for an error message, or ``***`` when ``name`` looks like it holds a secret
    (a mistyped ``api_keyy = "sk-…"`` must not print the key)."""
    return "***" if _SECRET_NAME.search(name.rsplit(".", 1)[-1]) else repr(value)


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _apply(cfg: Config, section: str | None, key: str, value: Any, source: str) -> None:
    target: Any = cfg if section is None else getattr(cfg, section, None)
    name = key if section is None else f"{section}.{key}"
    if target is None or not dataclasses.is_dataclass(target):
        raise ConfigError(f"unknown section [{section}] (from {source})")
    types_ = _field_types(type(target))
    if key not in types_ or dataclasses.is_dataclass(types_[key]):
        raise ConfigError(f"unknown key {name} = {shown(name, value)} (from {source})")
    value = _coerce(value, types_[key], name, source)
    if name in _CHOICES:
        _check_choice(name, value, tuple(_CHOICES[name]()), source)
    _check_range(name, value, source)
    if isinstance(value, dict) and isinstance(getattr(target, key), dict):
        value = {**getattr(target, key), **value}  # tables extend the defaults
    setattr(target, key, value)


def apply_mapping(cfg: Config, data: dict[str, Any], source: str) -> None:
    """Merge a TOML-shaped mapping (``{"section": {"key": value}}``) into ``cfg``."""
    top = _field_types(Config)
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in top or not dataclasses.is_dataclass(top[key]):
                raise ConfigError(f"unknown section [{key}] (from {source})")
            for sub, subvalue in value.items():
                _apply(cfg, key, sub, subvalue, source)
        else:
            _apply(cfg, None, key, value, source)


def apply_overrides(cfg: Config, overrides: dict[str, Any], source: str = "command line") -> None:
    """Apply dotted overrides such as ``{"retrieval.k": 5}``; ``None`` values are skipped."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.rpartition(".")
        _apply(cfg, section or None, key, value, source)


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Build the effective configuration from every source, later ones winning."""
    cfg = Config()
    env = dict(os.environ) if env is None else env
    toml_path = Path(path) if path else Path("fathom.toml")
    if path and not toml_path.exists():
        raise ConfigError(f"{toml_path}: config file not found")
    if toml_path.exists():
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{toml_path}: not valid TOML ({exc})") from None
        apply_mapping(cfg, data, str(toml_path))
    if env.get("FATHOM_HOME"):
        cfg.home = env["FATHOM_HOME"]
    for name, value in sorted(env.items()):
        if not name.startswith("FATHOM_") or "__" not in name:
            continue
        section, _, key = name[len("FATHOM_") :].lower().partition("__")
        _apply(cfg, section, key, value, f"environment {name}")
    if overrides:
        apply_overrides(cfg, overrides)
    return cfg
