"""The terminal front end: what ``cli.py`` prints — progress, answers and their reports, shown
pages and passages (``render_show``), tables (``tables``) and pictures drawn by the terminal's own
image protocol (``images``). Everything here receives data from ``commands`` and draws it; nothing
below this package imports rich."""
