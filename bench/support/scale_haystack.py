"""The scale bench's haystack: needles (gold passages with their questions) inside real text
and, past what exists, distractors that recombine real sentences of other documents.

Everything here is pure and deterministic by seed: the same data and seed give the same
records in the same order, and a larger size's haystack holds a smaller one's real records. No
haystack record holds a sentence of a needle passage (real records that do are dropped, and the
sentence pool the distractors draw from leaves them out), so the only copy of a gold passage
in a collection is its needle.

Records are ``{"doc_id", "title", "text"}`` dicts as ``docs.jsonl`` holds them; ids are
numbered in file order (``0000000n`` for needles, ``0000123h`` for the haystack), so a
collection's rows, which follow the records' ids, follow the file.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Sets of real text the haystack is built from (``docs.jsonl`` folders), besides SQuAD 1.1's
# training paragraphs and the training halves of the needle sets. SQuAD 2.0's folders are left
# out: their dev articles are SQuAD 1.1 dev's (the needles') and their train articles 1.1's.
HAYSTACK_SETS = (
    "hotpotqa_dev500",
    "scifact",
    "musique_train100_hipporag",
    "hotpotqa_train100_hipporag",
)
SQUAD_DEV = "squad_v1.1_dev"
COVIDQA = "covidqa_200423"
SQUAD_TRAIN = "squad_v1.1_train/train-v1.1.json"
MAX_WORDS = 150  # a distractor's words at most
PASSAGE_CHARS = 1600  # a COVID-QA needle: its paragraph, cut to about this around the answer
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Needle:
    """A needle question: its gold answers and the id of the passage record that holds them."""

    qid: str
    question: str
    answers: tuple[str, ...]
    passage: str  # the needle record's doc_id
    source: str  # "squad" | "covidqa"

    def to_dict(self) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "question": self.question,
            "answers": list(self.answers),
            "passage": self.passage,
            "source": self.source,
        }


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (a plain rule: end mark, space, capital or digit)."""
    out = []
    for para in text.split("\n"):
        out += [s.strip() for s in _SENTENCE.split(para) if s.strip()]
    return out


def fingerprint(sentence: str) -> str:
    """A sentence's key for the no-copy check: case and spacing folded, hashed."""
    return hashlib.blake2b(
        _SPACE.sub(" ", sentence.lower()).strip().encode(), digest_size=12
    ).hexdigest()


def _rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _test_half(folder: Path, seed: int) -> tuple[list[dict[str, Any]], set[str]]:
    """A set's test-half questions (split by document, as every Fathom evaluation splits)
    and its test-half document ids."""
    from fathom.learn.questions import Question, split_by_document

    raw = _rows(folder / "questions.jsonl")
    qs = [
        Question(str(r["qid"]), r["question"], tuple(r["answers"]), tuple(r["doc_ids"]))
        for r in raw
    ]
    keep = {q.qid for q in split_by_document(qs, "test", seed)}
    test = [r for r in raw if str(r["qid"]) in keep and r.get("answers")]
    return test, {d for r in test for d in r["doc_ids"]}


