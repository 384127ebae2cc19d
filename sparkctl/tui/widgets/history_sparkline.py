"""A history sparkline that draws what the samples say, on a fixed scale, and nothing for none.

Textual's Sparkline scales bars between the data's own minimum and maximum, draws a single
value as a full-height bar and an empty series as a baseline. For the dashboard's history
that misleads: one 35% GPU sample, or the placeholder a caller puts in when NVML gave
nothing, fills the box as if the GPU were flat out. Here the scale is fixed by the caller
(0-100 % for utilization, 0-MemTotal for available memory), a flat series sits at its own
level, and no data draws nothing: the label beside it says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.app import RenderResult as TextualRenderResult
from textual.reactive import reactive
from textual.renderables._blend_colors import blend_colors
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Sparkline

BARS = SparklineRenderable.BARS  # "▁▂▃▄▅▆▇█"


class HistorySparkline(Sparkline):
    """A Sparkline with a fixed [low, high] scale that renders blank without data.

    `bounds` may be changed at any time (the memory total is known only after the first
    sample); values outside it are clamped. Colours come from the same component classes
    as Textual's Sparkline.
    """

    # Repainted when the drawn cells change, not at every new sample: a column spans
    # several samples and a bar an eighth of a row of the scale (~5 GiB of a Spark's 121),
    # so most new data draws the same bars (watch_data, watch_bounds).
    data: reactive[Sequence[float] | None] = reactive(None, repaint=False)
    bounds: reactive[tuple[float, float]] = reactive((0.0, 100.0), repaint=False)

    def __init__(self, data: Sequence[float] | None = None, *, bounds: tuple[float, float] = (0.0, 100.0),
                 **kwargs) -> None:
        self._drawn: tuple | None = None  # what the cells show: see _drawn_key
        super().__init__(data, **kwargs)
        self.set_reactive(HistorySparkline.bounds, bounds)

    def _drawn_key(self) -> tuple:
        """The bars as drawn at this size: each column's height in eighths and its colour's
        place between the two ends in 1% steps (a finer change of colour is not seen)."""
        data = list(self.data or ())
        if not data:
            return ()
        bars = _FixedScaleBars(data, self.bounds, self.size.width, self.size.height, None, None)
        return (self.size, tuple((filled, round(r * 100)) for filled, r in bars.columns()))

    def _repaint_if_drawn_changed(self) -> None:
        key = self._drawn_key()
        if key != self._drawn:
            self._drawn = key
            self.refresh()

    def watch_data(self) -> None:
        self._repaint_if_drawn_changed()

    def watch_bounds(self) -> None:
        self._repaint_if_drawn_changed()

    @property
    def has_data(self) -> bool:
        return bool(self.data)

    def render(self) -> TextualRenderResult:
        data = list(self.data or ())
        if not data:
            return ""  # no samples: nothing drawn, not a bar at zero or at full height
        _, base = self.background_colors
        min_color = base + self.get_component_styles("sparkline--min-color").color
        max_color = base + self.get_component_styles("sparkline--max-color").color
        return _FixedScaleBars(data, self.bounds, self.size.width, self.size.height,
                               min_color.rich_color, max_color.rich_color)


@lru_cache(maxsize=1024)
def _bar_style(min_color, max_color, ratio: float) -> Style:
    """The blended colour of a bar: samples (0.1 GiB, whole percents) repeat, and blending
    and building a Style for every cell of every redraw was most of a redraw's cost."""
    return Style.from_color(blend_colors(min_color, max_color, ratio))


class _FixedScaleBars:
    """Bars for `data` bucketed over `width` columns like Textual's (max per bucket),
    heights measured against `bounds` instead of the data's own range."""

    def __init__(self, data: list[float], bounds: tuple[float, float], width: int, height: int,
                 min_color, max_color) -> None:
        self.data = data
        self.low, self.high = bounds
        self.width = max(1, width)
        self.height = max(1, height)
        self.min_color = min_color
        self.max_color = max_color

    def ratio(self, value: float) -> float:
        span = self.high - self.low
        if span <= 0:
            return 0.0
        return min(1.0, max(0.0, (value - self.low) / span))

    def columns(self) -> list[tuple[int, float]]:
        """(filled eighths, ratio) per column."""
        width = self.width
        buckets = list(SparklineRenderable._buckets(self.data, num_buckets=width))
        levels = len(BARS) * self.height  # 8 steps per row
        step = len(buckets) / width
        columns: list[tuple[int, float]] = []
        for col in range(width):
            r = self.ratio(max(buckets[int(col * step)]))
            # every sample shows at least the lowest eighth: a reading of 0 is a floor line,
            # which must not look like the blank of no reading at all
            columns.append((max(1, round(r * levels)), r))
        return columns

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = self.height
        columns = self.columns()
        for row in reversed(range(height)):
            low = row * len(BARS)
            # one segment per run of equal cells (same bar, same colour), not per cell:
            # each segment costs the compositor as much as a whole run, and a history in
            # 0.1 GiB steps is mostly runs
            run, run_style = "", None
            for filled, r in columns:
                if filled <= low:
                    cell, style = " ", None
                else:
                    cell = BARS[min(filled - low, len(BARS)) - 1]
                    style = _bar_style(self.min_color, self.max_color, r)
                if style is not run_style and run:
                    yield Segment(run, run_style)
                    run = ""
                run += cell
                run_style = style
            if run:
                yield Segment(run, run_style)
            if row:
                yield Segment.line()
