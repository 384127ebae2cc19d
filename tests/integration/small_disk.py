"""A real full (or tiny) file system for tests: a tmpfs of a few hundred KiB mounted under
the test's own directory, which root can do here and in CI. Elsewhere the tests that need
it skip saying why, and in CI (CI=true) that fails them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_tmpfs(where: Path, size_kib: int = 256) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        why = f"cannot mount a tmpfs (needs root): {done.stderr.strip() or done.returncode}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path) -> None:
    """Write zeros until the file system has no space left."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
