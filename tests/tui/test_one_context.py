"""One context per decision in the TUI (issue 30): a contender benched and evaluated beside a
production model resident at 4096 tokens of context reaches a recommendation with the
defaults; the Bench and Eval screens say the context before the run and show what runs;
where an eval pair was measured at two contexts, the head to head and the promote dialog
offer to evaluate the contender again at the incumbent's. FAKE Ollama (testkit/fakes), FAKE
Spark probes, runs recorded by sparkctl's own recorder into a REAL MLflow SQLite store."""

from __future__ import annotations

import asyncio
import dataclasses

from textual.widgets import Collapsible, DataTable, Input, Select

from sparkctl.config import Config, EvalConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.evals import EvalRunner, EvalSettings, load_suite
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from tests.integration.test_decision_seams import answers_for, write_gsm8k
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
    recording_bench,
)
from tests.tui.test_decision_screens import bench_running, until

A, B = "llama3.2:3b", "qwen3:8b"  # production (resident at 4096) and the contender


def scenario(tokens_per_s=None):
    state = bench_scenario(tokens_per_s=tokens_per_s)
    state.answers = answers_for({A: 90, B: 88})
    state.add_resident(A, context_length=4096, expires_in_s=None)
    return state


def build(server, store, tmp_path):
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT), lanes={"production": A},
                  eval=EvalConfig(suites_dir=str(write_gsm8k(tmp_path / "suites")), num_predict=64))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    spool = Spool(tmp_path / "spool.jsonl")
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()),
                   recorder=lambda rec: record_run(rec, spool, store), spool=spool, store=store)
    app.animation_level = "none"
    return app


def eval_running(app) -> bool:
    return any(w.group == "eval" and not w.is_finished for w in app.screen.workers)


async def head_to_head(app, pilot, models=(B, A)):
    await pilot.press("h")
    await until(pilot, lambda: app.current_mode == "runs" and app.screen.rows)
    runs = app.screen
    await until(pilot, lambda: not runs.fetching)
    runs.marked = []  # marks from an earlier visit stay: space would clear them
    table = runs.query_one("#runs", DataTable)
    for model in models:
        row = next(i for i, r in enumerate(runs.shown) if r.model == model)
        table.move_cursor(row=row)
        await pilot.press("space")
    await pilot.press("v")
    await until(pilot, lambda: type(app.screen).__name__ == "HeadToHeadScreen" and app.screen.data is not None)
    await pilot.pause(0.1)
    return app.screen


async def test_bench_and_eval_of_a_contender_with_the_defaults_reach_a_recommendation(
        mlflow_template_db, tmp_path):  # noqa: F811
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server = FakeOllama(scenario()).start()
    try:
        app = build(server, store, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.report is not None and app.report.engine.resident)
            await pilot.press("b")
            await until(pilot, lambda: app.current_mode == "bench")
            await pilot.pause(0.3)  # the switch lands a moment later
            screen = app.screen
            q = screen.query_one
            q("#models", Input).value = f"{B} {A}"
            for field, value in {"reps": "3", "warmup": "0", "num_predict": "8"}.items():
                q(f"#{field}", Input).value = value
            await pilot.pause(0.1)
            # said before the run: the one context both will run at, and why
            assert "num_ctx 4096 (production's)" in str(q("#settings", Collapsible).title)
            await pilot.press("ctrl+r")
            # the fake answers at once: wait for the runs, not for a glimpse of it running
            await until(pilot, lambda: not bench_running(app) and len(screen.runs) == 2, timeout=90)
            assert [r.num_ctx for r in screen.runs] == [4096, 4096]

            await pilot.press("e")
            await until(pilot, lambda: app.current_mode == "eval")
            await pilot.pause(0.3)
            screen = app.screen
            screen.query_one("#models", Input).value = f"{B} {A}"
            screen.query_one("#n", Input).value = "20"
            await pilot.pause(0.1)
            assert screen.query_one("#num_ctx", Input).placeholder == "auto 4096"
            await pilot.press("ctrl+r")
            await until(pilot, lambda: not eval_running(app) and len(screen._runs) == 2, timeout=90)

            h2h = await head_to_head(app, pilot)
            text = str(h2h.query_one("#chart").render())
            assert "not like for like" not in text, text
            assert "recommendation:" in text
            gsm8k = next(line for line in text.splitlines() if line.startswith("GSM8K"))
            assert "not compared" not in gsm8k, text
    finally:
        server.stop()


