"""A generated SQuAD-shaped question set: articles of two paragraphs, a question on each second
paragraph (whose town the first paragraph does not name) and, optionally, one the article
cannot answer."""

from __future__ import annotations

import json
from pathlib import Path

from fathom.learn.questions import document_half

TOWNS = ["Rostfeld", "Quillmere", "Dunhallow", "Brackwater", "Elmsworth", "Karrow"]


def make_squadish(folder: Path, towns: list[str] = TOWNS, unanswerable: bool = True) -> list[str]:
    """``docs.jsonl`` and ``questions.jsonl`` in ``folder``, an article per town; returns the
    test half's document ids (split by document, seed 0)."""
    folder.mkdir(parents=True)
    docs, questions = [], []
    for i, town in enumerate(towns):
        first = f"Article {i} opens with the history of the valley and its rivers."
        second = f"The bridge of article {i} was built in the town of {town} in 1820."
        text = f"{first}\n\n{second}"
        doc_id = f"Article_{i}"
        docs.append({"doc_id": doc_id, "title": f"Article {i}", "text": text})
        questions.append(
            {
                "qid": f"q{i}",
                "question": f"In which town was the bridge of article {i} built?",
                "answers": [town],
                "answer_starts": [text.index(town)],
                "doc_ids": [doc_id],
                "para_index": 1,
                "para_char_start": len(first) + 2,
                "para_char_end": len(text),
            }
        )
        if unanswerable:
            questions.append(
                {
                    "qid": f"u{i}",
                    "question": f"Who painted the bridge of article {i}?",
                    "answers": [],
                    "doc_ids": [doc_id],
                    "is_impossible": True,
                }
            )
    for name, rows in (("docs.jsonl", docs), ("questions.jsonl", questions)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return [d["doc_id"] for d in docs if document_half(d["doc_id"], 0) == "test"]
