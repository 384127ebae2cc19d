"""Several sparkctl processes at once, as on a real Spark (a TUI, a bench in another
terminal, a `sparkctl sync`): real processes, real files, real MLflow on SQLite."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool, recover_orphans
from sparkctl.tracking.store import RECORD_ID_TAG, MlflowStore, default_tracking_uri

REPO = Path(__file__).resolve().parents[2]


# -- spool: appends racing compaction -------------------------------------------------


def _writer(path: str, tag: str, n: int, out) -> None:
    """Append n runs, journaling each first and marking every third one synced (as
    record_run does when MLflow took it); report which ids must stay pending."""
    spool = Spool(path)
    keep = []
    for i in range(n):
        rec = RunRecord(experiment="e", run_name=f"{tag}{i}", status="KILLED", start_ms=1, end_ms=2,
                        step_metrics={"tps": [float(i)]}, artifacts={"out.txt": "x" * 2000})
        spool.journal(rec)
        spool.append(rec)
        if i % 3 == 0:
            spool.mark_synced(rec.record_id, f"run-{tag}{i}")
        else:
            keep.append(rec.record_id)
    out.put(keep)


def _compactor(path: str, stop, out) -> None:
    spool = Spool(path)
    rewrites = 0
    while not stop.is_set():
        rewrites += spool.compact() > 0
    out.put(rewrites)


def test_appends_racing_compaction_lose_no_record(tmp_path):
    path = str(tmp_path / "spool.jsonl")
    ctx = multiprocessing.get_context("fork")
    results, rewrites, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    writers = [ctx.Process(target=_writer, args=(path, tag, 150, results)) for tag in ("a", "b")]
    compactors = [ctx.Process(target=_compactor, args=(path, stop, rewrites)) for _ in range(2)]
    for p in compactors + writers:
        p.start()
    expected = set()
    for _ in writers:
        expected.update(results.get(timeout=60))
    for p in writers:
        p.join(10)
        assert p.exitcode == 0
    stop.set()
    total_rewrites = sum(rewrites.get(timeout=30) for _ in compactors)
    for p in compactors:
        p.join(10)
        assert p.exitcode == 0

    assert total_rewrites >= 5, "the compactors never raced the writers"
    spool = Spool(path)
    assert {r.record_id for r in spool.pending()} == expected  # 200 of 300: none lost, none synced back
    assert spool.in_progress() == []
    spool.compact()
    assert len(Path(path).read_text().splitlines()) == len(expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool.jsonl"]  # no temp file left behind


def _recoverer(path: str, out) -> None:
    out.put([r.record_id for r in recover_orphans(Spool(path))])


def test_two_processes_recovering_at_once_close_a_dead_run_once(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    ctx = multiprocessing.get_context("fork")
    rec = RunRecord(experiment="e", run_name="r", status="KILLED", start_ms=1, end_ms=2,
                    step_metrics={"tps": [1.0]})
    dead = ctx.Process(target=spool.journal, args=(rec,))  # journals as itself, then exits
    dead.start()
    dead.join(10)
    out = ctx.Queue()
    procs = [ctx.Process(target=_recoverer, args=(str(spool.path), out)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(10)
    assert sorted(got) == [[], [], [rec.record_id]]
    finals = [line for line in spool.path.read_text().splitlines() if '"kind":"record"' in line]
    assert len(finals) == 1


# -- MLflow: a fresh store created by several processes at once ----------------------

# Each child pays `import mlflow` first (so only store creation overlaps), says it is
# ready, waits for "go", then opens the store and writes one run. MLflow's own log
# handler is on (MLFLOW_CONFIGURE_LOGGING unset, as in a user's shell), so a line
# reaching stderr means sparkctl failed to re-route it after the import.
STORE_CHILD = r"""
import sys, time
from pathlib import Path
folder, barrier, i = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
import mlflow
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.store import MlflowStore, TrackingError, default_tracking_uri
(barrier / f"ready-{i}").touch()
while not (barrier / "go").exists():
    time.sleep(0.002)
store = MlflowStore(default_tracking_uri(folder), None, "race")
rec = RunRecord(experiment="race", run_name=f"proc{i}", start_ms=1, end_ms=2,
                summary_metrics={"decode_tps_median": float(i)})
try:
    run_id = store.write(rec)
except TrackingError as exc:
    (barrier / f"error-{i}").write_text(str(exc))
    sys.exit(3)
(barrier / f"done-{i}").write_text(rec.record_id)
"""


def test_fresh_store_opened_by_three_processes_at_once(tmp_path):
    """Three sparkctl processes meet an MLflow database that does not exist yet. Without
    the lock, one runs the migrations while another sees half-migrated tables and
    reports "schema out of date: run mlflow db upgrade". With it, the others wait."""
    folder, barrier = tmp_path / "data", tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_CONFIGURE_LOGGING", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", STORE_CHILD, str(folder), str(barrier), str(i)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("ready-*"))) < 3:
            assert time.monotonic() < deadline, "children did not start"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        (barrier / "go").touch()
        outputs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    errors = {f.name: f.read_text() for f in barrier.glob("error-*")}
    assert errors == {}
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert outputs == [("", "")] * 3  # nothing from MLflow or alembic on the terminal

    written = {(barrier / f"done-{i}").read_text() for i in range(3)}
    store = MlflowStore(default_tracking_uri(folder), None, "race")
    runs = store.search_runs()
    assert {r["tags"][RECORD_ID_TAG] for r in runs} == written and len(runs) == 3
    log_text = (folder / "mlflow.log").read_text()
    assert log_text.count("Creating initial MLflow database tables") == 1  # one creator, two waiters
    assert "Running upgrade" in log_text
