"""Notes, refusals and warnings as a list a user can read whole.

A screen keeps what it has to say as ``Note``s (a refusal, a guard's flag with what it
means, a residency warning) and shows them in a ``NotesPanel`` under its results: every
note wraps at word boundaries at any width, is literal text (config keys such as
``[bench] timeout_s`` stay), and the panel scrolls when there are more than fit. Enter on a
result row, or ``n``, opens ``NotesScreen``: the same notes on a whole screen. Toasts only
echo what is already on screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

MARK = {"error": ("✘ ", "bold red"), "warning": ("! ", "bold yellow"), "info": ("· ", "")}


@dataclass(frozen=True)
class Note:
    text: str  # one or more whole sentences, shown literally
    level: str = "warning"  # "error" | "warning" | "info"
    about: str = ""  # the model or run it concerns ("": the whole run)
    why: str = ""  # what it means for the numbers, when known


def render_notes(notes: list[Note] | tuple[Note, ...]) -> Text:
    """One paragraph per note: a mark, what it is about, the note, and why it matters."""
    out = Text()
    for i, note in enumerate(notes):
        if i:
            out.append("\n")
        mark, style = MARK.get(note.level, MARK["info"])
        out.append(mark, style=style)
        if note.about:
            out.append(f"{note.about}: ", style="bold")
        out.append(note.text, style="red" if note.level == "error" else "")
        if note.why:
            out.append(f" — {note.why}", style="dim")
    return out


class NotesPanel(Static):
    """The notes under a screen's results: wrapped, scrollable, hidden while empty."""

    DEFAULT_CSS = """
    NotesPanel {
        height: auto; max-height: 8; display: none; overflow-y: auto;
        border: round $warning 60%; border-title-color: $warning; border-title-style: bold;
        padding: 0 1; scrollbar-size-vertical: 1;
    }
    NotesPanel.-shown { display: block; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.notes: tuple[Note, ...] = ()
        self.hint = "n: all notes"

    def show(self, notes: list[Note] | tuple[Note, ...], title: str = "notes") -> None:
        self.notes = tuple(notes)
        self.set_class(bool(self.notes), "-shown")
        self.border_title = f"{title} ({len(self.notes)})" if self.notes else title
        self.border_subtitle = self.hint if self.notes else ""
        self.update(render_notes(self.notes))
        self.scroll_home(animate=False)

    @property
    def text(self) -> str:
        return render_notes(self.notes).plain


class NotesScreen(ModalScreen[None]):
    """Every note of a run (or of the screen), wrapped to the terminal's width."""

    DEFAULT_CSS = """
    NotesScreen { align: center middle; }
    NotesScreen #notes-box {
        width: 96%; max-width: 120; height: auto; max-height: 90%;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    NotesScreen #notes-full { height: auto; }
    NotesScreen #notes-status { height: 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,n,enter", "close", "Close")]

    def __init__(self, title: str, notes: list[Note] | tuple[Note, ...]) -> None:
        super().__init__()
        self.title_text = title
        self.notes = tuple(notes)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notes-box") as box:
            box.border_title = self.title_text
            body = render_notes(self.notes) if self.notes else Text("no notes", style="dim")
            yield Static(body, id="notes-full")
        yield Label("Esc closes", id="notes-status")

    def action_close(self) -> None:
        self.dismiss(None)
