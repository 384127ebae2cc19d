"""The unified-memory budget as one bar: a segment per resident model, other use,
reclaimable cache, free, and the reserve floor marked at the right end."""

from __future__ import annotations

import re
from collections.abc import Hashable

from rich.text import Text
from textual.widget import Widget

from sparkctl.core.budget import Level, MemoryBudget, bar_cells, reserve_cell
from sparkctl.core.fmt import gib
from sparkctl.core.names import model_key
from sparkctl.core.snapshots import GIB, Unavailable
from sparkctl.tui.widgets.drift_gate import DriftGate

POOL_TITLE = {"unified": "Unified memory", "vram": "GPU memory (VRAM)", "host": "Host memory (no GPU)"}
GLYPH = {"model": "█", "other": "▓", "cache": "▒", "free": "░"}
SHORT_LABEL = {"reclaimable cache": "cache", "other use": "other use"}


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _drawn(b: MemoryBudget | Unavailable | None,
           contenders: frozenset[str] = frozenset()) -> tuple[object, tuple[float, ...]]:
    """(what the bar says in kind, its figures in GiB as shown: to 0.1). A note's words are
    kind, its numbers figures: "models claim 92.0 GiB but only 2.5 GiB of memory is in use"
    drifts with the memory it quotes, and is no new note at each 0.1 GiB."""
    if not isinstance(b, MemoryBudget):
        return b, ()
    tenth = lambda n: round(n / GIB, 1)  # noqa: E731
    notes = tuple(_NUMBER.sub("#", n) for n in b.notes)
    kind = (b.pool, b.level, notes, contenders, tuple((s.kind, s.label, s.lane) for s in b.segments))
    quoted = tuple(float(x) for n in b.notes for x in _NUMBER.findall(n))
    return kind, (tenth(b.total), tenth(b.available), tenth(b.reserve), *(tenth(s.bytes) for s in b.segments),
                  *quoted)


def _short_gib(n: int) -> str:
    return f"{n / GIB:.0f}G" if n >= 10 * GIB else f"{n / GIB:.1f}G"


def fit_entries(entries: list[list[Text]], width: int, wrap_form: int = -1) -> Text:
    """The legend in the most detailed form that fits one line of `width`; when none does,
    form `wrap_form` wrapped at entry boundaries (an entry is never cut in two).
    `entries[i]` holds entry i's forms, most detailed first."""
    sep = "  "
    for form in range(len(entries[0]) if entries else 0):
        line = Text(sep).join(e[form] for e in entries)
        if line.cell_len <= width:
            return line
    out, line_len = Text(), 0
    for e in entries:
        piece = e[wrap_form]
        if line_len and line_len + len(sep) + piece.cell_len > width:
            out.append("\n")
            line_len = 0
        elif line_len:
            out.append(sep)
            line_len += len(sep)
        out.append(piece)
        line_len += piece.cell_len
    return out


