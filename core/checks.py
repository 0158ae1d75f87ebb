"""What ``fathom doctor`` reports: one ``Check`` per thing it looked at.

It sits at the bottom so that each part of Fathom can report on itself (a generator backend's
check lives in the backend's module) and ``fathom.doctor`` only gathers the records."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One line of ``fathom doctor``: its section, what was checked, ``ok`` / ``warning`` /
    ``problem``, what was found, and the fix when it is not ok."""

    section: str
    name: str
    status: str  # "ok" | "warning" | "problem"
    detail: str
    fix: str = ""
