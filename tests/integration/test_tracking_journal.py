"""The journal of a bench in progress: what a crash, a power cut or a reused pid leaves,
and how it comes back. Real files, real processes killed with SIGKILL, real MLflow on
SQLite through the real `sparkctl sync` command; no mocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from sparkctl.tracking.owner import boot_id, current_owner
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import (
    COMPACT_THRESHOLD_BYTES,
    RECOVERED_TAG,
    RECOVERY_GUARD_TAG,
    Spool,
    recover_orphans,
)
from sparkctl.tracking.store import RECORD_ID_TAG, MlflowStore
from sparkctl.tracking.sync import record_run, sync_pending
from testkit.tracking import (  # noqa: F401  (pytest fixtures)
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
)

REPO = Path(__file__).resolve().parents[2]

# A bench process in miniature: journal `reps` finished repetitions, then die by SIGKILL
# (nothing in Python runs: no finally, no atexit) or stay alive until stdin closes.
BENCH_CHILD = r"""
import os, signal, sys
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
path, rid, reps, mode, experiment = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
spool = Spool(path)
for k in range(1, reps + 1):
    spool.journal(RunRecord(
        experiment=experiment, run_name="qwen3:8b q4", status="KILLED",
        start_ms=1_700_000_000_000, end_ms=1_700_000_000_000 + 1000 * k,
        params={"model": "qwen3:8b", "num_ctx": "8192"}, tags={"engine.version": "0.12.6"},
        step_metrics={"decode_tps": [40.0 + i for i in range(k)], "ttft_ms": [100.0] * k},
        summary_metrics={"decode_tps_median": 40.0 + (k - 1) / 2}, record_id=rid))
