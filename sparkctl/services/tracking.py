"""The TUI's one way to the run record: the recorder, runs waiting in the spool, runs
closed after a crash, the replay to MLflow, and the engine-change note.

Screens import this module, never ``sparkctl.tracking`` (imports point one way: tui ->
services -> tracking), which is also what keeps MLflow out of the dashboard's process:
nothing here imports it until a run is written or replayed, and the engine-change note
reads without it (``services/runs/drift.py``). Every function blocks (file locks, fsync,
SQLite, HTTP): call them from worker threads.
"""

from __future__ import annotations

from typing import Any, Callable

from sparkctl.config import Config


def open_tracking(cfg: Config) -> tuple[Any, Any]:
    """(spool, store) of the configured tracking; nothing is opened or imported yet."""
    from sparkctl.services.factory import make_spool_and_store

    return make_spool_and_store(cfg)


class TrackingLater:
    """The spool and store, opened when first asked for (from any thread), not at start:
    their modules (the spool, the store, its SQLite and REST readers) are ~10 ms of imports
    the dashboard's first frame does not draw. The data dir is checked at once, so an
    unwritable one is still a one-line error before the TUI starts."""

    def __init__(self, cfg: Config) -> None:
        import threading

        from sparkctl.services.factory import ensure_data_dir

        ensure_data_dir()
        self._cfg = cfg
        self._lock = threading.Lock()
        self._opened: tuple[Any, Any] | None = None

    def get(self) -> tuple[Any, Any]:
        with self._lock:
            if self._opened is None:
                self._opened = open_tracking(self._cfg)
            return self._opened

    @property
    def opened(self) -> bool:
        return self._opened is not None


def recorder_for(spool: Any, store: Any) -> Callable[[Any], Any]:
    """A RunRecord -> SyncResult callable: spool first, then MLflow (call from a thread)."""

    def record(record: Any) -> Any:
        from sparkctl.services.benched import record_and_note

        return record_and_note(record, spool, store)  # and noted for the engine-change note

    return record


def recorder_later(tracking: TrackingLater, store: Any = None) -> Callable[[Any], Any]:
    """recorder_for, with the spool and store opened at the first run recorded (``store``:
    one given in their place)."""

    def record(record: Any) -> Any:
        spool, opened = tracking.get()
        return recorder_for(spool, opened if store is None else store)(record)

    return record


def hurry_tracking() -> None:
    """A stop signal arrived: writes and reads of a tracking server under way or to come
    get a few seconds more at most, none after a second signal (the runs are in the spool
    already, and `sparkctl sync` writes them later). Cheap and safe in a signal handler."""
    from sparkctl.tracking.deadline import hurry

    hurry()


def recover_interrupted(spool: Any) -> list[Any]:
    """Close the runs whose sparkctl died mid-bench (KILLED, with their finished
    repetitions) and return them; MLflow is not touched (a sync writes them)."""
    from sparkctl.tracking.spool import recover_orphans

    return recover_orphans(spool)


def pending_count(spool: Any) -> int:
    """Runs in the spool that are not in MLflow yet."""
    return len(spool.pending()) if spool is not None else 0


def sync_spooled(spool: Any, store: Any) -> tuple[int, list[tuple[str, str]]]:
    """`sparkctl sync`: every spooled run into MLflow; (written, [(record id, error)])."""
    from sparkctl.tracking.sync import sync_pending

    return sync_pending(spool, store)


def residency_warnings() -> list[str]:
    """Benches whose lane models were not put back as they were (journals left failed or
    by a dead process): what the dashboard warns about."""
    from sparkctl.tracking.residency_journal import residency_warnings as warnings

    return list(warnings())


def restore_failed_in(pid: int) -> bool:
    """Whether a bench of process ``pid`` left models it could not put back (its residency
    journal stays, marked failed: tracking/residency_journal.py)."""
    from sparkctl.tracking.residency_journal import FAILED, read_journals

    return any(j.state == FAILED and j.owner.get("pid") == pid for j in read_journals())
