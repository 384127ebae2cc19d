"""The local spool: every run is written here, durably, before MLflow sees it.

An append-only JSONL file. Two kinds of line::

    {"kind":"record","record":{...RunRecord...}}
    {"kind":"synced","record_id":"<hex>","mlflow_run_id":"<id>","at_ms":<ms>}

A record is pending until a ``synced`` line with its id follows it; the file is never
rewritten, so a crash at any point loses at most the line being written. A process
killed mid-write leaves a truncated last line: readers skip it with a warning, and the
next writer starts on a fresh line so the damage does not spread to the next record.

Writers take an exclusive ``fcntl.flock`` and readers a shared one, so two sparkctl
processes (the TUI and a ``sparkctl sync``) never interleave or half-read lines.
Blocking file I/O: call from a worker thread, not the UI thread.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path

from sparkctl.tracking.record import RunRecord

log = logging.getLogger(__name__)

SPOOL_FILE_NAME = "spool.jsonl"


def default_spool_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser().resolve() / SPOOL_FILE_NAME


class Spool:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Spool({str(self.path)!r})"

    # -- writing -------------------------------------------------------------------

    def append(self, record: RunRecord) -> None:
        """Write the record as one line and fsync it before returning."""
        self._append_line({"kind": "record", "record": record.to_dict()})

    def mark_synced(self, record_id: str, mlflow_run_id: str) -> None:
        """Note that ``record_id`` is now in MLflow as ``mlflow_run_id``."""
        self._append_line(
            {
                "kind": "synced",
                "record_id": record_id,
                "mlflow_run_id": mlflow_run_id,
                "at_ms": int(time.time() * 1000),
            }
        )

    def _append_line(self, obj: dict) -> None:
        # Serialise first: a record that cannot be encoded must not leave half a line.
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
        data = line.encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    # A previous writer died mid-line: end that line so ours stays whole.
                    data = b"\n" + data
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.path.parent)

    # -- reading -------------------------------------------------------------------

    def pending(self) -> list[RunRecord]:
        """Records with no ``synced`` marker, in the order they were spooled.

        Unreadable lines (a truncated last line from a killed process, or any other
        damage) are skipped with a warning; this never raises for bad content."""
        records: dict[str, RunRecord] = {}
        synced: set[str] = set()
        for lineno, obj in self._read_objects():
            kind = obj.get("kind")
            if kind == "synced":
                rid = obj.get("record_id")
                if isinstance(rid, str):
                    synced.add(rid)
            elif kind == "record":
                try:
                    rec = RunRecord.from_dict(obj["record"])
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("spool %s line %d: bad record skipped (%s)", self.path, lineno, exc)
                    continue
                records.setdefault(rec.record_id, rec)
            else:
                log.warning("spool %s line %d: unknown line kind %r skipped", self.path, lineno, kind)
        return [rec for rid, rec in records.items() if rid not in synced]

    def _read_objects(self) -> list[tuple[int, dict]]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                with os.fdopen(os.dup(fd), "rb") as fh:
                    raw = fh.read()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

        out: list[tuple[int, dict]] = []
        lines = raw.split(b"\n")
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            is_last = i == len(lines)  # no newline after it: the writer did not finish
            try:
                obj = json.loads(line.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except (UnicodeDecodeError, ValueError) as exc:
                what = "truncated last line" if is_last else "unreadable line"
                log.warning("spool %s line %d: %s skipped (%s)", self.path, i, what, exc)
                continue
            out.append((i, obj))
        return out


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
