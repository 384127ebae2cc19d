"""What every long command (bench, eval) needs: one progress line on a terminal, printing
that survives a dead terminal, signals that stop the work cleanly, and closing the runs a
dead process left in the spool."""

from __future__ import annotations

import os
import sys
from typing import Any, Awaitable, Callable

STOPPING = "stopping: putting lane models back and recording the runs first"


def emit(text: str, stream) -> None:
    """Print, unless the terminal is gone (an ssh hang-up leaves EIO on every write): the
    run is already recorded, so a dead terminal must not turn it into a traceback."""
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):
        try:  # keep the interpreter's own flush at exit from failing again
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass


class ProgressLine:
    """One status line redrawn in place on a terminal; nothing when piped, except notices
    (``always``), which print as ``sparkctl: ...`` lines."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.dead = False

    def line(self, text: str, end: str = "", always: bool = False) -> None:
        if not (self.enabled or always) or self.dead:
            return
        try:
            if self.enabled:
                from sparkctl.cli.terminal import REDRAW, write_control

                write_control(sys.stderr, REDRAW)
                sys.stderr.write(text[:160] + end)
            else:
                sys.stderr.write(f"sparkctl: {text}{end}")
            sys.stderr.flush()
        except (OSError, ValueError):
            # the terminal is gone (ssh hang-up: EIO): stop drawing, never fail the work
            self.enabled = False
            self.dead = True

    def done(self) -> None:
        if self.enabled:
            self.line("")


def run_stoppable(work: Callable[[], Awaitable[Any]], on_again: Callable[[], None]) -> Any:
    """asyncio.run(work()) where SIGINT, SIGTERM and SIGHUP cancel the work once (an ssh
    drop or `kill` stops like Ctrl-C, so the run is recorded KILLED, not lost). Later
    signals only call ``on_again``: a dropped session sends two SIGHUPs and an impatient
    user a second Ctrl-C, and neither may cut the lane restore short."""
    import asyncio
    import signal

    from sparkctl.services.tracking import hurry_tracking

    async def go():
        loop, me = asyncio.get_running_loop(), asyncio.current_task()
        stopping: list[int] = []

        def stop(sig: int) -> None:
            # a tracking server that drips its answers must not hold the process: from
            # here on its writes get seconds, not their full deadline (the runs are spooled)
            if sig != signal.SIGHUP or not stopping:
                hurry_tracking()
            if not stopping:
                stopping.append(sig)
                me.cancel()
            elif sig != signal.SIGHUP:
                on_again()

        # SIGINT too: asyncio.run's own handler raises KeyboardInterrupt on a second Ctrl-C
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        return await work()

    return asyncio.run(go())


def recover(spool) -> list[str]:
    """Close runs whose sparkctl died mid-run (KILLED, with what finished), as messages."""
    try:
        from sparkctl.tracking.spool import recover_orphans
    except ImportError:
        return []
    try:
        records = recover_orphans(spool)
    except OSError as exc:
        return [f"could not read the spool {spool.path}: {exc}"]
    return [f"recovered an interrupted {r.tags.get('sparkctl.kind', 'bench')} run of "
            f"{r.params.get('model', '?')} as KILLED ({r.tags.get('guard.recovery', 'its process died')})"
            for r in records]


def lanes_failed(runner_box: list) -> bool:
    """Whether a lane model could not be put back (the runner already said so, loudly)."""
    restore = runner_box[0].lane_restore if runner_box else None
    return restore is not None and not restore.ok


def not_saved(runs) -> bool:
    """Whether a run was lost (neither the spool nor MLflow took it): said once more as the
    last line, so a script or a user scrolling past the table cannot take it as recorded."""
    lost = [r for r in runs if getattr(r, "not_saved", False)]
    for r in lost:
        emit(f"sparkctl: {r.model}: {r.sync_message}", sys.stderr)
    return bool(lost)


def run_tracked(work: Callable[[], Awaitable[Any]], progress: ProgressLine, *, what: str, stopped: str,
                lanes_bad: Callable[[], bool]) -> tuple[Any, int | None]:
    """run_stoppable for a tracked run (bench, eval, sweep): the refusals they share become
    one-line CliErrors; an interruption prints `stopped` and gives its exit code (4 when a
    lane model could not be put back, which matters more than the stop). Returns (result,
    None), or (None, exit code) after an interruption."""
    import asyncio

    from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_REFUSED, CliError
    from sparkctl.services.bench import BenchBusy, BenchRefused, Notice
    from sparkctl.services.bench.lock import LockUnavailable

    try:
        return run_stoppable(work, lambda: progress(Notice(STOPPING))), None
    except BenchRefused as exc:
        raise CliError(f"refused: {exc}", EXIT_REFUSED) from None
    except BenchBusy as exc:
        raise CliError(f"refused: {exc} (without --no-wait the {what} waits for it)", EXIT_REFUSED) from None
    except LockUnavailable as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress.enabled = False
        emit(f"sparkctl: stopped; {stopped}", sys.stderr)
        return None, (EXIT_REFUSED if lanes_bad() else EXIT_INTERRUPTED)
    finally:
        progress.done()
