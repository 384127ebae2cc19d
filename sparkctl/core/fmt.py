"""Number formatting shared by the CLI and the TUI (one place, so both print the same)."""

from __future__ import annotations

from sparkctl.core.snapshots import GIB, Unavailable


def gib(n: int | float | None, digits: int = 1) -> str:
    if n is None:
        return "n/a"
    return f"{n / GIB:.{digits}f} GiB"


def na(x: object, fmt: str = "{}", unit: str = "") -> str:
    """Format a reading, or 'n/a (reason)' for an Unavailable one."""
    if isinstance(x, Unavailable):
        return str(x)
    if x is None:
        return "n/a"
    return fmt.format(x) + unit


def short_na(x: object, fmt: str = "{}", unit: str = "") -> str:
    """Like na() but without the reason, for narrow table cells."""
    if isinstance(x, Unavailable) or x is None:
        return "n/a"
    return fmt.format(x) + unit


def sparkline(values: list[float], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """Unicode block sparkline of the last `width` values."""
    blocks = " ▁▂▃▄▅▆▇█"
    vals = values[-width:]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = hi - lo
    out = []
    for v in vals:
        if span <= 0:
            out.append(blocks[4])
        else:
            idx = int(round((min(max(v, lo), hi) - lo) / span * (len(blocks) - 1)))
            out.append(blocks[idx])
    return "".join(out)
