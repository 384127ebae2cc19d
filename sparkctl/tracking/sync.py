"""Spool first, then MLflow; replay what did not make it.

Both functions block (file fsync, ``import mlflow`` on first use, SQLite or HTTP
writes with timeouts of seconds): call them from a worker thread, e.g. a Textual
``@work(thread=True)`` worker, and post the result back as a message. There is no
asyncio here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sparkctl.core.oserrors import disk_problem
from sparkctl.core.redact import redact_text
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import COMPACT_THRESHOLD_BYTES, Spool, recover_orphans
from sparkctl.tracking.store import MlflowStore, TrackingError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncResult:
    """What happened to one run.

    ``synced``: it is in MLflow as ``run_id``. ``spooled``: it is safe in the spool at
    ``spool_path`` (when not synced, ``sparkctl sync`` will replay it). ``error``: why
    MLflow (or the spool) failed, one line."""

    record_id: str
    synced: bool
    spooled: bool
    spool_path: Path
    run_id: str | None = None
    error: str | None = None
    spool_error: str | None = None

    @property
    def lost(self) -> bool:
        return not self.synced and not self.spooled

    @property
    def message(self) -> str:
        """One line for the user; credentials in any quoted URL are redacted."""
        return redact_text(self._message())

    def _message(self) -> str:
        if self.synced:
            text = f"run recorded in MLflow ({self.run_id})"
            if self.spool_error:
                text += f"; spool not written: {self.spool_error}"
            return text
        if self.spooled:
            return f"MLflow write failed, run kept in spool {self.spool_path}: {self.error}"
        return f"run NOT saved: spool: {self.spool_error}; MLflow: {self.error}"


def record_run(record: RunRecord, spool: Spool, store: MlflowStore) -> SyncResult:
    """Append ``record`` to the spool (fsynced), then write it to MLflow.

    Never raises for MLflow or spool failures: the result says where the run is.
    Blocking; call from a worker thread."""
    spooled, spool_error = True, None
    try:
        spool.append(record)
    except (OSError, TypeError, ValueError) as exc:
        spooled, spool_error = False, disk_problem(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        log.error("could not spool run %s to %s: %s", record.record_id, spool.path, spool_error)

    try:
        run_id = store.write(record)
    except TrackingError as exc:
        if spooled:
            _compact_if_large(spool)
        return SyncResult(
            record_id=record.record_id,
            synced=False,
            spooled=spooled,
            spool_path=spool.path,
            error=str(exc),
            spool_error=spool_error,
        )

    if spooled:
        try:
            spool.mark_synced(record.record_id, run_id)
        except OSError as exc:
            # Harmless: a later replay finds the run by its record id and writes nothing.
            log.warning("could not mark run %s synced in the spool: %s", record.record_id, exc)
        _compact_if_large(spool)
    return SyncResult(
        record_id=record.record_id,
        synced=True,
        spooled=spooled,
        spool_path=spool.path,
        run_id=run_id,
        spool_error=spool_error,
    )


def _compact_if_large(spool: Spool) -> None:
    try:
        if spool.size() > COMPACT_THRESHOLD_BYTES:
            spool.compact()
    except OSError as exc:  # the run itself is safe; a big spool is only untidy
        log.warning("could not compact the spool %s: %s", spool.path, exc)


def sync_pending(spool: Spool, store: MlflowStore) -> tuple[int, list[tuple[str, str]]]:
    """Replay every pending spooled record into MLflow (``sparkctl sync``).

    First closes runs whose sparkctl died mid-bench (``recover_orphans``: KILLED, with
    the repetitions journaled), so they are replayed too; last, compacts the spool.

    Returns ``(synced_count, failed)`` where ``failed`` lists ``(record_id, error)``.
    Replays are idempotent (records carry their id into MLflow). If the server is
    unreachable, the remaining records are not attempted (each would wait out the same
    timeout) and are reported failed with that error. Blocking; call from a worker
    thread."""
    synced = 0
    failed: list[tuple[str, str]] = []
    try:
        recover_orphans(spool)
    except OSError as exc:
        log.warning("could not recover interrupted runs from the spool %s: %s", spool.path, exc)
    pending = spool.pending()
    for i, record in enumerate(pending):
        try:
            run_id = store.write(record)
        except TrackingError as exc:
            failed.append((record.record_id, str(exc)))
            if exc.unreachable:
                failed.extend((r.record_id, f"not attempted: {exc}") for r in pending[i + 1 :])
                break
            continue
        try:
            spool.mark_synced(record.record_id, run_id)
        except OSError as exc:
            log.warning("could not mark run %s synced in the spool: %s", record.record_id, exc)
        synced += 1
    try:
        spool.compact()
    except OSError as exc:
        log.warning("could not compact the spool %s: %s", spool.path, exc)
    return synced, failed
