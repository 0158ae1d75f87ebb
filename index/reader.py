"""Fathom's reader: one small cross-encoder that reads a question and a passage together.

The model (``index/reader/``: an int8 ONNX graph, its WordPiece tokenizer and ``reader.json``)
is the first layers of all-MiniLM-L6-v2 with two heads, trained by ``fathom.learn.reader``:

* a **relevance** logit per window (does this window hold the answer?), read off ``[CLS]``;
* **start/end** logits per token for the answer span, with ``[CLS]`` as the no-answer position.

A passage longer than one window is read as overlapping windows (``MAX_LENGTH`` tokens with
the question, ``STRIDE`` tokens shared by neighbours). ``Reader.read`` gives each passage its
best window's relevance and its best span with the margin of that span over no-answer;
everything here is numpy, ``tokenizers`` and ONNX Runtime — no torch at query time.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import BackendUnavailable

if TYPE_CHECKING:
    import numpy as np

NAME = "fathom-reader"
MODEL_DIR = Path(__file__).with_name("reader")
MODEL_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "reader.json"
MAX_LENGTH = 128  # tokens of one window: [CLS] question [SEP] passage [SEP]
RERANK_LENGTH = 80  # the reranker's shorter windows: one per candidate
QUESTION_TOKENS = 40  # a longer question is cut to its first 40 tokens
STRIDE = 32  # tokens two neighbouring windows of one passage share
MAX_ANSWER_TOKENS = 30


@dataclass(frozen=True, slots=True)
class Windows:
    """Encoded (question, passage window) pairs, padded to the longest window."""

    input_ids: np.ndarray  # (n, L) int64
    attention_mask: np.ndarray  # (n, L) int64
    token_type_ids: np.ndarray  # (n, L) int64
    passage: np.ndarray  # (n, L) bool: the token is passage text
    starts: np.ndarray  # (n, L) int64: each token's first character in its passage (-1: none)
    ends: np.ndarray  # (n, L) int64: one past its last character (-1: none)
    owner: np.ndarray  # (n,) int64: which passage the window reads

    def __len__(self) -> int:
        return len(self.owner)

    def select(self, rows: Any) -> Windows:
        """The windows at ``rows`` (an index array), trimmed to their own longest."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        width = int(self.attention_mask[rows].sum(axis=1).max()) if len(rows) else 1
        return Windows(
            *(a[rows, :width] for a in (self.input_ids, self.attention_mask)),
            self.token_type_ids[rows, :width],
            self.passage[rows, :width],
            self.starts[rows, :width],
            self.ends[rows, :width],
            self.owner[rows],
        )


def load_tokenizer(path: Path) -> Any:
    """The WordPiece tokenizer at ``path``, without its own padding and truncation."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _cut_question(tok: Any, question: str) -> str:
    """``question`` cut to its first ``QUESTION_TOKENS`` tokens."""
    enc = tok.encode(question, add_special_tokens=False)
    if len(enc.ids) <= QUESTION_TOKENS:
        return question
    return question[: enc.offsets[QUESTION_TOKENS - 1][1]]


def encode(
    tok: Any, question: str, texts: list[str], max_length: int = MAX_LENGTH, stride: int = STRIDE
) -> Windows:
    """Every window of every text, paired with ``question``."""
    import numpy as np

    question = _cut_question(tok, question.strip() or "?")
    tok.enable_truncation(max_length, stride=stride, strategy="only_second")
    try:
        encodings = tok.encode_batch([(question, t or " ") for t in texts])
    finally:
        tok.no_truncation()
    rows: list[Any] = []
    owner: list[int] = []
    for i, enc in enumerate(encodings):
        for window in (enc, *enc.overflowing):
            rows.append(window)
            owner.append(i)
    width = max((len(w.ids) for w in rows), default=1)
    n = len(rows)
    ids = np.zeros((n, width), dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.int64)
    types = np.zeros((n, width), dtype=np.int64)
    passage = np.zeros((n, width), dtype=bool)
    starts = np.full((n, width), -1, dtype=np.int64)
    ends = np.full((n, width), -1, dtype=np.int64)
    for r, w in enumerate(rows):
        m = len(w.ids)
        ids[r, :m], mask[r, :m], types[r, :m] = w.ids, w.attention_mask, w.type_ids
        seq = np.array([s if s is not None else -1 for s in w.sequence_ids])
        offs = np.asarray(w.offsets, dtype=np.int64).reshape(-1, 2)
        text_tok = (seq == 1) & (offs[:, 1] > offs[:, 0])
        passage[r, :m] = text_tok
        starts[r, :m] = np.where(text_tok, offs[:, 0], -1)
        ends[r, :m] = np.where(text_tok, offs[:, 1], -1)
    return Windows(ids, mask, types, passage, starts, ends, np.asarray(owner, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader found in one passage."""

    relevance: float  # the best window's relevance logit
    answer: float  # the best span's score over no-answer (logit margin; > 0: an answer)
    start: int  # the best span's characters in the passage, [start, end)
    end: int
    window: int  # which of the passage's windows it came from (0-based)


