"""One bench per engine at a time, across processes and users.

Two benches on one engine each measure a share of it and both look valid. The lock is an
flock on a file named after the engine's host, in a directory shared by every user of the
machine (the kernel drops it when the holder dies, so a crash never leaves it stale). The
holder writes who it is (pid, models, since when) into the file so a waiter can say whom
it waits for. Blocking file calls run in a thread; waiting polls so that it can be cancelled.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

POLL_S = 0.5


class BenchBusy(Exception):
    """Another bench holds the engine and the caller chose not to wait."""


@dataclass(frozen=True)
class Holder:
    pid: int
    models: list[str]
    since: float
    host: str

    def describe(self) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} benching {', '.join(self.models) or '?'} on {self.host} since {since}"


def lock_dir() -> Path:
    return Path(os.environ.get("SPARKCTL_LOCK_DIR") or Path(tempfile.gettempdir()) / "sparkctl-locks")


def engine_key(engine_host: str) -> str:
    """One key per engine however its URL is written: case, a trailing slash, and the
    loopback names (localhost, 127.0.0.1, ::1, 0.0.0.0) do not make a second engine."""
    parts = urlsplit(engine_host.strip().rstrip("/").lower())
    host = parts.hostname or ""
    if host in ("localhost", "::1", "0.0.0.0", "127.0.0.1") or host.startswith("127."):
        host = "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{host}:{port}{parts.path}"


def lock_path(engine_host: str) -> Path:
    digest = hashlib.sha256(engine_key(engine_host).encode()).hexdigest()[:16]
    return lock_dir() / f"bench-{digest}.lock"


class LockUnavailable(Exception):
    """The lock file cannot be opened (permissions, a read-only /tmp): say where."""


class BenchLock:
    def __init__(self, engine_host: str, models: list[str]) -> None:
        self.engine_host = engine_host
        self.models = list(models)
        self.path = lock_path(engine_host)
        self._fd: int | None = None

    def _open(self) -> int:
        d = self.path.parent
        if not d.exists():
            d.mkdir(parents=True, exist_ok=True)
            try:
                os.chmod(d, 0o1777)  # shared by every user, like /tmp itself
            except OSError:
                pass
        # Another user's file in a sticky directory cannot be opened with O_CREAT where
        # fs.protected_regular is set (Ubuntu, DGX OS), so create only when missing, and
        # fall back to read-only: flock works on any open file.
        for flags in (os.O_RDWR, os.O_RDONLY):
            try:
                return os.open(self.path, flags)
            except FileNotFoundError:
                break
            except PermissionError:
                continue
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another process created it just now
            return self._open()
        except OSError as exc:
            raise LockUnavailable(f"cannot open the bench lock {self.path}: {exc.strerror}; "
                                  "set $SPARKCTL_LOCK_DIR to a writable directory") from None
        try:
            os.fchmod(fd, 0o666)  # every user of the machine shares it
        except OSError:
            pass
        return fd

    def try_acquire(self) -> Holder | None:
        """Take the lock now and return None, or return who holds it. Blocking (file I/O)."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd, self.engine_host)
            os.close(fd)
            return holder or Holder(0, [], time.time(), self.engine_host)
        me = {"pid": os.getpid(), "models": self.models, "since": time.time(), "host": self.engine_host}
        try:  # who holds it is information for waiters; a read-only fd still locks
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        except OSError:
            pass
        self._fd = fd
        return None

    async def acquire(self, wait: bool, say) -> None:
        """Take the lock; while another bench holds it, say so once and wait (or raise BenchBusy)."""
        told = None
        while True:
            try:
                holder = await asyncio.to_thread(self.try_acquire)
            except asyncio.CancelledError:
                # cancelled while the thread ran: it may have taken the lock; never keep it
                self.release()
                raise
            if holder is None:
                return
            if not wait:
                raise BenchBusy(f"another bench is running on {self.engine_host}: {holder.describe()}")
            if told != (holder.pid, holder.since):
                say(f"waiting for another bench to finish: {holder.describe()}")
                told = (holder.pid, holder.since)
            await asyncio.sleep(POLL_S)

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _read_holder(fd: int, host: str) -> Holder | None:
    try:
        raw = os.pread(fd, 4096, 0)
        data = json.loads(raw.decode() or "{}")
        return Holder(int(data["pid"]), list(data.get("models") or []), float(data["since"]), host)
    except (OSError, ValueError, KeyError, TypeError):
        return None
