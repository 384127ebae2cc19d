"""A screen's breakpoint classes (-short, -tall) set when it is built, from the terminal's size,
and the first screen taken as styled with the stylesheet as it is.

Textual adds them at the screen's first resize, after its first layout: the whole screen is
then styled and laid out again before anything is drawn (~15-20 ms of CPU for the
dashboard on a 2-core box). Set beforehand, the resize finds them already right and
changes nothing; if the size was not known yet, the resize corrects them as before.

A screen made for a mode starts with a CSS count that differs from the app's, so Textual
parses the whole stylesheet again (and again at the next widget registered, its cache
emptied) before composing it: two more parses of app.tcss and every default CSS, ~15 ms
of CPU on a 2-core box, for nothing while no theme change is pending (the app gives the
stylesheet its theme's variables before the first parse: app.py _start_with_theme). What
else that refresh did is done here: the app's node is styled before the screen's widgets
inherit its colours.
"""

from __future__ import annotations

from textual.screen import Screen


def preset_breakpoints(screen: Screen) -> None:
    app = screen.app
    if app._css_update_count == 0:  # no theme change since start: the stylesheet is current (textual is pinned)
        screen._css_update_count = app._css_update_count
        # what that refresh also did: style the app's own node before the screen's widgets
        # take their colours from it (Textual styles it only after composing the first screen)
        app.stylesheet.apply(app)
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
