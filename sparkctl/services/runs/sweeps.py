"""One recorded workload sweep read back from MLflow: the cell runs sharing a `sweep.id` tag
(services/bench/sweep.py writes them as children of the sweep's own run and tags them; the
sweep's own run has no cell tag and is left out of the matrix). Blocking: call from a
worker thread. The assembly into a matrix is pure (core.sweep.sweep_from_runs)."""

from __future__ import annotations

from typing import Any

from sparkctl.core.sweep import SweepView, sweep_from_runs
from sparkctl.services.runs.query import quote

TAG_SWEEP = "sweep.id"
MAX_CELLS = 2000


class NotASweep(Exception):
    """The run is not a cell of a sweep (a plain bench, an eval), or the sweep's id cannot be searched."""


def sweep_id_of(store: Any, run_id: str) -> str | None:
    """The run's `sweep.id` tag, or None (a plain bench)."""
    literal = quote(run_id)
    found = store.search_runs(f"attributes.run_id = {literal}", max_results=1) if literal else []
    return ((found[0].get("tags") or {}).get(TAG_SWEEP) or None) if found else None


def read_sweep(store: Any, sweep_id: str) -> SweepView:
    """Every cell run of one sweep, assembled (newest record of each cell)."""
    literal = quote(sweep_id)
    if literal is None:
        raise NotASweep(f"sweep id {sweep_id!r} cannot be searched")
    runs = store.search_runs(f"tags.`{TAG_SWEEP}` = {literal}", max_results=MAX_CELLS)
    return sweep_from_runs(sweep_id, runs)


def sweep_of_run(store: Any, run_id: str) -> SweepView:
    """The sweep the run belongs to. Raises NotASweep for a run that is not a cell."""
    sweep_id = sweep_id_of(store, run_id)
    if sweep_id is None:
        raise NotASweep(f"run {run_id[:8]} is not part of a sweep (no {TAG_SWEEP} tag): "
                        "sweeps come from bench --profile/--depth/--concurrency/--slo")
    return read_sweep(store, sweep_id)
