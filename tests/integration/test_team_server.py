"""A team's MLflow: a REAL `mlflow server` process on a loopback port (SQLite backend, copied
from the migrated template), written to by two sparkctl hosts, stopped and restarted in
the middle of a bench. The engine is the FAKE Ollama (testkit/fakes/ollama_server.py); the
host names come from FAKE probes (testkit/fakes/host.py), one per "Spark"."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, RepStarted
from sparkctl.services.runs import list_runs
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import MlflowStore
from sparkctl.tracking.sync import record_run, sync_pending
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import mlflow_template_db  # noqa: F401

EXPERIMENT = "team-bench"


class MlflowServer:
    """`mlflow server` on a loopback port over the SQLite file ``db``, or over
    ``backend_uri`` (PostgreSQL: tests/integration/test_team_postgres.py) with ``env``."""

    def __init__(self, db: Path, artifacts: Path, backend_uri: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.db, self.artifacts = db, artifacts
        self.backend_uri = backend_uri or f"sqlite:///{db}"
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.log = db.with_suffix(".log")

    def start(self) -> "MlflowServer":
        mlflow = Path(sys.executable).with_name("mlflow")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(mlflow), "server", "--backend-store-uri", self.backend_uri, "--artifacts-destination",
                 str(self.artifacts), "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **self.env})
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "mlflow server did not come up in 90 s"
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


@pytest.fixture
def team_server(mlflow_template_db, tmp_path):  # noqa: F811
    db = tmp_path / "team.db"
    shutil.copy2(mlflow_template_db, db)  # migrated already: the server starts in seconds
    server = MlflowServer(db, tmp_path / "artifacts").start()
    try:
        yield server
    finally:
        server.stop()


async def bench_from(host_name: str, server_url: str, ollama, spool: Spool, *, sink=None):
    cfg = Config(tracking=TrackingConfig(uri=server_url, experiment=EXPERIMENT))
    store = MlflowStore(server_url, None, EXPERIMENT, timeout_s=3)
    probes = FakeProbes(dataclasses.replace(spark_snapshot(), hostname=host_name))
    s = dataclasses.replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=3, num_predict=12, think=False)
    engine = OllamaEngine(ollama.url, timeout=5.0)
    try:
        runner = BenchRunner(cfg, engine, probes, s, sink=sink, recorder=lambda rec: record_run(rec, spool, store))
        (run,) = await runner.run(["llama3.2:3b"])
        return run, store
    finally:
        await engine.close()


async def test_two_sparks_write_to_one_server_and_a_restart_loses_nothing(team_server, serve, tmp_path):
    ollama = serve(bench_scenario(tokens_per_s=None))
    spool_a, spool_b = Spool(tmp_path / "a.jsonl"), Spool(tmp_path / "b.jsonl")

    run_a, store = await bench_from("spark-01", team_server.url, ollama, spool_a)
    assert run_a.run_id and spool_a.pending() == []

    # spark-02's bench: the server goes away after its first repetition
    def stop_server(ev):
        if isinstance(ev, RepStarted) and ev.index == 1:
            team_server.stop()

    run_b, _ = await bench_from("spark-02", team_server.url, ollama, spool_b, sink=stop_server)
    assert run_b.status == "FINISHED" and len(run_b.reps) == 3
    assert run_b.run_id is None and "kept in spool" in run_b.sync_message  # not lost: spooled
    (pending,) = spool_b.pending()

    team_server.start()  # same port, same database
    synced, failed = sync_pending(spool_b, MlflowStore(team_server.url, None, EXPERIMENT))
    assert (synced, failed) == (1, [])

    rows = list_runs(MlflowStore(team_server.url, None, EXPERIMENT))
    assert sorted(r.host for r in rows) == ["spark-01", "spark-02"]
    b = next(r for r in rows if r.host == "spark-02")
    assert b.status == "FINISHED" and b.decode_tps_median == pytest.approx(run_b.summary["decode_tps_median"])
