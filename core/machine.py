"""The machine a measurement or a training run was made on: CPU model and memory, as results
files and the reader's training record give them."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str | None:
    """The CPU's model name (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def memory_gb() -> float | None:
    """Physical memory in GiB, one decimal; None where the OS does not say."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        return None