def _covid_passage(text: str, start: int, answer: str) -> tuple[int, int]:
    """The span of ``text`` around an answer at ``start``: its paragraph, cut to about
    ``PASSAGE_CHARS`` centred on the answer at whitespace when the paragraph is longer."""
    a = text.rfind("\n\n", 0, start)
    a = 0 if a < 0 else a + 2
    b = text.find("\n\n", start + len(answer))
    b = len(text) if b < 0 else b
    if b - a > PASSAGE_CHARS:
        mid = start + len(answer) // 2
        lo = max(a, mid - PASSAGE_CHARS // 2)
        hi = min(b, max(start + len(answer), lo + PASSAGE_CHARS))
        lo = text.find(" ", lo, start) + 1 if lo > a else a
        hi_space = text.rfind(" ", start + len(answer), hi)
        a, b = lo, (hi_space if hi < b and hi_space > 0 else hi)
    return a, b


def load_needles(data: Path, per_set: int, seed: int) -> tuple[list[dict[str, Any]], list[Needle]]:
    """``per_set`` questions from each of SQuAD 1.1 dev's and COVID-QA's test halves (shuffled
    with ``seed``), whose gold answer is in the passage, with the passage records they need
    (a passage shared by several questions once). Passage records' ``doc_id`` is a key until
    ``number`` gives the final ids."""
    passages: dict[str, dict[str, Any]] = {}
    needles: list[Needle] = []
    for name, source in ((SQUAD_DEV, "squad"), (COVIDQA, "covidqa")):
        folder = data / name
        docs = {str(d["doc_id"]): d for d in _rows(folder / "docs.jsonl")}
        test, _ = _test_half(folder, seed)
        random.Random(seed).shuffle(test)
        taken = 0
        for r in test:
            if taken >= per_set:
                break
            doc = docs[r["doc_ids"][0]]
            if source == "squad":
                a, b = r["para_char_start"], r["para_char_end"]
            else:
                a, b = _covid_passage(doc["text"], r["answer_starts"][0], r["answers"][0])
            text = doc["text"][a:b].strip()
            answers = tuple(
                x for x in dict.fromkeys(r["answers"]) if x.strip() and x.strip() in text
            )
            if not answers:
                continue
            key = f"{source}:{doc['doc_id']}:{a}"
            passages.setdefault(key, {"doc_id": key, "title": doc.get("title") or "", "text": text})
            needles.append(Needle(str(r["qid"]), r["question"], answers, key, source))
            taken += 1
    return list(passages.values()), needles


def real_records(data: Path, seed: int) -> list[dict[str, Any]]:
    """The haystack's real documents, interleaved across sources: SQuAD 1.1's training
    paragraphs, the other sets' documents, and the training halves of the needle sets (SQuAD
    dev articles as paragraphs, COVID-QA papers whole)."""
    sources: list[list[dict[str, Any]]] = []
    squad = json.loads((data / SQUAD_TRAIN).read_text(encoding="utf-8"))
    sources.append(
        [
            {"title": a["title"].replace("_", " "), "text": p["context"]}
            for a in squad["data"]
            for p in a["paragraphs"]
        ]
    )
    for name in HAYSTACK_SETS:
        if (data / name / "docs.jsonl").is_file():
            sources.append(
                [
                    {"title": d.get("title") or "", "text": d["text"]}
                    for d in _rows(data / name / "docs.jsonl")
                ]
            )
    for name in (SQUAD_DEV, COVIDQA):
        _, test_docs = _test_half(data / name, seed)
        docs = [d for d in _rows(data / name / "docs.jsonl") if str(d["doc_id"]) not in test_docs]
        if name == SQUAD_DEV:
            sources.append(
                [
                    {"title": d["title"], "text": p}
                    for d in docs
                    for p in d["text"].split("\n\n")
                    if p.strip()
                ]
            )
        else:
            sources.append([{"title": d["title"], "text": d["text"]} for d in docs])
    out = []
    for i in range(max(map(len, sources))):
        out += [s[i] for s in sources if i < len(s)]
    return out


def without_needles(
    records: Iterable[dict[str, Any]], needle_keys: set[str]
) -> list[dict[str, Any]]:
    """``records`` less any that holds a sentence of a needle passage (by ``fingerprint``) or
    repeats an earlier record."""
    out, seen = [], set()
    for r in records:
        key = (r["title"], r["text"])
        if key in seen or any(fingerprint(s) in needle_keys for s in sentences(r["text"])):
            continue
        seen.add(key)
        out.append(r)
    return out


def sentence_pool(records: Iterable[dict[str, Any]], needle_keys: set[str]) -> list[list[str]]:
    """Each record's sentences of 6 to 80 words (none a needle's), records with at least two."""
    pool = []
    for r in records:
        kept = [
            s
            for s in sentences(r["text"])
            if 6 <= len(s.split()) <= 80 and fingerprint(s) not in needle_keys
        ]
        if len(kept) >= 2:
            pool.append(kept)
    return pool


def distractor(pool: list[list[str]], titles: list[str], i: int, seed: int) -> dict[str, Any]:
    """Distractor ``i``: a real title and runs of one to three consecutive sentences, each run
    from another document of ``pool``, of 100–140 words and never more than ``MAX_WORDS`` (one
    chunk at the default chunker settings)."""
    rng = random.Random(f"scale-distractor:{seed}:{i}")
    target = rng.randint(100, 140)
    parts: list[str] = []
    words = 0
    used: set[int] = set()
    for _ in range(200):  # tries; a pool of long sentences may end a distractor short
        if words >= target:
            break
        d = rng.randrange(len(pool))
        if d in used:
            continue
        used.add(d)
        doc = pool[d]
        n = rng.randint(1, 3)
        start = rng.randrange(max(1, len(doc) - n + 1))
        for s in doc[start : start + n]:
            if words + len(s.split()) > MAX_WORDS:
                break
            parts.append(s)
            words += len(s.split())
    return {"title": titles[rng.randrange(len(titles))], "text": " ".join(parts)}


def distractors(
    pool: list[list[str]], titles: list[str], seed: int, start: int = 0
) -> Iterator[dict[str, Any]]:
    """Distractors ``start``, ``start + 1``, … (endless)."""
    i = start
    while True:
        yield distractor(pool, titles, i, seed)
        i += 1


def needle_keys(passages: Iterable[dict[str, Any]]) -> set[str]:
    """The fingerprints of every needle passage's sentences."""
    return {fingerprint(s) for p in passages for s in sentences(p["text"])}


def compose(
    passages: list[dict[str, Any]],
    real: list[tuple[dict[str, Any], int]],
    pool: list[list[str]],
    seed: int,
    size: int,
    needle_chunks: int,
    doc_chunks: int = 1,
) -> tuple[list[dict[str, Any]], dict[str, str], int]:
    """The records of a ``size``-chunk haystack: every needle passage (``needle_chunks``
    chunks in all), then real records (each with its chunk count) in order while they fit,
    then distractor documents of ``doc_chunks`` distractors each, one paragraph apiece (one
    chunk each: a document of 20 makes 20 chunks, give or take one where the chunker splits a
    paragraph), under the first one's title. Returns ``(records with final ids, needle key →
    id, expected chunks)``."""
    records: list[dict[str, Any]] = []
    ids: dict[str, str] = {}
    for p in passages:
        doc_id = f"{len(records):07d}n"
        ids[p["doc_id"]] = doc_id
        records.append({"doc_id": doc_id, "title": p["title"], "text": p["text"]})
    chunks = needle_chunks
    for rec, n in real:
        if chunks + n > size:
            break
        records.append({"doc_id": f"{len(records):07d}h", **rec})
        chunks += n
    titles = [r["title"] for r, _ in real if r["title"]] or ["Notes"]
    gen = distractors(pool, titles, seed)
    while chunks < size:
        parts = [next(gen) for _ in range(min(doc_chunks, size - chunks))]
        text = "\n\n".join(p["text"] for p in parts)
        records.append({"doc_id": f"{len(records):07d}h", "title": parts[0]["title"], "text": text})
        chunks += len(parts)
    return records, ids, chunks


def write_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
