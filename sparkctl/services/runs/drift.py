"""Lane models whose last valid bench ran on another engine version than the one serving now.

The story behind the tool: an engine upgrade silently cost the incumbent 14%, caught only
because someone remembered to look. The dashboard asks this after each engine version it
sees and says "engine 0.33.0 since last bench of production (0.32.9): re-bench"; the Runs
screen re-benches those models with the settings of their last run.
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkctl.services.runs.decide import usable
from sparkctl.services.runs.query import list_runs, run_params
from sparkctl.services.runs.rows import RunRow

HISTORY = 50


@dataclass(frozen=True)
class StaleLane:
    lane: str
    model: str
    engine_now: str  # version serving now
    run: RunRow | None  # the last valid bench of the lane model; None: never benched

    @property
    def message(self) -> str:
        if self.run is None:
            return f"{self.lane} ({self.model}) has no valid bench yet: bench it"
        return (f"engine {self.engine_now} since last bench of {self.lane} "
                f"({self.run.engine_version}): re-bench")


def stale_lanes(store, lanes: dict[str, str], engine_kind: str, engine_version: str,
                experiment: str | None = None) -> list[StaleLane]:
    """Every lane whose model's newest valid bench on this engine kind is on another version."""
    out = []
    for lane, model in lanes.items():
        rows = [r for r in list_runs(store, model=model, kind="bench", limit=HISTORY, experiment=experiment)
                if usable(r) and r.engine_kind == engine_kind]
        last = rows[0] if rows else None
        if last is None or last.engine_version != engine_version:
            out.append(StaleLane(lane, model, engine_version, last))
    return out


# params the bench records (services/bench/runner.py to_record) -> BenchSettings fields
_SETTINGS: dict[str, tuple[str, type]] = {
    "num_ctx": ("num_ctx", int), "num_predict": ("num_predict", int), "reps": ("reps", int),
    "warmup": ("warmup", int), "timeout_s": ("timeout_s", float), "mode": ("mode", str),
    "temperature": ("temperature", float), "seed": ("seed", int), "cache_policy": ("cache", str),
}


def rebench_overrides(store, run: RunRow) -> tuple[dict[str, Any], list[str]]:
    """BenchSettings overrides that repeat `run`'s settings, and notes on what could not be
    repeated (the prompt is taken from the run's own prompt.txt when it differs)."""
    params = run_params(store, run.run_id)
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, (field, kind) in _SETTINGS.items():
        raw = params.get(key)
        if raw in (None, "", "None"):
            continue
        try:
            out[field] = kind(float(raw)) if kind is int else kind(raw)
        except ValueError:
            notes.append(f"{key}={raw!r} not repeated (unreadable)")
    if "think" in params:
        out["think"] = params["think"].strip().lower() == "true"
    try:
        out["prompt"] = store.read_artifact(run.run_id, "prompt.txt")
    except Exception:
        notes.append("the run's prompt was not found; the configured prompt is used")
    if "num_ctx" in out:
        out["ctx_explicit"] = True
    return out, notes