if mode == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
print("journaled", flush=True)
sys.stdin.read()
"""


def child_env(data_dir: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_CONFIGURE_LOGGING", None)
    env.pop("MLFLOW_LOGGING_LEVEL", None)
    if data_dir is not None:
        env["SPARKCTL_DATA_DIR"] = str(data_dir)
    return env


def crashed_bench(spool: Spool, reps: int, experiment: str = TEST_EXPERIMENT) -> tuple[str, int]:
    """Run a bench child that journals ``reps`` repetitions and is SIGKILLed; its
    (record id, pid)."""
    rid = f"crash{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", BENCH_CHILD, str(spool.path), rid, str(reps), "crash", experiment],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    return rid, proc.pid


def partial(rid: str, reps: int = 1) -> RunRecord:
    return RunRecord(experiment=TEST_EXPERIMENT, run_name="r", status="KILLED", start_ms=1, end_ms=2,
                     step_metrics={"decode_tps": [42.0] * reps}, record_id=rid)


def write_partial(spool: Spool, rec: RunRecord, owner: dict) -> None:
    """A journal line exactly as another process would have written it."""
    line = json.dumps({"kind": "partial", "record": rec.to_dict(), "owner": owner})
    with open(spool.path, "a") as fh:
        fh.write(line + "\n")


def test_killed_bench_is_recovered_as_killed_with_its_finished_repetitions(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    rid, pid = crashed_bench(spool, reps=2)
    # the journal alone is not a finished run: nothing to sync until it is recovered
    assert spool.pending() == []
    assert [(rec.record_id, owner["pid"]) for rec, owner in spool.in_progress()] == [(rid, pid)]

    (rec,) = recover_orphans(spool)
    assert rec.record_id == rid and rec.status == "KILLED"
    assert rec.step_metrics["decode_tps"] == [40.0, 41.0]  # both repetitions, from the latest partial
    assert rec.end_ms == 1_700_000_002_000
    assert rec.params["model"] == "qwen3:8b" and rec.tags["engine.version"] == "0.12.6"
    assert rec.tags[RECOVERED_TAG] == "true"
    assert rec.tags[RECOVERY_GUARD_TAG] == (
        f"the sparkctl process (pid {pid}) died during the run; "
        "recovered from the journal with 2 repetition(s)"
    )
    # it is now an ordinary pending run, once: a second recovery finds nothing
    assert spool.pending() == [rec]
    assert recover_orphans(spool) == []
    assert spool.in_progress() == []


def test_bench_still_running_is_left_alone_until_it_dies(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    rid = "livebench"
    proc = subprocess.Popen(
        [sys.executable, "-c", BENCH_CHILD, str(spool.path), rid, "3", "live", TEST_EXPERIMENT],
        env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "journaled"
        assert recover_orphans(spool) == []  # a bench in another terminal, alive
        assert spool.pending() == []
        assert [r.record_id for r, _ in spool.in_progress()] == [rid]
    finally:
        proc.kill()
        proc.wait(10)
    (rec,) = recover_orphans(spool)
    assert rec.record_id == rid and len(rec.step_metrics["decode_tps"]) == 3
    assert f"(pid {proc.pid})" in rec.tags[RECOVERY_GUARD_TAG]


def test_final_record_supersedes_every_partial(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    rec = RunRecord(experiment=TEST_EXPERIMENT, run_name="r", status="KILLED", start_ms=1, end_ms=2,
                    step_metrics={"decode_tps": [40.0]})
    spool.journal(rec)
    rec.step_metrics["decode_tps"].append(41.0)
    spool.journal(rec)
    assert spool.pending() == []
    final = RunRecord.from_dict(rec.to_dict() | {"status": "FINISHED", "end_ms": 3})
    spool.append(final)
    assert spool.pending() == [final]
    assert spool.in_progress() == []
    assert recover_orphans(spool) == []
    kinds = [json.loads(line)["kind"] for line in spool.path.read_text().splitlines()]
    assert kinds == ["partial", "partial", "record"]
    owner = json.loads(spool.path.read_text().splitlines()[0])["owner"]
    me = psutil.Process()
    assert owner["pid"] == os.getpid() and abs(owner["create_time"] - me.create_time()) < 1
    assert owner["boot_id"] == boot_id() and owner["host"]


def test_reused_pid_and_power_cycle_count_as_dead_another_host_does_not(tmp_path):
    """Owners this process can judge without killing anything: our own live pid with the
    wrong start time (the pid was reused), with another boot id (the machine was power-
    cycled since), and a process on another machine sharing the data dir."""
    spool = Spool(tmp_path / "spool.jsonl")
    me = current_owner()
    reused = me | {"create_time": me["create_time"] - 3600}
    rebooted = me | {"boot_id": "00000000-0000-0000-0000-000000000000"}
    elsewhere = me | {"host": "other-spark", "boot_id": "11111111-1111-1111-1111-111111111111"}
    write_partial(spool, partial("reused", reps=3), reused)
    write_partial(spool, partial("rebooted"), rebooted)
    write_partial(spool, partial("elsewhere"), elsewhere)
    write_partial(spool, partial("alive"), me)

    recovered = {r.record_id: r for r in recover_orphans(spool)}
    assert sorted(recovered) == ["rebooted", "reused"]
    assert recovered["reused"].tags[RECOVERY_GUARD_TAG].endswith("with 3 repetition(s)")
    assert f"(pid {os.getpid()})" in recovered["rebooted"].tags[RECOVERY_GUARD_TAG]
    assert sorted(r.record_id for r, _ in spool.in_progress()) == ["alive", "elsewhere"]


def test_sync_closes_a_crashed_run_into_a_fresh_store_and_prints_no_mlflow_logs(tmp_path):
    """What a user does after a power cut: `sparkctl sync`. It runs on a data dir with no
    MLflow database yet (a fresh store: ~70 migrations), so it also proves MLflow's log
    lines go to <data dir>/mlflow.log, not the terminal."""
    data = tmp_path / "data"
    spool = Spool(data / "spool.jsonl")
    data.mkdir()
    rid, pid = crashed_bench(spool, reps=2, experiment="sparkctl-bench")
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text("")
    out = subprocess.run(
        [sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "sync", "--json"],
        env=child_env(data), capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert json.loads(out.stdout)["synced"] == 1  # stdout is the command's JSON and nothing else

    log_text = (data / "mlflow.log").read_text()
    assert "Creating initial MLflow database tables" in log_text
    assert "Running upgrade" in log_text  # alembic's migrations

    store = MlflowStore(f"sqlite:///{data / 'mlflow.db'}", None, "sparkctl-bench")
    (run,) = store.search_runs()
    assert run["status"] == "KILLED"
    assert run["tags"][RECORD_ID_TAG] == rid
    assert run["tags"][RECOVERED_TAG] == "true"
    assert run["tags"][RECOVERY_GUARD_TAG] == (
        f"the sparkctl process (pid {pid}) died during the run; recovered from the journal with 2 repetition(s)"
    )
    assert run["metrics"]["decode_tps"] == 41.0  # latest step: the second repetition
    # synced, so compaction left nothing in the spool
    assert spool.pending() == [] and spool.in_progress() == [] and spool.path.read_bytes() == b""


def test_sync_pending_recovers_then_writes_then_compacts(tmp_path, mlflow_store):
    spool = Spool(tmp_path / "spool.jsonl")
    rid, _ = crashed_bench(spool, reps=1)
    done = RunRecord(experiment=TEST_EXPERIMENT, run_name="done", start_ms=1, end_ms=2)
    assert record_run(done, spool, mlflow_store).synced
    assert sync_pending(spool, mlflow_store) == (1, [])
    ids = {r["tags"][RECORD_ID_TAG]: r for r in mlflow_store.search_runs()}
    assert set(ids) == {rid, done.record_id}
    assert ids[rid]["status"] == "KILLED"
    assert spool.path.read_bytes() == b""


def test_record_run_compacts_a_spool_past_the_threshold(tmp_path, mlflow_store):
    """Months of synced runs with their outputs: the spool does not grow without end."""
    spool = Spool(tmp_path / "spool.jsonl")
    outputs = "token " * 20_000
    for i in range(COMPACT_THRESHOLD_BYTES // len(outputs) + 2):
        old = RunRecord(experiment=TEST_EXPERIMENT, run_name=f"old{i}", start_ms=1, end_ms=2,
                        artifacts={"outputs.txt": outputs})
        spool.journal(old)
        spool.append(old)
        spool.mark_synced(old.record_id, f"run{i}")
    assert spool.size() > COMPACT_THRESHOLD_BYTES
    waiting = RunRecord(experiment=TEST_EXPERIMENT, run_name="waiting", start_ms=1, end_ms=2)
    spool.append(waiting)  # MLflow was down for this one

    new = RunRecord(experiment=TEST_EXPERIMENT, run_name="new", start_ms=1, end_ms=2)
    assert record_run(new, spool, mlflow_store).synced
    assert spool.size() < 2_000
    assert [r.record_id for r in spool.pending()] == [waiting.record_id]
