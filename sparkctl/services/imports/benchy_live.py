"""Following llama-benchy's `--emit-progress` file as it grows, into the events a bench sends
(services/bench/events.py: Phase, RepStarted, Live, RepDone), so the Bench screen's gauges and
the CLI's progress line show a llama-benchy run while it runs; at its end the stream is
recorded as import runs (llama_benchy.progress_records).

Blocking (it polls a file): run it in a thread worker. It stops at `bench_complete`, when
`stop` is set, or after `idle_s` seconds in which the file did not grow. A file that shrinks
was started again by a new llama-benchy run (it opens the file for writing): the state
starts over, said in a Phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkctl.core import benchy_progress as progress
from sparkctl.core.termtext import safe_line
from sparkctl.services.bench.events import Live, Phase, RepDone, RepStarted
from sparkctl.services.bench.results import RepResult

POLL_S = 0.1


class FollowFailed(Exception):
    """The file could not be followed (one line naming it)."""


def follow(path: str | Path, sink: Callable[[Any], None], *, stop: threading.Event | None = None,
           idle_s: float | None = 600.0, poll_s: float = POLL_S, wait_for_file_s: float = 30.0,
           clock: Callable[[], float] = time.monotonic,
           state: progress.ProgressState | None = None) -> progress.ProgressState:
    """Read `path` as llama-benchy writes it, sending bench events to `sink`; returns what was
    read (its `.complete` says whether the stream ended with bench_complete). `state`, when
    given, is filled in place: what was read survives an interruption of the caller."""
    p = Path(path)
    stop = stop or threading.Event()
    started = clock()
    while not p.exists():
        if stop.is_set() or clock() - started > wait_for_file_s:
            raise FollowFailed(f"{p}: no such file (waited {wait_for_file_s:g} s for llama-benchy to create it)")
        time.sleep(poll_s)
    state = state if state is not None else progress.ProgressState()
    view = _View(sink, p)
    pos = 0
    pending = ""
    last_growth = clock()
    while True:
        try:
            size = p.stat().st_size
            if size < pos:  # truncated: a new llama-benchy run opened the file again
                state.__init__()
                pos, pending = 0, ""
                view.say(f"{p.name} was started again: following the new run")
            with open(p, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except OSError as exc:
            raise FollowFailed(f"{p}: cannot read it ({exc.strerror or exc})") from None
        if chunk:
            pos += len(chunk)
            last_growth = clock()
            text = pending + chunk.decode("utf-8", errors="replace")
            lines = text.split("\n")
            pending = lines.pop()  # a line not finished yet waits for its newline
            for line in lines:
                view.update(state, state.feed_line(line))
            view.flush(state)
            if state.complete:
                return state
        if stop.is_set():
            return state
        if idle_s is not None and clock() - last_growth > idle_s:
            view.say(f"{p.name} did not grow for {idle_s:g} s: stopped following it")
            return state
        time.sleep(poll_s)


class _View:
    """Stream updates -> bench events, the text of each request's chunks batched per read."""

    def __init__(self, sink: Callable[[Any], None], path: Path) -> None:
        self.sink = sink
        self.path = path
        self.text: dict[int, list[str]] = {}

    def say(self, text: str) -> None:
        # the file's name is the user's, the version llama-benchy's (already cleaned by the
        # reader): a phase line reaches the terminal through the CLI and the Bench screen
        self.sink(Phase(safe_line(text)))

    def update(self, state: progress.ProgressState, u: progress.Update | None) -> None:
        if u is None:
            return
        r = u.request
        if u.kind == "header":
            self.say(f"llama-benchy {state.version or '?'}: following {self.path.name}")
        elif u.kind == "started" and r is not None:
            label = f"d{r.context_size} c{r.concurrency} run {r.run_index + 1}, request {r.request_id}"
            self.sink(RepStarted(r.model, r.request_id, False, 0, label=label))
        elif u.kind == "tokens" and r is not None and r.snippet:
            self.text.setdefault(r.request_id, []).append(r.snippet)
        elif u.kind == "ended" and r is not None:
            self._live(r, r.end_ts or r.start_ts)
            rep = RepResult(r.model, r.request_id, False, ttft_s=r.ttft_s, client_decode_tps=r.decode_tps,
                            wall_s=r.duration_s or 0.0, eval_count=r.total_tokens, client_tokens=r.tokens,
                            error=r.error or None, prompt_eval_count=r.prompt_tokens)
            self.sink(RepDone(rep))
        elif u.kind == "complete":
            self.say(f"llama-benchy finished ({state.status}): {sum(1 for x in state.requests.values() if x.done)} "
                     f"request(s) in {len(state.cells())} cell(s)")

    def flush(self, state: progress.ProgressState) -> None:
        """One Live per request that streamed since the last read, at the stream's own time."""
        for rid in list(self.text):
            r = state.requests.get(rid)
            if r is not None and not r.done:
                self._live(r, state.last_ts)
        self.text.clear()

    def _live(self, r: progress.Request, now: float) -> None:
        text = "".join(self.text.pop(r.request_id, []))
        self.sink(Live(r.model, text, "", r.tokens, max(0.0, now - r.start_ts), r.ttft_s, r.live_tps(now)))
