"""Issue 30 in the TUI: the Decision view (Runs: mark two models, v) and the promote dialog
(Runs: P) say what the numbers show. The engine is the FAKE Ollama
(testkit/fakes/ollama_server.py); the runs are seeded the way the bench and the eval write
them (tests/integration/decision_seeds.py) into a REAL MLflow SQLite store, since J/token
and a per-model TTFT cannot come out of the fake."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from textual.widgets import DataTable, Static

from sparkctl.config import Config, PromoteConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.promote_dialog import PromoteDialog
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from tests.integration.decision_seeds import seed_bench, seed_eval
from tests.integration.test_decision_verdicts import CON, INC, trade_off
from testkit.tracking import TEST_EXPERIMENT, copy_template_store, mlflow_template_db  # noqa: F401


def build(server, store, tmp_path, promote: PromoteConfig):
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT), lanes={"production": INC}, promote=promote)
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    spool = Spool(tmp_path / "spool.jsonl")
    app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0),
                   probes=FakeProbes(spark_snapshot()), recorder=lambda rec: record_run(rec, spool, store),
                   spool=spool, store=store)
    app.animation_level = "none"
    return app


async def until(pilot, cond, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the screen"
        await pilot.pause(0.05)


async def runs_screen(app, pilot, count: int):
    await pilot.press("h")
    await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == count)
    return app.screen.query_one("#runs", DataTable)


async def test_the_decision_view_names_every_row_that_is_worse(mlflow_template_db, tmp_path):  # noqa: F811
    """Point 3: the Decision view ended in "promote qwen3:8b (better: decode; nothing worse
    beyond the noise or margins)" with TTFT +204%, twice the memory and twice the J/token."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    trade_off(store, tmp_path)
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store, tmp_path, PromoteConfig(quality_margin_pp={"gsm8k": 15.0, "ifeval": 15.0}))
        async with app.run_test(size=(140, 45)) as pilot:
            table = await runs_screen(app, pilot, 6)
            models = [r.model for r in app.screen.shown]
            for model in (CON, INC):  # one row of each model marked
                table.move_cursor(row=models.index(model))
                await pilot.press("space")
            await pilot.press("v")
            await until(pilot, lambda: type(app.screen).__name__ == "HeadToHeadScreen" and app.screen.data is not None)
            text = str(app.screen.query_one("#chart").render())
            (line,) = [x for x in text.splitlines() if x.startswith("recommendation:")]
            assert line.startswith(f"recommendation: promote {CON} (faster decode +24.9% [")
            assert ", but TTFT +204.0% [" in line and "], twice the memory (16.00 vs 8.00 GiB) and J/token +" in line
            assert "nothing worse" not in text
    finally:
        server.stop()


async def test_the_promote_dialog_names_the_newer_eval_it_left_out_and_does_not_call_a_tie_worse(
        mlflow_template_db, tmp_path):  # noqa: F811
    """Point 4: the dialog judged an older like-for-like eval pair without saying that a newer
    eval of the contender existed (at another context). Point 2: an even score on 100 items
    each is "not resolved", with the items that would resolve it, never "worse"."""
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    now = int(time.time() * 1000) - 60_000
    seed_bench(store, tmp_path, CON, now, decode=[50.0, 50.5, 49.5], ttft=[0.1, 0.1, 0.1], joules=[0.4, 0.4, 0.4],
               resident_gib=6.0)
    seed_eval(store, tmp_path, INC, "gsm8k", 90, 100, now + 1000)
    seed_eval(store, tmp_path, CON, "gsm8k", 90, 100, now + 2000)
    newer = seed_eval(store, tmp_path, CON, "gsm8k", 91, 100, now + 3000, num_ctx=4096)
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store, tmp_path, PromoteConfig())
        async with app.run_test(size=(140, 45)) as pilot:
            await runs_screen(app, pilot, 4)
            assert app.screen.shown[0].run_id == newer  # the contender's newest run is selected
            await pilot.press("P")
            await until(pilot, lambda: isinstance(app.screen, PromoteDialog))
            dialog = app.screen
            await until(pilot, lambda: dialog.plan is not None)
            text = " ".join(str(dialog.query_one("#promote-evidence", Static).render()).split())
            assert "quality unmet gsm8k: qwen3:8b vs llama3.2:3b: 90.0% -> 90.0%, +0.0 pp [" in text
            assert "not resolved at the 2 pp margin" in text
            assert "more items per model than the suite's 1,319 would be needed to resolve it" in text
            assert "worse by more" not in text and "would not show" not in text
            assert f"a newer gsm8k eval of {CON} was left out" in text
            assert f"run {newer[:8]} (" in text and "not like for like: num_ctx 4096 vs 8192" in text
    finally:
        server.stop()
