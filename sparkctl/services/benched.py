"""What this machine's sparkctl last benched: for each tracking store, model and engine kind,
the engine version of the newest usable bench it recorded.

The dashboard's engine-change note ("engine 0.14.0 since last bench of production
(0.13.2): re-bench") reads this small file instead of searching the store: a search per
lane model, ordered by start time, and the history modules behind them cost ~0.1 s of CPU
at every start on a 10,000-run SQLite store (more over a slow server). A lane whose model
has no entry here (benched before this file existed, or only from another machine) is
still asked of the store (services/runs/drift.py), so the note says what it said before.

Written after each run is spooled, by ``record_and_note`` (the recorders of
services/tracking.py and services/factory.py both record through it), under the same
lock-and-rename as sparkctl's state file. Reading it
never raises: a missing or unreadable file answers nothing, and the store is asked.
Blocking file I/O: call from worker threads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE_NAME = "last_benches.json"
VERSION = 1


def record_and_note(record: Any, spool: Any, store: Any) -> Any:
    """Record a run (spool first, then MLflow: tracking/sync.py) and, once it reached
    either, note it here. Returns the SyncResult."""
    from sparkctl.tracking.sync import record_run

    result = record_run(record, spool, store)
    if result.spooled or result.synced:
        remember(record, store)  # what the engine-change note reads first
    return result


def stale_message(lane: str, engine_now: str, benched_on: str) -> str:
    return f"engine {engine_now} since last bench of {lane} ({benched_on}): re-bench"


def _file() -> Path:
    from sparkctl import paths

    return paths.data_dir() / FILE_NAME


def _where(store: Any, experiment: str | None = None) -> str:
    """The store a bench went to, as the file keys it: its URI without credentials and
    the experiment (benches in another store say nothing about this one)."""
    return f"{store.display_uri} · {experiment or store.experiment}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("stores"), dict):
        return {}
    return data


def remember(record: Any, store: Any, path: Path | None = None) -> None:
    """Note ``record`` if it is a usable bench (finished, valid, a plain bench with a
    decode rate: what the note's store search looks for) newer than the one noted for its
    model and engine kind. Never raises: the note falls back to the store without it."""
    from sparkctl.core.names import model_key
    from sparkctl.services.runs.comparison import usable
    from sparkctl.services.runs.rows import row_from_run
    from sparkctl.statefile import locked, write_atomic

    try:
        row = row_from_run({"run_name": record.run_name, "status": record.status, "start_time": record.start_ms,
                            "tags": record.tags, "params": record.params, "metrics": record.summary_metrics})
        if not (usable(row) and row.model and row.engine_kind and row.engine_version):
            return
        path = path or _file()
        where = _where(store, record.experiment)
        with locked(path):
            data = _read(path) or {"version": VERSION, "stores": {}}
            kinds = data["stores"].setdefault(where, {}).setdefault(model_key(row.model), {})
            known = kinds.get(row.engine_kind)
            if isinstance(known, dict) and int(known.get("start_ms") or 0) > (row.start_ms or 0):
                return  # a replay of an older run
            kinds[row.engine_kind] = {"version": row.engine_version, "start_ms": row.start_ms}
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except Exception:  # a nicety: the run itself is recorded whatever happens here
        return


def notes_from_file(store: Any, lanes: dict[str, str], engine_kind: str, engine_version: str,
                    path: Path | None = None) -> tuple[list[tuple[str, str, bool]], dict[str, str]]:
    """The engine-change notes this file answers, as (lane, message, True: a bench to
    repeat) in the lanes' order, as services/runs/drift.py engine_change_notes gives them,
    and the lanes it cannot answer (lane -> model), for the store to be asked about."""
    from sparkctl.core.names import model_key

    try:
        models = _read(path or _file())["stores"].get(_where(store))
    except (KeyError, AttributeError):  # no file yet; a store that is not an MlflowStore
        models = None
    notes: list[tuple[str, str, bool]] = []
    rest: dict[str, str] = {}
    for lane, model in lanes.items():
        kinds = models.get(model_key(model)) if isinstance(models, dict) else None
        entry = kinds.get(engine_kind) if isinstance(kinds, dict) else None
        version = entry.get("version") if isinstance(entry, dict) else None
        if not isinstance(version, str) or not version:
            rest[lane] = model
        elif version != engine_version:
            notes.append((lane, stale_message(lane, engine_version, version), True))
    return notes, rest
