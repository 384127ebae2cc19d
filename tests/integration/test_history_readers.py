"""Run history read without MLflow: sparkctl's read-only SQLite reader and its REST reader
give exactly what MLflow's own client gives, on a REAL MLflow SQLite store and a REAL
`mlflow server` (tests/integration/test_team_server.py starts it), and the reader steps
aside (to the client) whenever it cannot be sure.

The runs are written through MLflow's client (MlflowStore.write: params, tags, step and
summary metrics, artifacts), then every read is asked twice: of a store that uses the
reader and of one that never does (``fast_reads=False``, MLflow's client alone)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sqlite3

import pytest

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.sqlite_reader import KNOWN_REVISIONS
from sparkctl.tracking.store import MlflowStore, NeedsMlflow, TrackingError, sqlite_path
from tests.integration.history_cases import SEARCHES, plain, records
from tests.integration.test_team_server import MlflowServer
from testkit.tracking import (  # noqa: F401  (pytest fixtures)
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
)


@pytest.fixture(scope="module")
def stores(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """(reader store, client-only store) over one SQLite file of 24 runs (one deleted)
    in the test experiment and one run in another experiment."""
    folder = tmp_path_factory.mktemp("readers")
    fast = copy_template_store(mlflow_template_db, folder)
    ids = [fast.write(r) for r in records()]
    fast.write(RunRecord(experiment="other", run_name="elsewhere", start_ms=1, end_ms=2,
                         tags={"model.name": "qwen3:8b"}))
    from mlflow import MlflowClient

    MlflowClient(fast.uri).delete_run(ids[4])
    slow = MlflowStore(fast.uri, None, TEST_EXPERIMENT, fast_reads=False)
    return fast, slow, ids


def _pages(store, filter_string, order_by, size):
    pages, token = [], None
    while True:
        page, token = store.search_runs_page(filter_string, order_by, size, token)
        pages.append(plain(page))
        if not token:
            return pages


@pytest.mark.parametrize("filter_string,order_by", SEARCHES)
def test_sqlite_reader_pages_exactly_as_mlflow_client(stores, filter_string, order_by):
    fast, slow, ids = stores
    filter_string = filter_string.format(run_id=ids[2])
    for size in (5, 100):
        got = _pages(fast, filter_string, order_by, size)
        assert got == _pages(slow, filter_string, order_by, size)
        assert sum(map(len, got)) > 0  # every search here finds something: no vacuous match


def test_sqlite_reader_answers_without_mlflow_what_the_client_answers(stores):
    """Through the dashboard's reads, in a process where MLflow's client could not be
    used: the same runs, metric histories; a missing experiment has no runs."""
    fast, slow, ids = stores
    light = fast.without_mlflow()
    assert plain(light.search_runs(max_results=50)) == plain(slow.search_runs(max_results=50))
    assert light.search_runs(experiment="no-such") == []
    for run_id in ids[:8]:
        assert str(light.metric_history(run_id, "engine_decode_tps")) == str(
            slow.metric_history(run_id, "engine_decode_tps"))
        assert str(fast.metric_steps(run_id, "engine_decode_tps")) == str(
            slow.metric_steps(run_id, "engine_decode_tps"))
        # per-repetition figures with gaps line up by step (compare's acceptance, issue 22)
        assert fast.metric_steps(run_id, "spec_acceptance_pct") == slow.metric_steps(run_id, "spec_acceptance_pct")
        assert light.metric_history(run_id, "spec_acceptance_pct") == slow.metric_history(
            run_id, "spec_acceptance_pct")
    assert fast.metric_steps(ids[1], "spec_acceptance_pct") == {1: 61.0, 3: 58.5}  # not vacuous
    assert light.metric_history(ids[0], "no-such-metric") == slow.metric_history(ids[0], "no-such-metric") == []
    assert fast.read_artifact(ids[1], "items.jsonl") == slow.read_artifact(ids[1], "items.jsonl")


def test_imported_community_runs_read_as_mlflow_client_reads_them(stores, tmp_path):
    """llama-benchy imports (issue 22): `runs --kind import`, `compare --community`'s figures
    and a run looked up by id give the same through the reader as through MLflow's client."""
    from sparkctl.services.imports import community, llama_benchy
    from sparkctl.services.runs.query import list_runs
    from tests.integration.test_community_formats import benchy_json

    fast, slow, _ = stores
    store = MlflowStore(fast.uri, None, "imports")
    client_only = MlflowStore(fast.uri, None, "imports", fast_reads=False)
    path = tmp_path / "gpt.json"
    path.write_text(json.dumps(benchy_json([60.0, 59.5, 60.4], [3790.0, 3770.0])))
    report, sha = llama_benchy.read(path)
    for record in llama_benchy.records(report, sha, path.name, experiment="imports", now_ms=1_700_000_000_000,
                                       model="llama3.2:3b", engine_kind="llama.cpp"):
        store.write(record)
    imported = list_runs(store.without_mlflow(), kind="import")
    assert len(imported) == 2 and imported == list_runs(client_only, kind="import")
    for depth in (0, 4096):
        got = community.figures(store.without_mlflow(), "llama3.2:3b", depth=depth)
        assert len(got) == 1 and got == community.figures(client_only, "llama3.2:3b", depth=depth)


