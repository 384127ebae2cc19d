"""`sparkctl eval score` from the Eval screen: pick a file of saved responses (JSONL, one
``{"prompt": ..., "response": ...}`` a line) and the suite it answers. The file is typed
or picked in a tree of the current directory (JSONL and JSON files only); the directory
tree reads the disk in its own worker."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DirectoryTree, Input, Label, Select

from sparkctl.tui.widgets.fields import Field

SUFFIXES = (".jsonl", ".json")


class ResponseFiles(DirectoryTree):
    """Directories and JSON(L) files; hidden entries left out."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or p.suffix.lower() in SUFFIXES)]


class ScoreFileDialog(ModalScreen[tuple[Path, str] | None]):
    DEFAULT_CSS = """
    ScoreFileDialog { align: center middle; }
    ScoreFileDialog #score-box {
        width: 90%; max-width: 100; height: 90%; max-height: 30;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    ScoreFileDialog #score-row { height: auto; }
    ScoreFileDialog #score-path { width: 1fr; }
    ScoreFileDialog #score-suite { width: 16; }
    ScoreFileDialog #score-files { height: 1fr; }
    ScoreFileDialog .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, suites: tuple[str, ...], suite: str, root: Path | None = None) -> None:
        super().__init__()
        self.suites = suites
        self.suite = suite
        self.root = root or Path.cwd()

    def compose(self) -> ComposeResult:
        with Vertical(id="score-box") as box:
            box.border_title = "Score saved responses (sparkctl eval score)"
            with Horizontal(id="score-row"):
                path = Field(placeholder="a .jsonl of {prompt, response} lines", id="score-path")
                path.border_title = "file"
                yield path
                yield Select([(s, s) for s in self.suites], value=self.suite, allow_blank=False, id="score-suite")
                yield Button("Score", id="score-go", variant="primary")
            yield ResponseFiles(self.root, id="score-files")
            yield Label("enter on a file picks it · Score scores it · escape: cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one(ResponseFiles).focus()

    @on(DirectoryTree.FileSelected)
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        self.query_one("#score-path", Input).value = str(event.path)
        self.query_one("#score-go", Button).focus()

    @on(Button.Pressed, "#score-go")
    def _go(self) -> None:
        raw = self.query_one("#score-path", Input).value.strip()
        if not raw:
            self.query_one(".hint", Label).update("pick a file first (or type its path)")
            return
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = self.root / path
        self.dismiss((path, str(self.query_one("#score-suite", Select).value)))

    def action_cancel(self) -> None:
        self.dismiss(None)
