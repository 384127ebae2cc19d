"""Each screen in the states a user meets at the moment of decision, at the ssh default
(80x24) and a large terminal (140x45): after a refusal, mid-sweep, with three resident
models (production, fast and a contender), with notes. Snapshots (pytest-textual-snapshot)
against the FAKE Ollama on fixed ports, FAKE Spark probes and a fixed clock; MLflow is a
REAL SQLite copy. Figures that come from the clock are blanked before the picture.
Regenerate with `pytest tests/tui/test_screen_states.py --snapshot-update` and look at
every SVG before committing it."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import deque
from datetime import datetime, timezone

import pytest
from textual.widgets import DataTable, Input, ProgressBar

from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRefused
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.bench import BenchScreen
from sparkctl.tui.screens.eval import EvalStats
from sparkctl.tui.widgets.gauges import Gauges
from sparkctl.tui.widgets.stream_tail import StreamTail
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_config
from testkit.fakes.ollama_server import GIB, FakeOllama, bench_scenario, load_scenario, two_models_resident
from tests.integration.test_eval import write_gsm8k
from testkit.tracking import copy_template_store, mlflow_template_db, recording_bench  # noqa: F401
from tests.tui.test_bench_screen import build as bench_app
from tests.tui.test_bench_screen import config as bench_config
from tests.tui.test_eval_screen import answering_state
from tests.tui.test_eval_screen import build as eval_app
from tests.tui.test_eval_screen import config as eval_config
from tests.tui.test_runs_screen import until

SIZES = {"80x24": (80, 24), "140x45": (140, 45)}
FIXED = datetime(2030, 1, 1, tzinfo=timezone.utc)  # past the fake's expiries: a stable "Until"


async def still(app, pilot) -> None:
    """No worker left to change the picture, no cursor to blink."""
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)


def blank_live(screen) -> None:
    """The figures and text a stream leaves depend on the moment: fixed stand-ins."""
    screen.query_one(Gauges).set(tokens="(n)", elapsed="(t)", ttft="(t)", tps="(t)")
    for view in screen.query(StreamTail):
        view.clear()
        view.write_line("(streamed text)")


def shot(snap_compare, server, app, size: str, run) -> bool:
    """The picture after `run`; the FAKE server stops whatever the outcome."""
    try:
        return snap_compare(app, terminal_size=SIZES[size], run_before=run)
    finally:
        server.stop()


def three_resident():
    """production gpt-oss:120b, the fast lane's llama3.2:3b and the contender qwen3:30b-a3b
    (split CPU/GPU) in memory."""
    state = two_models_resident()
    state.add_resident("llama3.2:3b", size=3 * GIB, size_vram=3 * GIB, expires_in_s=None, context_length=131072)
    return state


def resident_app(port: int, tmp_path, store=None):
    server = FakeOllama(three_resident(), port=port).start()
    cfg = dataclasses.replace(spark_config(), contenders=("qwen3:30b-a3b",))  # as read from the state file
    cfg = dataclasses.replace(cfg, ui=dataclasses.replace(cfg.ui, refresh_s=3600, history_s=60))
    app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0),
                   probes=FakeProbes(spark_snapshot()), clock=lambda: FIXED, user_theme_dir=tmp_path,
                   recorder=lambda r: None, store=store)
    app.animation_level = "none"
    return server, app


@pytest.mark.parametrize("size", list(SIZES))
def test_dashboard_with_three_resident_models(snap_compare, tmp_path, size):
    server, app = resident_app(27941, tmp_path)

    async def run(pilot):
        await pilot.pause(0.3)
        await still(app, pilot)

    assert shot(snap_compare, server, app, size, run)


@pytest.mark.parametrize("size", list(SIZES))
def test_models_with_three_resident_models(snap_compare, tmp_path, size):
    server, app = resident_app(27942, tmp_path)

    async def run(pilot):
        await pilot.pause(0.3)
        await pilot.press("m")
        await pilot.pause(0.3)
        await still(app, pilot)

    assert shot(snap_compare, server, app, size, run)


@pytest.mark.parametrize("size", list(SIZES))
def test_bench_after_a_refusal_with_its_notes(snap_compare, size):
    server = FakeOllama(load_scenario(spill=True), port=27943).start()  # qwen3:8b loads 30% on the CPU
    app = bench_app(server, bench_config(warmup=0, reps=1, num_predict=5))

    async def run(pilot):
        await pilot.press("b")
        await pilot.pause(0.3)
        await still(app, pilot)
        app.screen.query_one("#models", Input).value = "qwen3:8b"
        await pilot.press("ctrl+r")
        await still(app, pilot)

    assert shot(snap_compare, server, app, size, run)


@pytest.mark.parametrize("size", list(SIZES))
def test_bench_mid_sweep(snap_compare, monkeypatch, size):
    # every answer runs away at 20 tok/s until its 1.5 s ceiling: the second cell is in flight
    server = FakeOllama(bench_scenario(tokens_per_s=20.0, runaway="response"), port=27944).start()
    app = bench_app(server, bench_config(warmup=0, reps=1, num_predict=100000, timeout_s=1.5))

    async def run(pilot):
        await pilot.press("b")
        await pilot.pause(0.3)
        await still(app, pilot)
        await pilot.press("w")
        screen = app.screen
        for field, value in {"models": "llama3.2:3b", "depth": "0", "concurrency": "1,2"}.items():
            screen.query_one(f"#{field}", Input).value = value
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "d0/c2: round" in str(screen.query_one("#phase").render()))
        # the picture holds still from here: the stream's later events are not drawn
        monkeypatch.setattr(BenchScreen, "on_bench_event", lambda self, message: None)
        blank_live(screen)
        screen.query_one(ProgressBar).update(total=None, progress=0)
        await pilot.pause(0.1)

    assert shot(snap_compare, server, app, size, run)


@pytest.mark.parametrize("size", list(SIZES))
def test_eval_finished_with_notes(snap_compare, tmp_path, size):
    server = FakeOllama(answering_state(), port=27945).start()
    app = eval_app(server, eval_config(write_gsm8k(tmp_path / "suites")))

    async def run(pilot):
        await pilot.press("e")
        await pilot.pause(0.3)
        await still(app, pilot)
        screen = app.screen
        screen.query_one("#models", Input).value = "llama3.2:3b qwen3:8b"
        screen.query_one("#n", Input).value = "6"
        await pilot.press("ctrl+r")
        await still(app, pilot)
        for view in screen.query(StreamTail):
            view.lines = deque((re.sub(r"\d+\.\d s", "(t) s", line) for line in view.lines), maxlen=view.lines.maxlen)
            view.refresh()
        stats = screen.query_one(EvalStats)
        stats.set(current=re.sub(r"\d+\.\d s", "(t) s", stats.current))
        table = screen.query_one("#results", DataTable)
        if "MLflow" in [str(c.label) for c in table.columns.values()]:  # run ids differ run to run
            col = [str(c.label) for c in table.columns.values()].index("MLflow")
            for i in range(table.row_count):
                table.update_cell_at((i, col), "(run id)")
        await pilot.pause(0.1)

    assert shot(snap_compare, server, app, size, run)


@pytest.fixture(scope="module")
def refused_history(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """llama3.2:3b benched; qwen3:8b refused (loaded 30% on the CPU)."""
    folder = tmp_path_factory.mktemp("states-runs")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    server = FakeOllama(load_scenario(spill=True)).start()
    bench = recording_bench(server.url, store, folder / "spool.jsonl", warmup=0, reps=2, num_predict=8)
    try:
        asyncio.run(bench("llama3.2:3b"))
        with pytest.raises(BenchRefused):
            asyncio.run(bench("qwen3:8b"))
    finally:
        server.stop()
    return store


@pytest.mark.parametrize("size", list(SIZES))
def test_runs_after_a_refusal(snap_compare, tmp_path, refused_history, size):
    server, app = resident_app(27946, tmp_path, store=refused_history)

    async def run(pilot):
        await pilot.press("h")
        await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 2)
        screen = app.screen
        # the clock's figures (dates, speeds, run ids) fixed; status, flags, models as recorded
        screen.rows = [dataclasses.replace(r, run_id=f"{i:08d}" + "f" * 24, start_ms=None,
                                           decode_tps_median=None if r.status == "REFUSED" else 100.0,
                                           decode_tps_cv_pct=None if r.status == "REFUSED" else 1.0,
                                           ttft_s_median=None if r.status == "REFUSED" else 0.1,
                                           prefill_tps_median=None if r.status == "REFUSED" else 1000.0,
                                           joules_per_token=None, roofline_pct=None)
                       for i, r in enumerate(screen.rows)]
        screen.by_id = {r.run_id: r for r in screen.rows}
        screen._cells.clear()
        screen._set_columns()
        screen._fill()
        await pilot.pause(0.1)

    assert shot(snap_compare, server, app, size, run)


@pytest.mark.parametrize("size", list(SIZES))
def test_help_on_the_bench_screen(snap_compare, size):
    server = FakeOllama(bench_scenario(), port=27947).start()
    app = bench_app(server, bench_config())

    async def run(pilot):
        await pilot.press("b")
        await pilot.pause(0.3)
        await still(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.3)

    assert shot(snap_compare, server, app, size, run)
