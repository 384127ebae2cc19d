"""sparkctl's SQLite reader answers exactly what MLflow's client answers, at the schema
revision of EVERY MLflow release pyproject admits (3.7 to 3.17), not only the installed one.

Each fixture under tests/data/mlflow_stores/ was made by scripts/mlflow_store_fixtures.py
run with that release's own interpreter (a throwaway virtualenv): sparkctl's test runs
(tests/integration/history_cases.py) written through that release's client into a fresh
store, the store dumped as SQL, and that client's answers to every search recorded beside
it. Here each store is rebuilt from its SQL and read by the reader, with MLflow never
imported; its answers must equal the recorded ones. The installed release is also checked
live by tests/integration/test_history_readers.py."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from sparkctl.tracking.sqlite_reader import KNOWN_REVISIONS, SqliteRunReader
from sparkctl.tracking.store import MlflowStore, TrackingError
from tests.integration.history_cases import TEST_EXPERIMENT, plain

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "mlflow_stores"
RECORDED = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.json.gz"))


def _load(revision: str) -> dict:
    with gzip.open(FIXTURES / f"{revision}.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _rebuild(revision: str, folder: Path) -> Path:
    """The store as that release wrote it, from its SQL dump."""
    db = folder / "mlflow.db"
    with gzip.open(FIXTURES / f"{revision}.sql.gz", "rt", encoding="utf-8") as fh:
        script = fh.read()
    con = sqlite3.connect(db)
    try:
        con.executescript(script)
    finally:
        con.close()
    return db


def _pages(reads, filter_string, order_by, size) -> list:
    pages, token = [], None
    while True:
        page, token = reads.search_runs_page(filter_string, order_by, size, token)
        pages.append(plain(page))
        if not token:
            return pages


def test_every_admitted_release_has_a_recorded_store_and_nothing_else_is_known():
    assert set(RECORDED) == set(KNOWN_REVISIONS)
    for revision in RECORDED:
        rec = _load(revision)
        assert rec["revision"] == revision
        # the reader's idea of the schema is the one that release made
        assert KNOWN_REVISIONS[revision].workspaces == ("workspace" in rec["columns"]["experiments"]), revision
        # the run tables the reader queries have every column it names
        cols = rec["columns"]
        assert {"run_uuid", "name", "experiment_id", "status", "start_time", "end_time", "artifact_uri",
                "lifecycle_stage"} <= set(cols["runs"])
        assert {"run_uuid", "key", "value", "is_nan"} <= set(cols["latest_metrics"])
        assert {"run_uuid", "key", "value", "is_nan", "step", "timestamp"} <= set(cols["metrics"])


@pytest.mark.parametrize("revision", RECORDED)
def test_the_reader_answers_as_that_releases_client(revision, tmp_path):
    rec = _load(revision)
    db = _rebuild(revision, tmp_path)
    reads = MlflowStore(f"sqlite:///{db}", None, TEST_EXPERIMENT).without_mlflow()  # never imports MLflow
    runs = rec["runs"]  # each run as that client read it; pages hold run ids
    for case in rec["searches"]:
        for size, pages in case["pages"].items():
            expected = [[runs[run_id] for run_id in page] for page in pages]
            got = _pages(reads, case["filter"], case["order_by"], int(size))
            assert got == expected, f"MLflow {rec['mlflow']}: {case['filter']!r} {case['order_by']} by {size}"
    assert plain(reads.search_runs(experiment="other")) == [runs[i] for i in rec["other_experiment"]]
    assert reads.search_runs(experiment="no-such") == rec["missing_experiment"] == []
    reader = SqliteRunReader(db)
    for run_id, keys in rec["histories"].items():
        for key, points in keys.items():
            got = [[s, t, "NaN" if v != v else v] for s, t, v in reader.metric_points(run_id, key)]
            assert got == points, f"MLflow {rec['mlflow']}: history of {key} in {run_id}"
    assert sum(map(len, rec["searches"][0]["pages"]["100"])) == 23  # not vacuous: 24 runs, one deleted


@pytest.mark.parametrize("revision", [r for r in RECORDED if KNOWN_REVISIONS[r].workspaces])
def test_an_experiment_of_that_name_in_another_workspace_is_met_as_the_client_met_it(revision, tmp_path):
    """Since MLflow 3.10 a name is unique per workspace. With workspaces off the client
    refuses a store that holds experiments outside the default one; the reader does not
    answer from whichever experiment of that name comes first, it refuses alike."""
    rec = _load(revision)
    probe = rec["workspace"]
    assert probe["has_column"]
    db = _rebuild(revision, tmp_path)
    with sqlite3.connect(db) as con:
        (exp_id,) = con.execute("SELECT max(experiment_id) + 1 FROM experiments").fetchone()
        con.execute("INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, "
                    "creation_time, last_update_time, workspace) VALUES (?, ?, 'file:///nowhere', 'active', 1, 1, ?)",
                    (exp_id, TEST_EXPERIMENT, probe["foreign_workspace"]))
    store = MlflowStore(f"sqlite:///{db}", None, TEST_EXPERIMENT)
    if "error" in probe["client"]:
        assert "workspace" in probe["client"]["error"].lower()
        with pytest.raises(TrackingError, match="outside MLflow's default workspace: set MLFLOW_ENABLE_WORKSPACES"):
            store.without_mlflow().search_runs()
    else:  # that release read the default workspace's experiment
        assert len(store.without_mlflow().search_runs()) == probe["client"]["runs"]
