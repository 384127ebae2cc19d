"""Exit codes and the one error type command modules raise.

Command modules import this, never the package entry point, so the import graph stays a
tree: ``sparkctl.cli`` -> command module -> ``exitcodes``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    BAD_INPUT = 2  # a wrong flag, config key, model name or file: the user can fix it
    UNREACHABLE = 3  # the engine (or tracking server) did not answer
    REFUSED = 4  # sparkctl declined: would evict a lane, spilled, unmet precondition
    ENGINE_ERROR = 5  # the engine answered with an error
    HOOK_FAILED = 6  # the lane changed, but its [lanes] on_change hook failed
    NOT_SAVED = 7  # the work ran, but neither the spool nor MLflow could take its run
    INTERRUPTED = 130  # Ctrl-C, SIGTERM, SIGHUP (128 + SIGINT, like a shell)


EXIT_OK = ExitCode.OK
EXIT_BAD_INPUT = ExitCode.BAD_INPUT
EXIT_UNREACHABLE = ExitCode.UNREACHABLE
EXIT_REFUSED = ExitCode.REFUSED
EXIT_ENGINE_ERROR = ExitCode.ENGINE_ERROR
EXIT_HOOK_FAILED = ExitCode.HOOK_FAILED
EXIT_NOT_SAVED = ExitCode.NOT_SAVED
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


class CliError(Exception):
    """A one-line message for stderr and the exit code that goes with it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = int(code)
