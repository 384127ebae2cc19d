"""Issue 18 in the TUI: what the screen says at the moment of decision. The engine is the
FAKE Ollama (testkit/fakes/ollama_server.py); runs go through sparkctl's own recorder into a
REAL MLflow SQLite store (a few seeded the way the producers write them)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from textual.widgets import DataTable

from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from testkit.tracking import TEST_EXPERIMENT, copy_template_store, mlflow_template_db  # noqa: F401

A, B = "llama3.2:3b", "qwen3:8b"


def build(server, store, tmp_path, lanes=None):
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT), lanes=lanes or {})
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    spool = Spool(tmp_path / "spool.jsonl")
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()),
                   recorder=lambda rec: record_run(rec, spool, store), spool=spool, store=store)
    app.animation_level = "none"
    return app


async def until(pilot, cond, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the screen"
        await pilot.pause(0.05)


def bench_running(app) -> bool:
    return any(w.group == "bench" and not w.is_finished for w in app.screen.workers)


async def test_dashboard_warnings_are_recomputed_after_the_bench_that_answers_them(
        mlflow_template_db, tmp_path, monkeypatch):  # noqa: F811
    """Point 7: "production has no valid bench yet" stayed on the dashboard after the bench."""
    import sparkctl.tui.app as app_module

    monkeypatch.setattr(app_module, "DRIFT_DELAY_S", 0.05)
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store, tmp_path, lanes={"production": A})
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.stale_lanes) == 1)
            assert "production (llama3.2:3b) has no valid bench yet" in app.stale_lanes[0][1]
            await pilot.press("b")
            await until(pilot, lambda: app.current_mode == "bench")
            app.screen.start_with([A], {"reps": 1, "warmup": 0, "num_predict": 8, "think": False})
            await until(pilot, lambda: bench_running(app))
            await until(pilot, lambda: not bench_running(app))
            await until(pilot, lambda: app.stale_lanes == ())
    finally:
        server.stop()


def seed(store, tmp_path, name: str, status: str, tags: dict, start_ms: int, params=None) -> None:
    rec = RunRecord(experiment=TEST_EXPERIMENT, run_name=name, status=status, start_ms=start_ms,
                    end_ms=start_ms + 1000, params={"model": tags.get("model.name", A), **(params or {})},
                    tags={"engine.kind": "ollama", "engine.version": "0.13.0", "host.name": "spark-01", **tags},
                    summary_metrics={"decode_tps_median": 50.0})
    assert record_run(rec, Spool(tmp_path / "seed.jsonl"), store).synced


async def test_the_runs_screen_shows_status_and_kind_within_80_columns(mlflow_template_db, tmp_path):  # noqa: F811
    """Point 7: the Status column sat past the 13th column (off screen at 80 columns), and
    promotions and rollbacks were not told apart."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    now = int(time.time() * 1000)
    seed(store, tmp_path, "killed", "KILLED", {"model.name": A}, now - 5000)
    seed(store, tmp_path, "invalid", "FINISHED", {"model.name": A, "guard.valid": "false"}, now - 4000)
    seed(store, tmp_path, "cell", "FINISHED", {"model.name": A, "sweep.id": "s1", "sweep.cell": "prose/d0/c4",
                                               "sweep.profile": "prose", "sweep.depth": "0",
                                               "sweep.concurrency": "4"}, now - 3000)
    seed(store, tmp_path, "promote", "FINISHED", {"model.name": B, "sparkctl.kind": "promotion",
                                                  "promotion.action": "promote"}, now - 2000)
    seed(store, tmp_path, "rollback", "FAILED", {"model.name": A, "sparkctl.kind": "promotion",
                                                 "promotion.action": "rollback"}, now - 1000)
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("h")
            await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 5)
            table = app.screen.query_one("#runs", DataTable)
            keys = [c.key.value for c in table.ordered_columns]
            upto = keys.index("kind") + 1
            assert sum(c.get_render_width(table) for c in table.ordered_columns[:upto]) <= 78
            rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            status, kind = keys.index("status"), keys.index("kind")
            assert [(r[status], r[kind]) for r in rows] == [
                ("FAILED", "rollback"), ("ok", "promote"), ("ok", "cell prose/d0/c4"), ("INVALID", "bench"),
                ("KILLED", "bench")]
    finally:
        server.stop()