async def evaluate(url, store, tmp_path, model, num_ctx):
    """`model` evaluated on the 20-item sample at `num_ctx` (given, as --ctx does)."""
    cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT), lanes={"production": A},
                 eval=EvalConfig(suites_dir=str(write_gsm8k(tmp_path / "suites"))))
    s = EvalSettings.from_config(cfg, "gsm8k", n=20, think=False, num_predict=64, num_ctx=num_ctx)
    engine = OllamaEngine(url, timeout=10.0)
    spool = Spool(tmp_path / "seed-spool.jsonl")
    try:
        await EvalRunner(cfg, engine, FakeProbes(spark_snapshot()), s, load_suite(cfg, "gsm8k"),
                         recorder=lambda rec: record_run(rec, spool, store)).run([model])
    finally:
        await engine.close()


async def test_an_eval_pair_at_two_contexts_is_re_run_at_the_matching_one_from_the_head_to_head(
        mlflow_template_db, tmp_path):  # noqa: F811
    """Production evaluated at the 4096 it is resident at, the contender at 8192 (an older
    run): the quality row is not compared. e (as b does for benches) evaluates the
    contender again at 4096 with production's sample, and the row compares. The promote
    dialog offers the same."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server = FakeOllama(scenario()).start()
    try:
        bench = recording_bench(server.url, store, tmp_path / "bench-spool.jsonl", warmup=0, reps=3, num_predict=8,
                                num_ctx=4096, ctx_explicit=True)
        await bench(A, B)
        await evaluate(server.url, store, tmp_path, A, 4096)
        await evaluate(server.url, store, tmp_path, B, 8192)
        app = build(server, store, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            h2h = await head_to_head(app, pilot)
            text = str(h2h.query_one("#chart").render())
            assert "not compared" in next(line for line in text.splitlines() if line.startswith("GSM8K"))
            status = str(h2h.query_one("#chart-status").render())
            assert "e: evaluate qwen3:8b on gsm8k at num_ctx 4096, as llama3.2:3b's run" in status, status
            await pilot.press("escape")
            await until(pilot, lambda: type(app.screen).__name__ == "RunsScreen")
            runs = app.screen
            runs.query_one("#runs", DataTable).move_cursor(
                row=next(i for i, r in enumerate(runs.shown) if r.model == B and r.kind == "bench"))
            await pilot.press("P")
            await until(pilot, lambda: type(app.screen).__name__ == "PromoteDialog"
                        and not app.screen.query_one("#rerun").disabled, timeout=60)
            assert "e: evaluate qwen3:8b on gsm8k at num_ctx 4096" in str(
                app.screen.query_one("#promote-evidence").render())
            await pilot.press("e")  # from the dialog: the Eval screen runs it
            await until(pilot, lambda: app.current_mode == "eval" and type(app.screen).__name__ == "EvalScreen")
            screen = app.screen
            await until(pilot, lambda: screen.query_one("#num_ctx", Input).value == "4096")
            assert screen.query_one("#n", Input).value == "20"
            assert str(screen.query_one("#suite", Select).value) == "gsm8k"
            await until(pilot, lambda: not eval_running(app) and B in screen._runs, timeout=90)
            h2h = await head_to_head(app, pilot)
            text = str(h2h.query_one("#chart").render())
            gsm8k = next(line for line in text.splitlines() if line.startswith("GSM8K"))
            assert "not compared" not in gsm8k and "20 paired" in text, text
    finally:
        server.stop()


async def test_after_b_the_bench_screen_shows_the_mode_and_context_that_run(mlflow_template_db, tmp_path):  # noqa: F811
    """Issue 30: after B or b the Bench screen still showed sweep mode and num_ctx 8192 while
    it ran a plain bench at 4096."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server = FakeOllama(scenario(tokens_per_s=20.0)).start()  # paced: the run lasts seconds
    try:
        app = build(server, store, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("b")
            await until(pilot, lambda: app.current_mode == "bench")
            await pilot.pause(0.3)  # the switch lands a moment later
            screen = app.screen
            screen.query_one("#kind", Select).value = "sweep"
            screen.query_one("#num_ctx", Input).value = "8192"
            await pilot.pause(0.1)
            screen.start_with([A, B], {"num_ctx": 4096, "ctx_explicit": True, "reps": 2, "warmup": 0,
                                       "num_predict": 8, "think": False})
            await pilot.pause(0.05)  # the form and the line say what runs from the start
            assert screen.query_one("#kind", Select).value == "bench"
            assert not screen.query_one("#sweep-row").display or "-on" not in screen.query_one("#sweep-row").classes
            assert screen.query_one("#num_ctx", Input).value == "4096"
            title = str(screen.query_one("#settings", Collapsible).title)
            assert title.startswith("running bench: 2 reps") and "num_ctx 4096" in title, title
            await until(pilot, lambda: not bench_running(app), timeout=60)
            assert "running" not in str(screen.query_one("#settings", Collapsible).title)
    finally:
        server.stop()
