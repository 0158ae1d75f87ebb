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
from dataclasses import dataclass, field
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
        tokens: int = 0,
    ) -> None:
        self.analyzer = analyzer
        self.n = n
        self.vocab = vocab
        self.data, self.indices, self.indptr = data, indices, indptr
        self.model = model  # the bm25s object when freshly built (saving needs it)
        self.tokens = tokens  # terms indexed, when built here (a segment's share of avgdl)
        self.k1, self.b = 1.5, 0.75

    @classmethod
    def build(
        cls, texts: list[str], cfg: IndexConfig, stats: CorpusStats | None = None
    ) -> Bm25Index:
        """Index ``texts``; ``stats``: the other segments' statistics, which the scores are
        computed with (document frequencies, rows and mean length over them and ``texts``),
        so they compare with those segments' scores."""
        import bm25s

        analyzer = Analyzer(cfg.bm25_stemmer, cfg.bm25_stopwords)
        terms = analyzer.terms_batch(texts)
        tokens = sum(len(t) for t in terms)
        if stats is not None and texts:
            out = _build_scored(analyzer, terms, cfg, stats)
            out.tokens = tokens
            return out
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
            tokens=tokens,
        )

    def doc_freqs(self) -> dict[str, int]:
        """Each term's document frequency (its column's stored scores: one per row holding
        it)."""
        import numpy as np

        if not self.n:
            return {}
        counts = np.diff(np.asarray(self.indptr)).tolist()
        width = len(counts)
        return {t: counts[i] for t, i in self.vocab.items() if i < width}

    def params(self, cfg: IndexConfig) -> dict[str, Any]:
        return {"k1": cfg.bm25_k1, "b": cfg.bm25_b, "n": self.n, **self.analyzer.params()}

    def save(self, directory: Path) -> None:
        import numpy as np

        out = directory / self.DIR
        out.mkdir(parents=True, exist_ok=True)
        if self.n and self.model is not None:
            self.model.save(str(out), allow_pickle=False, show_progress=False)
        elif self.n:  # scored here (``stats``): the same files bm25s writes
            for name, arr in (
                ("data", self.data),
                ("indices", self.indices),
                ("indptr", self.indptr),
            ):
                np.save(out / f"{name}.csc.index.npy", arr, allow_pickle=False)
            (out / "vocab.index.json").write_text(json.dumps(self.vocab), encoding="utf-8")
            params = {"k1": self.k1, "b": self.b, "method": "lucene", "num_docs": self.n}
            (out / "params.index.json").write_text(json.dumps(params), encoding="utf-8")
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


@dataclass
class CorpusStats:
    """BM25 statistics of the rows a new segment joins: rows, terms indexed, and each term's
    document frequency."""

    rows: int = 0
    tokens: int = 0
    df: dict[str, int] = field(default_factory=dict)
    unknown_rows: int = 0  # rows of segments that did not record their terms

    def add(self, index: Bm25Index, tokens: int) -> None:
        """Count in segment ``index`` (``tokens``: its terms, 0 when not recorded: then its
        rows count at the new rows' mean length)."""
        self.rows += index.n
        self.tokens += tokens
        for term, n in index.doc_freqs().items():
            self.df[term] = self.df.get(term, 0) + n
        if not tokens:
            self.unknown_rows += index.n


def _build_scored(
    analyzer: Analyzer, terms: list[list[str]], cfg: IndexConfig, stats: CorpusStats
) -> Bm25Index:
    """BM25 (Lucene's variant, as bm25s scores it) of ``terms`` under the statistics of the
    whole collection they join, as a CSC matrix (a column per term, a row per text)."""
    import numpy as np

    vocab: dict[str, int] = {}
    ids = [
        np.asarray([vocab.setdefault(t, len(vocab)) for t in doc], dtype=np.int64) for doc in terms
    ]
    n = len(terms)
    lens = np.asarray([len(d) for d in ids], dtype=np.float64)
    rows = stats.rows + n
    unknown = stats.unknown_rows
    mean_new = lens.mean() if n else 0.0
    avgdl = max((stats.tokens + lens.sum() + unknown * mean_new) / max(rows, 1), 1e-9)
    doc_col, term_col, tf_col = [], [], []
    for i, doc in enumerate(ids):
        uniq, tf = np.unique(doc, return_counts=True)
        doc_col.append(np.full(len(uniq), i, dtype=np.int64))
        term_col.append(uniq)
        tf_col.append(tf)
    docs = np.concatenate(doc_col) if doc_col else np.zeros(0, np.int64)
    tids = np.concatenate(term_col) if term_col else np.zeros(0, np.int64)
    tf = np.concatenate(tf_col).astype(np.float64) if tf_col else np.zeros(0)
    names = list(vocab)
    df_here = np.bincount(tids, minlength=len(names)).astype(np.float64)
    df = df_here + np.asarray([stats.df.get(t, 0) for t in names], dtype=np.float64)
    idf = np.log(1 + (rows - df + 0.5) / (df + 0.5))
    k1, b = cfg.bm25_k1, cfg.bm25_b
    score = idf[tids] * tf / (k1 * (1 - b + b * lens[docs] / avgdl) + tf)
    order = np.lexsort((docs, tids))
    indptr = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(np.bincount(tids, minlength=len(names)), out=indptr[1:])
    out = Bm25Index(
        analyzer,
        n,
        vocab,
        score[order].astype(np.float32),
        docs[order].astype(np.int32),
        indptr.astype(np.int32 if indptr[-1] < 2**31 else np.int64),
    )
    out.k1, out.b = k1, b
    return out


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