async def test_a_killed_run_carries_no_placement_flag_without_a_placement_reading(mlflow_template_db, tmp_path):  # noqa: F811
    """Issue 30: a run stopped before its placement after was read (recorded "n/a") was
    flagged `placement` on the Runs screen; a run that did read a CPU share still is."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    now = int(time.time() * 1000)
    seed(store, tmp_path, "killed", "KILLED", {"model.name": A, "guard.placement_before": "100% GPU",
                                               "guard.placement_after": "n/a"}, now - 2000)
    seed(store, tmp_path, "spilled", "FINISHED", {"model.name": B, "guard.placement_before": "100% GPU",
                                                  "guard.placement_after": "30%/70% CPU/GPU"}, now - 1000)
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store, tmp_path)
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("h")
            await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 2)
            flags = {r.model: r.flags for r in app.screen.rows}
            assert "placement" not in flags[A] and "placement" in flags[B], flags
            table = app.screen.query_one("#runs", DataTable)
            col = [c.key.value for c in table.ordered_columns].index("flags")
            shown = {str(table.get_row_at(i)[[c.key.value for c in table.ordered_columns].index("model")]):
                     str(table.get_row_at(i)[col]) for i in range(table.row_count)}
            assert "placement" not in shown[A] and "placement" in shown[B], shown
    finally:
        server.stop()


async def test_head_to_head_of_runs_at_two_contexts_offers_to_bench_both_at_one(
        mlflow_template_db, tmp_path):  # noqa: F811
    """Point 2: the comparison said "not like for like" with a generic list of settings. It
    names num_ctx, and b benches both models at the baseline's context."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    state = bench_scenario(tokens_per_s=None)
    state.add_resident(B, context_length=4096, expires_in_s=None)
    server = FakeOllama(state).start()
    try:
        app = build(server, store, tmp_path, lanes={"production": A})
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press("b")
            await until(pilot, lambda: app.current_mode == "bench")
            # each alone (one bench runs its models at one context, issue 30): A at [bench]
            # num_ctx, B at the 4096 it is resident at
            for model in (A, B):
                app.screen.start_with([model], {"reps": 3, "warmup": 0, "num_predict": 8, "think": False})
                # (the fake answers at once: wait for the run, not for a glimpse of it running)
                await until(pilot, lambda: not bench_running(app) and len(app.screen.runs) == 1)
            await pilot.press("h")
            await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 2)
            runs = app.screen
            table = runs.query_one("#runs", DataTable)
            for row in range(2):
                table.move_cursor(row=row)
                await pilot.press("space")
            await pilot.press("v")
            await until(pilot, lambda: type(app.screen).__name__ == "HeadToHeadScreen" and app.screen.data is not None)
            text = str(app.screen.query_one("#chart").render())
            assert "num_ctx 8192 (llama3.2:3b) vs 4096 (qwen3:8b)" in text
            status = str(app.screen.query_one("#chart-status").render())
            assert "b: bench llama3.2:3b qwen3:8b at num_ctx 8192" in status
            await pilot.press("b")
            await until(pilot, lambda: app.current_mode == "bench")
            # The fake answers at once: the second bench can start and finish between two
            # looks, so wait for its runs rather than for a glimpse of it running.
            from sparkctl.services.runs import list_runs

            for _ in range(600):
                if not bench_running(app) and len(await asyncio.to_thread(list_runs, store, limit=10)) >= 4:
                    break
                await pilot.pause(0.05)

        newest = list_runs(store, limit=2)
        assert {r.model for r in newest} == {A, B} and {r.num_ctx for r in newest} == {"8192"}
    finally:
        server.stop()
