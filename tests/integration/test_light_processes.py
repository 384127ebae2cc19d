"""What the dashboard, `sparkctl status` and the history commands load, seen in REAL child
processes: each answers as before, without importing MLflow (~2 s and ~180 MB), Textual
where it shows nothing, or the `ollama` client (its pydantic models, ~0.3 s) where plain
HTTP is enough. The engine is the FAKE Ollama (testkit/fakes/ollama_server.py, real HTTP);
the store a REAL MLflow SQLite file written by the REAL BenchRunner through sparkctl's
recorder. No timing is asserted: the budgets are measured by benchmarks/ (make bench)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.fakes.ollama_server import FakeOllama, bench_scenario, two_models_resident
from testkit.tracking import (  # noqa: F401  (pytest fixtures)
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
    recording_bench,
)

REPO = Path(__file__).resolve().parents[2]
A, B = "llama3.2:3b", "qwen3:8b"
NEVER = {"mlflow", "ollama", "pydantic"}


def _child(code: str, env: dict, cwd: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``code`` in a fresh interpreter; also the top-level names of every module it loaded."""
    out = cwd / "modules.json"
    wrapper = ("import atexit, json, sys\n"
               f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n" + code)
    done = subprocess.run([sys.executable, "-c", wrapper], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return done, {m.split(".")[0] for m in json.loads(out.read_text())}


def _cli(args: list[str], env: dict, cwd: Path):
    return _child(f"from sparkctl.cli import main\nsys.exit(main({args!r}))", env, cwd)


@pytest.fixture(scope="module")
def history(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """A and B benched on Ollama 0.12.6 (the FAKE engine) into a REAL SQLite store, and a
    config that names it, with A as the production lane."""
    folder = tmp_path_factory.mktemp("light")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        bench = recording_bench(server.url, store, folder / "spool.jsonl", warmup=0, reps=3, num_predict=12)
        asyncio.run(bench(A))
        asyncio.run(bench(B))
    finally:
        server.stop()
    config = folder / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n\n'
                      f'[lanes]\nproduction = "{A}"\n')
    return folder, config


def test_runs_and_compare_answer_from_sqlite_without_importing_mlflow(history, tmp_path):
    folder, config = history
    env = {"SPARKCTL_CONFIG": str(config)}
    done, mods = _cli(["runs", "--json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["model"] for r in json.loads(done.stdout)) == [A, B]
    assert not mods & NEVER, mods & NEVER
    done, mods = _cli(["compare", A, B, "--json", "--community"], env, tmp_path)  # --community: issue 22
    assert done.returncode == 0, done.stderr
    assert [m["model"] for m in json.loads(done.stdout)["models"]] == [A, B]
    assert json.loads(done.stdout)["community"] == []  # asked of the store, found no imports
    assert not mods & NEVER, mods & NEVER


def test_status_json_answers_without_mlflow_textual_or_the_ollama_client(tmp_path):
    server = FakeOllama(two_models_resident()).start()
    try:
        done, mods = _cli(["status", "--json"], {"OLLAMA_HOST": server.url}, tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["engine"]["reachable"] and [r["name"] for r in report["resident"]] == ["gpt-oss:120b",
                                                                                       "qwen3:30b-a3b"]
    assert not mods & (NEVER | {"textual"}), mods & (NEVER | {"textual"})


DASHBOARD = """
import asyncio
from sparkctl.config import load_config
from sparkctl.tui.app import make_app

async def run():
    app = make_app(load_config(None))  # the real engine, probes and tracking, from the config
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(1200):
            if app.report is not None and app.report.engine.reachable and app.stale_lanes:
                break
            await pilot.pause(0.05)
        table = app.screen.query_one("#resident")
        print(json.dumps({"rows": [str(table.get_cell_at((i, 0))) for i in range(table.row_count)],
                          "note": app.screen.query_one("#warnings").text}))

asyncio.run(run())
"""


def test_dashboard_shows_the_engine_change_note_without_importing_mlflow(history, tmp_path):
    """The engine moved to 0.13.0 since A (the production lane) was benched on 0.12.6: the
    dashboard says so, reading the SQLite store itself, and its process never loads MLflow
    or the ollama client."""
    _, config = history
    state = two_models_resident()
    state.version = "0.13.0"
    server = FakeOllama(state).start()
    try:
        done, mods = _child(DASHBOARD, {"SPARKCTL_CONFIG": str(config), "OLLAMA_HOST": server.url}, tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["rows"] == ["gpt-oss:120b", "qwen3:30b-a3b"]
    assert "engine 0.13.0 since last bench of production (0.12.6): re-bench" in shown["note"]
    assert not mods & NEVER, mods & NEVER


def test_engine_change_note_asks_a_child_process_where_the_reader_cannot(history, monkeypatch):
    """A store only MLflow's client can read (here: a schema revision the reader is told it
    does not know): the note is still made, by a short-lived child process."""
    from sparkctl.services.runs.drift import engine_change_notes
    from sparkctl.tracking import sqlite_reader
    from sparkctl.tracking.store import MlflowStore, NeedsMlflow

    folder, _ = history
    store = MlflowStore(f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}", None, TEST_EXPERIMENT)
    monkeypatch.setattr(sqlite_reader, "KNOWN_REVISIONS", frozenset())
    with pytest.raises(NeedsMlflow):
        store.without_mlflow().search_runs()
    notes = engine_change_notes(store, {"production": A, "fast": B}, "ollama", "0.13.0")
    # (lane, message, whether there is a bench to repeat: the dashboard offers B only then)
    assert notes[:2] == [("production", "engine 0.13.0 since last bench of production (0.12.6): re-bench", True),
                         ("fast", "engine 0.13.0 since last bench of fast (0.12.6): re-bench", True)]
    # and why it took a child process: a note without a lane, for the dashboard
    assert len(notes) == 3 and notes[2][0] == ""
    assert notes[2][1].startswith(f"note: {store.display_uri} is read through MLflow's client (seconds slower): "
                                  "its schema revision dc11669786a5 is not one sparkctl's reader knows")


# a store written by an MLflow whose schema revision sparkctl's reader does not know (a
# release newer than pyproject's range): the child forgets every known revision first
UNKNOWN_REVISION = "from sparkctl.tracking import sqlite_reader\nsqlite_reader.KNOWN_REVISIONS = {}\n"


def test_runs_and_compare_say_once_that_mlflow_s_client_read_the_store(history, tmp_path):
    """Where the reader cannot answer, the command still answers (through MLflow's client)
    and says why it was slow: one line on stderr, however many reads it made."""
    _, config = history
    env = {"SPARKCTL_CONFIG": str(config)}
    for args in (["runs", "--json"], ["compare", A, B, "--json", "--community"]):
        done, mods = _child(UNKNOWN_REVISION + f"from sparkctl.cli import main\nsys.exit(main({args!r}))", env,
                            tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)  # the answer, as without the note
        notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
        assert len(notes) == 1, done.stderr
        assert "is read through MLflow's client (seconds slower): its schema revision dc11669786a5" in notes[0]
        assert "mlflow" in mods  # the client did read


def test_dashboard_says_when_its_engine_change_note_came_through_mlflow_s_client(history, tmp_path):
    _, config = history
    state = two_models_resident()
    state.version = "0.13.0"
    server = FakeOllama(state).start()
    try:
        done, mods = _child(UNKNOWN_REVISION + DASHBOARD, {"SPARKCTL_CONFIG": str(config),
                                                          "OLLAMA_HOST": server.url}, tmp_path, timeout=240)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    note = json.loads(done.stdout.strip().splitlines()[-1])["note"]
    assert "engine 0.13.0 since last bench of production (0.12.6): re-bench" in note
    assert "is read through MLflow's client (seconds slower): its schema revision dc11669786a5" in note
    assert "mlflow" not in mods  # a child process of its own asked MLflow's client
