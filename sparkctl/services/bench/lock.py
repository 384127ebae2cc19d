"""One bench per engine at a time, across processes and users.

Two benches on one engine each measure a share of it and both look valid. A lane change
(promotion, rollback) takes the same lock: it loads and unloads lane models, which a bench
running meanwhile would measure, and would put back the wrong way at its end. The lock is an
flock on a file named after the engine's host, in a directory shared by every user of the
machine (the kernel drops it when the holder dies, so a crash never leaves it stale). The
holder writes who it is (pid, models, since when) into the file so a waiter can say whom
it waits for. Blocking file calls run in a thread; waiting polls so that it can be cancelled.

The directory is shared on purpose (a per-user one would let two users bench one engine at
once), so it is treated as hostile ground:
- the directory must be a real one (not a symlink) and, unless it is this user's, have the
  sticky bit when others may write in it; it is opened once and the file opened relative to
  it, so it cannot be swapped between the check and the open;
- the file is opened with O_NOFOLLOW (a planted symlink is refused, its target untouched),
  without O_CREAT when it exists and never with O_TRUNC, and must be a regular file;
- it is written (truncated, then the holder's line) only after the flock is taken, and only
  when it is this user's own file with one link (another user's file, or a hard link to
  someone's file, is locked but never written);
- it is created 0644: others can open it to lock and read, not write;
- what it holds is not a secret: the engine URL is redacted, and what a waiter reads back is
  stripped of control characters before it reaches a terminal.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sparkctl.core.redact import redact_uri
from sparkctl.core.safeload import load_json

POLL_S = 0.5


class BenchBusy(Exception):
    """Another bench (or lane change) holds the engine and the caller chose not to wait."""


BENCHING = "benching"


@dataclass(frozen=True)
class Holder:
    pid: int
    models: list[str]
    since: float
    host: str
    doing: str = BENCHING  # what the holder does with the engine: benching, promoting, rolling back

    def describe(self) -> str:
        try:
            since = time.strftime("%H:%M:%S", time.localtime(self.since))
        except (OverflowError, ValueError, OSError):  # read back from a file anyone could write
            since = "?"
        return f"pid {self.pid} {self.doing} {', '.join(self.models) or '?'} on {self.host} since {since}"

    @property
    def what(self) -> str:
        return "another bench" if self.doing == BENCHING else "a lane change"


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
    """The lock file cannot be opened (permissions, a read-only /tmp, a planted link): say where."""


# Never follow a link, never block on a FIFO someone left under the lock's name.
_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ADVICE = "set $SPARKCTL_LOCK_DIR to a directory of your own"


class BenchLock:
    def __init__(self, engine_host: str, models: list[str], doing: str = BENCHING) -> None:
        self.engine_host = engine_host
        self.shown_host = redact_uri(engine_host)  # what the file, a notice or an error may say
        self.models = list(models)
        self.doing = doing
        self.path = lock_path(engine_host)
        self._fd: int | None = None
        self._ours = False

    def _open(self) -> tuple[int, bool]:
        """The lock file's descriptor, and whether this process may write into it."""
        dir_fd = _open_shared_dir(self.path.parent)
        try:
            fd = _open_in(dir_fd, self.path)
        finally:
            os.close(dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise LockUnavailable(f"cannot use the bench lock {self.path}: it is not a regular file; "
                                  f"remove it or {_ADVICE}")
        writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
        return fd, writable and st.st_uid == os.geteuid() and st.st_nlink == 1

    def try_acquire(self) -> Holder | None:
        """Take the lock now and return None, or return who holds it. Blocking (file I/O)."""
        fd, ours = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd, self.shown_host)
            os.close(fd)
            return holder or Holder(0, [], time.time(), self.shown_host)
        if ours:  # who holds it is information for waiters; only ever in our own file
            me = {"pid": os.getpid(), "models": self.models, "since": time.time(), "host": self.shown_host,
                  "doing": self.doing}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(me).encode(), 0)
            except OSError:
                pass
        self._fd, self._ours = fd, ours
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
                running = "another bench is running" if holder.doing == BENCHING else "a lane change is running"
                raise BenchBusy(f"{running} on {self.shown_host}: {holder.describe()}")
            if told != (holder.pid, holder.since):
                say(f"waiting for {holder.what} to finish: {holder.describe()}")
                told = (holder.pid, holder.since)
            await asyncio.sleep(POLL_S)

    def release(self) -> None:
        if self._fd is not None:
            if self._ours:
                try:
                    os.ftruncate(self._fd, 0)
                except OSError:
                    pass
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _open_shared_dir(d: Path) -> int:
    """The lock directory, opened without following a link, after checking that nobody but
    its owner can replace the files in it (or that its owner is this user)."""
    created = False
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(d, 0o700)
        created = True
    except FileExistsError:
        pass  # made by another user or process (or planted): checked below, never chmod-ed by path
    except OSError as exc:
        raise LockUnavailable(f"cannot create the bench lock directory {d}: {exc.strerror}; {_ADVICE}") from None
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        what = exc.strerror
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # with O_DIRECTORY, Linux says ENOTDIR for a link
            what = "it is a symbolic link" if os.path.islink(d) else "it is not a directory"
        raise LockUnavailable(f"cannot use the bench lock directory {d}: {what}; {_ADVICE}") from None
    st = os.fstat(fd)
    if created and st.st_uid == os.geteuid():
        try:
            os.fchmod(fd, 0o1777)  # shared by every user, and sticky, like /tmp itself
            st = os.fstat(fd)
        except OSError:
            pass
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if st.st_uid != os.geteuid() and others_write and not st.st_mode & stat.S_ISVTX:
        os.close(fd)
        raise LockUnavailable(f"cannot use the bench lock directory {d}: it belongs to uid {st.st_uid} and "
                              f"anyone may replace the files in it (mode {stat.S_IMODE(st.st_mode):o}, no "
                              f"sticky bit); remove it or {_ADVICE}")
    return fd


