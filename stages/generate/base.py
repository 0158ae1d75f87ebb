"""What every generator backend shares: the prompt, the context-window check, the ``Draft``.

A backend subclasses ``BaseGenerator`` and writes only what is its own: how it counts tokens
(``count_tokens``, and ``_encode`` when it can count a rendered prompt exactly) and how its model
answers one prompt (``_complete``). ``generate`` builds the messages from the numbered sources,
refuses a prompt that does not fit the context window (a server would silently cut its start,
where the instructions are), runs ``_complete`` and turns its ``Completion`` into a ``Draft``
with the citations parsed.

The abilities the engine uses are declared here with their neutral defaults, so it never has to
ask a backend what it can do: ``language_model`` (writes its own words),
``concurrent_requests`` (a server), ``supports_deadline`` (stops sampling at ``time_budget_ms``),
``expected_prefill_ms`` / ``measure_prefill`` (prompt-evaluation speed), ``complete`` (the
reply to a side prompt, such as a follow-up's rewrite), ``summarize`` (a
summary without a model), ``replayed_ms`` (time an evaluation cache replayed), ``forget``
(drop cached prompt state between measured answers, where ``keeps_prompt_cache``) and
``close``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fathom.core.base import Draft, Hit
from fathom.core.citations import parse_citations
from fathom.core.config import GeneratorConfig
from fathom.stages.generate.common import check_fits, estimate_prompt_tokens, estimate_tokens
from fathom.stages.generate.prompt import build_messages

TokenSink = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class Completion:
    """What a backend's model returned for one prompt. ``None`` counts mean "not reported":
    the prompt's count is then the one ``_encode`` gave, the answer's ``count_tokens``."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = ""
    logprobs: tuple[float, ...] | None = None
    model: str = ""


@dataclass(frozen=True, slots=True)
class Request:
    """One prompt for a backend's ``_complete``: what its ``_encode`` made of the messages,
    where streamed pieces go, when ``generate`` began (a time budget counts from then) and the
    time budget itself (None: no deadline)."""

    prompt: Any
    on_token: TokenSink | None
    started: float
    time_budget_ms: float | None


