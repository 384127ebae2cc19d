"""Tracking against real MLflow (SQLite files, a closed port for "server down"); no mocks."""

from __future__ import annotations

import json
import logging
import multiprocessing
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import (
    COMPLETE_TAG,
    RECORD_ID_TAG,
    MlflowStore,
    TrackingError,
    default_tracking_uri,
    sqlite_path,
)
from sparkctl.tracking.sync import record_run, sync_pending
from testkit.tracking import (  # noqa: F401  (pytest fixtures)
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def make_record(**overrides) -> RunRecord:
    values = dict(
        experiment=TEST_EXPERIMENT,
        run_name="qwen3-8b q4 ctx8192",
        status="FINISHED",
        start_ms=1_700_000_000_000,
        end_ms=1_700_000_042_000,
        params={"engine": "ollama", "num_ctx": "8192", "model": "qwen3:8b"},
        tags={"sparkctl.version": "0.1.0", "host": "spark-1"},
        step_metrics={"decode_tps": [41.5, None, 43.0, 42.25], "ttft_ms": [120.0, 95.5, 97.0, 99.0]},
        summary_metrics={"decode_tps_median": 42.25, "ttft_ms_median": 98.0},
        artifacts={
            "outputs.txt": "first answer\nsecond answer\n",
            "config.json": {"num_ctx": 8192, "prompt": "fixed", "lanes": [1, 2]},
            "samples.json": [{"rep": 0, "tokens": 512}],
        },
    )
    values.update(overrides)
    return RunRecord(**values)


def client_for(store: MlflowStore):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=store.uri)


def artifact_dir(run) -> Path:
    uri = urlparse(run.info.artifact_uri)
    assert uri.scheme == "file"
    return Path(unquote(uri.path))


def closed_port_uri() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- import cost ----------------------------------------------------------------------


def test_importing_tracking_modules_does_not_import_mlflow():
    code = (
        "import sys\n"
        "import sparkctl.tracking.store, sparkctl.tracking.sync\n"
        "import sparkctl.tracking.spool, sparkctl.tracking.record\n"
        "bad = sorted(m for m in sys.modules if m == 'mlflow' or m.startswith('mlflow.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


# -- record and URI helpers -------------------------------------------------------------


def test_default_tracking_uri_is_absolute_sqlite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = default_tracking_uri(Path("data"))
    assert uri == f"sqlite:////{str(tmp_path / 'data' / 'mlflow.db').lstrip('/')}"
    assert uri.startswith("sqlite:////")
    assert sqlite_path(uri) == tmp_path / "data" / "mlflow.db"
    assert sqlite_path("http://localhost:5000") is None


def test_record_json_round_trip_and_validation():
    rec = make_record()
    assert len(rec.record_id) == 32
    line = rec.to_json()
    assert "\n" not in line
    back = RunRecord.from_json(line)
    assert back == rec
    assert back.step_metrics["decode_tps"][1] is None
    # unknown keys from a newer writer are ignored; non-string params become strings
    data = json.loads(line) | {"future_field": 1}
    data["params"]["num_ctx"] = 8192
    assert RunRecord.from_json(json.dumps(data)).params["num_ctx"] == "8192"
    with pytest.raises(ValueError):
        make_record(status="RUNNING")
    with pytest.raises(ValueError):
        make_record(record_id="x' OR '1'='1")
    assert make_record().record_id != rec.record_id


# -- writing to MLflow --------------------------------------------------------------------


def test_write_logs_params_tags_metrics_artifacts(mlflow_store):
    rec = make_record()
    run_id = mlflow_store.write(rec)
    client = client_for(mlflow_store)
    run = client.get_run(run_id)

    assert run.info.status == "FINISHED"
    assert run.info.run_name == rec.run_name
    assert run.info.start_time == rec.start_ms
    assert run.info.end_time == rec.end_ms
    assert run.data.params == rec.params
    for key, value in rec.tags.items():
        assert run.data.tags[key] == value
    assert run.data.tags[RECORD_ID_TAG] == rec.record_id
    assert run.data.tags[COMPLETE_TAG] == "true"

    history = client.get_metric_history(run_id, "decode_tps")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
        (0, 41.5),
        (2, 43.0),
        (3, 42.25),
    ]
    assert all(m.timestamp == rec.end_ms for m in history)
    ttft = client.get_metric_history(run_id, "ttft_ms")
    assert [m.step for m in sorted(ttft, key=lambda m: m.step)] == [0, 1, 2, 3]
    assert run.data.metrics["decode_tps_median"] == 42.25
    (summary,) = client.get_metric_history(run_id, "ttft_ms_median")
    assert (summary.step, summary.value) == (0, 98.0)

    # artifacts live next to the database, not in ./mlruns
    adir = artifact_dir(run)
    db_dir = sqlite_path(mlflow_store.uri).parent
    assert adir.is_relative_to(db_dir / "artifacts")
    assert (adir / "outputs.txt").read_text() == rec.artifacts["outputs.txt"]
    assert json.loads((adir / "config.json").read_text()) == rec.artifacts["config.json"]
    assert json.loads((adir / "samples.json").read_text()) == rec.artifacts["samples.json"]
    assert not (Path.cwd() / "mlruns").exists()


