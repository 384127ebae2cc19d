"""The workload sweep's matrix and charts in the TUI (issue 12). A REAL SweepRunner runs a
sweep against the FAKE Ollama (two models, its OLLAMA_NUM_PARALLEL slots and shared decode),
recorded by sparkctl's own recorder (spool, then a REAL SQLite MLflow store); M on the Runs
screen reads it back by its sweep.id tag. The Bench screen's settings start one too."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import replace

import pytest
from textual.widgets import DataTable, Input

from sparkctl.config import Config, TrackingConfig
from sparkctl.core.latency import parse_slo
from sparkctl.core.sweep import Cell, CellResult, CellStats, SweepView
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchSettings
from sparkctl.services.bench.profiles import resolve
from sparkctl.services.bench.sweep import SweepRunner
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
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
PREDICT = 12


@pytest.fixture(scope="module")
def recorded(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """A sweep of A and B at depths 0/1024 and concurrency 1/2 with an SLO (8 cell runs),
    then one plain bench of A. Read-only for the tests that share it."""
    folder = tmp_path_factory.mktemp("sweep-history")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    state = bench_scenario(tokens_per_s=None, response_tokens=[" word"] * 40)
    state.models[A].tokens_per_s = 300.0
    state.models[B].tokens_per_s = 200.0
    state.num_parallel = 2
    server = FakeOllama(state).start()
    spool = Spool(folder / "spool.jsonl")
    cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))

    async def sweep():
        engine = OllamaEngine(server.url, timeout=10.0, connect_timeout=1.0)
        s = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=1, num_predict=PREDICT, timeout_s=30.0,
                    think=False)
        runner = SweepRunner(cfg, engine, FakeProbes(spark_snapshot()), s, resolve("prose", cfg.bench, PREDICT),
                             [0, 1024], [1, 2], parse_slo("ttft=2s,itl=1s"),
                             recorder=lambda rec: record_run(rec, spool, store))
        try:
            return await runner.run([A, B])
        finally:
            await engine.close()

    try:
        result = asyncio.run(sweep())
        bench = recording_bench(server.url, store, folder / "spool2.jsonl", warmup=0, reps=1, num_predict=PREDICT)
        asyncio.run(bench(A))
        assert len(store.search_runs()) == 10  # 8 cells, the sweep's own run, 1 bench
        yield server, store, result
    finally:
        server.stop()


def build(server, store, cfg=None, recorder=None):
    base = cfg or Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=recorder or (lambda r: None),
                   store=store)
    app.animation_level = "none"
    return app


async def until(pilot, cond, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting for the screen"
        await pilot.pause(0.02)


async def open_runs(app, pilot):
    await pilot.press("h")
    await pilot.pause(0.1)
    await until(pilot, lambda: app.current_mode == "runs" and app.screen.rows)
    return app.screen


def chart_text(app) -> str:
    return str(app.screen.query_one("#chart").render())


async def test_M_on_a_sweep_run_shows_the_recorded_cells_and_charts_fit_80_columns(recorded):
    server, store, result = recorded
    app = build(server, store)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_runs(app, pilot)
        table = screen.query_one("#runs", DataTable)
        cell_row = next(i for i, r in enumerate(screen.shown) if "/d" in r.run_name)
        table.move_cursor(row=cell_row)
        await pilot.press("M")
        await until(pilot, lambda: type(app.screen).__name__ == "SweepMatrixScreen" and app.screen.data is not None)
        view = app.screen.data
        assert view.sweep_id == result.sweep_id and view.models == [A, B] and view.slo == "ttft=2s,itl=1s"
        assert view.columns == [("prose", 0, 1), ("prose", 0, 2), ("prose", 1024, 1), ("prose", 1024, 2)]
        # every cell holds its recorded run's own metrics
        runs = [r for r in store.search_runs(f"tags.`sweep.id` = '{result.sweep_id}'") if "sweep.cell" in r["tags"]]
        assert len(runs) == 8
        text = chart_text(app)
        for run in runs:
            t, m = run["tags"], run["metrics"]
            got = view.get(run["params"]["model"], ("prose", int(t["sweep.depth"]), int(t["sweep.concurrency"])))
            assert got.run_id == run["run_id"]
            assert got.stats.decode_tps_per_request_median == pytest.approx(m["decode_tps_per_request_median"])
            assert got.stats.throughput_tps == pytest.approx(m["throughput_tps"])
            assert got.stats.ttft_s_p90 is None and "ttft_s_p90" not in m  # a handful of requests: withheld
            assert got.stats.ttft_n == m["ttft_n"] == int(t["sweep.concurrency"])  # one round
            assert got.stats.goodput_pct == pytest.approx(m["goodput_pct"])
            assert f"{m['decode_tps_per_request_median']:.1f}" in text
            assert f"Σ {m['throughput_tps']:.1f}" in text
        # and the cells the sweep itself measured
        for c in result.results:
            assert view.get(c.cell.model, (c.cell.profile, c.cell.depth, c.cell.concurrency)).stats.requests \
                == c.stats.requests
        lines = text.splitlines()
        assert "d1k c2" in text and "good 100%" in text
        assert "decode tok/s per request against context depth" in text
        assert f"{A} · concurrency 2" in text and f"{B} · depth 1k" in text and "█" in text
        assert all(len(line) <= 80 for line in lines), max(lines, key=len)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)

        # a plain bench is not part of a sweep: M says so
        plain = next(i for i, r in enumerate(screen.shown) if "/d" not in r.run_name)
        table.move_cursor(row=plain)
        await pilot.press("M")
        await until(pilot, lambda: type(app.screen).__name__ == "SweepMatrixScreen" and app.screen.data is not None)
        assert "is not part of a sweep" in chart_text(app)


def fixed_view() -> SweepView:
    """Clock-free numbers for the snapshot: two models, depth 0/4k x concurrency 1/2/4."""
    out = []
    for m, base in ((A, 90.0), (B, 46.0)):
        for d, fall in ((0, 1.0), (4096, 0.8)):
            for c, share in ((1, 1.0), (2, 0.7), (4, 0.45)):
                st = CellStats(requests=3 * c, decode_tps_per_request_median=base * fall * share,
                               throughput_tps=base * fall * share * c * 0.95, ttft_s_p90=0.05 * c * (1 + d / 4096),
                               tpot_ms_median=1000.0 / (base * fall * share), goodput_pct=100.0 if c < 4 else 50.0)
                out.append(CellResult(Cell(m, "prose", d, c), st, run_id=f"{len(out):032d}"))
    return SweepView("20261201T120000-abc123", tuple(out), "ttft=200ms,itl=50ms", "ollama 0.13.0",
                     ("FINISHED",) * len(out))


def test_sweep_matrix_snapshot(snap_compare, recorded):
    server, store, _ = recorded
    app = build(server, store)

    async def run(pilot):
        from sparkctl.tui.screens.sweep_matrix import SweepMatrixScreen

        # the dashboard behind the matrix has both first samples in, and drawn, before it is covered
        await until(pilot, lambda: app.report is not None and app.report.engine.reachable)
        await pilot.pause(0.3)
        app.push_screen(SweepMatrixScreen(view=fixed_view()))
        await until(pilot, lambda: type(app.screen).__name__ == "SweepMatrixScreen" and app.screen.data is not None)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


async def test_a_sweep_from_the_bench_settings_records_one_run_per_cell_and_opens_the_matrix(
        mlflow_template_db, tmp_path):  # noqa: F811
    state = bench_scenario(tokens_per_s=300.0, response_tokens=[" word"] * 40)
    state.num_parallel = 2
    server = FakeOllama(state).start()
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, store, recorder=lambda r: record_run(r, spool, store))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("b")
            await pilot.pause(0.2)
            bench = app.screen
            await pilot.press("w")  # sweep mode: its fields show, Run says what it runs
            values = {"models": A, "reps": "1", "warmup": "0", "num_predict": "10", "depth": "0,512",
                      "concurrency": "1,2", "slo": "ttft=5s,itl=1s"}
            for field, value in values.items():
                bench.query_one(f"#{field}", Input).value = value
            await pilot.pause()
            assert str(bench.query_one("#run").label) == "Run sweep"
            await pilot.click("#run")
            await until(pilot, lambda: type(app.screen).__name__ == "SweepMatrixScreen" and app.screen.data is not None,
                        timeout=60)
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            # the matrix ends on its own figures: no error from a store it was never meant to read
            assert str(app.screen.query_one("#chart-status").render()) == "Esc closes"
            view = app.screen.data
            found = store.search_runs(f"tags.`sweep.id` = '{view.sweep_id}'")
            runs = [r for r in found if "sweep.cell" in r["tags"]]  # the cells, not the sweep's own run
            assert len(runs) == 4 == len(view.results) == len(found) - 1
            assert sorted(r["tags"]["sweep.cell"] for r in runs) == ["prose/d0/c1", "prose/d0/c2",
                                                                     "prose/d512/c1", "prose/d512/c2"]
            by_id = {r["run_id"]: r for r in runs}
            for cell in view.results:  # the matrix shows what was recorded
                m = by_id[cell.run_id]["metrics"]
                assert cell.stats.decode_tps_per_request_median == pytest.approx(m["decode_tps_per_request_median"])
                assert cell.stats.goodput_pct == pytest.approx(m["goodput_pct"]) == 100.0
            assert view.slo == "ttft=5s,itl=1s" and view.engine.startswith("ollama")
            text = chart_text(app)
            assert "d512 c2" in text and all(len(line) <= 80 for line in text.splitlines())
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert app.screen is bench
            assert bench.query_one("#summary", DataTable).row_count == 4
            assert str(bench.query_one("#phase").render()).startswith("sweep finished: 4 cell(s)")

            # a bad list is one line, and nothing runs
            bench.query_one("#concurrency", Input).value = "1,x"
            # ctrl+r: at 80x24 the Run button may sit below the summary's rows, scrolled away
            await pilot.press("ctrl+r")
            await pilot.pause(0.1)
            said = bench.query_one("#notes").text  # on screen, whole, not in a toast that goes
            assert "concurrency" in said and "whole number" in said
            assert len(store.search_runs()) == 5  # the 4 cells and the sweep's own run
    finally:
        server.stop()
