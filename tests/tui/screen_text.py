"""The text a user sees: the whole terminal as plain lines, as Textual's own screenshot
draws it (App.export_screenshot, as text instead of SVG)."""

from __future__ import annotations

import io

from rich.console import Console


def screen_text(app) -> str:
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def joined(text: str) -> str:
    """The screen's lines joined with spaces, runs of spaces squeezed and the side borders
    of full-width panels dropped: a sentence wrapped over several lines reads as one."""
    return " ".join(" ".join(line.strip().strip("│▐▌▊▎").split()) for line in text.splitlines())
