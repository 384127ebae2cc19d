"""A failed write, said in words a user acts on ("the disk is full") rather than as
`OSError: [Errno 28] No space left on device`. Pure: it reads the exception, nothing else."""

from __future__ import annotations

import errno


def disk_problem(exc: BaseException | None) -> str:
    """Why a file could not be written."""
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return "the disk is full (no space left on the device)"
        if exc.errno == errno.EDQUOT:
            return "the disk quota is used up"
        if exc.errno == errno.EROFS:
            return "the file system is read-only"
        if exc.strerror:
            return exc.strerror[:1].lower() + exc.strerror[1:]
    return f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"