class BaseGenerator:
    """A generator backend (see the module docstring); subclasses set ``name`` and ``model``."""

    name: ClassVar[str] = ""
    # Whether ``generate`` holds to ``time_budget_ms`` (the in-process backends do).
    supports_deadline: ClassVar[bool] = False
    # Whether a prompt's evaluated state carries over to the next one (llama.cpp's KV cache),
    # so that timings differ from a cold start until ``forget``.
    keeps_prompt_cache: ClassVar[bool] = False
    # Whether answers are written by a language model (False: quoted from the sources), so it
    # can choose among candidate answers and summarise a section in its own words.
    language_model: ClassVar[bool] = True
    # Whether the backend answers several requests at once (a server), so that portfolio
    # members' prompts are sent together.
    concurrent_requests: ClassVar[bool] = False
    model: str = ""
    selection: str = ""  # why ``auto`` chose this backend (make_generator sets it)
    template_source: str = ""  # where a GGUF's chat template came from, when it has none
    # Where a backend keeps its measured prompt speed across processes (make_generator sets
    # FATHOM_HOME/models/prompt-speed.json): one entry per ``_speed_key``.
    speed_file: Path | None = None

    def __init__(self, cfg: GeneratorConfig) -> None:
        self.cfg = cfg
        # Milliseconds per prompt token, as measured lately on this machine (None until one
        # was): what a deadline needs before it sends a long context, and what the depth
        # decision prices a chunk of context at.
        self.prefill_ms_per_token: float | None = None
        self._speed_read = False

    # -- tokens ------------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """``generator.context_window``."""
        return self.cfg.context_window

    def count_tokens(self, texts: list[str]) -> list[int]:
        """A conservative estimate; backends with a tokenizer count exactly."""
        return [estimate_tokens(t) for t in texts]

    def _encode(self, messages: list[dict[str, str]]) -> tuple[int, Any]:
        """``(prompt tokens, what _complete reads)``: by default an upper-bound estimate of the
        chat prompt and the messages themselves."""
        return estimate_prompt_tokens(messages, self.count_tokens), messages

    def prompt_tokens(self, question: str, hits: list[Hit]) -> int:
        """Tokens of the full rendered prompt, template included (exact where the backend can
        tokenize it, else an over-estimate)."""
        return self._encode(build_messages(question, hits, self.cfg.framing))[0]

    # -- generation --------------------------------------------------------------------------

    def generate(
        self,
        question: str,
        hits: list[Hit],
        on_token: TokenSink | None = None,
        time_budget_ms: float | None = None,
    ) -> Draft:
        """Answer ``question`` from ``hits`` (numbered [1]…); streams pieces to ``on_token``.

        ``time_budget_ms`` (only where ``supports_deadline``): stop once this call has taken
        that long, with finish reason ``"deadline"``."""
        t0 = time.perf_counter()
        messages = build_messages(question, hits, self.cfg.framing)
        n_prompt, prompt = self._encode(messages)
        check_fits(self.name, self.model, n_prompt, self.cfg.max_tokens, self.context_window)
        out = self._complete(Request(prompt, on_token, t0, time_budget_ms))
        text = out.text.strip()
        n_out = out.completion_tokens
        return Draft(
            text=text,
            citations=parse_citations(text, len(hits)),
            prompt_tokens=out.prompt_tokens or n_prompt,
            completion_tokens=sum(self.count_tokens([text])) if n_out is None else n_out,
            backend=self.name,
            model=out.model or self.model,
            finish_reason=out.finish_reason,
            logprobs=out.logprobs,
            ms=(time.perf_counter() - t0) * 1000,
        )

    def _complete(self, req: Request) -> Completion:
        """Run the model on ``req.prompt`` (what ``_encode`` returned)."""
        raise NotImplementedError

    def complete(self, messages: list[dict[str, str]], time_budget_ms: float | None) -> str:
        """The model's reply to chat ``messages`` (a side prompt: a follow-up's rewrite), not
        streamed, within ``time_budget_ms`` where the backend holds to a deadline."""
        _, prompt = self._encode(messages)
        return self._complete(Request(prompt, None, time.perf_counter(), time_budget_ms)).text

    # -- abilities the engine uses (neutral defaults) -----------------------------------------

    @property
    def replayed_ms(self) -> float:
        """Generation time an evaluation cache replayed instead of running (0 here)."""
        return 0.0

    def expected_prefill_ms(self, prompt_tokens: int) -> float | None:
        """How long evaluating a prompt of ``prompt_tokens`` should take from an empty prompt
        cache, from the prompts measured so far (None before the first, and for a backend that
        measures none)."""
        rate = self._known_speed()
        return None if rate is None else rate * prompt_tokens

    def measure_prefill(self, question: str, hits: list[Hit]) -> float | None:
        """Measure prompt evaluation now, where the backend can (None: it cannot)."""
        return None

    def summarize(
        self, hits: list[Hit], on_token: TokenSink | None = None, question: str | None = None
    ) -> Draft | None:
        """A summary of ``hits`` (for ``question``; None: their key points) without a model,
        or None: a language model writes one by answering the summary question."""
        return None

    def use_vectors(self, vectors: Any) -> None:
        """Sentence vectors the Engine already made (``index.embed.SentenceVectors``), for a
        backend that reads them; ignored here."""

    def forget(self) -> None:
        """Drop state a later prompt could reuse (an in-process KV cache); nothing here."""

    def close(self) -> None:
        """Release clients and models; nothing here."""

    # -- the measured prompt speed ----------------------------------------------------------

    def _speed_key(self) -> str:
        """What one speed entry is the speed of: the backend and its model."""
        return f"{self.name}:{self.model}"

    def _known_speed(self) -> float | None:
        """The measured ms per prompt token: this process's, else the speed file's (read
        once)."""
        if self.prefill_ms_per_token is None and not self._speed_read:
            self._speed_read = True
            self.prefill_ms_per_token = self._speeds().get(self._speed_key())
        return self.prefill_ms_per_token

    def _speeds(self) -> dict[str, float]:
        if self.speed_file is None:
            return {}
        for path in (self.speed_file, self.speed_file.with_name(OLD_SPEED_FILE)):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}
        return {}

    def _record_speed(self, rate: float) -> None:
        """Keep a new measure (ms per prompt token), smoothed with the ones before it, here
        and in the speed file."""
        old = self._known_speed()
        self.prefill_ms_per_token = rate if old is None else 0.7 * old + 0.3 * rate
        if self.speed_file is None:
            return
        speeds = {**self._speeds(), self._speed_key(): round(self.prefill_ms_per_token, 4)}
        tmp = self.speed_file.with_name(f".{self.speed_file.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):  # a measure that is not kept costs nothing
            self.speed_file.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(speeds, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.speed_file)


# The speed file's earlier name, when only llama.cpp kept one: read when the new one is missing.
OLD_SPEED_FILE = "llamacpp-speed.json"
