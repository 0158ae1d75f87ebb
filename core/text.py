"""Text made safe to print: no control characters or ANSI escapes from documents or paths."""

from __future__ import annotations

import re

# CSI / OSC / other ESC sequences, then remaining C0/C1 controls except tab and newline.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_terminal_text(text: str) -> str:
    """``text`` without escape sequences or control characters (tab and newline kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))
