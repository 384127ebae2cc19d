"""The Models screen (placeholder until the Models work lands)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header, Static


class ModelsScreen(Screen):
    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Models: not built yet")
        yield Footer()
