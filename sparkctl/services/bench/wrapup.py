"""The end of every tracked run (bench, eval, sweep): put lane models back and record the
runs, to the end, whatever arrives meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine


async def finish_shielded(wrap_up: Coroutine[Any, Any, Any], say: Callable[[str], None],
                          what: str = "the runs") -> asyncio.Future:
    """Run `wrap_up` as its own task and wait for it through any number of cancellations:
    a second Ctrl-C, SIGHUP or Escape while it runs must not leave production unloaded or
    a run unrecorded. Returns the finished task (its result or exception untouched)."""
    task = asyncio.ensure_future(wrap_up)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                say(f"stopping: putting lane models back and recording {what} first")
    return task
