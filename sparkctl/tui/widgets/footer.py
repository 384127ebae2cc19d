"""The footer every screen shows: its own keys first, then the app's, in the compact
style, so at 80 columns the keys that go to the other screens stay on it (they share one
group, "d m b h e screens", instead of a word each; `?` names them all). Under 100 columns
the palette's key gives its place to them (ctrl+p still opens it; help lists it).

Built once, not over and over: Textual's Footer starts empty and rebuilds all its key
widgets (each styled anew) whenever the screen says its bindings may have changed; at start
that was three times before the first frame (focus set, screen resumed, focus set again
after a refresh), ~30 ms of CPU each on a 2-core box, for the same row of keys. This one
shows its keys from its first compose and rebuilds only when what it shows (the shown
bindings, enabled or not, their tooltips, the palette key) differs from what it last built
or is about to build. Same compose, same CSS, the same classes on every key.

Only once its screen is on the app's stack: a binding such as Textual's `screen.copy_text`
is checked against `app.screen`, so before the push the keys would be those of the screen
below (or, with no screen yet, an error). Under `App.run` on Python 3.12+ Textual runs tasks
eagerly (`asyncio.eager_task_factory`), and a screen composes inside its registration,
before it is pushed; on 3.11 it composes after. A footer composed that early starts empty,
as Textual's own does, and is built at the first "bindings changed", which the screen sends
when it becomes active.
"""

from __future__ import annotations

from typing import Hashable

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PALETTE_FROM = 100  # terminal columns from which the palette key shows (`?` lists it always)


class BuiltOnceFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._built_for: Hashable = None  # the keys last composed or already asked for

    def _shown(self) -> Hashable:
        """What the footer draws from the screen's bindings, and nothing else."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return self.show_command_palette, tuple(
            (binding, enabled, tooltip)
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette)

    def compose(self) -> ComposeResult:
        if self.screen not in self.app.screen_stack:
            return  # composed eagerly, before its screen was pushed: built when it is active
        # The screen's bindings are known once its screen is up: no empty first build
        # waiting for the first "bindings changed"
        self._bindings_ready = True
        self._built_for = self._shown()
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # A key is born with compact=True and no class; the footer's binding (the
                # palette key has none: it stays True) then restyled it once or twice.
                # Given its final value and class now, nothing changes when it mounts.
                compact = True if "-command-palette" in widget.classes else self.compact
                widget.set_reactive(FooterKey.compact, compact)
                widget.set_class(compact, "-compact", update=False)
            yield widget

    def bindings_changed(self, screen) -> None:
        if self.is_attached and screen is self.screen and self.app.app_focus:
            shown = self._shown()
            if shown == self._built_for:
                return  # built with these keys, or a rebuild that will read them is queued
            self._built_for = shown
        super().bindings_changed(screen)

    def _watch_show_command_palette(self) -> None:
        # Textual reads it only when it rebuilds: a change is a change of what is shown
        if self._built_for is not None and self.is_attached:
            self.bindings_changed(self.screen)


class KeysFooter(BuiltOnceFooter):
    DEFAULT_CSS = """
    KeysFooter.-compact FooterLabel { margin: 0 1 0 0; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)

    def _palette_fits(self) -> bool:
        return self.app.size.width >= PALETTE_FROM

    def compose(self) -> ComposeResult:
        # the first build already for the terminal's width (no rebuild at the first resize)
        self.set_reactive(Footer.show_command_palette, self._palette_fits())
        yield from super().compose()

    def on_resize(self) -> None:
        self.show_command_palette = self._palette_fits()
