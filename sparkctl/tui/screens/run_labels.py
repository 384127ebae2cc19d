"""How the Runs screen and the charts it opens say a run's date and a read that failed: one
place, so the screens that open one another do not import one another for it."""

from __future__ import annotations

from datetime import datetime


def date_label(start_ms: int | None) -> str:
    if start_ms is None:
        return "-"
    return datetime.fromtimestamp(start_ms / 1000).strftime("%Y-%m-%d %H:%M")


def error_line(exc: BaseException) -> str:
    """An exception in one line: its message's first line, else its type."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
