"""Append-only JSON Lines logs (an evaluation's ``log.jsonl``), read back tolerantly."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fathom.core.errors import ParseError


def read_log(path: str | os.PathLike) -> list[dict]:
    """The rows of ``log.jsonl``. A last line that does not parse (an interrupted run) is
    dropped; a bad line anywhere else is a ``ParseError``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows: list[dict] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):
                break  # cut off mid-write
            raise ParseError(
                str(path), f"line {i} is not valid JSON ({e.msg})", "re-run the evaluation"
            ) from None
        if not isinstance(row, dict):
            raise ParseError(str(path), f"line {i} is not a JSON object", "re-run the evaluation")
        rows.append(row)
    return rows
