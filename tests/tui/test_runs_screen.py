"""Pilot and snapshot tests of the Runs screen. The history is made by the REAL BenchRunner
against the FAKE Ollama (two models, an engine upgrade between benches), recorded by
sparkctl's own recorder (spool, then MLflow) into a REAL SQLite store; the screen reads
it back through services/runs."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from textual.widgets import DataTable, Input, Label

from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.store import MlflowStore
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
    recording_bench,
)

A, B = "llama3.2:3b", "qwen3:8b"
REPS = 3


@pytest.fixture(scope="module")
def history(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """Four runs, oldest first: A and B on Ollama 0.12.6, then A and B on 0.13.0.
    A is paced at 100 tok/s, B at 150. Read-only for the tests that share it."""
    folder = tmp_path_factory.mktemp("runs-history")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    state = bench_scenario(tokens_per_s=None)
    state.models[A].tokens_per_s = 100.0
    state.models[B].tokens_per_s = 150.0
    server = FakeOllama(state).start()
    bench = recording_bench(server.url, store, folder / "spool.jsonl", warmup=0, reps=REPS, num_predict=12)

    try:
        # one model per bench: the runs of one bench share its start time
        asyncio.run(bench(A))
        asyncio.run(bench(B))
        state.version = "0.13.0"
        asyncio.run(bench(A))
        asyncio.run(bench(B))
        assert len(store.search_runs()) == 4
        yield server, store
    finally:
        server.stop()


def build(server, store):
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=lambda r: None, store=store)
    app.animation_level = "none"
    return app


async def until(pilot, cond, timeout: float = 15.0) -> None:
    """Pause until ``cond()`` holds (workers post their messages when they are done)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the screen"
        await pilot.pause(0.02)


def shown(app) -> list[tuple[str, str]]:
    """(model, engine) of each table row, top to bottom."""
    table = app.screen.query_one("#runs", DataTable)
    model, engine = table.get_column_index("model"), table.get_column_index("engine")  # (the order follows the width)
    return [(str(table.get_cell_at((i, model))), str(table.get_cell_at((i, engine)))) for i in range(table.row_count)]


async def open_runs(app, pilot):
    await pilot.press("h")
    await pilot.pause(0.1)
    await until(pilot, lambda: app.current_mode == "runs" and app.screen.rows)
    return app.screen


async def test_lists_filters_sorts_and_opens_a_run(history):
    server, store = history
    app = build(server, store)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_runs(app, pilot)
        assert shown(app) == [(B, "ollama 0.13.0"), (A, "ollama 0.13.0"), (B, "ollama 0.12.6"), (A, "ollama 0.12.6")]
        table = screen.query_one("#runs", DataTable)
        row0 = [str(c) for c in table.get_row_at(0)]
        assert row0[1] == "ok" and row0[2] == "bench" and row0[13] == "spark-01" and row0[11] == "-"
        assert len(row0[14]) == 8
        assert float(row0[5]) > 0 and "loading" not in str(screen.query_one("#runs-status", Label).content)

        # filter by model name, typed into the Input
        await pilot.press("slash")
        for ch in "qwen":
            await pilot.press(ch)
        await pilot.pause()
        assert shown(app) == [(B, "ollama 0.13.0"), (B, "ollama 0.12.6")]
        # ... and by engine version
        screen.query_one("#runs-filter", Input).value = "0.12"
        await pilot.pause()
        assert shown(app) == [(B, "ollama 0.12.6"), (A, "ollama 0.12.6")]
        screen.query_one("#runs-filter", Input).value = ""
        await pilot.press("enter")  # back to the table
        await pilot.pause()
        assert len(shown(app)) == 4 and app.focused is table

        # sort by the decode column, as a header click does: fastest (B, 150 tok/s) first
        keys = list(table.columns)
        decode_key = next(k for k in keys if k.value == "decode")
        table.post_message(DataTable.HeaderSelected(table, decode_key, keys.index(decode_key),
                                                    table.columns[decode_key].label))
        await until(pilot, lambda: screen.sort_column == "decode")
        decode = [float(str(table.get_cell_at((i, 5)))) for i in range(4)]
        assert decode == sorted(decode, reverse=True)
        assert [m for m, _ in shown(app)] == [B, B, A, A]
        await pilot.press("S")  # the other way round
        await pilot.pause()
        assert [m for m, _ in shown(app)] == [A, A, B, B]

        # Enter on the top row (A): its repetitions, flags and reasons
        table.move_cursor(row=0)
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "RunDetailScreen" and app.screen.decode is not None)
        detail = app.screen
        assert detail.row.model == A
        assert len(detail.decode) == REPS and len(detail.ttft) == REPS
        assert all(d > 0 for d in detail.decode)
        assert detail.query_one("#reps", DataTable).row_count == REPS
        guard = str(detail.query_one("#detail-guard").render())
        assert "flags:" in guard and "invalid:" in guard
        extra = str(detail.query_one("#detail-extra").render())
        assert "GPU samples:" in extra and "throttle" in extra  # from the run's gpu_samples.json
        assert "output (rep 1):" in extra and "sky" in extra  # the fake's answer text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)

        # r reloads: same rows, the sort kept
        await pilot.press("r")
        await pilot.pause()
        await until(pilot, lambda: not screen.fetching)
        assert [m for m, _ in shown(app)] == [A, A, B, B]


