"""Reading a text file the user named, with a one-line reason naming it when that fails.

Config files, saved eval responses and the state file all need the same four answers (not
there, a directory, not UTF-8, any other OS error); each caller wraps the line in its own
error type."""

from __future__ import annotations

from pathlib import Path


class UnreadableFile(Exception):
    """One line: the path and why it could not be read."""


def read_text(path: Path, *, missing: str = "file not found", directory: str = "a directory, not a file") -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: {missing}") from None
    except IsADirectoryError:
        raise UnreadableFile(f"{path}: {directory}") from None
    except UnicodeDecodeError:
        raise UnreadableFile(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read ({exc.strerror})") from None
