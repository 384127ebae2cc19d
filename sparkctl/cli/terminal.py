"""The last guard before the terminal: every command's stdout and stderr lose escape
sequences and control characters (core/termtext.py), whoever wrote the text: a model name
or an error from the engine, a fleet host's status, a model's streamed answer, a tracking
server's message. sparkctl's own redraws (a progress line rewritten in place) go through
``control``, the only way to reach the terminal with one.

Text is cleaned per write, so a sequence split across two writes cannot get through either:
its ESC is a control character and goes on its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from sparkctl.core.termtext import safe_text

# sparkctl's own in-place redraw: back to the line's start, erase it
REDRAW = "\r\x1b[K"


class SafeStream:
    """A text stream whose writes are cleaned; anything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(safe_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def control(self, sequence: str) -> None:
        """Write sparkctl's own control sequence as it is."""
        self._stream.write(sequence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def write_control(stream: Any, sequence: str) -> None:
    """`sequence` to `stream` unchanged, through its guard when it has one."""
    getattr(stream, "control", stream.write)(sequence)


@contextmanager
def guarded_output() -> Iterator[None]:
    """sys.stdout and sys.stderr behind SafeStream for the length of a command."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