async def test_an_unreachable_store_shows_one_error_line(history):
    server, _ = history
    store = MlflowStore("http://127.0.0.1:9", None, TEST_EXPERIMENT, timeout_s=2, max_retries=0)
    app = build(server, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("h")
        await pilot.pause(0.1)
        screen = app.screen
        await until(pilot, lambda: screen.error is not None, timeout=30)
        line = str(screen.query_one("#runs-status", Label).content)
        assert line.startswith("✘") and "\n" not in line
        assert screen.query_one("#runs", DataTable).row_count == 0
        await pilot.press("r")  # still alive, tries again
        await pilot.pause(0.1)
        assert app.current_mode == "runs"


def test_runs_screen_snapshot(snap_compare, history):
    server, store = history
    app = build(server, store)

    async def run(pilot):
        screen = await open_runs(app, pilot)
        # timings and ids vary run to run: fixed values in the cells that come from the clock
        fixed = []
        for i, r in enumerate(screen.rows):
            fixed.append(dataclasses.replace(
                r, run_id=f"{i:08d}" + "f" * 24, start_ms=None, decode_tps_median=100.0 + i,
                decode_tps_cv_pct=1.0, ttft_s_median=0.1, prefill_tps_median=1000.0,
                joules_per_token=None, roofline_pct=None, flags=()))
        screen.rows = fixed
        screen.by_id = {r.run_id: r for r in fixed}
        table = screen.query_one("#runs", DataTable)
        table.clear(columns=True)  # auto column widths remember the cleared values
        from sparkctl.tui.screens.runs import COLUMNS

        for label, key in COLUMNS:
            table.add_column(label, key=key)
        screen._fill()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run)


async def test_chart_and_head_to_head_from_the_table_at_80_columns(history):
    """c charts the selected model's runs across engine versions; space marks models and v
    compares them: bars and the same verdict table as `sparkctl compare`. At 80 columns no
    chart line is wider than the screen."""
    server, store = history
    app = build(server, store)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_runs(app, pilot)
        table = screen.query_one("#runs", DataTable)
        table.move_cursor(row=0)  # B on 0.13.0
        await pilot.press("c")
        await until(pilot, lambda: type(app.screen).__name__ == "HistoryChartScreen" and app.screen.data is not None)
        text = str(app.screen.query_one("#chart").render())
        lines = text.splitlines()
        assert "engine ollama 0.13.0" in text and sum("●" in line for line in lines) == 2  # two runs of B
        assert all(len(line) <= 80 for line in lines)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)

        await pilot.press("space")  # mark B
        table.move_cursor(row=1)
        await pilot.press("space")  # mark A
        assert screen.marked == [B, A]
        await pilot.press("v")
        await until(pilot, lambda: type(app.screen).__name__ == "HeadToHeadScreen" and app.screen.data is not None)
        text = str(app.screen.query_one("#chart").render())
        assert "decode tok/s (median)" in text and "█" in text
        assert "decision on ollama 0.13.0" in text and "worse" in text  # A (100) vs B (150) on the same engine
        assert all(len(line) <= 80 for line in text.splitlines() if "█" in line)


async def test_the_decision_table_keeps_one_line_per_metric_at_80_columns(history):
    """Issue 30: at 80 columns every row of the decision table wrapped onto two lines. Now
    each metric is one line within the chart (the models named above it as A and B, a
    verdict that does not fit cut with … and given whole below), and w shows the CLI's
    whole tables."""
    server, store = history
    app = build(server, store)
    app.config = dataclasses.replace(app.config, lanes={"production": A})
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_runs(app, pilot)
        table = screen.query_one("#runs", DataTable)
        for row in (0, 1):
            table.move_cursor(row=row)
            await pilot.press("space")
        await pilot.press("v")
        await until(pilot, lambda: type(app.screen).__name__ == "HeadToHeadScreen" and app.screen.data is not None)
        await pilot.pause(0.2)
        chart = app.screen.query_one("#chart")
        lines = str(chart.render()).splitlines()
        start = next(i for i, line in enumerate(lines) if "verdict" in line.lower())
        end = next(i for i, line in enumerate(lines) if line.startswith("recommendation:"))
        rows = lines[start:end]
        assert all(len(line) <= chart.size.width for line in rows), rows
        for metric in ("decode", "TTFT s", "GSM8K", "IFEval", "J/token"):
            assert sum(line.startswith(metric) for line in rows) == 1, (metric, rows)
        assert any(line.startswith("A = llama3.2:3b (incumbent) · B = qwen3:8b") for line in lines)
        decode = next(line for line in rows if line.startswith("decode"))
        assert decode.rstrip().endswith("better")  # B (150 tok/s) against A (100): on the metric's own line
        assert all(len(line) <= chart.size.width for line in lines if "█" in line)  # the bars too
        await pilot.press("w")
        await pilot.pause(0.1)
        assert "DIFFERENCE [95% CI]" in str(chart.render())  # the CLI's table, whole


