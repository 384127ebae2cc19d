"""The Bench screen's "follow llama-benchy" question: which `--emit-progress` file to watch.
Typed by what it returns: the path, or None for cancel. Whether the file is there is the
follower's to find out, in its worker (file I/O)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label


class FollowBenchyDialog(ModalScreen[str | None]):
    DEFAULT_CSS = """
    FollowBenchyDialog { align: center middle; }
    FollowBenchyDialog > Vertical {
        width: 76; height: auto; padding: 1 2;
        border: round $accent; background: $panel;
    }
    FollowBenchyDialog #follow-error { color: $error; height: auto; }
    FollowBenchyDialog .hint { color: $text-muted; }
    FollowBenchyDialog Horizontal { height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, last: str = "") -> None:
        super().__init__()
        self.last = last

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Follow a llama-benchy run (its --emit-progress file)", classes="title")
            yield Input(value=self.last, placeholder="e.g. ~/bench/progress.jsonl", id="follow-path")
            yield Label("", id="follow-error")
            yield Label("the gauges show its requests as they stream; at bench_complete the run is recorded "
                        "(kind import) · escape: cancel", classes="hint")
            with Horizontal():
                yield Button("Follow", id="follow-go", variant="primary")
                yield Button("Cancel", id="follow-cancel")

    def _go(self) -> None:
        value = self.query_one("#follow-path", Input).value.strip()
        if not value:
            self.query_one("#follow-error", Label).update("type the path of the --emit-progress file")
            return
        self.dismiss(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._go()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "follow-go":
            self._go()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
