"""A bounded, line-based view of a token stream that never changes the screen's layout.

Textual's Log grows its virtual size with every new line, and a virtual-size change
re-lays-out the whole screen: at 2,000 tok/s that is a full repaint several times a
second. This view has a fixed size, keeps the last `max_lines` lines in a deque and paints
only the lines on show, so an append repaints this widget alone. It follows the end of
the stream; the mouse wheel or PageUp/PageDown scroll back, End resumes following.

Rows are cut to the view's width as text arrives; each break remembers how the text went
on across it, so when the width changes (the first pieces often arrive before the panes
are laid out, and terminals are resized) the rows are put back together and cut again.
"""

from __future__ import annotations

from collections import deque

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.strip import Strip
from textual.widget import Widget

from sparkctl.core.fmt import wrap_rows
from sparkctl.core.termtext import safe_text


class StreamTail(Widget, can_focus=True):
    DEFAULT_CSS = """
    StreamTail { height: 1fr; padding: 0 1; }
    """
    BINDINGS = [
        Binding("pageup", "back", "Scroll back", show=False),
        Binding("pagedown", "forward", "Scroll forward", show=False),
        Binding("end", "follow", "Follow", show=False),
    ]

    def __init__(self, max_lines: int = 5000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines: deque[str] = deque([""], maxlen=max_lines)
        # joins[i]: how row i's text goes on into row i+1 (None: a newline of its own; ""
        # or " ": a break made here); the last row's entry is unused
        self.joins: deque[str | None] = deque([None], maxlen=max_lines)
        self.column = 0
        self.back = 0  # lines scrolled back from the end; 0 = following
        self._cut_at = 0  # the width the rows were cut at

    @property
    def wrap_width(self) -> int:
        return max(20, self.content_size.width)

    def append(self, text: str) -> None:
        """Add streamed text (any mix of pieces and newlines)."""
        # a model's output: Textual would pass an escape sequence in it to the terminal
        text = safe_text(text)
        if not text:
            return
        self._fit_width()
        pieces, joins, self.column = wrap_rows(text, self.column, self._cut_at)
        self._add(pieces, joins)
        if self.back:
            self.back = min(self.back + len(pieces) - 1, max(0, len(self.lines) - 1))
        self.refresh()

    def _add(self, pieces: list[str], joins: list[str | None]) -> None:
        self.lines[-1] += pieces[0]
        for join, piece in zip(joins, pieces[1:]):
            self.joins[-1] = join
            self.lines.append(piece)
            self.joins.append(None)

    def write_line(self, text: str) -> None:
        text = safe_text(text)
        if self.lines[-1]:
            self.lines.append("")
            self.joins.append(None)
        self.lines[-1] = text
        self.joins[-1] = None
        self.lines.append("")
        self.joins.append(None)
        self.column = 0
        self.refresh()

    def clear(self) -> None:
        self.lines = deque([""], maxlen=self.lines.maxlen)
        self.joins = deque([None], maxlen=self.lines.maxlen)
        self.column = 0
        self.back = 0
        self.refresh()

    def _fit_width(self) -> None:
        """Cut the rows again if the view's width is not the one they were cut at."""
        width = self.wrap_width
        if width == self._cut_at:
            return
        self._cut_at = width
        if len(self.joins) != len(self.lines):  # rows set from outside: taken as they are
            self.joins = deque([None] * len(self.lines), maxlen=self.lines.maxlen)
        texts, current = [], ""
        for row, join in zip(self.lines, self.joins):
            current += row
            if join is None:
                texts.append(current)
                current = ""
            else:
                current += join
        if current:
            texts.append(current)
        self.lines = deque([""], maxlen=self.lines.maxlen)
        self.joins = deque([None], maxlen=self.lines.maxlen)
        self.column = 0
        for n, text in enumerate(texts):
            if n:
                self.joins[-1] = None
                self.lines.append("")
                self.joins.append(None)
            pieces, joins, self.column = wrap_rows(text, 0, width)
            self._add(pieces, joins)
        self.back = min(self.back, max(0, len(self.lines) - 1))

    def on_resize(self) -> None:
        if self.content_size.width > 0:
            self._fit_width()
            self.refresh()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def render_line(self, y: int) -> Strip:
        height = self.content_size.height
        end = len(self.lines) - self.back
        start = max(0, end - height)
        index = start + y
        if index >= end:
            return Strip.blank(self.content_size.width, self.rich_style)
        line = self.lines[index][: self.content_size.width]
        style = self.rich_style
        if self.back and y == height - 1:
            line = f"… {self.back} more line(s) below: End to follow"[: self.content_size.width]
            style = style + Style(reverse=True)
        return Strip([Segment(line, style)]).extend_cell_length(self.content_size.width, style)

    def _scroll(self, lines: int) -> None:
        self.back = max(0, min(len(self.lines) - 1, self.back + lines))
        self.refresh()

    def action_back(self) -> None:
        self._scroll(max(1, self.content_size.height - 1))

    def action_forward(self) -> None:
        self._scroll(-max(1, self.content_size.height - 1))

    def action_follow(self) -> None:
        self.back = 0
        self.refresh()

    def on_mouse_scroll_up(self, event) -> None:
        self._scroll(3)
        event.stop()

    def on_mouse_scroll_down(self, event) -> None:
        self._scroll(-3)
        event.stop()
