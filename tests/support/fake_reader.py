"""A stand-in for Fathom's reader with the real tokenizer and windows and chosen logits.

``FakeReader(targets)`` gives, in every window, the first occurrence of each target string a
span score of ``score`` (start and end logits), earlier targets scoring higher; everything
else scores 0 and no-answer ``null`` (start and end logits at ``[CLS]``). Relevance is the
best target's span score in the window, else -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fathom.index.embed import packaged_minilm_dir
from fathom.index.reader import Reader, Windows, encode, load_tokenizer


class FakeReader(Reader):
    name = "fathom-reader"

    def __init__(
        self, targets: list[str], score: float = 5.0, null: float = 1.0, meta: Any = None
    ) -> None:
        super().__init__(folder=packaged_minilm_dir())
        self.targets = targets
        self.score = score
        self.null = null
        self.meta = dict(meta or {})
        self._tok = load_tokenizer(packaged_minilm_dir() / "tokenizer.json")
        self.texts: list[str] = []

    def load(self) -> FakeReader:
        return self

    def encode(self, question: str, texts: list[str], max_length: int = 128) -> Windows:
        self.texts = list(texts)
        return encode(self._tok, question, texts, max_length=max_length)

    def run(self, windows: Windows):
        n, width = windows.input_ids.shape
        start = np.zeros((n, width), dtype=np.float32)
        end = np.zeros((n, width), dtype=np.float32)
        start[:, 0] = end[:, 0] = self.null / 2
        rel = np.full(n, -1.0, dtype=np.float32)
        for r in range(n):
            text = self.texts[int(windows.owner[r])]
            for rank, target in enumerate(self.targets):
                at = text.find(target)
                if at < 0:
                    continue
                toks = np.flatnonzero(
                    windows.passage[r]
                    & (windows.ends[r] > at)
                    & (windows.starts[r] < at + len(target))
                )
                if not len(toks) or windows.starts[r, toks[0]] > at:
                    continue  # not wholly inside this window
                if windows.ends[r, toks[-1]] < at + len(target):
                    continue
                s = (self.score - rank * 0.5) / 2
                start[r, toks[0]] = max(start[r, toks[0]], s)
                end[r, toks[-1]] = max(end[r, toks[-1]], s)
                rel[r] = max(rel[r], 2 * s)
        return start, end, rel
