"""Chunkers and token counting; a chunker is chosen by name from ``[chunker]`` config."""

from __future__ import annotations

from collections.abc import Callable

from fathom.chunking.semantic import SemanticChunker
from fathom.core.base import Chunker, TokenCounter
from fathom.core.config import ChunkerConfig
from fathom.core.errors import ConfigError

CHUNKERS: dict[str, Callable[[ChunkerConfig, TokenCounter], Chunker]] = {
    "semantic": lambda cfg, counter: SemanticChunker(
        counter,
        target_tokens=cfg.target_tokens,
        min_tokens=cfg.min_tokens,
        max_tokens=cfg.max_tokens,
        overlap_tokens=cfg.overlap_tokens,
    ),
}


def make_chunker(cfg: ChunkerConfig, counter: TokenCounter) -> Chunker:
    """The chunker named by ``cfg.name``, built with ``cfg``'s budgets and ``counter``."""
    try:
        factory = CHUNKERS[cfg.name]
    except KeyError:
        choices = ", ".join(sorted(CHUNKERS))
        raise ConfigError(
            f"chunker.name = {cfg.name!r}: unknown chunker — choose one of {choices}"
        ) from None
    return factory(cfg, counter)


__all__ = ["CHUNKERS", "SemanticChunker", "make_chunker"]
