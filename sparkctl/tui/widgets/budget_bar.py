"""The unified-memory budget as one bar: a segment per resident model, other use,
reclaimable cache, free, and the reserve floor marked at the right end."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from sparkctl.core.budget import Level, MemoryBudget, bar_cells, reserve_cell
from sparkctl.core.fmt import gib
from sparkctl.core.snapshots import GIB, Unavailable
from sparkctl.tui.widgets.drift import DriftGate

POOL_TITLE = {"unified": "Unified memory", "vram": "GPU memory (VRAM)", "host": "Host memory (no GPU)"}
GLYPH = {"model": "█", "other": "▓", "cache": "▒", "free": "░"}


def _drawn(b: MemoryBudget | Unavailable | None) -> tuple[object, tuple[float, ...]]:
    """(what the bar says in kind, its figures in GiB as shown: to 0.1)."""
    if not isinstance(b, MemoryBudget):
        return b, ()
    tenth = lambda n: round(n / GIB, 1)  # noqa: E731
    kind = (b.pool, b.level, b.notes, tuple((s.kind, s.label, s.lane) for s in b.segments))
    return kind, (tenth(b.total), tenth(b.available), tenth(b.reserve), *(tenth(s.bytes) for s in b.segments))


class BudgetBar(Widget):
    DEFAULT_CSS = """
    BudgetBar { height: 4; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.budget: MemoryBudget | Unavailable | None = None
        # a level, a model, a note: at once; a drift of the figures under 1 GiB: every few s
        self._gate = DriftGate(far=1.0)

    def show(self, budget: MemoryBudget | Unavailable | None) -> None:
        # Repaint when what is drawn changes (figures at 0.1 GiB), not at every byte of
        # page cache, and small drifts seldom: the idle dashboard's CPU is mostly repaints.
        if self._gate.due(*_drawn(budget)):
            self.budget = budget
            self.refresh()

    def _colour(self, kind: str, lane: str | None) -> str:
        v = self.app.theme_variables
        if kind == "model":
            return v.get(f"lane-{lane or 'other'}", "#8A8F98")
        return v.get(f"budget-{kind}", "#555555")

    def render(self) -> Text:
        b = self.budget
        if b is None:
            return Text("reading memory…", style="dim")
        if isinstance(b, Unavailable):
            return Text(f"memory budget {b}", style="bold red")
        width = max(10, self.content_size.width)
        cells = bar_cells(b, width)
        bar = Text()
        for seg, n in cells:
            bar.append(GLYPH[seg.kind] * n, style=self._colour(seg.kind, seg.lane))
        rc = reserve_cell(b, width)
        if rc is not None and rc < len(bar):
            reserve_style = f"bold {self._colour('reserve', None)}"
            bar.stylize(reserve_style, rc, rc + 1)
            plain = bar.plain
            bar = bar[:rc] + Text("┃", style=reserve_style) + bar[rc + 1 : len(plain)]

        legend = Text()
        for seg in b.segments:
            if seg.bytes <= 0 and seg.kind != "free":
                continue
            label = f"{seg.label} ({seg.lane})" if seg.kind == "model" else seg.label
            legend.append(GLYPH[seg.kind] + " ", style=self._colour(seg.kind, seg.lane))
            legend.append(f"{label} {gib(seg.bytes)}   ")
        legend.append("┃ ", style=f"bold {self._colour('reserve', None)}")
        legend.append(f"reserve {gib(b.reserve)}")

        level_style = {Level.OK: "bold green", Level.WARN: "bold yellow", Level.CRITICAL: "bold white on red"}
        level_text = {
            Level.OK: " OK ",
            Level.WARN: " LOW MEMORY ",
            Level.CRITICAL: " BELOW RESERVE ",
        }
        figures = Text()
        figures.append(f"{POOL_TITLE[b.pool.value]}: ", style="bold")
        figures.append(
            f"total {gib(b.total)} · available {gib(b.available)} · models {gib(b.models_bytes)} · "
            f"headroom above reserve {gib(b.headroom)}  "
        )
        figures.append(level_text[b.level], style=level_style[b.level])
        out = Text("\n").join([figures, bar, legend])
        if b.notes:
            out.append("\n" + "; ".join(b.notes), style="yellow")
        return out
