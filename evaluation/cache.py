"""A generation cache keyed by (backend, model, generation settings, prompt), in SQLite.

Strategies that send the same prompt (``fixed:4`` and a gate that chose 4, say) pay for one
generation. A replayed draft keeps the time its generation took, and ``replayed_ms`` tells the
caller how much generation time a replay skipped, so latencies stay those of a real run.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from fathom.core.base import Draft, Hit


class CachingGenerator:
    """Wraps a generator; ``generate`` replays a stored draft for a prompt seen before."""

    def __init__(self, inner: Any, path: Path, settings: dict[str, Any] | None = None) -> None:
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.settings = dict(settings or {})
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS drafts (key TEXT PRIMARY KEY, draft TEXT NOT NULL)"
        )
        self.hits = 0
        self.misses = 0
        # A draft is stored only when generated from an empty KV cache (after ``forget``), so a
        # replay stands for a cold generation: a feedback round that reused the previous
        # round's prefix is faster than the same prompt asked on its own. A backend that keeps
        # no cache Fathom can drop (a server) is taken as it comes.
        self._cold = not inner.keeps_prompt_cache
        self.replayed_ms = 0.0  # generation time the replays stood in for (since last reset)

    # The Generator protocol, delegated.
    @property
    def context_window(self) -> int:
        return self.inner.context_window

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def prompt_tokens(self, question: str, hits: list[Hit]) -> int:
        return self.inner.prompt_tokens(question, hits)

    def __getattr__(self, name: str) -> Any:  # the rest of the protocol: the inner's
        if name == "inner":  # not set yet (during unpickling): avoid recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def forget(self) -> None:
        """Drop the wrapped generator's KV cache (when it keeps one)."""
        self.inner.forget()
        self._cold = True

    def key(self, question: str, hits: list[Hit]) -> str:
        from fathom.stages.generate.prompt import build_messages

        payload = {
            # 2: drafts are timed from an empty KV cache (``forget``); older ones may carry a
            # time that reused the previous prompt's prefix, so they are not replayed.
            "format": 2,
            "backend": self.name,
            "model": self.model,
            "settings": self.settings,
            "messages": build_messages(question, hits),
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    def generate(
        self,
        question: str,
        hits: list[Hit],
        on_token: Any | None = None,
        time_budget_ms: float | None = None,
    ) -> Draft:
        """A replay when the prompt was generated before (and, with ``time_budget_ms``, that
        generation fitted the budget); else the wrapped generator's answer, stored when it was
        generated cold and not cut by a deadline (a cut depends on this run's timing)."""
        t0 = time.perf_counter()
        key = self.key(question, hits)
        row = self._db.execute("SELECT draft FROM drafts WHERE key = ?", (key,)).fetchone()
        if row is not None:
            draft = _draft_from_json(row[0])
            if time_budget_ms is None or draft.ms <= time_budget_ms:
                self.hits += 1
                self.replayed_ms += max(0.0, draft.ms - (time.perf_counter() - t0) * 1000)
                if on_token is not None:
                    on_token(draft.text)
                return draft
        extra = {} if time_budget_ms is None else {"time_budget_ms": time_budget_ms}
        draft = self.inner.generate(question, hits, on_token=on_token, **extra)
        self.misses += 1
        if self._cold and draft.finish_reason != "deadline":
            self._db.execute(
                "INSERT OR REPLACE INTO drafts (key, draft) VALUES (?, ?)",
                (key, _draft_json(draft)),
            )
        self._cold = not self.inner.keeps_prompt_cache
        return draft

    def take_replayed_ms(self) -> float:
        """Replayed generation time since the last call, and reset it."""
        ms, self.replayed_ms = self.replayed_ms, 0.0
        return ms

    def close(self) -> None:
        self._db.close()
        self.inner.close()


def _draft_json(d: Draft) -> str:
    return json.dumps(
        {
            "text": d.text,
            "citations": list(d.citations),
            "prompt_tokens": d.prompt_tokens,
            "completion_tokens": d.completion_tokens,
            "backend": d.backend,
            "model": d.model,
            "finish_reason": d.finish_reason,
            "logprobs": list(d.logprobs) if d.logprobs is not None else None,
            "ms": d.ms,
        },
        ensure_ascii=False,
    )


def _draft_from_json(s: str) -> Draft:
    d = json.loads(s)
    return Draft(
        text=d["text"],
        citations=tuple(d["citations"]),
        prompt_tokens=d["prompt_tokens"],
        completion_tokens=d["completion_tokens"],
        backend=d["backend"],
        model=d["model"],
        finish_reason=d["finish_reason"],
        logprobs=tuple(d["logprobs"]) if d["logprobs"] is not None else None,
        ms=d["ms"],
    )
