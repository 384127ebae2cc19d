"""Lane models whose last valid bench ran on another engine version than the one serving now.

The story behind the tool: an engine upgrade silently cost the incumbent 14%, caught only
because someone remembered to look. The dashboard asks this after each engine version it
sees and says "engine 0.33.0 since last bench of production (0.32.9): re-bench"; the Runs
screen re-benches those models with the settings of their last run.
Blocking (SQLite or HTTP): call from a worker thread. The dashboard asks through
``engine_change_notes``, which never imports MLflow in its process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from sparkctl.core.rebench import rebench_blocker  # noqa: F401  (the Runs screen's B and the dashboard share it)
from sparkctl.services.benched import stale_message
from sparkctl.services.runs.comparison import usable
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
        return stale_message(self.lane, self.engine_now, self.run.engine_version)


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


# the rare fallback (see engine_change_notes): a child process that imports MLflow
CHILD_TIMEOUT_S = 120.0


def engine_change_notes(store, lanes: dict[str, str], engine_kind: str, engine_version: str
                        ) -> list[tuple[str, str, bool]]:
    """(lane, message, whether it has a bench to repeat) for every stale lane, for the
    dashboard: never imports MLflow here.

    The store's reads without MLflow (SQLite read directly, a server over REST) answer;
    where only MLflow's client can (a schema revision sparkctl's reader does not know),
    the same query runs in a short-lived child process, so its ~200 MB and seconds of
    import stay out of the TUI, and a last entry with no lane ("") says so and why.
    Raises TrackingError when the store cannot be read."""
    from sparkctl.tracking.store import NeedsMlflow, fallback_note

    try:
        return [(s.lane, s.message, s.run is not None)
                for s in stale_lanes(store.without_mlflow(), lanes, engine_kind, engine_version)]
    except NeedsMlflow as exc:
        why = fallback_note(store.display_uri, exc.reason)
    ask = {"uri": store.uri, "experiment": store.experiment, "lanes": lanes, "kind": engine_kind,
           "version": engine_version}
    # the URI may hold a password: stdin, never argv (which `ps` shows to everyone)
    done = subprocess.run([sys.executable, "-m", "sparkctl.services.runs.drift"], input=json.dumps(ask),
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        from sparkctl.tracking.store import TrackingError

        raise TrackingError((done.stderr.strip().splitlines() or ["the engine-change check failed"])[-1])
    # the last entry, with no lane: why the answer took a child process (the dashboard says so)
    return [(str(lane), str(message), bool(has_run)) for lane, message, has_run in json.loads(done.stdout)] + [
        ("", why, False)]


def _child() -> int:
    """``python -m sparkctl.services.runs.drift``: the query of engine_change_notes through
    MLflow's client; a JSON request on stdin, a JSON list of [lane, message, has_run] on stdout."""
    from sparkctl.tracking.store import MlflowStore, TrackingError

    os.nice(10)  # background work: the TUI that asked comes first
    ask = json.loads(sys.stdin.read())
    store = MlflowStore(ask["uri"], None, ask["experiment"])
    try:
        stale = stale_lanes(store, ask["lanes"], ask["kind"], ask["version"])
    except TrackingError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(json.dumps([[s.lane, s.message, s.run is not None] for s in stale]))
    return 0


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


if __name__ == "__main__":
    sys.exit(_child())
