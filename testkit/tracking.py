"""Real MLflow on real SQLite files, for the tracking tests and the benchmarks: the store
fixtures and a bench that records into a store.

A fresh SQLite store runs ~70 schema migrations (6-9 s), so one template database is
migrated per session and each test gets its own copy. Import the fixtures into a test
module with ``from testkit.tracking import mlflow_template_db, mlflow_store``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri

TEST_EXPERIMENT = "sparkctl-test"


@pytest.fixture(scope="session")
def mlflow_template_db(tmp_path_factory) -> Path:
    """Path of a migrated, empty MLflow SQLite database (do not write to it)."""
    folder = tmp_path_factory.mktemp("mlflow-template")
    store = MlflowStore(default_tracking_uri(folder), None, TEST_EXPERIMENT)
    assert store.search_runs() == []  # creates the tables; the experiment does not exist yet
    db = folder / DB_FILE_NAME
    assert db.is_file()
    return db


def copy_template_store(template_db: Path, folder: Path) -> MlflowStore:
    """An ``MlflowStore`` on a copy of the migrated template database in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        src = template_db.with_name(template_db.name + suffix)
        if src.exists():
            shutil.copy2(src, folder / src.name)
    return MlflowStore(default_tracking_uri(folder), None, TEST_EXPERIMENT)


@pytest.fixture
def mlflow_store(mlflow_template_db: Path, tmp_path: Path) -> MlflowStore:
    """An ``MlflowStore`` on a private copy of the template database in ``tmp_path``
    (artifacts go to ``tmp_path/artifacts``)."""
    return copy_template_store(mlflow_template_db, tmp_path / "mlflow")


def recording_bench(engine_url: str, store: MlflowStore, spool_path: Path, make_engine=None, **settings):
    """``async bench(*models)``: the REAL BenchRunner against the engine at ``engine_url``
    (tests pass the FAKE Ollama, or `make_engine(url)` for another adapter), Spark-like FAKE
    probes, every run recorded through sparkctl's own recorder (spool, then ``store``).
    ``settings`` override BenchSettings."""
    from dataclasses import replace

    from sparkctl.config import Config, TrackingConfig
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.services.bench import BenchRunner, BenchSettings
    from sparkctl.tracking.spool import Spool
    from sparkctl.tracking.sync import record_run
    from testkit.fakes.host import FakeProbes, spark_snapshot

    cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    spool = Spool(spool_path)
    s = replace(BenchSettings.from_config(cfg.bench), **{"think": False, "timeout_s": 30.0, **settings})

    async def bench(*models: str):
        engine = make_engine(engine_url) if make_engine is not None else OllamaEngine(engine_url, timeout=5.0)
        try:
            runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s,
                                 recorder=lambda rec: record_run(rec, spool, store))
            return await runner.run(list(models))
        finally:
            await engine.close()

    return bench
