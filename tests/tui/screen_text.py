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


def terminal_output(app) -> str:
    """What the app writes to the terminal for its whole screen: the bytes a real terminal
    would act on (an escape sequence in a widget's text reaches it whole; Textual does not
    remove them)."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return update.render_segments(app.console)


def escapes_in(output: str) -> list[str]:
    """The sequences in `output` that are not Textual's own drawing (cursor moves and SGR
    colours, CSI ... H/m/K): an OSC (title, clipboard), a DCS, a bare BEL, a C1 control."""
    import re

    own = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    return re.findall(r"\x1b.{0,20}|[\x07\x80-\x9f].{0,20}", own, flags=re.DOTALL)
