"""Text charts that fit any terminal width: one row per item, a shared scale.

Chosen over a plotting library (plotext) because the rows carry their labels and values
in text, so an 80-column ssh terminal shows the same information as a wide one, only with
shorter bars; nothing here wraps or overlaps at any width >= MIN_WIDTH.

- ``range_rows``: a run's min..max as a bar with its median marked (decode tok/s across
  engine versions and dates).
- ``bar_rows``: one value per item as a bar from zero (a head-to-head).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_WIDTH = 30
RANGE = "─"
MEDIAN = "●"
FULL = "█"
PARTIAL = " ▏▎▍▌▋▊▉"  # eighths of a cell


@dataclass(frozen=True)
class RangeItem:
    label: str
    low: float | None
    mid: float | None
    high: float | None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _scale(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi == lo:
        pad = abs(hi) * 0.05 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def range_rows(items: list[RangeItem], width: int, label_width: int = 24) -> list[tuple[str, str, str]]:
    """(label, bar, value text) per item; the three joined by spaces are at most `width`.
    The bar spans low..high on a scale shared by all rows, with the median as MEDIAN."""
    width = max(width, MIN_WIDTH)
    values = [v for it in items for v in (it.low, it.mid, it.high) if v is not None]
    texts = [f"{_fmt(it.mid)} ({_fmt(it.low)}-{_fmt(it.high)})" for it in items]
    value_w = max([len(t) for t in texts] + [1])
    label_w = min(label_width, max([len(it.label) for it in items] + [1]), max(6, width // 3))
    if label_w + value_w + 2 + 8 > width:  # narrow: the median alone, the bar shows the range
        texts = [_fmt(it.mid) for it in items]
        value_w = max(len(t) for t in texts)
    bar_w = max(4, width - label_w - value_w - 2)
    out = []
    if not values:
        return [(_clip(it.label, label_w).ljust(label_w), " " * bar_w, t.rjust(value_w)) for it, t in zip(items, texts)]
    s_lo, s_hi = _scale(values)

    def col(v: float) -> int:
        return min(bar_w - 1, max(0, round((v - s_lo) / (s_hi - s_lo) * (bar_w - 1))))

    for it, text in zip(items, texts):
        cells = [" "] * bar_w
        if it.low is not None and it.high is not None:
            for c in range(col(it.low), col(it.high) + 1):
                cells[c] = RANGE
        if it.mid is not None:
            cells[col(it.mid)] = MEDIAN
        out.append((_clip(it.label, label_w).ljust(label_w), "".join(cells), text.rjust(value_w)))
    return out


def bar_rows(items: list[tuple[str, float | None]], width: int, unit: str = "",
             label_width: int = 24, spec: str = ".1f") -> list[tuple[str, str, str]]:
    """(label, bar, value text) per item: bars from zero to the value, the longest filling
    the space left by the labels and values, in eighths of a cell."""
    width = max(width, MIN_WIDTH)
    texts = [("-" if v is None else f"{format(v, spec)}{unit}") for _, v in items]
    value_w = max([len(t) for t in texts] + [1])
    label_w = min(label_width, max([len(lbl) for lbl, _ in items] + [1]), max(6, width // 3))
    bar_w = max(4, width - label_w - value_w - 2)
    top = max([v for _, v in items if v is not None and v > 0] + [0.0])
    out = []
    for (label, v), text in zip(items, texts):
        bar = ""
        if v is not None and v > 0 and top > 0:
            eighths = round(v / top * bar_w * 8)
            bar = FULL * (eighths // 8) + (PARTIAL[eighths % 8] if eighths % 8 else "")
        out.append((_clip(label, label_w).ljust(label_w), bar.ljust(bar_w)[:bar_w], text.rjust(value_w)))
    return out
