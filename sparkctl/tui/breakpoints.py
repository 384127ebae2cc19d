"""A screen's breakpoint classes (-short, -tall) set when it is built, from the terminal's size.

Textual adds them at the screen's first resize, after its first layout: the whole screen is
then styled and laid out again before anything is drawn (~15-20 ms of CPU for the
dashboard on a 2-core box). Set beforehand, the resize finds them already right and
changes nothing; if the size was not known yet, the resize corrects them as before.
"""

from __future__ import annotations

from textual.screen import Screen


def preset_breakpoints(screen: Screen) -> None:
    app = screen.app
    width, height = app.size
    for size, breakpoints in (
        (width, app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None else screen.HORIZONTAL_BREAKPOINTS),
        (height, app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None else screen.VERTICAL_BREAKPOINTS),
    ):
        # the class of the largest breakpoint the size reaches, as Textual picks it
        for floor, name in sorted(breakpoints or [], reverse=True):
            if size >= floor:
                screen.add_class(name, update=False)
                break
