"""The `[lanes] on_change` hook: a shell command run after a successful promotion or
rollback, so the user's router can pick up the new lane model. Its exit code and output
are shown and recorded; a failing hook is reported, never hidden (and never undoes the
lane change: the model is loaded and verified, only the follow-up failed)."""

from __future__ import annotations

import os
import subprocess
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

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def line(self) -> str:
        if self.exit_code is None:
            return f"on_change hook FAILED: {self.error} (`{self.command}`)"
        verdict = "ran" if self.ok else "FAILED"
        return f"on_change hook {verdict}: `{self.command}` exited {self.exit_code} in {self.duration_s:.1f} s"

    def to_dict(self) -> dict:
        return {"command": self.command, "exit_code": self.exit_code, "ok": self.ok, "output": self.output,
                "duration_s": round(self.duration_s, 3), "error": self.error}


def hook_env(action: str, lane: str, model: str, previous: str, engine_host: str) -> dict[str, str]:
    return {"SPARKCTL_ACTION": action, "SPARKCTL_LANE": lane, "SPARKCTL_MODEL": model,
            "SPARKCTL_PREVIOUS_MODEL": previous, "SPARKCTL_ENGINE_HOST": engine_host}


def run_hook(command: str, extra_env: dict[str, str], timeout_s: float = HOOK_TIMEOUT_S) -> HookResult:
    """Run `command` with /bin/sh, `extra_env` added to the environment. Blocking."""
    started = time.monotonic()
    try:
        done = subprocess.run(command, shell=True, env={**os.environ, **extra_env}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace")
        return HookResult(command, None, out[-OUTPUT_KEEP:], time.monotonic() - started,
                          f"still running after {timeout_s:g} s, killed")
    except OSError as exc:
        return HookResult(command, None, "", time.monotonic() - started, f"could not start: {exc}")
    out = done.stdout.decode("utf-8", "replace")
    return HookResult(command, done.returncode, out[-OUTPUT_KEEP:], time.monotonic() - started)
