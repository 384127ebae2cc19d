"""Promotion from the Runs screen: P on a run's model opens a dialog with the
preconditions and their evidence; Promote runs the same service as `sparkctl promote` in
a worker. FAKE Ollama (testkit/fakes/ollama_server.py), REAL BenchRunner evidence in a REAL
SQLite MLflow store."""

from __future__ import annotations

import asyncio
import dataclasses

from textual.widgets import Button, DataTable, Static

from sparkctl import paths
from sparkctl.config import Config, TrackingConfig, layer_state
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.lanes.listing import lane_rows
from sparkctl.services.runs import list_runs
from sparkctl.statefile import read_state
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.promote_dialog import PromoteDialog
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_state
from testkit.fakes.ollama_server import FakeOllama
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)


async def until(pilot, cond, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the screen"
        await pilot.pause(0.05)


async def test_p_promotes_the_selected_runs_model_after_showing_the_evidence(mlflow_store, tmp_path):  # noqa: F811
    state = spark_state()
    state.tokens_per_s = None
    server = FakeOllama(state).start()
    try:
        await recording_bench(server.url, mlflow_store, tmp_path / "bench.jsonl", warmup=0, reps=3,
                              num_predict=12)("qwen3:8b")
        base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT),
                      lanes={"production": "gpt-oss:120b", "fast": "llama3.2:3b"})
        cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0),
                                  state_file=str(paths.state_file()))
        spool = Spool(tmp_path / "spool.jsonl")
        app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0),
                       probes=FakeProbes(spark_snapshot(61.0, runner_gib=80.0)),
                       recorder=lambda rec: record_run(rec, spool, mlflow_store), store=mlflow_store)
        app.animation_level = "none"
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.press("h")
            table = app.screen.query_one("#runs", DataTable)
            await until(pilot, lambda: table.row_count == 1)
            await pilot.press("P")
            await until(pilot, lambda: isinstance(app.screen, PromoteDialog))
            dialog = app.screen
            await until(pilot, lambda: dialog.plan is not None)
            text = str(dialog.query_one("#promote-evidence", Static).render())
            assert "promote qwen3:8b to lane production (now gpt-oss:120b)" in text
            assert "bench    met" in text and "quality  n/a" in text and "fit      met" in text
            assert not dialog.query_one("#promote", Button).disabled
            dialog.query_one("#promote", Button).focus()
            await pilot.press("enter")  # the keyboard way (a click would do the same)
            await until(pilot, lambda: read_state(paths.state_file()).lanes.get("production") == "qwen3:8b")
            await until(pilot, lambda: app.config.lanes["production"] == "qwen3:8b")
            assert app.focused is table  # the footer's keys work after the dialog

            # l on the dashboard: the lanes as `sparkctl lanes` lists them; R rolls one back
            await pilot.press("d")
            await pilot.pause(0.2)
            await pilot.press("l")
            await until(pilot, lambda: type(app.screen).__name__ == "LanesScreen")
            await until(pilot, lambda: app.screen.rows, timeout=10)
            lanes = {r.lane: r for r in app.screen.rows}
            assert lanes["production"].model == "qwen3:8b" and lanes["production"].action == "promote"
            assert lanes["production"].previous == "gpt-oss:120b"
            app.screen.query_one("#lanes", DataTable).move_cursor(row=[r.lane for r in app.screen.rows].index("production"))
            await pilot.press("R")
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmDialog")
            question = str(app.screen.query_one("#confirm-question").render())
            assert "Roll lane production back to gpt-oss:120b?" in question
            # issue 30: the dialog says what the rollback unloads before it runs
            assert "unloads  qwen3:8b (it serves no lane after the rollback)" in question, question
            await pilot.press("y")
            await until(pilot, lambda: app.config.lanes["production"] == "gpt-oss:120b", timeout=30)
            # the overlay names where the lane comes from as `sparkctl lanes` does, read afresh
            await until(pilot, lambda: {r.lane: r for r in app.screen.rows}["production"].model == "gpt-oss:120b")
            fresh = {r.lane: r.set_by for r in lane_rows(layer_state(cfg, read_state(paths.state_file())), None)}
            shown = {r.lane: r.set_by for r in app.screen.rows}
            assert shown == fresh and "state.toml" not in shown["production"]
            table = app.screen.query_one("#lanes", DataTable)
            row = table.get_row_at([r.lane for r in app.screen.rows].index("production"))
            assert str(row[-1]) == fresh["production"]
        (row, *_) = list_runs(mlflow_store, kind="promotion")
        assert row.model == "gpt-oss:120b" and row.status == "FINISHED"  # the rollback, newest first
    finally:
        server.stop()
