"""The `[lanes] on_change` hook: a shell command run after a successful promotion or
rollback, so the user's router can pick up the new lane model. Its exit code and output
are shown and recorded; a failing hook is reported, never hidden (and never undoes the
lane change: the model is loaded and verified, only the follow-up failed).

A hook may start a background process and exit at once (`restart-router &`): sparkctl
waits for the hook's own exit, not for its output to close (the background child keeps
that open for as long as it runs). Its output goes to a temporary file rather than a pipe
for that reason, and the hook runs in a process group of its own, so that a hook past its
time is killed with whatever it started, and one that left something running is said so."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

HOOK_TIMEOUT_S = 120.0
OUTPUT_KEEP = 4000  # characters of output kept (the tail)


@dataclass(frozen=True)
class HookResult:
    command: str
    exit_code: int | None  # None: it did not run to an end (timeout, could not start)
    output: str  # stdout and stderr together, the tail
    duration_s: float
    error: str = ""  # why it did not run to an end
    left_running: bool = False  # it exited, leaving a process of its group running

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def line(self) -> str:
        if self.exit_code is None:
            return f"on_change hook FAILED: {self.error} (`{self.command}`)"
        verdict = "ran" if self.ok else "FAILED"
        left = "; it left a process running in the background (not waited for)" if self.left_running else ""
        return f"on_change hook {verdict}: `{self.command}` exited {self.exit_code} in {self.duration_s:.1f} s{left}"

    def to_dict(self) -> dict:
        return {"command": self.command, "exit_code": self.exit_code, "ok": self.ok, "output": self.output,
                "duration_s": round(self.duration_s, 3), "error": self.error, "left_running": self.left_running}


def hook_env(action: str, lane: str, model: str, previous: str, engine_host: str) -> dict[str, str]:
    return {"SPARKCTL_ACTION": action, "SPARKCTL_LANE": lane, "SPARKCTL_MODEL": model,
            "SPARKCTL_PREVIOUS_MODEL": previous, "SPARKCTL_ENGINE_HOST": engine_host}


def run_hook(command: str, extra_env: dict[str, str], timeout_s: float | None = None) -> HookResult:
    """Run `command` with /bin/sh, `extra_env` added to the environment, until it exits or
    `timeout_s` (default HOOK_TIMEOUT_S) passes. Blocking."""
    timeout_s = HOOK_TIMEOUT_S if timeout_s is None else timeout_s
    started = time.monotonic()
    with tempfile.TemporaryFile() as out_file:
        try:
            proc = subprocess.Popen(command, shell=True, env={**os.environ, **extra_env}, stdin=subprocess.DEVNULL,
                                    stdout=out_file, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return HookResult(command, None, "", time.monotonic() - started, f"could not start: {exc}")
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            return HookResult(command, None, _tail(out_file), time.monotonic() - started,
                              f"still running after {timeout_s:g} s, killed")
        elapsed = time.monotonic() - started
        return HookResult(command, code, _tail(out_file), elapsed, left_running=_group_alive(proc.pid))


def _tail(f) -> str:
    """The last OUTPUT_KEEP characters written so far (a background child may write more)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - 4 * OUTPUT_KEEP))
    return f.read().decode("utf-8", "replace")[-OUTPUT_KEEP:]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
