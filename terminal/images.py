"""Pictures in the terminal: which image protocol stdout speaks, and a PNG as its escape sequence.

Two protocols are spoken: kitty's graphics protocol (kitty, Ghostty) and iTerm2's inline images
(iTerm2, WezTerm). Detection is conservative: never when stdout is not a terminal, never inside
tmux or screen (they swallow the sequences), and only for a terminal that names itself
(``TERM=xterm-kitty`` or ``KITTY_WINDOW_ID``, ``TERM=xterm-ghostty``, ``TERM_PROGRAM`` iTerm.app,
WezTerm or ghostty). ``FATHOM_IMAGES=kitty`` or ``iterm2`` forces one (a terminal Fathom cannot
recognise, tmux with passthrough, a test), ``FATHOM_IMAGES=none`` turns pictures off.
Standard library only: importing it costs nothing.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Literal, TextIO

Protocol = Literal["kitty", "iterm2"]
ENV = "FATHOM_IMAGES"
KITTY_CHUNK = 4096  # base64 characters per kitty escape (the protocol's limit)
_ITERM_PROGRAMS = {"iTerm.app", "WezTerm"}
_KITTY_PROGRAMS = {"ghostty"}


def image_protocol(stream: TextIO, env: Mapping[str, str] | None = None) -> Protocol | None:
    """The image protocol ``stream``'s terminal speaks, or None (print the file's path)."""
    env = os.environ if env is None else env
    forced = env.get(ENV, "").strip().lower()
    if forced in ("kitty", "iterm2"):
        return forced  # type: ignore[return-value]
    if forced in ("none", "off", "0", "no"):
        return None
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or unusual stream
        return None
    term, program = env.get("TERM", ""), env.get("TERM_PROGRAM", "")
    if env.get("TMUX") or term.startswith(("screen", "tmux")):
        return None
    if term in ("xterm-kitty", "xterm-ghostty") or env.get("KITTY_WINDOW_ID"):
        return "kitty"
    if program in _KITTY_PROGRAMS:
        return "kitty"
    if program in _ITERM_PROGRAMS:
        return "iterm2"
    return None


def kitty_sequence(png: bytes, columns: int) -> str:
    """``png`` shown ``columns`` cells wide by the kitty graphics protocol: transmitted and
    displayed at once (``a=T``) as PNG (``f=100``), its base64 in chunks (``m=1``: more)."""
    data = base64.b64encode(png).decode("ascii")
    chunks = [data[i : i + KITTY_CHUNK] for i in range(0, len(data), KITTY_CHUNK)] or [""]
    out = []
    for i, chunk in enumerate(chunks):
        more = int(i < len(chunks) - 1)
        keys = f"a=T,f=100,c={columns},q=2,m={more}" if i == 0 else f"m={more}"
        out.append(f"\x1b_G{keys};{chunk}\x1b\\")
    return "".join(out)


def iterm2_sequence(png: bytes, columns: int, name: str = "page.png") -> str:
    """``png`` shown ``columns`` cells wide as an iTerm2 inline image (OSC 1337 ``File=``)."""
    data = base64.b64encode(png).decode("ascii")
    label = base64.b64encode(name.encode("utf-8")).decode("ascii")
    args = f"name={label};size={len(png)};width={columns};preserveAspectRatio=1;inline=1"
    return f"\x1b]1337;File={args}:{data}\x07"


def image_sequence(protocol: Protocol, png: bytes, columns: int, name: str = "page.png") -> str:
    """``png`` as ``protocol``'s escape sequence, ``columns`` cells wide."""
    if protocol == "kitty":
        return kitty_sequence(png, columns)
    return iterm2_sequence(png, columns, name)
