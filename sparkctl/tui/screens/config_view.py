"""`o`: the effective configuration, read-only: every value and the file it came from
(the same text as `sparkctl config`, credentials shown as ***)."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class ConfigScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ConfigScreen { align: center middle; }
    ConfigScreen #config-box {
        width: 96%; max-width: 130; height: 90%;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    ConfigScreen #config-status { height: 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,o,q", "close", "Close")]

    def __init__(self, config) -> None:
        super().__init__()
        from sparkctl.services.config_text import render_config

        self.text = render_config(config)  # pure formatting of what is already loaded: no I/O

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="config-box") as box:
            box.border_title = "Configuration (read-only; edit the file named beside each value)"
            yield Static(Syntax(self.text, "toml", theme="ansi_dark", word_wrap=True), id="config-text")
        yield Label("Esc closes · `sparkctl config` prints the same", id="config-status")

    def action_close(self) -> None:
        self.dismiss(None)
