"""The Eval screen's "Suites dir" question: read the quality suites from a directory, or go
back to the pulled or shipped copy. Typed by what it returns: a directory to use, ``""`` to
forget the remembered one, None for cancel. The directory is checked by the caller, in a
worker (it is file I/O)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

FORGET = ""  # the dialog's answer for "back to the pulled or shipped copy"


class SuitesDirDialog(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SuitesDirDialog { align: center middle; }
    SuitesDirDialog > Vertical {
        width: 72; height: auto; padding: 1 2;
        border: round $accent; background: $panel;
    }
    SuitesDirDialog #suites-dir-error { color: $error; height: auto; }
    SuitesDirDialog .hint { color: $text-muted; }
    SuitesDirDialog Horizontal { height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str = "", overridden_by: str = "") -> None:
        super().__init__()
        self.current = current  # the directory `suites path` remembers, if any
        self.overridden_by = overridden_by  # "[eval] suites_dir in FILE" when the config wins anyway

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Read the quality suites from a directory", classes="title")
            yield Input(value=self.current, placeholder="a directory holding gsm8k-test.jsonl or ifeval-input.jsonl",
                        id="suites-dir-path")
            yield Label("", id="suites-dir-error")
            if self.overridden_by:
                yield Label(f"note: {self.overridden_by} wins over this choice", classes="hint")
            yield Label("enter: use it (remembered, as `sparkctl suites path DIR`) · escape: cancel", classes="hint")
            with Horizontal():
                yield Button("Use", id="suites-dir-use", variant="primary")
                yield Button("Shipped copy", id="suites-dir-forget")
                yield Button("Cancel", id="suites-dir-cancel")

    def _use(self) -> None:
        value = self.query_one("#suites-dir-path", Input).value.strip()
        if not value:
            self.query_one("#suites-dir-error", Label).update("type a directory, or choose Shipped copy")
            return
        self.dismiss(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._use()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "suites-dir-use":
            self._use()
        elif event.button.id == "suites-dir-forget":
            self.dismiss(FORGET)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
