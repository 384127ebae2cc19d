"""A total deadline for one blocking call to a tracking server, and a way for a signal to
shorten it.

MLflow's client (requests) and the REST reader (httpx) bound each socket read, never a
whole call: a server that answers one byte a second keeps a write or a search going for as
long as it likes. `call_within` runs the call on a daemon thread and stops waiting for it at
the deadline. The thread is left behind (no thread can be killed), which is harmless: it is
a daemon, so the process never waits for it at exit, and a write it may still finish is
idempotent (records carry their id; `sparkctl sync` finds it done).

`hurry()` is what a signal handler calls: from then on every call waits at most
`HURRY_S` more (counted from the later of the signal and the call's start), and after a
second `hurry()` none waits at all. A bench spools its run before writing it, so giving up
on the server loses nothing; the process ends within seconds of the signal.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")

HURRY_S = 5.0
_POLL_S = 0.1

_lock = threading.Lock()
_hurried: list[float] = []  # monotonic times of hurry() calls


class DeadlinePassed(Exception):
    """The call did not finish in time. `hurried`: a signal cut its time short."""

    def __init__(self, waited_s: float, hurried: bool) -> None:
        super().__init__(f"gave up after {waited_s:.0f} s")
        self.waited_s = waited_s
        self.hurried = hurried


def hurry() -> None:
    """A signal: calls under way or to come get at most HURRY_S more; a second one, none."""
    with _lock:
        _hurried.append(time.monotonic())


def hurried() -> bool:
    with _lock:
        return bool(_hurried)


def _reset_for_tests() -> None:
    with _lock:
        _hurried.clear()


def _end(start: float, deadline_s: float) -> tuple[float, bool]:
    """When a call that began at `start` must be given up on, and whether a signal said so."""
    end = start + deadline_s
    with _lock:
        marks = list(_hurried)
    if len(marks) >= 2:
        return min(end, marks[1]), True
    if marks:
        cut = max(start, marks[0]) + HURRY_S
        if cut < end:
            return cut, True
    return end, False


def call_within(fn: Callable[[], T], deadline_s: float | None, name: str = "sparkctl-tracking") -> T:
    """`fn()`, or DeadlinePassed once `deadline_s` (None: no deadline, unless hurried) has
    gone by without an answer. Exceptions of `fn` are raised as they are."""
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller as it is
            box["error"] = exc
        finally:
            done.set()

    start = time.monotonic()
    threading.Thread(target=run, name=name, daemon=True).start()
    limit = float("inf") if deadline_s is None else deadline_s
    while not done.wait(_POLL_S):
        end, cut = _end(start, limit)
        now = time.monotonic()
        if now >= end:
            raise DeadlinePassed(now - start, cut)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