class BudgetBar(Widget):
    DEFAULT_CSS = """
    BudgetBar { height: auto; min-height: 3; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.budget: MemoryBudget | Unavailable | None = None
        self.contenders: frozenset[str] = frozenset()  # model keys the legend calls contender
        # a level, a model, a note: at once; a drift of the figures under 1 GiB: every few s
        self._gate = DriftGate(far=1.0)
        self._text: tuple[object, Hashable, Text] | None = None  # (the budget, its drawing's key, the text)
        self._painted: Text | None = None  # the text last handed to Textual to draw

    def show(self, budget: MemoryBudget | Unavailable | None, contenders=()) -> None:
        # Repaint when what is drawn changes (figures at 0.1 GiB), not at every byte of
        # page cache, and small drifts seldom: the idle dashboard's CPU is mostly repaints.
        # A repaint is the bar's own lines; the screen is laid out again only when their
        # rows change (a layout of the whole screen cost more than drawing the bar).
        contenders = frozenset(contenders)
        if not self._gate.due(*_drawn(budget, contenders)):
            return
        self.budget = budget
        self.contenders = contenders
        painted = self._painted
        text = self.render()
        if painted is not None and text == painted:
            return  # the same cells: nothing to draw
        # a line that grew or shrank may wrap onto another number of rows: lay out again
        self.refresh(layout=painted is None or self._rows(text) != self._rows(painted))

    def _rows(self, text: Text) -> int | None:
        """How many rows `text` takes at the bar's width (its lines wrapped as drawn)."""
        width = self.content_size.width
        return len(text.wrap(self.app.console, width)) if width > 0 else None

    def _colour(self, kind: str, lane: str | None) -> str:
        v = self.app.theme_variables
        if kind == "model":
            return v.get(f"lane-{lane or 'other'}", "#8A8F98")
        return v.get(f"budget-{kind}", "#555555")

    def _lane(self, seg) -> str | None:
        """The lane as the resident table names it: a side-loaded model is "contender"."""
        if seg.kind == "model" and seg.lane in (None, "other") and model_key(seg.label) in self.contenders:
            return "contender"
        return seg.lane

    def _figures(self, b: MemoryBudget, width: int) -> Text:
        level_style = {Level.OK: "bold green", Level.WARN: "bold yellow", Level.CRITICAL: "bold white on red"}
        level_text = {Level.OK: " OK ", Level.WARN: " LOW MEMORY ", Level.CRITICAL: " BELOW RESERVE "}
        forms = [
            (f"{POOL_TITLE[b.pool.value]}: ", f"total {gib(b.total)} · available {gib(b.available)} · "
             f"models {gib(b.models_bytes)} · headroom above reserve {gib(b.headroom)}  "),
            (f"{POOL_TITLE[b.pool.value]}: ", f"{gib(b.total)} · available {gib(b.available)} · "
             f"models {gib(b.models_bytes)} · headroom {gib(b.headroom)}  "),
            ("", f"{_short_gib(b.total)} · avail {_short_gib(b.available)} · models {_short_gib(b.models_bytes)} · "
             f"headroom {_short_gib(b.headroom)} "),
        ]
        for i, (title, body) in enumerate(forms):
            figures = Text()
            figures.append(title, style="bold")
            figures.append(body)
            figures.append(level_text[b.level], style=level_style[b.level])
            if figures.cell_len <= width or i == len(forms) - 1:
                return figures
        return figures

    def render(self) -> Text:
        """The bar's text for its width now, made once per budget, width and theme (show
        makes it to compare; Textual asks again to measure and to draw)."""
        key = (self.contenders, self.content_size.width, self.app.theme)
        made = self._text
        if made is None or made[0] is not self.budget or made[1] != key:
            self._text = made = (self.budget, key, self._make_text())
        self._painted = made[2]
        return self._painted

    def _make_text(self) -> Text:
        b = self.budget
        if b is None:
            return Text("reading memory…", style="dim")
        if isinstance(b, Unavailable):
            return Text(f"memory budget {b}", style="bold red")
        width = max(10, self.content_size.width)
        cells = bar_cells(b, width)
        bar = Text()
        for seg, n in cells:
            bar.append(GLYPH[seg.kind] * n, style=self._colour(seg.kind, self._lane(seg)))
        rc = reserve_cell(b, width)
        if rc is not None and rc < len(bar):
            reserve_style = f"bold {self._colour('reserve', None)}"
            bar.stylize(reserve_style, rc, rc + 1)
            plain = bar.plain
            bar = bar[:rc] + Text("┃", style=reserve_style) + bar[rc + 1 : len(plain)]

        # each entry in two forms, both naming the lane as the resident table does: "name
        # (lane) 68.0 GiB", "name (lane) 68G"; the legend takes the first that fits one line,
        # else the second over several lines. A lane is never dropped to save a line (the
        # colour alone does not say it) nor cut off its model.
        entries: list[list[Text]] = []
        for seg in b.segments:
            if seg.bytes <= 0 and seg.kind != "free":
                continue
            lane = self._lane(seg)
            glyph = Text(GLYPH[seg.kind] + " ", style=self._colour(seg.kind, lane))
            label = f"{seg.label} ({lane})" if seg.kind == "model" else seg.label
            entries.append([glyph + Text(f"{label} {gib(seg.bytes)}"),
                            glyph + Text(f"{SHORT_LABEL.get(label, label)} {_short_gib(seg.bytes)}")])
        reserve = Text("┃ ", style=f"bold {self._colour('reserve', None)}")
        entries.append([reserve + Text(f"reserve {gib(b.reserve)}"), reserve + Text(f"reserve {_short_gib(b.reserve)}")])
        legend = fit_entries(entries, width, wrap_form=1)

        out = Text("\n").join([self._figures(b, width), bar, legend])
        if b.notes:
            out.append("\n" + "; ".join(b.notes), style="yellow")
        return out

