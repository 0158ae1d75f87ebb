"""Question sets for ``fathom eval``, ``policy sweep`` and ``portfolio build``: Fathom's JSONL
and the BEIR layout.

- JSONL (``questions.jsonl``): one ``{"qid", "question", "answers", "doc_ids"}`` object per line
  (``answers`` and ``doc_ids`` are lists of strings; a lone string is a list of one);
  ``is_impossible: true`` (SQuAD 2.0) or ``answerable: false`` (MuSiQue) marks an unanswerable
  question, as does an empty ``answers`` list on a set whose other questions have answers.
- BEIR: a folder with ``queries.jsonl`` (``_id``/``text`` or ``qid``/``question``) and
  ``qrels.tsv`` or ``qrels/test.tsv`` (``query-id  corpus-id  score``, one header line); only
  queries with judgements are kept. A JSONL file with ``--qrels FILE`` is read the same way.

The splits are here too: evaluated and fitting questions (``split_questions``), and the train
and test halves of the documents (``split_by_document``) that ``eval``, ``policy sweep`` and
``portfolio build|eval`` choose between.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fathom.core.errors import ConfigError, FathomError


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    question: str
    answers: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    qrels: dict[str, int] | None = field(default=None, hash=False, compare=False)
    unanswerable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "question": self.question,
            "answers": list(self.answers),
            "doc_ids": list(self.doc_ids),
            "qrels": self.qrels,
            "unanswerable": self.unanswerable,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Question:
        return cls(
            qid=d["qid"],
            question=d["question"],
            answers=tuple(d.get("answers") or ()),
            doc_ids=tuple(d.get("doc_ids") or ()),
            qrels=d.get("qrels"),
            unanswerable=bool(d.get("unanswerable")),
        )


def load_questions(path: str | Path, qrels: str | Path | None = None) -> list[Question]:
    """The questions at ``path`` (a JSONL file or a BEIR folder), in file order."""
    path = Path(path)
    if path.is_dir():
        queries = _first(path, ("queries.jsonl", "questions.jsonl"))
        qrels = qrels or _first(path, ("qrels.tsv", "qrels/test.tsv"))
        return _read(queries, Path(qrels))
    if not path.is_file():
        raise FathomError(f"{path}: no such question file or BEIR folder")
    return _read(path, Path(qrels) if qrels else None)


def _first(folder: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FathomError(f"{folder}: none of {', '.join(names)} found (BEIR layout expected)")


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id → {corpus-id: score}`` from a BEIR qrels TSV (header line skipped)."""
    out: dict[str, dict[str, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise FathomError(f"{path}: cannot read qrels ({exc.strerror or exc})") from None
    for lineno, line in enumerate(lines, 1):
        parts = line.split("\t") if "\t" in line else line.split()
        if not parts or not line.strip():
            continue
        if lineno == 1 and not parts[-1].lstrip("-").isdigit():
            continue  # header
        if len(parts) == 4:  # TREC qrels: qid 0 docid score
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise FathomError(f"{path}:{lineno}: expected query-id, corpus-id, score")
        try:
            out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        except ValueError:
            raise FathomError(f"{path}:{lineno}: score {parts[2]!r} is not an integer") from None
    return out


def _read(path: Path, qrels_path: Path | None) -> list[Question]:
    judged = read_qrels(qrels_path) if qrels_path else None
    records: list[dict[str, Any]] = []
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise FathomError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise TypeError("not an object")
            except (ValueError, TypeError) as exc:
                raise FathomError(f"{path}:{lineno}: not a JSON object ({exc})") from None
            rec["_line"] = lineno
            records.append(rec)
    any_answers = any(r.get("answers") for r in records)
    out: list[Question] = []
    seen: set[str] = set()
    for rec in records:
        # A null qid counts as absent, so it falls through to the other id keys.
        qid = next((rec[k] for k in ("qid", "_id", "id") if rec.get(k) is not None), "")
        qid = str(qid)
        text = rec.get("question", rec.get("text", rec.get("query")))
        if not qid or not isinstance(text, str) or not text.strip():
            raise FathomError(f"{path}:{rec['_line']}: needs a qid and a question")
        if qid in seen:
            raise FathomError(f"{path}:{rec['_line']}: duplicate qid {qid!r}")
        seen.add(qid)
        answers = tuple(a for a in _strings(path, rec, "answers") if a.strip())
        doc_ids = _strings(path, rec, "doc_ids")
        q_rels = None
        if judged is not None:
            if qid not in judged:
                continue
            q_rels = dict(judged[qid])
            doc_ids = tuple(d for d, s in q_rels.items() if s > 0)
        unanswerable = bool(
            rec.get("is_impossible")
            or rec.get("answerable") is False
            or (any_answers and not answers and judged is None)
        )
        if unanswerable:
            answers = ()
        out.append(Question(qid, text.strip(), answers, doc_ids, q_rels, unanswerable))
    if not out:
        raise FathomError(f"{path}: no questions" + (" with qrels" if judged is not None else ""))
    return out


def _strings(path: Path, rec: dict[str, Any], key: str) -> tuple[str, ...]:
    """``rec[key]`` as strings: a list as it is, a lone string as a list of one, null as none."""
    value = rec.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        shown = json.dumps(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise FathomError(
            f"{path}:{rec['_line']}: {key} must be a string or a list of strings, not {shown}"
        )
    return tuple(str(v) for v in value)


# ---------------------------------------------------------------------------------------------
# Splits: evaluated and fitting questions, and the two halves of the documents
# ---------------------------------------------------------------------------------------------


def split_questions(
    questions: list[Question], limit: int | None, fit_size: int, seed: int, need_fit: bool
) -> tuple[list[Question], list[Question]]:
    """Shuffle with ``seed``; the first ``limit`` are evaluated, the next ``fit_size`` (disjoint)
    fit the gates. Without enough questions left for fitting, the evaluated set shrinks."""
    order = list(questions)
    random.Random(seed).shuffle(order)
    n_eval = len(order) if limit is None else min(limit, len(order))
    if need_fit:
        spare = len(order) - n_eval
        if spare < min(fit_size, 20):
            # Fitting on evaluated questions would leak; take the fitting split off the top.
            n_fit = min(fit_size, max(20, len(order) // 5))
            if len(order) - n_fit < 1:
                raise ConfigError(
                    f"{len(order)} questions are too few to fit the threshold gates and "
                    "evaluate on the rest"
                )
            n_eval = min(n_eval, len(order) - n_fit)
        fit = order[n_eval : n_eval + fit_size]
    else:
        fit = []
    return order[:n_eval], fit


def document_half(doc_id: str, seed: int) -> str:
    """``"train"`` or ``"test"``: a document's half, from a hash of its id and ``seed`` (stable
    across runs and machines)."""
    import hashlib

    h = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return "train" if h[0] % 2 == 0 else "test"


def _document_groups(questions: list[Question]) -> Callable[[str], str]:
    """Each document's group: the smallest id among the documents its questions connect it to
    (a HotpotQA question on A and B joins every question on A or on B). A document no question
    names is its own group."""
    parent: dict[str, str] = {}

    def find(d: str) -> str:
        root = d
        while parent[root] != root:
            root = parent[root]
        while parent[d] != root:  # path compression
            parent[d], d = root, parent[d]
        return root

    for q in questions:
        for d in q.doc_ids:
            parent.setdefault(d, d)
        for d in q.doc_ids[1:]:
            a, b = find(q.doc_ids[0]), find(d)
            if a != b:
                # The smaller id is the root, so a group's root is its smallest document id,
                # whatever the order of the questions.
                a, b = min(a, b), max(a, b)
                parent[b] = a
    return lambda d: find(d) if d in parent else d


def split_by_document(questions: list[Question], half: str, seed: int) -> list[Question]:
    """The questions whose documents fall in ``half``: split by document, never by question, so
    no test question's document was seen in training.

    Questions that share any gold document form one group (connected through their documents:
    a HotpotQA question on A and B joins every question on A or on B), and a group goes to the
    half of its smallest document id, so a document never reaches both halves. With one gold
    document per question that is the half of the question's document. A question without any
    (unanswerable) goes by its qid."""
    if half not in ("train", "test"):
        raise ConfigError(f"document split {half!r}: must be train or test")
    group = _document_groups(questions)
    return [
        q
        for q in questions
        if document_half(group(q.doc_ids[0]) if q.doc_ids else q.qid, seed) == half
    ]


def half_documents(
    questions: list[Question], documents: Iterable[str], half: str, seed: int
) -> set[str]:
    """The ids among ``documents`` that fall in ``half`` as ``split_by_document`` splits
    ``questions``: a document with its group, one no question names by its own id."""
    if half not in ("train", "test"):
        raise ConfigError(f"document split {half!r}: must be train or test")
    group = _document_groups(questions)
    return {d for d in documents if document_half(group(d), seed) == half}


def read_set(
    folder: Path, split: str, seed: int = 0
) -> tuple[dict[str, str], dict[str, dict[str, Any]], list[Question]]:
    """A question set folder (``docs.jsonl``, ``questions.jsonl``) as the trainers read it: its
    document texts by id, its raw question records by qid, and the questions of ``split``
    (``train`` or ``test`` by document, as ``split_by_document``; ``all``: every one)."""

    def rows(path: Path) -> list[dict[str, Any]]:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    docs = {str(d["doc_id"]): d["text"] for d in rows(folder / "docs.jsonl")}
    raw = {str(r["qid"]): r for r in rows(folder / "questions.jsonl")}
    questions = load_questions(folder / "questions.jsonl")
    if split != "all":
        questions = split_by_document(questions, split, seed)
    return docs, raw, questions
