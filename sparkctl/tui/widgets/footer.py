"""Textual's Footer, rebuilt only when the keys it shows change.

Textual's Footer starts empty and rebuilds all its key widgets (each styled anew) every
time the screen says its bindings may have changed: at start that is three times before
the first frame (focus set, screen resumed, focus set again after a refresh), ~30 ms of
CPU each on a 2-core box, for the same row of keys. This one shows its keys from its first
compose and rebuilds only when what it shows (the shown bindings, enabled or not, their
tooltips, the palette key) differs from what it last built or is about to build. It looks
exactly like Textual's (same compose, same CSS, the same classes on every key).
"""

from __future__ import annotations

from typing import Hashable

from textual.app import ComposeResult
from textual.widgets import Footer as TextualFooter
from textual.widgets._footer import FooterKey


class Footer(TextualFooter):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._built_for: Hashable = None  # the keys last composed or already asked for

    def _shown(self) -> Hashable:
        """What the footer draws from the screen's bindings, and nothing else."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return tuple((binding, enabled, tooltip)
                     for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
                     if binding.show or key == palette)

    def compose(self) -> ComposeResult:
        # The screen's bindings are known once the footer is in its screen: no empty first
        # build waiting for the first "bindings changed"
        self._bindings_ready = True
        self._built_for = self._shown()
        for widget in super().compose():
            if isinstance(widget, FooterKey) and "-command-palette" not in widget.classes:
                # bound to the footer's `compact` (False here) but born True: each key was
                # styled again twice (its class added at mount, removed by the binding)
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def bindings_changed(self, screen) -> None:
        if self.is_attached and screen is self.screen and self.app.app_focus:
            shown = self._shown()
            if shown == self._built_for:
                return  # built with these keys, or a rebuild that will read them is queued
            self._built_for = shown
        super().bindings_changed(screen)
