"""Keep-alive values: one parser for the config, the CLI and everything sent to Ollama.

Ollama reads `keep_alive` as api.Duration: a JSON number is seconds, a JSON string is a Go
duration that needs a unit ("30m", "1h30m"; a bare "-1" is a 400 `time: missing unit in
duration "-1"`), and any negative value means "never unload". sparkctl accepts what a
user naturally writes in TOML or on the command line (a number, a numeric string such as
the documented "-1", or a Go duration) and always sends a plain number of seconds, which
every Ollama version accepts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_UNITS_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")

HINT = 'seconds or a duration like "30m", "1h30m"; -1 keeps it forever, 0 unloads'


@dataclass(frozen=True)
class KeepAlive:
    """A parsed keep-alive. `seconds` is None for forever."""

    seconds: float | None
    text: str

    @property
    def forever(self) -> bool:
        return self.seconds is None

    @property
    def wire(self) -> int | float:
        """What to send as `keep_alive`: seconds as a JSON number (-1 for forever)."""
        if self.seconds is None:
            return -1
        return int(self.seconds) if float(self.seconds).is_integer() else self.seconds

    @property
    def label(self) -> str:
        return "forever" if self.seconds is None else format_seconds(self.seconds)


def go_duration_seconds(text: str) -> float:
    """Go's time.ParseDuration, in seconds (sign kept). Raises ValueError with the reason."""
    original, t = text, text
    sign = 1.0
    if t and t[0] in "+-":
        sign = -1.0 if t[0] == "-" else 1.0
        t = t[1:]
    if t == "0":
        return 0.0
    if not t:
        raise ValueError(f"invalid duration {original!r}")
    total, pos = 0.0, 0
    while pos < len(t):
        m = _PART.match(t, pos)
        if m is None:
            if _NUMBER.fullmatch(t[pos:]):
                raise ValueError(f"missing unit in duration {original!r}")
            raise ValueError(f"invalid duration {original!r}")
        total += float(m.group(1)) * _UNITS_S[m.group(2)]
        pos = m.end()
    return sign * total


def parse_keep_alive(value: object) -> KeepAlive:
    """A keep-alive from config or the command line. Raises ValueError (one line)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"invalid keep-alive {value!r}: expected {HINT}")
    if isinstance(value, (int, float)):
        seconds = float(value)
        text = str(value)
    else:
        text = value.strip()
        if _NUMBER.fullmatch(text):
            seconds = float(text)
        else:
            try:
                seconds = go_duration_seconds(text)
            except ValueError as exc:
                raise ValueError(f"invalid keep-alive {value!r} ({exc}): expected {HINT}") from None
    if not math.isfinite(seconds):
        raise ValueError(f"invalid keep-alive {value!r}: expected {HINT}")
    return KeepAlive(None if seconds < 0 else seconds, text)


def format_seconds(seconds: float) -> str:
    """1800 -> "30m", 5400 -> "1h30m", 45 -> "45s", 0 -> "0s"."""
    if seconds < 1 or not float(seconds).is_integer():
        return f"{seconds:g}s"
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return out or "0s"
