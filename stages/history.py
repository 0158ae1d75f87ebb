"""Every ask, recorded in SQLite (``FATHOM_HOME/history.db``) with versioned migrations.

``PRAGMA user_version`` holds the schema version; each migration runs once, in order, inside a
transaction. ``stats`` computes latency percentiles, SLO compliance, depth, tokens and cost.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.stages.followup import Turn
    from fathom.stages.records import Answer

MIGRATIONS: list[str] = [
    # 1: one row per ask
    """
    CREATE TABLE asks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        question TEXT NOT NULL,
        target TEXT NOT NULL,
        collection TEXT NOT NULL,
        query_type TEXT,
        policy TEXT,
        k INTEGER,
        reason TEXT,
        total_ms REAL,
        stages_ms TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        context_tokens INTEGER,
        embedding_tokens INTEGER,
        cost REAL,
        currency TEXT,
        backend TEXT,
        model TEXT,
        confidence REAL,
        rounds INTEGER,
        answer TEXT
    );
    CREATE INDEX asks_ts ON asks(ts);
    """,
    # 2: conversations (ask --session): the session, the question as asked (``question`` is
    # the standalone one answered), the subject a follow-up was resolved to, the cited titles
    """
    ALTER TABLE asks ADD COLUMN session TEXT;
    ALTER TABLE asks ADD COLUMN asked TEXT;
    ALTER TABLE asks ADD COLUMN subject TEXT;
    ALTER TABLE asks ADD COLUMN cited TEXT;
    CREATE INDEX asks_session ON asks(session, id);
    """,
]


def _percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class History:
    """The ask log. Opening it applies any pending migrations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._migrate()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            yield conn
        finally:
            conn.close()

    def _migrate(self) -> None:
        with self._connect() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
                with conn:
                    conn.executescript(f"BEGIN;\n{sql}\nPRAGMA user_version = {number};\nCOMMIT;")

    @property
    def version(self) -> int:
        with self._connect() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    def record(self, row: dict[str, Any]) -> int:
        cols = [
            "ts",
            "question",
            "target",
            "collection",
            "query_type",
            "policy",
            "k",
            "reason",
            "total_ms",
            "stages_ms",
            "prompt_tokens",
            "completion_tokens",
            "context_tokens",
            "embedding_tokens",
            "cost",
            "currency",
            "backend",
            "model",
            "confidence",
            "rounds",
            "answer",
            "session",
            "asked",
            "subject",
            "cited",
        ]
        data = {**row, "ts": row.get("ts", time.time())}
        data["stages_ms"] = json.dumps(data.get("stages_ms", {}))
        data["cited"] = json.dumps(list(data.get("cited") or []))
        values = [data.get(c) for c in cols]
        with self._connect() as conn, conn:
            cur = conn.execute(
                f"INSERT INTO asks ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                values,
            )
            return int(cur.lastrowid or 0)

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        with self._connect() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM asks ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["stages_ms"] = json.loads(d["stages_ms"] or "{}")
            out.append(d)
        return out

    def turns(self, session: str, limit: int) -> list[Turn]:
        """The last ``limit`` asks of conversation ``session``, oldest first."""
        from fathom.stages.followup import Turn

        with self._connect() as conn:
            rows = conn.execute(
                "SELECT asked, question, subject, cited, answer FROM asks WHERE session = ? "
                "ORDER BY id DESC LIMIT ?",
                (session, limit),
            ).fetchall()
        return [
            Turn(
                asked=asked or question,
                question=question,
                subject=subject or "",
                cited=tuple(json.loads(cited or "[]")),
                answer=answer or "",
            )
            for asked, question, subject, cited, answer in reversed(rows)
        ]

    def stats(self, since: float | None = None, slo_ms: float | None = None) -> dict[str, Any]:
        """Latency P50/P95, SLO compliance, mean depth, tokens and cost since ``since`` (s)."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT total_ms, k, prompt_tokens, completion_tokens, context_tokens, cost, "
                "currency, policy, confidence, rounds FROM asks WHERE ts >= ?",
                (since or 0.0,),
            ).fetchall()
        lat = [r[0] for r in rows if r[0] is not None]
        out: dict[str, Any] = {
            "asks": len(rows),
            "latency_ms": {
                "p50": _percentile(lat, 50),
                "p95": _percentile(lat, 95),
                "p99": _percentile(lat, 99),
                "mean": sum(lat) / len(lat) if lat else None,
            },
            "mean_k": sum(r[1] or 0 for r in rows) / len(rows) if rows else None,
            "tokens": {
                "prompt": sum(r[2] or 0 for r in rows),
                "completion": sum(r[3] or 0 for r in rows),
                "context": sum(r[4] or 0 for r in rows),
            },
            "cost": sum(r[5] or 0.0 for r in rows),
            "currency": next((r[6] for r in rows if r[6]), "USD"),
            "mean_confidence": (sum(r[8] or 0.0 for r in rows) / len(rows) if rows else None),
            "escalated": sum(1 for r in rows if (r[9] or 1) > 1),
            "policies": {},
        }
        for r in rows:
            out["policies"][r[7] or "?"] = out["policies"].get(r[7] or "?", 0) + 1
        if slo_ms is not None:
            out["slo_ms"] = slo_ms
            out["slo_compliance"] = sum(1 for x in lat if x <= slo_ms) / len(lat) if lat else None
        return out


def record_ask(cfg: Config, target: str, answer: Answer, session: str | None = None) -> None:
    """Append the ask to ``FATHOM_HOME/history.db`` (in conversation ``session``, when given:
    ``ask --session``)."""
    from fathom.stages.followup import Turn

    tr = answer.trace
    turn = Turn.from_answer(answer)
    History(cfg.home_path() / "history.db").record(
        {
            "question": answer.question,
            "target": target,
            "collection": tr.collection,
            "query_type": tr.query_type,
            "policy": tr.decision.policy if tr.decision else "",
            "k": tr.decision.k if tr.decision else 0,
            "reason": tr.decision.reason if tr.decision else "",
            "total_ms": tr.total_ms,
            "stages_ms": tr.stages_ms,
            "prompt_tokens": tr.tokens["prompt"],
            "completion_tokens": tr.tokens["completion"],
            "context_tokens": tr.tokens["context"],
            "embedding_tokens": tr.tokens["embedding"],
            "cost": tr.cost,
            "currency": tr.currency,
            "backend": tr.backend,
            "model": tr.model,
            "confidence": answer.confidence.get("score"),
            "rounds": tr.passes,
            "answer": answer.text,
            "session": session,
            "asked": turn.asked,
            "subject": turn.subject,
            "cited": turn.cited,
        }
    )