def best_spans(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    passage: np.ndarray,
    unit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window: the best span's first and last token and its score minus no-answer's.

    ``unit`` ``(n, L)``, when given, numbers the piece of text each token belongs to (a
    sentence; -1: none a span may touch): a span then starts and ends in one piece."""
    import numpy as np

    n, width = start_logits.shape
    neg = np.float32(-1e9)
    s = np.where(passage, start_logits, neg)
    e = np.where(passage, end_logits, neg)
    pair = s[:, :, None] + e[:, None, :]
    i, j = np.indices((width, width))
    band = (j >= i) & (j - i < MAX_ANSWER_TOKENS)
    pair = np.where(band[None], pair, neg)
    if unit is not None:
        same = (unit[:, :, None] == unit[:, None, :]) & (unit[:, :, None] >= 0)
        pair = np.where(same, pair, neg)
    flat = pair.reshape(n, -1).argmax(axis=1)
    first, last = np.divmod(flat, width)
    best = pair.reshape(n, -1)[np.arange(n), flat]
    null = start_logits[:, 0] + end_logits[:, 0]
    return first, last, (best - null).astype(np.float32)


class Reader:
    """The packaged reader (or one in ``folder``), loaded on first use; thread-safe."""

    name = NAME

    def __init__(self, folder: Path | None = None, threads: int | None = None) -> None:
        self.folder = Path(folder) if folder is not None else model_dir()
        self.threads = threads
        self._session: Any = None
        self._tok: Any = None
        self.meta: dict[str, Any] = {}
        self._error: BackendUnavailable | None = None  # a failed open, not tried again
        self._lock = threading.Lock()

    def load(self) -> Reader:
        """Open the model now; ``BackendUnavailable`` (one line) when it is missing or broken.
        A model that failed to open is not opened again: every later call raises the same."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._session is None:
                try:
                    self._open()
                except BackendUnavailable as exc:
                    self._error = exc
                    raise
        return self

    def _open(self) -> None:
        model, tok, meta = (self.folder / f for f in (MODEL_FILE, TOKENIZER_FILE, META_FILE))
        for path in (model, tok, meta):
            if not path.is_file():
                raise BackendUnavailable(f"reader model: {path} is missing")
        try:
            self.meta = json.loads(meta.read_text(encoding="utf-8"))
            self._tok = load_tokenizer(tok)
            import onnxruntime as ort

            opts = ort.SessionOptions()
            if self.threads:
                opts.intra_op_num_threads = self.threads
            opts.log_severity_level = 3
            self._session = ort.InferenceSession(
                str(model), opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # any unreadable file leaves the reader unusable
            text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            raise BackendUnavailable(
                f"reader model: {self.folder} cannot be loaded ({type(exc).__name__}: {text})"
            ) from None

    def encode(self, question: str, texts: list[str], max_length: int = MAX_LENGTH) -> Windows:
        self.load()
        return encode(self._tok, question, texts, max_length=max_length)

    def run(self, windows: Windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start logits, end logits ``(n, L)`` and relevance ``(n,)`` of ``windows``."""
        import numpy as np

        self.load()
        if not len(windows):
            z = np.zeros((0, 1), dtype=np.float32)
            return z, z, np.zeros(0, dtype=np.float32)
        feed = {
            "input_ids": windows.input_ids,
            "attention_mask": windows.attention_mask,
            "token_type_ids": windows.token_type_ids,
        }
        start, end, rel = self._session.run(None, feed)
        return start, end, rel.reshape(-1)

    def read(
        self, question: str, texts: list[str], windows: Windows | None = None
    ) -> list[Reading]:
        """Each text's best window and span (see ``Reading``); ``windows`` may be a subset of
        ``encode(question, texts)`` (a text with no window gets relevance ``-inf``)."""
        import numpy as np

        windows = windows if windows is not None else self.encode(question, texts)
        start, end, rel = self.run(windows)
        first, last, margin = best_spans(start, end, windows.passage)
        out: list[Reading] = []
        for t in range(len(texts)):
            rows = np.flatnonzero(windows.owner == t)
            if not len(rows):
                out.append(Reading(float("-inf"), float("-inf"), 0, 0, -1))
                continue
            r = rows[int(np.argmax(margin[rows]))]
            a = int(windows.starts[r, first[r]])
            b = int(windows.ends[r, last[r]])
            out.append(Reading(float(rel[rows].max()), float(margin[r]), a, b, int(r - rows[0])))
        return out


_SHARED: dict[str, Reader] = {}
_SHARED_LOCK = threading.Lock()


def model_dir() -> Path:
    """The reader's folder: ``FATHOM_READER_DIR`` (a retrained reader) or the packaged one."""
    env = os.environ.get("FATHOM_READER_DIR", "").strip()
    return Path(env).expanduser() if env else MODEL_DIR


def shared_reader(folder: Path | None = None) -> Reader:
    """One ``Reader`` per model folder for the process: the reranker and the answerer read
    with the same session."""
    key = str(Path(folder) if folder is not None else model_dir())
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Reader(Path(key))
        return _SHARED[key]


def answer_probability(margin: float) -> float:
    """The reader's two-way probability of its span over no answer, from the logit margin."""
    import math

    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, margin))))
