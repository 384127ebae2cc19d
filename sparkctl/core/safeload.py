"""Parsing JSON and TOML that came from outside the process (a file anyone could have
edited, a registry, another host) so that hostile shapes end in a ValueError with a
one-line reason, never in an exception the caller did not expect:

- too large: refused by size before any parsing (`max_bytes`);
- nested thousands deep (`[[[[...`): Python's parsers recurse, and RecursionError is not a
  ValueError; it is caught here and said as "nested too deeply";
- integers of hundreds of digits: fine as Python ints, but they overflow the first float or
  index they meet (`int too large to convert to float`, `cannot fit 'int' into an
  index-sized integer`); JSON integers are bounded to 64 bits here, and TOML's past
  Python's digit limit raise ValueError, which becomes `Unparsable` too.

Pure: text in, objects out."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

INT_LIMIT = 2**64  # the largest magnitude a JSON integer may have (uint64, as GGUF and Go write)
_LONG_DIGITS = re.compile(rb"\d{20}")


class Unparsable(ValueError):
    """The text was refused; `str()` says why in a few words (no position, no text)."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    value = int(text) if digits <= 20 else None
    if value is None or not -INT_LIMIT < value < INT_LIMIT:
        raise Unparsable(f"a number of {digits} digits (over 64 bits)")
    return value


def load_json(data: str | bytes, *, max_bytes: int | None = None) -> Any:
    """json.loads, bounded: Unparsable (a ValueError) for text over `max_bytes`, nesting
    past the interpreter's recursion limit, or an integer past 64 bits; json's own
    ValueError for text that is not JSON."""
    if max_bytes is not None and len(data) > max_bytes:
        raise Unparsable(f"over {max_bytes} bytes")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    hook = _bounded_int if _LONG_DIGITS.search(raw) else None  # the hook costs a call per int
    try:
        return json.loads(data, parse_int=hook)
    except RecursionError:
        raise Unparsable("nested too deeply") from None


def load_toml(text: str, *, max_bytes: int | None = None) -> dict[str, Any]:
    """tomllib.loads, bounded like `load_json`. A syntax error stays a TOMLDecodeError
    (it carries the line and column), itself a ValueError."""
    if max_bytes is not None and len(text) > max_bytes:
        raise Unparsable(f"over {max_bytes} bytes")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise Unparsable("nested too deeply") from None
    except ValueError:  # an integer past Python's digit limit (4300)
        raise Unparsable("an integer of thousands of digits") from None
