"""The Bench screen (placeholder)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header, Static


class BenchScreen(Screen):
    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Bench: not built yet")
        yield Footer()
