"""A pass/fail grid for a suite run: one cell per sampled item, one section per model.

The cells are data (a list of states per model), painted line by line: a 1,319-item GSM8K
run is one widget, not 1,319. Each state has its own glyph as well as its own colour, so
the grid reads without colour (a pasted screen, a colour-blind user): a did-not-finish
item is not just a differently coloured wrong answer. Cells come in groups of ten so
positions can be counted; lines wrap to the widget's width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sparkctl.core.suites.cells import DNF, ERROR, FAIL, FLIGHT, GLYPH, LEGEND, PASS, PENDING, STATES, state_of  # noqa: F401

GROUP = 10  # cells per group; groups are separated by a space


@dataclass
class _Section:
    model: str
    states: list[str] = field(default_factory=list)


class ItemGrid(ScrollView, can_focus=False):
    COMPONENT_CLASSES = {
        "item-grid--title", "item-grid--pass", "item-grid--fail", "item-grid--dnf",
        "item-grid--error", "item-grid--flight", "item-grid--pending",
    }
    DEFAULT_CSS = """
    ItemGrid { height: auto; max-height: 8; padding: 0 1; overflow-x: hidden; scrollbar-size-vertical: 1; }
    ItemGrid > .item-grid--title { text-style: bold; }
    ItemGrid > .item-grid--pass { color: $text-success; }
    ItemGrid > .item-grid--fail { color: $text-error; text-style: bold; }
    ItemGrid > .item-grid--dnf { color: magenta; text-style: bold reverse; }
    ItemGrid > .item-grid--error { color: $text-warning; text-style: bold; }
    ItemGrid > .item-grid--flight { color: $text-accent; text-style: bold reverse; }
    ItemGrid > .item-grid--pending { color: $text-muted; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sections: list[_Section] = []
        # one entry per painted line: (section index, None) for its title, else the cells'
        # (section index, (first, end)) slice
        self._lines: list[tuple[int, tuple[int, int] | None]] = []
        self._width = 0

    # ---- data ------------------------------------------------------------------------------

    def clear(self) -> None:
        self.sections = []
        self._relayout()

    def start(self, model: str, total: int) -> None:
        """A section of `total` items to do for `model` (replacing one of the same name)."""
        section = _Section(model, [PENDING] * total)
        for i, s in enumerate(self.sections):
            if s.model == model:
                self.sections[i] = section
                break
        else:
            self.sections.append(section)
        self._relayout()

    def set(self, model: str, position: int, state: str) -> None:
        for index, s in enumerate(self.sections):
            if s.model == model and 0 <= position < len(s.states):
                if s.states[position] != state:
                    s.states[position] = state
                    self._refresh_cell(index, position, follow=state == FLIGHT)
                return

    def load(self, model: str, states: list[str]) -> None:
        """Every cell of `model` at once (the run's own record at its end)."""
        for s in self.sections:
            if s.model == model and len(s.states) == len(states):
                s.states = list(states)
                self.refresh()
                return
        self.start(model, len(states))
        self.sections[-1].states = list(states)
        self.refresh()

    def cells(self, model: str) -> str:
        """The glyphs of `model`'s cells in sample order, ungrouped (what the user reads)."""
        for s in self.sections:
            if s.model == model:
                return "".join(GLYPH[x] for x in s.states)
        return ""

    def counts(self, model: str) -> dict[str, int]:
        for s in self.sections:
            if s.model == model:
                return {state: s.states.count(state) for state in STATES}
        return {}

    @property
    def lines_text(self) -> list[str]:
        """Every line as painted, without styles (for tests and copying)."""
        return [self._plain(i) for i in range(len(self._lines))]

    # ---- layout ----------------------------------------------------------------------------

    def _per_line(self, width: int) -> int:
        if width < GROUP:
            return max(1, width)
        return max(1, (width + 1) // (GROUP + 1)) * GROUP

    def _relayout(self) -> None:
        # a column kept for the scrollbar whether or not it shows: the wrap never flips
        width = max(1, (self.size.width or 79) - self.styles.scrollbar_size_vertical)
        self._width = width
        per = self._per_line(width)
        lines: list[tuple[int, tuple[int, int] | None]] = []
        for index, s in enumerate(self.sections):
            lines.append((index, None))
            for first in range(0, len(s.states), per):
                lines.append((index, (first, min(len(s.states), first + per))))
        self._lines = lines
        self.virtual_size = Size(width, len(lines))
        self.refresh(layout=True)

    def on_resize(self) -> None:
        if max(1, self.size.width - self.styles.scrollbar_size_vertical) != self._width:
            self._relayout()

    def _line_of(self, index: int, position: int) -> int:
        per = self._per_line(self._width)
        line = 0
        for s in self.sections[:index]:
            line += 1 + -(-len(s.states) // per)
        return line + 1 + position // per

    def _refresh_cell(self, index: int, position: int, follow: bool) -> None:
        line = self._line_of(index, position)
        top, height = round(self.scroll_offset.y), self.scrollable_content_region.height
        if follow and height and not top <= line < top + height:
            self.scroll_to(y=max(0, line - height + 1), animate=False)
        self.refresh()  # a few hundred cells at most on show: repainting them is cheap

    # ---- painting --------------------------------------------------------------------------

    def _title(self, s: _Section) -> str:
        n = {state: s.states.count(state) for state in STATES}
        done = n[PASS] + n[FAIL] + n[DNF] + n[ERROR]
        parts = [f"{s.model}  {done}/{len(s.states)}", f"✓{n[PASS]}", f"✗{n[FAIL]}"]
        if n[DNF]:
            parts.append(f"D{n[DNF]}")
        if n[ERROR]:
            parts.append(f"E{n[ERROR]}")
        return "  ".join(parts)

    def _plain(self, y: int) -> str:
        index, span = self._lines[y]
        s = self.sections[index]
        if span is None:
            return self._title(s)
        cells = [GLYPH[x] for x in s.states[span[0]:span[1]]]
        return " ".join("".join(cells[i:i + GROUP]) for i in range(0, len(cells), GROUP))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        line = y + round(self.scroll_offset.y)
        if line >= len(self._lines):
            return Strip.blank(width, base)
        index, span = self._lines[line]
        s = self.sections[index]
        if span is None:
            style = base + self.get_component_rich_style("item-grid--title", partial=True)
            segments = [Segment(self._title(s)[:width], style)]
        else:
            styles = {state: base + self.get_component_rich_style(f"item-grid--{state}", partial=True)
                      for state in STATES}
            segments = []
            for k, state in enumerate(s.states[span[0]:span[1]]):
                if k and k % GROUP == 0:
                    segments.append(Segment(" ", base))
                segments.append(Segment(GLYPH[state], styles[state]))
        return Strip(segments).crop(0, width).extend_cell_length(width, base)