@pytest.mark.parametrize("status", ["FAILED", "KILLED"])
def test_write_keeps_terminal_status(mlflow_store, status):
    rec = make_record(status=status, step_metrics={"decode_tps": [10.0]})
    run = client_for(mlflow_store).get_run(mlflow_store.write(rec))
    assert run.info.status == status
    assert run.info.end_time == rec.end_ms


def test_write_chunks_large_batches(mlflow_store):
    rec = make_record(
        params={f"p{i}": str(i) for i in range(150)},
        tags={f"t{i}": str(i) for i in range(130)},
        step_metrics={"lat": [float(i) for i in range(1200)]},
        summary_metrics={},
        artifacts={},
    )
    run_id = mlflow_store.write(rec)
    client = client_for(mlflow_store)
    run = client.get_run(run_id)
    assert len(run.data.params) == 150
    assert all(run.data.tags[f"t{i}"] == str(i) for i in range(130))
    assert len(client.get_metric_history(run_id, "lat")) == 1200


def test_failure_midway_never_leaves_run_running_and_replay_recovers(mlflow_store):
    circular: dict = {}
    circular["self"] = circular
    bad = make_record(artifacts={"ok.txt": "fine", "loop.json": circular})
    with pytest.raises(TrackingError) as info:
        mlflow_store.write(bad)
    assert "\n" not in str(info.value)

    from mlflow.entities import ViewType

    client = client_for(mlflow_store)
    exp = client.get_experiment_by_name(TEST_EXPERIMENT)
    (partial,) = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL)
    assert partial.info.status == "FAILED"
    assert partial.info.end_time is not None
    assert COMPLETE_TAG not in partial.data.tags

    # Replaying the same record (fixed) writes a complete run and hides the partial one.
    good = make_record(record_id=bad.record_id, artifacts={"ok.txt": "fine"})
    run_id = mlflow_store.write(good)
    assert run_id != partial.info.run_id
    active = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in active] == [run_id]
    assert active[0].info.status == "FINISHED"
    assert client.get_run(partial.info.run_id).info.lifecycle_stage == "deleted"


def test_write_is_idempotent_per_record_id(mlflow_store):
    rec = make_record()
    first = mlflow_store.write(rec)
    again = mlflow_store.write(RunRecord.from_json(rec.to_json()))
    assert again == first
    runs = mlflow_store.search_runs()
    assert [r["run_id"] for r in runs] == [first]
    assert len(client_for(mlflow_store).get_metric_history(first, "decode_tps")) == 3


def test_search_runs_returns_plain_dicts(mlflow_store):
    assert mlflow_store.search_runs(experiment="no-such-experiment") == []
    slow = make_record(params={"num_ctx": "4096"}, summary_metrics={"decode_tps_median": 30.0})
    fast = make_record(params={"num_ctx": "8192"}, summary_metrics={"decode_tps_median": 50.0})
    slow_id, fast_id = mlflow_store.write(slow), mlflow_store.write(fast)

    ranked = mlflow_store.search_runs(order_by=["metrics.decode_tps_median DESC"])
    assert [r["run_id"] for r in ranked] == [fast_id, slow_id]
    only = mlflow_store.search_runs(filter_string="params.num_ctx = '4096'")
    assert len(only) == 1
    row = only[0]
    assert row["run_id"] == slow_id
    assert row["status"] == "FINISHED"
    assert row["params"]["num_ctx"] == "4096"
    assert row["metrics"]["decode_tps_median"] == 30.0
    assert row["tags"][RECORD_ID_TAG] == slow.record_id
    assert mlflow_store.search_runs(max_results=1)[0]["run_id"] in {slow_id, fast_id}


