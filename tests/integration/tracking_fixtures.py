"""Fixtures for the tracking tests: real MLflow on real SQLite files.

A fresh SQLite store runs ~70 schema migrations (6-9 s), so one template database is
migrated per session and each test gets its own copy. Import the fixtures into a test
module with ``from tests.integration.tracking_fixtures import mlflow_template_db,
mlflow_store``.
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


@pytest.fixture
def mlflow_store(mlflow_template_db: Path, tmp_path: Path) -> MlflowStore:
    """An ``MlflowStore`` on a private copy of the template database in ``tmp_path``
    (artifacts go to ``tmp_path/artifacts``)."""
    folder = tmp_path / "mlflow"
    folder.mkdir()
    for suffix in ("", "-wal", "-shm", "-journal"):
        src = mlflow_template_db.with_name(mlflow_template_db.name + suffix)
        if src.exists():
            shutil.copy2(src, folder / src.name)
    return MlflowStore(default_tracking_uri(folder), None, TEST_EXPERIMENT)
