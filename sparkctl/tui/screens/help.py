"""`?`: help for the screen underneath: every key that works there (read from the active
bindings, so it cannot go stale), then what its columns mean and where the data comes from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Markdown

from sparkctl.tui.help_texts import help_for


def key_table(screen) -> str:
    """A Markdown table of the keys active on `screen` (its own, then the app's)."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, active in screen.app.active_bindings.items():
        b = active.binding
        if not b.description or key in seen:
            continue
        seen.add(key)
        rows.append((screen.app.get_key_display(b), b.description))
    for key, desc in (("?", "this help"), ("ctrl+p", "command palette: every action, searchable")):
        if key not in seen:
            rows.append((key, desc))
    lines = ["| key | does |", "|---|---|"]
    lines += [f"| `{k}` | {d} |" for k, d in rows]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-box {
        width: 90%; max-width: 110; height: 90%;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    HelpScreen #help-status { height: 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, screen) -> None:
        super().__init__()
        self.keys = key_table(screen)
        self.name_of = type(screen).__name__
        self.text = help_for(self.name_of)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = f"Help: {self.name_of.removesuffix('Screen')}"
            yield Markdown(f"{self.text}\n\n**Keys here**\n\n{self.keys}\n", id="help-text")
        yield Label("Esc closes", id="help-status")

    def action_close(self) -> None:
        self.dismiss(None)
