"""Each host's lane models' newest valid benches, from the shared tracking store.

Runs carry the hostname that ran them (tag ``host.name``), so a team's one MLflow server
answers "what did spark-02 last measure for its production lane, on which engine?".
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from sparkctl.core.host_status import HostStatus, LaneBench, lane_table
from sparkctl.services.runs.comparison import usable
from sparkctl.services.runs.query import list_runs

HISTORY = 20  # newest runs of one lane model on one host looked at


def lane_benches(store, status: HostStatus, override: dict[str, str] | None = None,
                 experiment: str | None = None) -> tuple[LaneBench, ...]:
    """For every lane of the host: its model's newest usable bench on that host, on the
    engine kind the host serves with (engine_version None when there is none).

    Read without MLflow where the store allows (SQLite read directly, a server over REST):
    a local store that does not exist yet has no benches, and is not created for the
    asking (MLflow's import and its schema migrations took ~5 s before the fleet printed)."""
    from sparkctl.tracking.store import NeedsMlflow

    light = getattr(store, "without_mlflow", None)
    if light is not None:
        try:
            return _lane_benches(light(), status, override, experiment)
        except NeedsMlflow:  # a schema revision or a filter only MLflow's client reads
            pass
    return _lane_benches(store, status, override, experiment)


def _lane_benches(store, status: HostStatus, override: dict[str, str] | None,
                  experiment: str | None) -> tuple[LaneBench, ...]:
    out = []
    lanes = lane_table(status, override) or tuple((lane, model, False) for lane, model in (override or {}).items())
    for lane, model, _resident in lanes:
        rows = [r for r in list_runs(store, model=model, kind="bench", host=status.hostname, limit=HISTORY,
                                     experiment=experiment)
                if usable(r) and r.engine_kind == status.engine_kind]
        last = rows[0] if rows else None
        out.append(LaneBench(lane, model, last.engine_version if last else None,
                             last.decode_tps_median if last else None, last.start_ms if last else None))
    return tuple(out)
