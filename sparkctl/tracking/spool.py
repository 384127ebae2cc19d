"""The local spool: every run is written here, durably, before MLflow sees it.

A JSONL file. Three kinds of line::

    {"kind":"record","record":{...RunRecord...}}
    {"kind":"partial","record":{...RunRecord so far...},"owner":{"pid":..,"create_time":..,"boot_id":..,"host":..}}
    {"kind":"synced","record_id":"<hex>","mlflow_run_id":"<id>","at_ms":<ms>}

A ``record`` is a finished run; it is pending until a ``synced`` line with its id
follows it. A ``partial`` is the journal of a run still in progress (written after each
finished repetition, status KILLED): the run's final ``record`` with the same id
supersedes every partial of it. If the owner process dies first, ``recover_orphans``
turns its latest partial into the final record, so a crash or power cut loses at most
the repetition in flight.

Lines are only ever appended, fsynced, so a crash at any point loses at most the line
being written. A process killed mid-write leaves a truncated last line: readers skip it
with a warning, and the next writer starts on a fresh line so the damage does not spread.
``compact`` rewrites the file (temp file, fsync, rename) to drop what is done.

Writers take an exclusive ``fcntl.flock`` and readers a shared one, so two sparkctl
processes (the TUI and a ``sparkctl sync``) never interleave or half-read lines. After
taking the lock every user checks that the path still names the file it opened (a
compaction may have renamed a new file over it meanwhile) and reopens if not, so no line
is ever written to a file that is no longer the spool.
Blocking file I/O: call from a worker thread, not the UI thread.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparkctl.core.safeload import load_json
from sparkctl.tracking.owner import DEAD, current_owner, owner_state
from sparkctl.tracking.record import RunRecord

log = logging.getLogger(__name__)

SPOOL_FILE_NAME = "spool.jsonl"

RECOVERED_TAG = "sparkctl.recovered"
RECOVERY_GUARD_TAG = "guard.recovery"

# record_run compacts the spool once it is larger than this.
COMPACT_THRESHOLD_BYTES = 1 << 20

_REOPEN_ATTEMPTS = 1000


def default_spool_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser().resolve() / SPOOL_FILE_NAME


@dataclass
class _Scan:
    """What a spool's lines say, by record id (line numbers are 0-based indexes)."""

    finals: dict[str, tuple[int, RunRecord]] = field(default_factory=dict)  # first final record
    partials: dict[str, tuple[int, dict, dict]] = field(default_factory=dict)  # latest: record dict, owner
    synced: set[str] = field(default_factory=set)
    other: set[int] = field(default_factory=set)  # unknown kinds (a newer sparkctl): kept
    bad: int = 0

    def orphan_candidates(self) -> dict[str, tuple[int, dict, dict]]:
        return {rid: p for rid, p in self.partials.items() if rid not in self.finals and rid not in self.synced}


