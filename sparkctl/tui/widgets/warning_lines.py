"""The dashboard's warnings under the resident models: one line each, never cut, never wrapped.

A warning wrapped over three lines at 80 columns pushed resident models off an 80x24
screen, a long one was cut mid-word, and one cut at the panel's edge never showed its second
half even at 140 columns. Here each warning has a one-line form; the lines that fit the
width whole are shown, in the room the resident rows leave, and whatever does not fit (too
long, or no room left) is counted in a last line, "⚠ 3 warnings: N opens them", where N shows
every warning whole. The widget lays itself out from its own size at each render, so a
resize redraws it from scratch (nothing of the last size stays drawn).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from sparkctl.tui.widgets.notes import Note

OPEN_KEY = "N"


@dataclass(frozen=True)
class WarningLine:
    """A warning as the dashboard shows it: `line` on one line, `note` whole behind N."""

    line: Text
    note: Note

    @property
    def key(self) -> tuple:
        return (self.line.markup, self.note)


def fit_lines(lines: list[Text], width: int, height: int, loud: list[bool] | None = None) -> list[Text]:
    """The lines to draw in `width` x `height`: every line that fits the width whole, in
    order, then one line counting the ones left out (too long, or past the height), red
    when one of those is `loud` (an error)."""
    if height <= 0 or not lines:
        return []
    loud = loud or [False] * len(lines)
    fitting = [i for i, t in enumerate(lines) if t.cell_len <= width]
    if len(fitting) == len(lines) and len(lines) <= height:
        return list(lines)
    shown = fitting[:height - 1]
    left = len(lines) - len(shown)
    style = "bold red" if any(loud[i] for i in range(len(lines)) if i not in shown) else "bold yellow"
    what = f"{left} more warning{'s' if left != 1 else ''}" if shown else f"{left} warning{'s' if left != 1 else ''}"
    summary = Text("⚠ ", style=style)
    summary.append(what, style=style)
    summary.append(f": {OPEN_KEY} opens them", style="dim")
    if summary.cell_len > width:
        summary = Text(f"⚠ {left}: {OPEN_KEY}", style=style)
    return [*(lines[i] for i in shown), summary]


class WarningLines(Widget):
    """Hidden while there is nothing to say; takes the resident box's spare lines."""

    DEFAULT_CSS = """
    WarningLines { height: 1fr; min-height: 1; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.items: tuple[WarningLine, ...] = ()
        self.display = False

    def show(self, items: list[WarningLine] | tuple[WarningLine, ...]) -> None:
        """Repaint only when the warnings changed (the dashboard calls this every refresh)."""
        items = tuple(items)
        if tuple(i.key for i in items) == tuple(i.key for i in self.items):
            return
        self.items = items
        self.display = bool(items)
        self.refresh()

    @property
    def notes(self) -> list[Note]:
        return [i.note for i in self.items]

    @property
    def text(self) -> str:
        """Every warning whole, as N shows them."""
        return "\n".join(i.note.text for i in self.items)

    def shown_lines(self) -> list[Text]:
        size = self.content_size
        return fit_lines([i.line for i in self.items], size.width, size.height,
                         [i.note.level == "error" for i in self.items])

    def render(self) -> Text:
        return Text("\n").join(self.shown_lines())
