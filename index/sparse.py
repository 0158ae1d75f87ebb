"""Sparse BM25 index with bm25s: arrays saved as ``.npy`` with ``allow_pickle=False``.

Tokenisation is ours (NFKC, lowercase, ``\\w\\w+`` tokens, bm25s's English stopwords, PyStemmer
Snowball stems) so that documents and queries go through exactly the same function.

NFKC makes decomposed text (``e`` + combining acute, as typed on macOS or copied from some PDFs)
and compatibility characters (ligatures like ``ﬁ``, full-width forms, superscripts, the micro
sign) give the same terms as their plain forms. It leaves ASCII and NFC text without
compatibility characters unchanged, so indexes built before it keep working; text indexed before
it that had compatibility characters or was decomposed (NFD) matches queries only after a
re-ingest. Lower-casing is ``str.lower``, not ``casefold``, which would change the terms of ``ß``
in existing indexes.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.config import IndexConfig

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


@functools.lru_cache(maxsize=8)
def _stopwords(name: str) -> frozenset[str]:
    if not name or name == "none":
        return frozenset()
    from bm25s.stopwords import STOPWORDS_EN

    if name in ("en", "english"):
        return frozenset(STOPWORDS_EN)
    raise ValueError(f"index.bm25_stopwords = {name!r}: only 'en' or 'none' are supported")


@functools.lru_cache(maxsize=8)
def _stemmer(name: str):
    if not name or name == "none":
        return None
    import Stemmer

    return Stemmer.Stemmer(name)


def _normalise(text: str) -> str:
    """NFKC, then lower-case (see the module docstring for why this order and not casefold)."""
    return unicodedata.normalize("NFKC", text).lower()


class Analyzer:
    """Text → BM25 terms; the same for documents and queries."""

    def __init__(
        self, stemmer: str = "english", stopwords: str = "en", stop_list: list[str] | None = None
    ) -> None:
        """``stop_list`` overrides the named list (the index stores the list it was built with,
        so queries need not import bm25s for it)."""
        self.stemmer_name = stemmer
        self.stopwords_name = stopwords
        self._stop = frozenset(stop_list) if stop_list is not None else _stopwords(stopwords)
        self._stem = _stemmer(stemmer)
        self._cache: dict[str, str] = {}

    def params(self) -> dict[str, str]:
        return {"stemmer": self.stemmer_name, "stopwords": self.stopwords_name}

    def terms_batch(self, texts: list[str]) -> list[list[str]]:
        """Terms of each text; stems every distinct word once."""
        stop = self._stop
        words = [[w for w in _TOKEN.findall(_normalise(t)) if w not in stop] for t in texts]
        if self._stem is None:
            return words
        cache = self._cache
        new = {w for ws in words for w in ws if w not in cache}
        if new:
            new_list = list(new)
            cache.update(zip(new_list, self._stem.stemWords(new_list), strict=True))
        return [[cache[w] for w in ws] for ws in words]

    def terms(self, text: str) -> list[str]:
        return self.terms_batch([text])[0]


class Bm25Index:
    """BM25 over the chunk store (row i = chunk i).

    Built with bm25s (which precomputes every (term, chunk) score into a CSC matrix) and saved in
    its format; queries read those arrays with numpy alone, so the query path never imports
    bm25s or scipy (about a second of start-up).
    """

    DIR = "bm25"

    def __init__(
        self,
        analyzer: Analyzer,
        n: int,
        vocab: dict[str, int],
        data: np.ndarray | None = None,
        indices: np.ndarray | None = None,
        indptr: np.ndarray | None = None,
        model: Any = None,
    ) -> None:
        self.analyzer = analyzer
        self.n = n
        self.vocab = vocab
        self.data, self.indices, self.indptr = data, indices, indptr
        self.model = model  # the bm25s object when freshly built (saving needs it)

    @classmethod
    def build(cls, texts: list[str], cfg: IndexConfig) -> Bm25Index:
        import bm25s

        analyzer = Analyzer(cfg.bm25_stemmer, cfg.bm25_stopwords)
        terms = analyzer.terms_batch(texts)
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in terms]
        model = bm25s.BM25(k1=cfg.bm25_k1, b=cfg.bm25_b)
        if not texts:
            return cls(analyzer, 0, {}, model=model)
        model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
        sc = model.scores
        return cls(
            analyzer,
            len(texts),
            dict(model.vocab_dict),
            sc["data"],
            sc["indices"],
            sc["indptr"],
            model=model,
        )

    def params(self, cfg: IndexConfig) -> dict[str, Any]:
        return {"k1": cfg.bm25_k1, "b": cfg.bm25_b, "n": self.n, **self.analyzer.params()}

    def save(self, directory: Path) -> None:
        out = directory / self.DIR
        out.mkdir(parents=True, exist_ok=True)
        if self.n:
            self.model.save(str(out), allow_pickle=False, show_progress=False)
        meta = {"n": self.n, **self.analyzer.params(), "stop_list": sorted(self.analyzer._stop)}
        (out / "fathom.json").write_text(json.dumps(meta), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, mmap: bool = False) -> Bm25Index:
        """Read the saved arrays (``.npy``, ``allow_pickle=False``) and vocabulary."""
        import numpy as np

        src = directory / cls.DIR
        meta = json.loads((src / "fathom.json").read_text(encoding="utf-8"))
        analyzer = Analyzer(meta["stemmer"], meta["stopwords"], meta.get("stop_list"))
        n = int(meta["n"])
        if not n:
            return cls(analyzer, 0, {})
        params = json.loads((src / "params.index.json").read_text(encoding="utf-8"))
        if params.get("method", "lucene") not in ("lucene", "robertson", "atire"):
            raise ValueError(f"{src}: BM25 variant {params['method']!r} is not supported")
        mode = "r" if mmap else None
        arrays = [
            np.load(src / f"{name}.csc.index.npy", allow_pickle=False, mmap_mode=mode)
            for name in ("data", "indices", "indptr")
        ]
        vocab = json.loads((src / "vocab.index.json").read_text(encoding="utf-8"))
        return cls(analyzer, n, vocab, *arrays)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every row for ``query``: ``(n,) float32``.

        Sum over the query's terms (repeats count, as in bm25s) of each term's precomputed
        column of chunk scores.
        """
        import numpy as np

        if not self.n:
            return np.zeros(0, dtype=np.float32)
        ids = [self.vocab[t] for t in self.analyzer.terms(query) if t in self.vocab]
        if not ids:
            return np.zeros(self.n, dtype=np.float32)
        starts, ends = self.indptr[ids], self.indptr[np.asarray(ids) + 1]
        rows = np.concatenate([self.indices[a:b] for a, b in zip(starts, ends, strict=True)])
        vals = np.concatenate([self.data[a:b] for a, b in zip(starts, ends, strict=True)])
        return np.bincount(rows, weights=vals, minlength=self.n).astype(np.float32)

    def search(
        self, query: str, k: int, within: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows with a positive score, by score then row: ``(scores (k',), rows (k',)
        int64)``; ``within``: only these rows (``(n,) int64``, ascending)."""
        scores = self.scores(query)
        if within is not None and len(scores):
            picked, where = top_positive(scores[within], k)
            return picked, within[where]
        return top_positive(scores, k)


def top_positive(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` positions of ``scores`` ``(n,)`` with a positive score, by score then
    position: ``(scores (k',) float32, positions (k',) int64)``."""
    import numpy as np

    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    # Exact order: score descending, then row ascending, also for which of the rows tied at
    # the k-th score make the cut (argpartition alone keeps an arbitrary subset of them). The
    # candidates are every positive row scoring at least the k-th score: O(n), then a sort of
    # the few candidates. (Partitioning the negated scores at k − 1 is much faster than the
    # scores at n − k when most of them are 0.)
    kth = -np.partition(-scores, k - 1)[k - 1] if k < n else scores.min()
    cand = np.flatnonzero((scores >= kth) & (scores > 0))
    top = cand[np.lexsort((cand, -scores[cand]))[:k]]
    return scores[top].astype(np.float32), top.astype(np.int64)
