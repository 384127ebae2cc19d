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


def recorder_for(spool: Any, store: Any) -> Callable[[Any], Any]:
    """A RunRecord -> SyncResult callable: spool first, then MLflow (call from a thread)."""

    def record(record: Any) -> Any:
        from sparkctl.tracking.sync import record_run

        return record_run(record, spool, store)

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