def _open_in(dir_fd: int, path: Path) -> int:
    """Open (or create) the lock file inside the checked directory: read-write when allowed,
    read-only otherwise (flock works on either); never through a link, never truncating."""
    name = path.name
    for _ in range(5):  # another process may create or remove it between two calls
        try:
            try:
                return os.open(name, os.O_RDWR | _OPEN, dir_fd=dir_fd)
            except PermissionError:
                # another user's file: lock it read-only. (Opening it with O_CREAT would fail
                # where fs.protected_regular is set, as on Ubuntu and DGX OS.)
                return os.open(name, os.O_RDONLY | _OPEN, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _unavailable(path, exc) from None
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _unavailable(path, exc) from None
        try:
            os.fchmod(fd, 0o644)  # whatever the umask: others may lock and read it, not write it
        except OSError:
            pass
        return fd
    raise LockUnavailable(f"cannot open the bench lock {path}: it keeps appearing and disappearing; {_ADVICE}")


def _unavailable(path: Path, exc: OSError) -> LockUnavailable:
    if exc.errno == errno.ELOOP:
        return LockUnavailable(f"cannot use the bench lock {path}: it is a symbolic link (left there by "
                               f"someone else?); it was not followed; remove it or {_ADVICE}")
    return LockUnavailable(f"cannot open the bench lock {path}: {exc.strerror}; {_ADVICE}")


def _read_holder(fd: int, host: str) -> Holder | None:
    """Who holds the lock, as the holder wrote it: another user's text, so only printable
    characters of it reach the caller's terminal."""
    try:
        raw = os.pread(fd, 4096, 0)
        data = load_json(raw.decode() or "{}")  # bounded: nesting and huge numbers are a ValueError
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not 0 < data["pid"] < 2**32:
            return None
        models = [_printable(m) for m in list(data.get("models") or [])[:20]]
        doing = _printable(data.get("doing") or BENCHING)[:40] or BENCHING
        return Holder(int(data["pid"]), models, float(data["since"]), host, doing)
    except (OSError, ValueError, KeyError, TypeError, OverflowError):
        return None


def _printable(text: object) -> str:
    return "".join(ch for ch in str(text) if ch.isprintable())[:200]