def test_the_installed_mlflow_writes_a_schema_the_reader_knows(mlflow_template_db):  # noqa: F811
    """Fails when the installed MLflow is outside the releases the reader knows: record its
    store (docs/development.md, "MLflow releases the readers know") and add its revision."""
    with sqlite3.connect(mlflow_template_db) as con:
        (revision,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision in KNOWN_REVISIONS, f"MLflow's schema is now at {revision}: check sqlite_reader.py against it"


def test_an_unknown_schema_revision_is_left_to_mlflow(stores, tmp_path):
    """A file at another revision (written by a newer MLflow here): the reader does not
    guess; MLflow's client answers, which here is its one-line error, and the reads that
    must not import MLflow say they cannot answer."""
    fast, _, _ = stores
    shutil.copy2(sqlite_path(fast.uri), tmp_path / "mlflow.db")
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", None, TEST_EXPERIMENT)
    with pytest.raises(NeedsMlflow):
        store.without_mlflow().search_runs()
    with pytest.raises(TrackingError, match="MLflow database"):
        store.search_runs()


def test_reads_leave_the_database_file_as_it_was(stores):
    fast, _, ids = stores
    db = sqlite_path(fast.uri)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    fast.without_mlflow().search_runs("tags.`model.name` ILIKE '%qwen3'")
    fast.metric_history(ids[0], "engine_decode_tps")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not db.with_name(db.name + "-journal").exists()


def test_a_store_not_created_yet_has_no_runs_and_is_not_created(tmp_path):
    store = MlflowStore(f"sqlite:///{tmp_path / 'data' / 'mlflow.db'}", None, TEST_EXPERIMENT)
    assert store.without_mlflow().search_runs() == []
    assert not (tmp_path / "data").exists()


@pytest.fixture(scope="module")
def server_stores(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """A REAL `mlflow server` over a copy of the template database, holding the same runs."""
    folder = tmp_path_factory.mktemp("rest")
    db = folder / "team.db"
    shutil.copy2(mlflow_template_db, db)
    server = MlflowServer(db, folder / "artifacts").start()
    try:
        fast = MlflowStore(server.url, None, TEST_EXPERIMENT, timeout_s=10)
        ids = [fast.write(r) for r in records()[:10]]
        yield fast, MlflowStore(server.url, None, TEST_EXPERIMENT, timeout_s=10, fast_reads=False), ids
    finally:
        server.stop()


@pytest.mark.parametrize("filter_string,order_by", SEARCHES[:8] + SEARCHES[13:15])
def test_rest_reader_pages_exactly_as_mlflow_client(server_stores, filter_string, order_by):
    fast, slow, _ = server_stores
    assert _pages(fast, filter_string, order_by, 4) == _pages(slow, filter_string, order_by, 4)


def test_rest_reader_reads_histories_and_artifacts_as_mlflow_client(server_stores):
    fast, slow, ids = server_stores
    light = fast.without_mlflow()
    assert plain(light.search_runs()) == plain(slow.search_runs())
    for run_id in ids[:4]:
        assert str(light.metric_history(run_id, "engine_decode_tps")) == str(
            slow.metric_history(run_id, "engine_decode_tps"))
        assert str(fast.metric_steps(run_id, "engine_decode_tps")) == str(
            slow.metric_steps(run_id, "engine_decode_tps"))
        assert fast.metric_steps(run_id, "spec_acceptance_pct") == slow.metric_steps(run_id, "spec_acceptance_pct")
    assert fast.metric_steps(ids[1], "spec_acceptance_pct") == {1: 61.0, 3: 58.5}
    assert fast.read_artifact(ids[1], "items.jsonl") == slow.read_artifact(ids[1], "items.jsonl")
    assert light.metric_history(ids[0], "no-such-metric") == slow.metric_history(ids[0], "no-such-metric") == []


def test_rest_reader_says_a_server_that_went_away_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connection refused
    store = MlflowStore(f"http://127.0.0.1:{port}/", None, TEST_EXPERIMENT, timeout_s=2)
    with pytest.raises(TrackingError) as info:
        store.without_mlflow().search_runs()
    assert info.value.unreachable and "unreachable" in str(info.value)


def test_an_experiment_of_that_name_in_another_workspace_is_refused_as_the_client_refuses_it(stores, tmp_path):
    """MLflow 3.10+ keeps experiments per workspace. A store holding one outside the
    default workspace (here of the same name, with its own run) is refused by MLflow's
    client while workspaces are off; the reader gives the same one-line refusal instead of
    answering from whichever experiment of that name it met first."""
    fast, _, _ = stores
    shutil.copy2(sqlite_path(fast.uri), tmp_path / "mlflow.db")
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        (exp_id,) = con.execute("SELECT max(experiment_id) + 1 FROM experiments").fetchone()
        con.execute("INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, creation_time, "
                    "last_update_time, workspace) VALUES (?, ?, 'file:///nowhere', 'active', 1, 1, 'team-b')",
                    (exp_id, TEST_EXPERIMENT))
        con.execute("INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
                    "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id) VALUES "
                    "('f' || hex(randomblob(15)), 'team run', 'LOCAL', '', '', 'u', 'FINISHED', 1, 2, '', 'active', "
                    "'file:///nowhere', ?)", (exp_id,))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(TrackingError) as by_client:
        MlflowStore(uri, None, TEST_EXPERIMENT, fast_reads=False).search_runs()
    with pytest.raises(TrackingError) as by_reader:
        MlflowStore(uri, None, TEST_EXPERIMENT).without_mlflow().search_runs()
    assert str(by_reader.value) == str(by_client.value)
    assert "outside MLflow's default workspace: set MLFLOW_ENABLE_WORKSPACES=true" in str(by_reader.value)


def test_rest_reader_leaves_a_named_workspace_to_mlflow_s_client(monkeypatch):
    """MLflow's client sends MLFLOW_WORKSPACE in a header that scopes the server's answers;
    the REST reader does not guess it: the reads that must not import MLflow say so."""
    monkeypatch.setenv("MLFLOW_WORKSPACE", "team-b")
    store = MlflowStore("http://127.0.0.1:9/", None, TEST_EXPERIMENT, timeout_s=2)
    with pytest.raises(NeedsMlflow, match="MLFLOW_WORKSPACE names an MLflow workspace"):
        store.without_mlflow().search_runs()
