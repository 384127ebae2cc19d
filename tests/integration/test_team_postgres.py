"""A team's MLflow on PostgreSQL, for real: a private cluster of Debian's PostgreSQL
(tests/integration/postgres.py), a REAL `mlflow server` with it as backend store and a
shared artifact root, and two sparkctl "hosts" benching and evaluating at the same time.
The tracking server and its database are both stopped in the middle of a bench and started
again: every run is written afterwards from the hosts' spools (nothing lost).
The engine is the FAKE Ollama (testkit/fakes/ollama_server.py); each host's name and GPU come
from FAKE probes (testkit/fakes/host.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import httpx
import psutil
import pytest

from sparkctl.config import Config, EvalConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, RepStarted
from sparkctl.services.evals import EvalRunner, EvalSettings, load_suite
from sparkctl.services.runs import list_runs
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import MlflowStore
from sparkctl.tracking.sync import record_run, sync_pending
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.postgres import PostgresCluster
from tests.integration.test_eval import gold_of, write_gsm8k
from tests.integration.test_team_server import MlflowServer

EXPERIMENT = "team-postgres"
MODEL = "llama3.2:3b"


@pytest.fixture
def postgres():
    cluster = PostgresCluster()
    try:
        cluster.start()
        cluster.create_database()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_server(postgres, tmp_path):
    server = MlflowServer(tmp_path / "mlflow", tmp_path / "artifacts", backend_uri=postgres.uri,
                          env={"PGPASSFILE": str(postgres.pgpass)})
    t0 = time.monotonic()
    server.start()  # the first start creates MLflow's tables in PostgreSQL
    ready(server)
    server.first_start_s = time.monotonic() - t0
    try:
        yield server
    finally:
        server.stop()


def ready(server) -> None:
    """Wait until the server answers from its store, not only its /health: the first query
    after a start opens its database connections (seconds on a busy machine)."""
    r = httpx.post(f"{server.url}/api/2.0/mlflow/experiments/search", json={"max_results": 1}, timeout=120)
    assert r.status_code == 200, r.text


class Host:
    """One Spark: its hostname, its own spool, its own client of the team's server."""

    def __init__(self, name: str, url: str, suites, tmp_path) -> None:
        self.name = name
        self.cfg = Config(tracking=TrackingConfig(uri=url, experiment=EXPERIMENT),
                          eval=EvalConfig(suites_dir=str(suites)))
        self.spool = Spool(tmp_path / f"{name}.jsonl")
        self.store = MlflowStore(url, None, EXPERIMENT, timeout_s=3)
        self.probes = FakeProbes(dataclasses.replace(spark_snapshot(), hostname=name))

    def record(self, rec):
        return record_run(rec, self.spool, self.store)

    async def bench(self, engine_url: str, sink=None):
        s = dataclasses.replace(BenchSettings.from_config(self.cfg.bench), warmup=0, reps=3, num_predict=12,
                                think=False)
        engine = OllamaEngine(engine_url, timeout=5.0)
        try:
            (run,) = await BenchRunner(self.cfg, engine, self.probes, s, sink=sink, recorder=self.record).run([MODEL])
            return run
        finally:
            await engine.close()

    async def eval(self, engine_url: str):
        suite = load_suite(self.cfg, "gsm8k")
        s = EvalSettings.from_config(self.cfg, suite.name, n=6, seed=3, think=False)
        engine = OllamaEngine(engine_url, timeout=5.0)
        try:
            (run,) = await EvalRunner(self.cfg, engine, self.probes, s, suite, recorder=self.record,
                                      journal=self.spool.journal).run([MODEL])
            return run
        finally:
            await engine.close()


async def test_two_hosts_bench_and_eval_on_a_postgres_backed_server_and_a_restart_loses_nothing(
        postgres, pg_server, serve, tmp_path):
    def engine():  # each Spark has its own engine (one bench per engine at a time)
        state = bench_scenario(tokens_per_s=None)
        state.answers = lambda model, prompt: (f"The answer is {gold_of(prompt)}." if gold_of(prompt) else None)
        return serve(state)

    ollama_a, ollama_b = engine(), engine()
    suites = write_gsm8k(tmp_path / "suites")
    a = Host("spark-01", pg_server.url, suites, tmp_path)
    b = Host("spark-02", pg_server.url, suites, tmp_path)

    # the password is in the pgpass file only: not on the server's command line
    cmdline = " ".join(psutil.Process(pg_server.proc.pid).cmdline())
    assert postgres.uri in cmdline and postgres.password not in cmdline

    down = {}

    def outage(ev):
        # spark-02's bench, after its first repetition: the server and its database go away
        if isinstance(ev, RepStarted) and ev.index == 1 and not down:
            down["at"] = time.monotonic()
            pg_server.stop()
            postgres.stop()

    async def host_a():
        return [await a.bench(ollama_a.url), await a.eval(ollama_a.url)]

    async def host_b():
        await asyncio.sleep(0.2)  # A's bench is under way: the two write at the same time
        return [await b.bench(ollama_b.url, sink=outage), await b.eval(ollama_b.url)]

    runs_a, runs_b = await asyncio.gather(host_a(), host_b())
    assert down, "the outage never happened"
    assert all(r.status == "FINISHED" for r in runs_a + runs_b)
    spooled = [r for r in runs_a + runs_b if r.run_id is None]
    assert len(spooled) >= 2  # at least spark-02's bench and eval waited in its spool
    assert all("kept in spool" in r.sync_message for r in spooled)

    postgres.start()  # the same cluster, the same data
    pg_server.start()  # the same port
    ready(pg_server)
    for host in (a, b):
        # `sparkctl sync` as a user runs it; a server just restarted may answer slowly at first
        store = MlflowStore(pg_server.url, None, EXPERIMENT, timeout_s=30)
        pending = len(host.spool.pending())
        synced, failed = sync_pending(host.spool, store)
        assert (synced, failed) == (pending, [])
        assert host.spool.pending() == []

    rows = list_runs(store, limit=50)
    assert sorted((r.host, r.kind) for r in rows) == [
        ("spark-01", "bench"), ("spark-01", "eval"), ("spark-02", "bench"), ("spark-02", "eval")]
    for run, host in [(runs_b[0], "spark-02"), (runs_a[0], "spark-01")]:
        (row,) = [r for r in rows if r.host == host and r.kind == "bench"]
        assert row.status == "FINISHED" and row.decode_tps_median == pytest.approx(run.summary["decode_tps_median"])
        assert len(store.metric_history(row.run_id, "engine_decode_tps")) == 3
    for host in ("spark-01", "spark-02"):
        (row,) = [r for r in rows if r.host == host and r.kind == "eval"]
        assert row.eval_items == 6 and row.gsm8k_strict == 1.0  # the fake answers every item right
        # the items file went to the shared artifact root, through the server
        assert len(store.read_artifact(row.run_id, "items.jsonl").splitlines()) == 6
    log = pg_server.log.read_text(errors="replace")
    assert postgres.password not in log
    print(f"mlflow server's first start on PostgreSQL (tables created): {pg_server.first_start_s:.1f} s")