async def test_B_rebenches_lanes_benched_on_an_older_engine_with_their_last_settings(history):
    """The engine moves to 0.14.0: B on the Runs screen opens the Bench screen running the
    lane model with the settings of its last run (reps, num_predict, prompt)."""
    server, store = history
    app = build(server, store)
    app.config = dataclasses.replace(app.config, lanes={"production": A})
    server.state.version = "0.14.0"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await open_runs(app, pilot)
            await until(pilot, lambda: app.report is not None and app.report.engine.version == "0.14.0")
            await pilot.press("B")
            await until(pilot, lambda: app.current_mode == "bench")
            bench = app.screen
            assert bench.query_one("#models").value == A
            assert bench.query_one("#reps").value == str(REPS)
            said = [n.message for n in app._notifications]
            assert any("engine 0.14.0 since last bench of production (0.13.0): re-bench" in m for m in said)
            await until(pilot, lambda: not any(w.group == "bench" and not w.is_finished for w in bench.workers),
                        timeout=30)
            assert bench.query_one("#summary").row_count == 1
    finally:
        server.state.version = "0.13.0"


async def test_the_dashboard_offers_B_only_for_lanes_B_can_rebench_and_B_says_why_not(history, monkeypatch):
    """Issue 30: the dashboard said "fast has no valid bench yet: bench it · h then B re-benches
    them", and B answered "every lane model has a valid bench". Now each warning names the key
    that answers it: B for a lane benched on an older engine, b for one never benched, and B
    names the lanes it leaves out with the same reason."""
    import sparkctl.tui.app as app_module

    monkeypatch.setattr(app_module, "DRIFT_DELAY_S", 0.05)
    server, store = history
    app = build(server, store)
    app.config = dataclasses.replace(app.config, lanes={"production": A, "fast": "phi4:14b"})
    server.state.version = "0.14.0"
    try:
        async with app.run_test(size=(140, 45)) as pilot:
            await until(pilot, lambda: len(app.stale_lanes) == 2)
            await pilot.pause(0.2)
            lines = str(app.screen.query_one("#warnings").render()).splitlines()
            production = next(line for line in lines if "production" in line)
            fast = next(line for line in lines if "phi4:14b" in line)
            assert production.endswith("re-bench (h then B)"), lines
            assert fast.endswith("has no valid bench yet: bench it (b)"), lines
            assert not any("re-benches them" in line for line in lines)
            await open_runs(app, pilot)
            await pilot.press("B")
            await until(pilot, lambda: app.current_mode == "bench")
            assert app.screen.query_one("#models").value == A  # production only
            said = [n.message for n in app._notifications]
            assert any("left out: fast (phi4:14b): never benched here" in m for m in said), said
            await until(pilot, lambda: not any(w.group == "bench" and not w.is_finished for w in app.screen.workers),
                        timeout=30)
    finally:
        server.state.version = "0.13.0"


async def test_dashboard_says_which_lanes_were_benched_on_another_engine_version(history, monkeypatch):
    server, store = history
    import sparkctl.tui.app as app_module

    monkeypatch.setattr(app_module, "DRIFT_DELAY_S", 0.05)
    app = build(server, store)
    app.config = dataclasses.replace(app.config, lanes={"production": A, "fast": B})
    server.state.version = "0.14.0"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.stale_lanes) == 2)
            drift = app.screen.query_one("#warnings").text
            assert "engine 0.14.0 since last bench of production (0.13.0): re-bench" in drift
            assert "engine 0.14.0 since last bench of fast (0.13.0): re-bench" in drift
    finally:
        server.state.version = "0.13.0"
    app = build(server, store)  # on the version both were last benched on: nothing to say
    app.config = dataclasses.replace(app.config, lanes={"production": A})
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._drift_checked is not None)
        await pilot.pause(0.5)
        assert app.stale_lanes == () and "re-bench" not in app.screen.query_one("#warnings").text


async def test_R_lists_engine_change_regressions(history):
    """Both models kept their pace across 0.12.6 -> 0.13.0 in the fake: listed, none flagged."""
    server, store = history
    app = build(server, store)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_runs(app, pilot)
        await pilot.press("R")
        await until(pilot, lambda: type(app.screen).__name__ == "RegressionsScreen" and app.screen.data is not None)
        text = str(app.screen.query_one("#chart").render())
        assert A in text and B in text and "@0.12.6" in text and "@0.13.0" in text
        assert "REGRESSION" not in text and text.count(" ok (") == 2
