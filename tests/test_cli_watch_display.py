"""What ``ingest --watch`` prints: one line per batch on stdout (or one JSON object), the files
that failed and the waits on stderr."""

from __future__ import annotations

import json

import pytest
from fathom.index.ingest import FileResult, IngestReport
from fathom.index.watch import WatchBatch
from fathom.terminal.render import WatchDisplay


def _batch() -> WatchBatch:
    report = IngestReport(collection="notes", generation=5, committed=True)
    report.files = [
        FileResult("/docs/a.md", "ok", chunks=2),
        FileResult("/docs/b.md", "ok", chunks=1),
        FileResult("/docs/c.pdf", "failed", "/docs/c.pdf: truncated — re-save it"),
        FileResult("/docs/d.md", "removed", "no longer present"),
    ]
    report.embedded_chunks, report.total_chunks = 3, 230
    return WatchBatch(events=6, added=1, changed=1, removed=1, report=report, seconds=0.84)


def test_one_line_per_batch(capsys: pytest.CaptureFixture[str]) -> None:
    display = WatchDisplay(as_json=False)
    display("watching", paths=["/docs"])
    display("waiting", files=["/docs/big.pdf"])
    display("batch", batch=_batch())
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        "collection notes (generation 5, committed): 1 added, 1 changed, 1 removed, 1 failed · "
        "3 chunks embedded, 230 in the collection · 0.8 s"
    )
    assert "watching /docs for changes — Ctrl-C stops" in err
    assert "waiting for 1 file(s) still being written: /docs/big.pdf" in err
    assert "truncated — re-save it" in err


def test_one_json_object_per_batch(capsys: pytest.CaptureFixture[str]) -> None:
    WatchDisplay(as_json=True)("batch", batch=_batch())
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert (data["events"], data["added"], data["changed"], data["removed"]) == (6, 1, 1, 1)
    assert data["report"]["counts"]["failed"] == 1 and data["report"]["generation"] == 5
