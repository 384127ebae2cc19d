"""The dashboard's first minute: CPU, idle CPU at 1 s refresh, RSS, and MLflow never loaded,
with the engine-change note on screen. Beside it, in the same run, a bare Textual app.

Goals: CPU in the first 60 s after start (process tree, from spawn: imports, first frames,
the note's query, then idling) under 1 s; idle from 20 s to 60 s at most 0.5% of a core;
RSS at most 100 MB at 60 s; `mlflow` never imported; the note still shown.

The dashboard reads the cached 10,000-run store (benchmarks/bench_store.py), with
production = qwen3:8b, last benched on Ollama 0.13.2, while the FAKE engine says 0.14.0:
the note must say "engine 0.14.0 since last bench of production (0.13.2)". As on a machine
whose sparkctl recorded that bench, its data dir holds the note sparkctl keeps of it
(last_benches.json, services/benched.py), which the dashboard reads instead of searching
the store; --note-from-store leaves it out, so the note is searched for in the store, as
for a lane benched before that file existed or only from another machine.
Run: .venv/bin/python benchmarks/idle_cpu.py [SECONDS] [--note-from-store]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench_store import EXPERIMENT, LANES, ensure_store
from tui_harness import FIRST_MODEL, AppRun, fake_engine

from sparkctl.services.benched import FILE_NAME, remember
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri

GOAL_CPU_S = 1.0
GOAL_IDLE_PCT = 0.5
GOAL_RSS_MB = 100.0
IDLE_FROM_S = 20.0
ENGINE_NOW = "0.14.0"
NOTE = "since last bench of production (0.13.2)"


def note_the_last_bench(data_dir, uri: str) -> None:
    """What sparkctl's recorder noted when it recorded production's last bench (0.13.2)."""
    record = RunRecord(experiment=EXPERIMENT, run_name=f"{LANES['production']} @ ollama 0.13.2",
                       start_ms=1, end_ms=2, summary_metrics={"decode_tps_median": 40.0},
                       tags={"model.name": LANES["production"], "engine.kind": "ollama", "engine.version": "0.13.2",
                             "guard.valid": "true"})
    remember(record, MlflowStore(uri, None, EXPERIMENT), data_dir / FILE_NAME)
    assert (data_dir / FILE_NAME).is_file()


def main(window: float = 60.0, note_from_store: bool = False) -> int:
    store = ensure_store()
    assert (store / DB_FILE_NAME).is_file()
    uri = default_tracking_uri(store)
    config = (f'[tracking]\nuri = "{uri}"\nexperiment = "{EXPERIMENT}"\n\n'
              f'[lanes]\nproduction = "{LANES["production"]}"\n\n[ui]\nrefresh_s = 1.0\n')
    server = fake_engine(ENGINE_NOW)
    runs = {"sparkctl": AppRun("sparkctl", server.url, config=config), "bare": AppRun("bare", server.url)}
    if not note_from_store:
        note_the_last_bench(Path(runs["sparkctl"].env["SPARKCTL_DATA_DIR"]), uri)
    cpu_at: dict[str, dict[str, float]] = {name: {} for name in runs}
    try:
        for run in runs.values():
            run.start()
        texts = (FIRST_MODEL, NOTE)
        while True:
            for name, run in runs.items():
                run.pump(0.02, texts if name == "sparkctl" else ())
                t = run.elapsed()
                if t >= IDLE_FROM_S and "idle_from" not in cpu_at[name]:
                    cpu_at[name]["idle_from"] = run.cpu_s()
                if t >= window and "end" not in cpu_at[name]:
                    cpu_at[name]["end"] = run.cpu_s()
                    cpu_at[name]["rss"] = run.rss_mb()
            if all("end" in c for c in cpu_at.values()):
                break
            time.sleep(0.05)
        seen = dict(runs["sparkctl"].seen)
        marks = {name: run.quit() for name, run in runs.items()}
    finally:
        server.stop()
    idle = {n: (c["end"] - c["idle_from"]) / (window - IDLE_FROM_S) * 100 for n, c in cpu_at.items()}
    s, b = cpu_at["sparkctl"], cpu_at["bare"]
    note_ok = NOTE in seen
    print(f"first {window:.0f} s after start, CPU of the process tree: sparkctl {s['end']:.2f} s, "
          f"bare Textual {b['end']:.2f} s - goal < {GOAL_CPU_S:.1f} s: {'MET' if s['end'] < GOAL_CPU_S else 'MISSED'}")
    print(f"idle CPU from {IDLE_FROM_S:.0f} s to {window:.0f} s at 1 s refresh: sparkctl {idle['sparkctl']:.2f}% "
          f"of a core, bare Textual {idle['bare']:.2f}% - goal <= {GOAL_IDLE_PCT}%: "
          f"{'MET' if idle['sparkctl'] <= GOAL_IDLE_PCT else 'MISSED'}")
    mlflow = marks["sparkctl"].get("mlflow_imported")
    print(f"RSS at {window:.0f} s: sparkctl {s['rss']:.0f} MB, bare Textual {b['rss']:.0f} MB - goal <= "
          f"{GOAL_RSS_MB:.0f} MB: {'MET' if s['rss'] <= GOAL_RSS_MB else 'MISSED'}; mlflow imported: {mlflow}; "
          f"engine-change note on screen: {note_ok} (at {seen.get(NOTE, float('nan')):.1f} s, "
          f"{'searched for in the store' if note_from_store else 'from last_benches.json'}); "
          f"first model at {seen.get(FIRST_MODEL, float('nan')):.2f} s")
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(float(args[0]) if args else 60.0, note_from_store="--note-from-store" in sys.argv[1:]))
