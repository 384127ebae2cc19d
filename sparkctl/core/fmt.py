"""Number formatting shared by the CLI and the TUI (one place, so both print the same)."""

from __future__ import annotations

from sparkctl.core.snapshots import GIB, Unavailable


def gib(n: int | float | None, digits: int = 1) -> str:
    if n is None:
        return "n/a"
    return f"{n / GIB:.{digits}f} GiB"


def size(n: int | float | None, digits: int = 1) -> str:
    """Bytes in the largest binary unit that keeps the number at 1 or more: "68.0 GiB",
    "1.2 MiB", "512 B". A 1 MB model is not "0.0 GiB"."""
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, step in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= step:
            return f"{sign}{n / step:.{digits}f} {unit}"
    return f"{sign}{int(n)} B"


def sizes_apart(a: int | float, b: int | float, digits: int = 1) -> tuple[str, str]:
    """Two sizes with enough decimals that different numbers never print alike
    (1.5 GiB vs 1.5 GiB becomes 1.52 GiB vs 1.48 GiB), up to 3 more digits."""
    for extra in range(4):
        x, y = gib(a, digits + extra), gib(b, digits + extra)
        if x != y or a == b:
            return x, y
    return x, y


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


def wrap_rows(text: str, column: int, width: int) -> tuple[list[str], list[str | None], int]:
    """Streamed text cut into rows no longer than `width` characters.

    `column` is where the current row already ends. Returns the pieces (the first one
    continues the current row, each other starts a row), for each break between them how the
    text continues across it (None: the text's own newline; "": a word cut; " ": a space
    dropped at the break), and the new column. The joins let the rows be put back together
    and cut again when the width changes. Breaks fall after a space where one is near, else
    mid-word. A runaway model can emit 60k tokens without a newline, and one ever-growing
    line makes every append cost more than the last."""
    if width <= 0:
        return [text], [], column
    pieces: list[str] = []
    joins: list[str | None] = []
    current = ""
    for n, piece in enumerate(text.split("\n")):
        if n:
            pieces.append(current)
            joins.append(None)
            current, column = "", 0
        while column + len(piece) > width:
            room = width - column
            cut = piece.rfind(" ", 0, room + 1)
            if cut <= 0 or cut < room // 2:
                cut = room
            if cut <= 0:  # the row is full: the piece starts the next one
                pieces.append(current)
                joins.append("")
                current, column = "", 0
                continue
            pieces.append(current + piece[:cut])
            if piece[cut:cut + 1] == " ":
                joins.append(" ")
                piece = piece[cut:].lstrip(" ")
            else:
                joins.append("")
                piece = piece[cut:]
            current, column = "", 0
        current += piece
        column += len(piece)
    pieces.append(current)
    return pieces, joins, column


def wrap_stream(text: str, column: int, width: int) -> tuple[str, int]:
    """wrap_rows' pieces as one text with a newline at each break, and the new column."""
    pieces, _, column = wrap_rows(text, column, width)
    return "\n".join(pieces), column
