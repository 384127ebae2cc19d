"""Modal questions for the Models screen: which model to pull, and "are you sure?"."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from sparkctl.core.names import InvalidModelName, validate_model_name


class PullDialog(ModalScreen[str | None]):
    """Ask for a model name; checked with Ollama's rules before the dialog closes."""

    DEFAULT_CSS = """
    PullDialog { align: center middle; }
    PullDialog > Vertical {
        width: 64; height: auto; padding: 1 2;
        border: round $accent; background: $panel;
    }
    PullDialog #pull-error { color: $error; height: auto; }
    PullDialog .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Pull a model from the registry", classes="title")
            yield Input(placeholder="e.g. qwen3:8b", id="pull-name")
            yield Label("", id="pull-error")
            yield Label("enter: pull · escape: cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            name = validate_model_name(event.value)
        except InvalidModelName as exc:
            self.query_one("#pull-error", Label).update(str(exc))
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question; `y`/`n`, enter on a button, or escape (no)."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical {
        width: 72; height: auto; padding: 1 2;
        border: round $warning; background: $panel;
    }
    ConfirmDialog #confirm-question { height: auto; margin-bottom: 1; }
    ConfirmDialog Horizontal { height: auto; align-horizontal: right; }
    ConfirmDialog Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="confirm-question")
            with Horizontal():
                yield Button("No", id="no")
                yield Button(self.yes_label, id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
