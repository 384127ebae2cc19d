"""The footer every screen shows: its own keys first, then the app's, in the compact
style, so at 80 columns the keys that go to the other screens stay on it (they share one
group, "d m b h e screens", instead of a word each; `?` names them all). Under 100 columns
the palette's key gives its place to them (ctrl+p still opens it; help lists it)."""

from __future__ import annotations

from textual.widgets import Footer


PALETTE_FROM = 100  # terminal columns from which the palette key shows (`?` lists it always)


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter.-compact FooterLabel { margin: 0 1 0 0; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)

    def on_resize(self) -> None:
        self.show_command_palette = self.app.size.width >= PALETTE_FROM
