"""Citation markers in answers: ``[2]``, ``[1, 2]``, ``[1;2]``, ranges ``[1-3]`` and runs
``[1][3]``; reading the numbers they name, renumbering and removing them."""

from __future__ import annotations

import re

# A citation marker: source numbers in square brackets, one ("[2]"), several ("[1, 2]", "[1,2]",
# "[1;2]") or a range ("[1-3]", "[1–3]"); adjacent markers ("[1][3]") are separate matches.
# Group 1 is the marker's inside. Up to three digits: "[2021]" is a year, not a source.
_CITE_ITEM = r"\d{1,3}(?:\s*[-–—]\s*\d{1,3})?"
CITATION = re.compile(rf"\[\s*({_CITE_ITEM}(?:\s*[,;]\s*{_CITE_ITEM})*)\s*\]")
# A run of markers with the horizontal space before it: "Paris [1] [3]." → " [1] [3]".
_CITE_RUN = re.compile(rf"[ \t]*{CITATION.pattern}(?:[ \t]*{CITATION.pattern})*")
_CITE_PART = re.compile(r"(\d{1,3})(?:\s*[-–—]\s*(\d{1,3}))?")


def marker_numbers(inside: str) -> list[int]:
    """The source numbers of one marker's inside (``"1, 3-5"`` → ``[1, 3, 4, 5]``), in order;
    a range runs either way (``"3-1"`` → ``[3, 2, 1]``)."""
    numbers: list[int] = []
    for m in _CITE_PART.finditer(inside):
        first = int(m.group(1))
        last = first if m.group(2) is None else int(m.group(2))
        step = 1 if last >= first else -1
        numbers.extend(range(first, last + step, step))
    return numbers


def cited_numbers(text: str) -> list[int]:
    """Every source number the citation markers in ``text`` name, in order, repeats and
    out-of-range numbers included."""
    return [n for m in CITATION.finditer(text) for n in marker_numbers(m.group(1))]


def parse_citations(text: str, n_sources: int) -> tuple[int, ...]:
    """Distinct cited source numbers in order of first mention, dropping out-of-range ones."""
    seen: list[int] = []
    for n in cited_numbers(text):
        if 1 <= n <= n_sources and n not in seen:
            seen.append(n)
    return tuple(seen)


def renumber_citations(text: str, mapping: dict[int, int]) -> str:
    """``text`` with each citation marker's numbers replaced by ``mapping[n]``.

    Every marker form ``CITATION`` reads is rewritten: ranges are expanded, numbers missing
    from ``mapping`` are dropped, repeats within a marker are kept once, and a marker with
    more than one number left is written ``[a, b]`` (``[1][3]`` stays two markers). A marker
    left empty is removed with the space before it (``"Paris [9]."`` → ``"Paris."``).
    """

    def run(m: re.Match[str]) -> str:
        chunk = m.group(0)
        lead = chunk[: len(chunk) - len(chunk.lstrip(" \t"))]
        out, end = [], len(lead)
        for marker in CITATION.finditer(chunk, len(lead)):
            gap, end = chunk[end : marker.start()], marker.end()
            new = [mapping[n] for n in marker_numbers(marker.group(1)) if n in mapping]
            if new:
                numbers = ", ".join(str(n) for n in dict.fromkeys(new))
                # The first marker kept takes the run's leading space, not its own gap.
                out.append(f"{gap if out else lead}[{numbers}]")
        return "".join(out)

    return _CITE_RUN.sub(run, text)


def strip_citations(text: str) -> str:
    """``text`` without its citation markers (and the space before each)."""
    return renumber_citations(text, {})
