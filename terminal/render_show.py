"""What ``--show``, ``fathom show`` and ``chat``'s slash commands print: a cited page drawn in
the terminal when it speaks an image protocol (``terminal_images``) and its file's path, a
passage in its surrounding text (styled on a terminal, marked when piped), and what a slash
command did. rich loads inside the functions that draw; the rich helpers are ``render``'s."""

from __future__ import annotations

import sys
from typing import Any

from fathom.terminal.render import docs_note, plain, print_json, sources_table, stderr_console


def render_chat_command(kind: str, shown: Any) -> None:
    """What a chat slash command did (``commands.Chat.command``): the last answer's sources,
    or its cited sources where they stand (``render_shown``), on stdout; the rest on stderr."""
    from rich.console import Console

    err = stderr_console()
    if kind == "show" and shown is not None:
        render_shown(shown)
    elif kind == "show":
        err.print("nothing to show yet — ask a question first", highlight=False)
    elif kind == "sources":
        if shown is None or not shown.sources:
            err.print("no sources yet — ask a question first", highlight=False)
        else:
            Console().print(sources_table(shown))
    elif kind == "doc":
        err.print(plain(f"reading {docs_note(shown)}" if shown else "reading every document"))
    elif kind == "clear":
        err.print(f"forgot {shown} turn(s): the next question starts afresh", highlight=False)
    elif kind == "help":
        err.print(plain(shown))
    else:
        err.print(plain(f"unknown command {shown} — /help lists them"))


SHOW_COLUMNS = 100  # widest a page picture is drawn, in terminal cells


def render_shown(shown: list, as_json: bool = False, head: dict | None = None) -> None:
    """What ``--show`` and ``fathom show`` wrote: a page drawn in the terminal when it speaks an
    image protocol (``terminal_images``), and its file's path; a passage in its surrounding
    text, styled on a terminal and marked ``⟦ ⟧`` / ``⟪ ⟫`` otherwise. ``--json``: ``head``
    with ``shown``, one object."""
    if as_json:
        print_json({**(head or {}), "shown": [s.to_dict() for s in shown]})
        return
    err = stderr_console()
    if not shown:
        err.print("nothing cited to show", highlight=False)
        return
    import shutil

    from fathom.terminal.images import image_protocol, image_sequence
    from rich.console import Console

    out = Console()
    protocol = image_protocol(sys.stdout)
    columns = min(SHOW_COLUMNS, shutil.get_terminal_size().columns)
    for item in shown:
        label = (f"[{item.n}] " if item.n else "") + (item.title or item.path)
        if item.kind == "none":
            err.print("[yellow]cannot show[/yellow]", plain(f"{label}: {item.note}"))
            continue
        if item.note:
            err.print("[yellow]note[/yellow]", plain(item.note), highlight=False)
        if item.image is not None:
            where = f"page {item.image.number} ({item.image.located})"
            if protocol is not None:
                out.print(plain(f"{label} · {where}"), highlight=False)
                out.file.write(image_sequence(protocol, item.image.png, columns) + "\n")
                out.file.flush()
            out.print(plain(f"{label} · {where} → {item.file}"), highlight=False, soft_wrap=True)
            continue
        out.print(plain(f"{label} · {item.section or 'passage'} → {item.file}"), soft_wrap=True)
        out.print(_passage_text(item, styled=out.is_terminal), soft_wrap=True)


def _passage_text(item: Any, styled: bool):
    """A shown passage in its surrounding text: the neighbours dim, the passage highlighted,
    the answer's sentence in it more strongly; unstyled, the plain text with its marks."""
    from fathom.core.text import safe_terminal_text
    from rich.text import Text

    if not styled:
        return Text(safe_terminal_text(item.marked()))
    text = Text()
    text.append(safe_terminal_text(item.before), style="dim")
    a, b = item.strong or (len(item.passage), len(item.passage))
    passage = item.passage
    for part, style in ((passage[:a], "on grey23"), (passage[a:b], "bold black on yellow")):
        text.append(safe_terminal_text(part), style=style)
    text.append(safe_terminal_text(passage[b:]), style="on grey23")
    text.append(safe_terminal_text(item.after), style="dim")
    return text
