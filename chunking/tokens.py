"""Token counting with the embedder's own tokenizer (the ``tokenizers`` library, no torch).

Chunk budgets are in the embedder's tokens, so ``HfTokenCounter`` loads the ``tokenizer.json``
that ships in a sentence-transformers model folder. ``WordCounter`` is the fallback when a model
has no ``tokenizer.json``: about 1.3 word-piece tokens per word for English prose.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from fathom.core.base import TokenCounter
from fathom.core.errors import BackendUnavailable

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

_WORD = re.compile(r"\w+|[^\w\s]")


class HfTokenCounter:
    """Counts tokens with a Hugging Face ``tokenizers`` tokenizer: no special tokens, no
    truncation, no padding."""

    def __init__(self, tokenizer: Tokenizer, id: str = "hf") -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.id = id
        # encode_batch_fast (tokenizers >= 0.20) skips computing character offsets we never use.
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)

    @classmethod
    def from_model_dir(cls, path: str | os.PathLike[str]) -> HfTokenCounter:
        """Load ``tokenizer.json`` from a (sentence-transformers) model folder."""
        from tokenizers import Tokenizer

        file = find_tokenizer_json(path)
        if file is None:
            raise BackendUnavailable(
                f"{path}: no tokenizer.json in the model folder — "
                "use a model saved with a fast tokenizer, or count with WordCounter"
            )
        data = file.read_bytes()
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        digest = hashlib.sha256(data).hexdigest()[:12]
        return cls(tokenizer, id=f"hf:{Path(path).name}:{digest}")

    def count(self, texts: list[str]) -> list[int]:
        """Token count of each text, in one batched call."""
        if not texts:
            return []
        return [len(enc.ids) for enc in self._encode(texts, add_special_tokens=False)]


class WordCounter:
    """Fallback estimate when no tokenizer is available: words and punctuation marks × 1.3,
    rounded up (word-piece tokenizers split rarer words into several pieces)."""

    id = "words*1.3"

    def count(self, texts: list[str]) -> list[int]:
        """Estimated token count of each text."""
        return [math.ceil(len(_WORD.findall(t)) * 1.3) for t in texts]


def find_tokenizer_json(path: str | os.PathLike[str]) -> Path | None:
    """``tokenizer.json`` in a model folder (or its ``0_Transformer/`` module), else ``None``."""
    root = Path(path)
    for candidate in (root / "tokenizer.json", root / "0_Transformer" / "tokenizer.json"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=8)
def _hf_counter(path: str) -> HfTokenCounter:
    return HfTokenCounter.from_model_dir(path)


def token_counter_for(model_dir: str | os.PathLike[str] | None) -> TokenCounter:
    """The embedder's tokenizer counter for a model folder (cached); ``WordCounter`` when there is
    no folder or it has no ``tokenizer.json``."""
    if model_dir is None:
        return WordCounter()
    if find_tokenizer_json(model_dir) is None:
        log.warning("%s: no tokenizer.json; estimating tokens from word counts", model_dir)
        return WordCounter()
    return _hf_counter(str(Path(model_dir).resolve()))
