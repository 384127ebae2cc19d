"""Every screen at the ssh default (80x24) and a large terminal (140x45): panels stack or
truncate, nothing overlaps. Snapshots (pytest-textual-snapshot) of the FAKE Ollama with a
fixed port, fixed clock and Spark-like FakeProbes; MLflow is a REAL SQLite copy.
Regenerate with `pytest tests/tui/test_screen_sizes.py --snapshot-update` and look at the
SVGs before committing them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_config
from testkit.fakes.ollama_server import FakeOllama, two_models_resident
from testkit.tracking import copy_template_store, mlflow_template_db  # noqa: F401

PORT = 47931  # fixed: the engine URL is part of the picture
FIXED = datetime(2030, 1, 1, tzinfo=timezone.utc)  # past the fake's expiries: stable "Until"
SIZES = {"80x24": (80, 24), "140x45": (140, 45)}


async def settle(app, pilot, mode: str) -> None:
    await pilot.pause(0.3)
    # the dashboard's first samples are in (and drawn) before another screen covers it
    await app.workers.wait_for_complete()
    for _ in range(200):
        if app.report is not None and app.report.engine.reachable:
            break
        await pilot.pause(0.05)
    await pilot.pause(0.2)
    if mode != "dashboard":
        await pilot.press({"models": "m", "bench": "b", "eval": "e", "runs": "h", "help": "question_mark"}[mode])
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
    if mode != "help":
        # a focused text field's cursor blinks: the picture would depend on the moment
        app.screen.set_focus(None)
        await pilot.pause(0.1)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("mode", ["dashboard", "models", "bench", "eval", "runs", "help"])
def test_screen_at_size(snap_compare, mlflow_template_db, tmp_path, mode, size, monkeypatch):  # noqa: F811
    # the lane re-bench check runs 3 s after the engine's version is seen: on a loaded machine
    # that fell inside the picture or not. These pictures are about layout: it never runs here
    monkeypatch.setattr("sparkctl.tui.app.DRIFT_DELAY_S", 3600.0)
    server = FakeOllama(two_models_resident(), port=PORT).start()
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    cfg = spark_config()
    cfg = type(cfg)(**{**cfg.__dict__, "ui": type(cfg.ui)(refresh_s=3600, history_s=60)})  # one sample: still
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), clock=lambda: FIXED,
                   user_theme_dir=tmp_path, recorder=lambda r: None, store=store)
    app.animation_level = "none"

    async def run_before(pilot) -> None:
        await settle(app, pilot, mode)

    try:
        assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)
    finally:
        server.stop()
