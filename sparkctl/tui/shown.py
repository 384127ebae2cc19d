"""A screen's watches of the app's samples, drawn only while the screen is on show.

The app samples every refresh and its watchers run whether or not their screen is in
front: a dashboard behind the Models or Runs screen restyled and laid out its panels every
second for nobody to see. A watch made here skips its screen while that screen is not in
the mode on screen (a modal over it leaves it drawn), notes what it missed, and the
screen draws that once when it is shown again (``catch_up``, from its on_screen_resume).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.screen import Screen


def watch_while_shown(screen: Screen, name: str, show: Callable[[Any], None], init: bool = True) -> None:
    """``screen.watch(screen.app, name, show)``, skipped while ``screen`` is out of sight."""
    missed: dict[str, Callable[[Any], None]] = screen.__dict__.setdefault("_missed_while_hidden", {})

    def changed(value: Any) -> None:
        if screen in screen.app.screen_stack:
            show(value)
        else:
            missed[name] = show

    screen.watch(screen.app, name, changed, init=init)


def catch_up(screen: Screen) -> None:
    """Draw what the screen's watches missed while it was out of sight."""
    missed = screen.__dict__.get("_missed_while_hidden")
    while missed:
        name, show = missed.popitem()
        show(getattr(screen.app, name))