class Spool:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Spool({str(self.path)!r})"

    # -- writing -------------------------------------------------------------------

    def append(self, record: RunRecord) -> None:
        """Write the finished run as one line and fsync it before returning."""
        self._append_lines([{"kind": "record", "record": record.to_dict()}])

    def journal(self, record: RunRecord) -> None:
        """Journal a run in progress: ``record`` holds every repetition finished so far
        (status KILLED, so that it is right as it stands if this process dies). Fsynced
        before returning; superseded by the final ``append`` of the same record id."""
        self._append_lines([{"kind": "partial", "record": record.to_dict(), "owner": current_owner()}])

    def mark_synced(self, record_id: str, mlflow_run_id: str) -> None:
        """Note that ``record_id`` is now in MLflow as ``mlflow_run_id``."""
        self._append_lines(
            [
                {
                    "kind": "synced",
                    "record_id": record_id,
                    "mlflow_run_id": mlflow_run_id,
                    "at_ms": int(time.time() * 1000),
                }
            ]
        )

    def _append_lines(self, objs: list[dict]) -> None:
        # Serialise first: a record that cannot be encoded must not leave half a line.
        data = b"".join(_encode(obj) for obj in objs)
        with self._locked(exclusive=True, create=True) as fd:
            assert fd is not None
            _append_fd(fd, data)

    # -- reading -------------------------------------------------------------------

    def pending(self) -> list[RunRecord]:
        """Finished records with no ``synced`` marker, in the order they were spooled
        (partials, the journal of runs in progress, are not pending).

        Unreadable lines (a truncated last line from a killed process, or any other
        damage) are skipped with a warning; this never raises for bad content."""
        scan = _scan(self._read_objects())
        return [rec for rid, (_, rec) in scan.finals.items() if rid not in scan.synced]

    def in_progress(self) -> list[tuple[RunRecord, dict]]:
        """``(record so far, owner)`` of each journaled run with no final record yet,
        whether its owner is alive or not."""
        scan = _scan(self._read_objects())
        out = []
        for _, rec, owner in scan.orphan_candidates().values():
            try:
                out.append((RunRecord.from_dict(rec), owner))
            except (TypeError, ValueError):
                continue
        return out

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    # -- recovery and compaction ---------------------------------------------------

    def recover_orphans(self) -> list[RunRecord]:
        """See the module-level ``recover_orphans``."""
        with self._locked(exclusive=True, create=False) as fd:
            if fd is None:
                return []
            scan = _scan(_parse(_read_fd(fd), self.path))
            recovered: list[RunRecord] = []
            for rid, (_, rec_dict, owner) in scan.orphan_candidates().items():
                state, why = owner_state(owner)
                if state != DEAD:
                    continue
                try:
                    rec = RunRecord.from_dict(rec_dict)
                except (TypeError, ValueError) as exc:
                    log.warning("spool %s: journal of run %s unreadable, not recovered (%s)", self.path, rid, exc)
                    continue
                reps = max((len(v) for v in rec.step_metrics.values() if isinstance(v, list)), default=0)
                pid = owner.get("pid") if isinstance(owner, dict) else None
                rec.status = "KILLED"
                rec.tags[RECOVERED_TAG] = "true"
                rec.tags[RECOVERY_GUARD_TAG] = (
                    f"the sparkctl process (pid {pid if pid is not None else '?'}) died during the run; "
                    f"recovered from the journal with {reps} repetition(s)"
                )
                # info, not warning: the caller tells the user (a warning would reach stderr)
                log.info("spool %s: run %s recovered as KILLED (%s)", self.path, rid, why)
                recovered.append(rec)
            if recovered:
                _append_fd(fd, b"".join(_encode({"kind": "record", "record": r.to_dict()}) for r in recovered))
            return recovered

    def compact(self) -> int:
        """Rewrite the spool keeping only what is still needed: finished records not yet
        synced, and the latest partial of each run with no final record (its owner may
        still be running, or ``recover_orphans`` will close it). Records already synced,
        their markers, superseded partials and unreadable lines go.

        Atomic: a temp file in the same directory, fsynced, renamed over the spool, and
        the directory fsynced, all under the exclusive lock. Returns the number of lines
        dropped (0: the file was left untouched)."""
        with self._locked(exclusive=True, create=False) as fd:
            if fd is None:
                return 0
            raw = _read_fd(fd)
            lines = raw.split(b"\n")
            objs = _parse(raw, self.path)
            scan = _scan(objs)
            keep: set[int] = set(scan.other)
            for rid, (i, _) in scan.finals.items():
                if rid not in scan.synced:
                    keep.add(i)
            for i, _, _ in scan.orphan_candidates().values():
                keep.add(i)
            total = sum(1 for line in lines if line.strip())
            if len(keep) == total:
                return 0
            kept = b"".join(lines[i] + b"\n" for i in sorted(keep))
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.compact.tmp")
            try:
                tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    _write_all(tfd, kept)
                    os.fsync(tfd)
                finally:
                    os.close(tfd)
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            _fsync_dir(self.path.parent)
            dropped = total - len(keep)
            log.info("spool %s compacted: %d line(s) dropped, %d kept", self.path, dropped, len(keep))
            return dropped

    # -- locking -------------------------------------------------------------------

    @contextmanager
    def _locked(self, *, exclusive: bool, create: bool) -> Iterator[int | None]:
        """An fd of the current spool file, locked; None when there is no file and
        ``create`` is False. Opened read-write in append mode when ``exclusive``."""
        fd = self._open_locked(exclusive=exclusive, create=create)
        if fd is None:
            yield None
            return
        try:
            yield fd
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def _open_locked(self, *, exclusive: bool, create: bool) -> int | None:
        flags = (os.O_RDWR | os.O_APPEND) if exclusive else os.O_RDONLY
        for _ in range(_REOPEN_ATTEMPTS):
            created = False
            try:
                if create:
                    try:
                        fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600)
                        created = True
                    except FileExistsError:
                        fd = os.open(self.path, flags)
                else:
                    fd = os.open(self.path, flags)
            except FileNotFoundError:
                if not create:
                    return None
                self.path.parent.mkdir(parents=True, exist_ok=True)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                if created:
                    _fsync_dir(self.path.parent)
                if _is_current(fd, self.path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            # A compaction renamed a new file over the one we opened (or it was removed)
            # while we waited for the lock: that file is no longer the spool.
            os.close(fd)
        raise OSError(f"spool {self.path} keeps being replaced; giving up")

    def _read_objects(self) -> list[tuple[int, dict]]:
        with self._locked(exclusive=False, create=False) as fd:
            if fd is None:
                return []
            raw = _read_fd(fd)
        return _parse(raw, self.path)


def recover_orphans(spool: Spool) -> list[RunRecord]:
    """Close the runs whose sparkctl process died mid-bench, and return them.

    For each run journaled in ``spool`` with no final record, whose owner is gone (its
    pid is not running, or is running but started at another time, i.e. a reused pid,
    or the machine has rebooted since), the latest partial is appended as the final
    record: status KILLED, tags ``sparkctl.recovered = "true"`` and ``guard.recovery``
    saying what happened. A run owned by a live process (a bench running elsewhere) or
    by another host is left alone. Safe to call from several processes at once (one
    exclusive lock covers the read and the append). Blocking, cheap (one read of the
    spool, one fsynced append when something is recovered): call it from a worker thread
    at bench start and TUI start; ``sync_pending`` calls it first."""
    return spool.recover_orphans()


def _is_current(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_ino, mine.st_dev) == (now.st_ino, now.st_dev)


def _encode(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def _append_fd(fd: int, data: bytes) -> None:
    size = os.fstat(fd).st_size
    if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
        # A previous writer died mid-line: end that line so ours stays whole.
        data = b"\n" + data
    _write_all(fd, data)
    os.fsync(fd)


def _read_fd(fd: int) -> bytes:
    chunks = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _parse(raw: bytes, path: Path) -> list[tuple[int, dict]]:
    """``(0-based line index, object)`` of every readable line."""
    out: list[tuple[int, dict]] = []
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        is_last = i == len(lines) - 1  # no newline after it: the writer did not finish
        try:
            obj = load_json(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except (UnicodeDecodeError, ValueError) as exc:
            what = "truncated last line" if is_last else "unreadable line"
            log.warning("spool %s line %d: %s skipped (%s)", path, i + 1, what, exc)
            continue
        out.append((i, obj))
    return out


def _scan(objs: list[tuple[int, dict]]) -> _Scan:
    scan = _Scan()
    for i, obj in objs:
        kind = obj.get("kind")
        if kind == "synced":
            rid = obj.get("record_id")
            if isinstance(rid, str):
                scan.synced.add(rid)
        elif kind == "record":
            try:
                rec = RunRecord.from_dict(obj["record"])
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("spool line %d: bad record skipped (%s)", i + 1, exc)
                scan.bad += 1
                continue
            scan.finals.setdefault(rec.record_id, (i, rec))
        elif kind == "partial":
            rec = obj.get("record")
            rid = rec.get("record_id") if isinstance(rec, dict) else None
            if not isinstance(rid, str):
                log.warning("spool line %d: bad partial skipped", i + 1)
                scan.bad += 1
                continue
            scan.partials[rid] = (i, rec, obj.get("owner"))
        else:
            log.warning("spool line %d: unknown line kind %r kept as is", i + 1, kind)
            scan.other.add(i)
    return scan


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(path: Path) -> None:
    try:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
