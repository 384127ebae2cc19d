"""The TUI is launched over ssh: a dropped session (SIGHUP) or a `kill` (SIGTERM) must end it
like "stop and quit" (the bench, eval or sweep stopped, lane models put back, the run
recorded KILLED), never by the default action that kills it mid-bench.

Textual handles SIGTSTP, SIGCONT and SIGWINCH only. Two things stand in the way of a clean
stop once the terminal is gone:

- Textual's writer thread writes frames to the terminal; after a hang-up every write fails
  with EIO, the thread dies, its bounded queue fills and the next frame blocks the event
  loop for good, wrap-up included. ``HangupSafeDriver`` gives it an output that turns a
  dead terminal into silence.
- Its input thread reads the terminal; a hung-up terminal reads as end-of-file forever (a
  busy loop) or raises EIO (which Textual turns into a crash). The driver stops reading.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Any, Callable

from textual.drivers.linux_driver import LinuxDriver

STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
_GONE = (errno.EIO, errno.EBADF, errno.ENXIO, errno.EPIPE)


class QuietOutput:
    """A text stream that stops writing, silently, once its terminal is gone."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.dead = False

    def write(self, text: str) -> int:
        if not self.dead:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self.dead = True
        return len(text)

    def flush(self) -> None:
        if not self.dead:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.dead = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...
        return getattr(self._stream, name)


class HangupSafeDriver(LinuxDriver):
    """Textual's terminal driver, made to outlive its terminal (see the module doc)."""

    def __init__(self, app, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._file = QuietOutput(self._file)

    def hung_up(self) -> None:
        """The terminal is gone: stop reading it and writing to it."""
        self._file.dead = True
        self.exit_event.set()  # the input thread ends at its next select

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        except OSError as exc:
            if exc.errno not in _GONE:
                raise  # Textual shows it as a crash, as before


def silence_terminal() -> None:
    """Point stdin, stdout and stderr at /dev/null: after a hang-up, anything still written
    (a last message, the interpreter's flush at exit) must not fail with EIO."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


def install(loop, on_signal: Callable[[int], None]) -> Callable[[], None]:
    """Route SIGHUP and SIGTERM to `on_signal` on the event loop; returns the undo."""
    done = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            done.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            continue

    def undo() -> None:
        for sig in done:
            try:
                loop.remove_signal_handler(sig)
            except (RuntimeError, ValueError):
                pass

    return undo