def test_out_of_date_schema_tells_user_to_upgrade(mlflow_store):
    db = sqlite_path(mlflow_store.uri)
    with sqlite3.connect(db) as conn:
        (current,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        older = "0584bdc529eb" if current != "0584bdc529eb" else "0a8213491aaa"
        conn.execute("UPDATE alembic_version SET version_num = ?", (older,))
    with pytest.raises(TrackingError) as info:
        mlflow_store.write(make_record())
    assert f"mlflow db upgrade {mlflow_store.uri}" in str(info.value)


# -- spool ----------------------------------------------------------------------------


def test_spool_append_pending_mark_synced(tmp_path):
    spool = Spool(tmp_path / "data" / "spool.jsonl")
    assert spool.pending() == []
    a, b = make_record(run_name="a"), make_record(run_name="b")
    spool.append(a)
    spool.append(b)
    assert [r.record_id for r in spool.pending()] == [a.record_id, b.record_id]
    assert spool.pending()[0] == a

    before = spool.path.read_bytes()
    spool.mark_synced(a.record_id, "run-123")
    assert spool.path.read_bytes().startswith(before)  # appended, never rewritten
    assert [r.record_id for r in spool.pending()] == [b.record_id]
    lines = spool.path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[2])["mlflow_run_id"] == "run-123"


def test_spool_skips_truncated_last_line(tmp_path, caplog):
    spool = Spool(tmp_path / "spool.jsonl")
    a, b = make_record(run_name="a"), make_record(run_name="b")
    spool.append(a)
    line_b = json.dumps({"kind": "record", "record": b.to_dict()})
    with open(spool.path, "a") as fh:  # a process killed half-way through its write
        fh.write(line_b[: len(line_b) // 2])

    with caplog.at_level(logging.WARNING, logger="sparkctl.tracking.spool"):
        pending = spool.pending()
    assert [r.record_id for r in pending] == [a.record_id]
    assert "truncated" in caplog.text

    # The next append starts on a fresh line: the damage stays confined to one line.
    c = make_record(run_name="c")
    spool.append(c)
    assert [r.record_id for r in spool.pending()] == [a.record_id, c.record_id]


def _append_many(path: str, n: int) -> None:
    spool = Spool(path)
    big = "x" * 20_000  # larger than a pipe buffer, so unlocked writes could interleave
    for i in range(n):
        spool.append(make_record(run_name=f"r{i}", artifacts={"big.txt": big}))


def test_spool_concurrent_processes_do_not_interleave(tmp_path):
    path = str(tmp_path / "spool.jsonl")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, 15)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    lines = Path(path).read_text().splitlines()
    assert len(lines) == 60
    for line in lines:
        json.loads(line)
    assert len(Spool(path).pending()) == 60


# -- spool + MLflow ---------------------------------------------------------------------


def test_record_run_writes_and_marks_synced(tmp_path, mlflow_store):
    spool = Spool(tmp_path / "spool.jsonl")
    rec = make_record()
    result = record_run(rec, spool, mlflow_store)
    assert result.synced and result.spooled and result.error is None
    assert result.run_id == mlflow_store.search_runs()[0]["run_id"]
    assert spool.pending() == []
    assert "recorded in MLflow" in result.message


def test_mlflow_down_keeps_run_in_spool_then_sync_replays(tmp_path, mlflow_store):
    import mlflow  # noqa: F401  (import cost is not what this test times)

    spool = Spool(tmp_path / "spool.jsonl")
    down = MlflowStore(closed_port_uri(), None, TEST_EXPERIMENT, timeout_s=2)
    rec = make_record()

    started = time.monotonic()
    result = record_run(rec, spool, down)
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"an unreachable server took {elapsed:.1f} s"
    assert not result.synced and result.spooled and not result.lost
    assert result.run_id is None
    assert "unreachable" in result.error
    assert str(spool.path) in result.message and "kept in spool" in result.message
    assert [r.record_id for r in spool.pending()] == [rec.record_id]

    # Still down: sync stops at the first unreachable error instead of timing out per record.
    spool.append(make_record(run_name="second"))
    started = time.monotonic()
    synced, failed = sync_pending(spool, down)
    assert time.monotonic() - started < 5
    assert synced == 0
    assert [rid for rid, _ in failed] == [r.record_id for r in spool.pending()]
    assert "not attempted" in failed[1][1]

    # Back up (a working store): everything is replayed and the spool drains.
    synced, failed = sync_pending(spool, mlflow_store)
    assert (synced, failed) == (2, [])
    assert spool.pending() == []
    runs = {r["tags"][RECORD_ID_TAG]: r for r in mlflow_store.search_runs()}
    assert runs[rec.record_id]["params"] == rec.params
    assert runs[rec.record_id]["status"] == "FINISHED"
    assert sync_pending(spool, mlflow_store) == (0, [])
