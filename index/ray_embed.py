"""Ingestion embedding as Ray tasks: an embedder whose ``embed`` fans out to Ray actors.

Each actor loads the same model once (from the same embedder configuration); a batch of texts
is cut into one contiguous shard per actor and the vectors come back in order. Everything else
(id, dimension, tokenizer, the ONNX export) is the wrapped local embedder's, so the collection
is the one a local ingest would build. Ray must already be initialised (``ray.init``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    from fathom.core.config import EmbedderConfig


class _EmbedActor:
    """Holds one embedder built from the configuration; embeds shards."""

    def __init__(self, cfg: dict[str, Any], models: str | None) -> None:
        from pathlib import Path

        from fathom.core.config import EmbedderConfig
        from fathom.index.embed import make_embedder

        # The models folder gives the actors the ONNX export (and the int8 model) the local
        # embedder uses, so remote vectors match a local ingest's.
        self.embedder = make_embedder(EmbedderConfig(**cfg), Path(models) if models else None)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)


class RayEmbedder:
    """``embed`` on ``actors`` Ray actors; the rest from ``inner`` (the local embedder)."""

    def __init__(
        self, inner: Any, cfg: EmbedderConfig, actors: int = 2, models: Path | None = None
    ) -> None:
        import dataclasses

        import ray

        self.inner = inner
        self.id = inner.id
        self._remote = ray.remote(num_cpus=1)(_EmbedActor)
        self._args = (dataclasses.asdict(cfg), str(models) if models else None)
        self._n_actors = max(1, actors)
        # Started by the first embed: an ingest with nothing new to embed starts none (an
        # actor killed while Ray was still placing it can keep its CPU from the next ones).
        self._actors: list[Any] = []
        self.shards = 0  # shards embedded remotely (for tests and logs)

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, name: str) -> Any:  # token_counter(), model_dir(), _load(), …
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim) float32``, computed by the actors in contiguous shards."""
        import numpy as np
        import ray

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not self._actors:
            self._actors = [self._remote.remote(*self._args) for _ in range(self._n_actors)]
        n = min(len(self._actors), len(texts))
        bounds = [round(i * len(texts) / n) for i in range(n + 1)]
        futures = [
            actor.embed.remote(texts[a:b])
            for actor, a, b in zip(self._actors, bounds, bounds[1:], strict=False)
        ]
        self.shards += len(futures)
        return np.concatenate(ray.get(futures), axis=0).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def close(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
