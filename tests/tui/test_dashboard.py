"""Pilot tests of the dashboard against the FAKE Ollama server (real HTTP, Ollama's wire
format) and FAKE host probes (a GB10 Spark, which this CI box is not)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from textual.widgets import DataTable, Label

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.dashboard import Panel
from sparkctl.tui.widgets.budget_bar import BudgetBar
from testkit.fakes.host import FakeProbes, gb10, no_gpu_snapshot, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, two_models_resident

CFG = Config(lanes={"production": "gpt-oss:120b", "fast": "llama3.2:3b"})


@pytest.fixture
def fake():
    server = FakeOllama(two_models_resident()).start()
    yield server
    server.stop()


def app_for(server, probes=None, cfg=CFG, refresh_s=0.2, **kw):
    cfg = Config(**{**cfg.__dict__, "ui": type(cfg.ui)(refresh_s=refresh_s, history_s=60, theme=cfg.ui.theme)})
    engine = OllamaEngine(server.url, timeout=3.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=probes or FakeProbes(spark_snapshot()),
                   recorder=lambda r: None, **kw)
    app.animation_level = "none"
    return app


def table_rows(app) -> list[list[str]]:
    table = app.screen.query_one("#resident", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def wait_for(pilot, predicate, timeout=5.0):
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError("condition not reached in time")


async def test_shows_resident_models_with_placement_lane_and_until(fake):
    app = app_for(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        rows = {r[0]: r for r in table_rows(app)}
        prod = rows["gpt-oss:120b"]
        assert prod[1] == "production" and prod[2] == "68.0 GiB" and prod[3] == "100% GPU"
        assert prod[4] == "131072" and prod[5] == "Forever"
        split = rows["qwen3:30b-a3b"]
        assert split[3] == "17%/83% CPU/GPU"  # (24-20)/24 on the CPU, as ollama ps rounds it
        assert split[5].endswith("min") or "min" in split[5]
        engine_text = app.screen.query_one("#engine", Panel).content.plain
        assert "reachable" in engine_text and fake.state.version in engine_text
        budget = app.screen.query_one(BudgetBar).render().plain
        assert "Unified memory: total 121.0 GiB" in budget
        assert "gpt-oss:120b (production) 68" in budget  # the legend names each model's lane
        # the probes were read off the UI thread
        assert app.probes.threads and "MainThread" not in app.probes.threads


async def test_engine_down_is_shown_and_recovers_by_itself(fake):
    app = app_for(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        fake.down()
        await wait_for(pilot, lambda: "UNREACHABLE" in app.screen.query_one("#engine", Panel).content.plain)
        assert "engine unreachable" in app.screen.query_one("#warnings").text
        assert table_rows(app) == []
        fake.up()
        await wait_for(pilot, lambda: "● reachable" in app.screen.query_one("#engine", Panel).content.plain)
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)


async def test_engine_500_is_an_engine_error_not_unreachable(fake):
    """Ollama answered, with a 500 (its runner died): up but failing, said as such."""
    fake.state.fail("/api/ps", 500, "llama-server process has terminated: exit status 2")
    app = app_for(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "terminated" in app.screen.query_one("#engine", Panel).content.plain)
        engine_text = app.screen.query_one("#engine", Panel).content.plain
        assert "ENGINE ERROR" in engine_text and "UNREACHABLE" not in engine_text
        assert "engine error: llama-server process has terminated: exit status 2" in engine_text
        assert "engine error" in app.screen.query_one("#warnings").text
        fake.state.clear_faults()
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        assert "● reachable" in app.screen.query_one("#engine", Panel).content.plain


def drawn(widget) -> list[str]:
    """The text a widget puts on screen, row by row (what the user sees, styles aside)."""
    from textual.geometry import Region

    width, height = widget.size
    return [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]


BAR_CELLS = set("▁▂▃▄▅▆▇█")


async def test_gpu_history_without_nvml_is_no_data_not_a_full_bar(fake):
    app = app_for(fake, probes=FakeProbes(no_gpu_snapshot()))
    async with app.run_test(size=(120, 40)) as pilot:
        label = lambda: str(app.screen.query_one("#spark-gpu-label", Label).content)  # noqa: E731
        await wait_for(pilot, lambda: "no data" in label() and len(app.history_available) >= 2)
        assert label() == "no data (NVML Shared Library Not Found)"
        rows = drawn(app.screen.query_one("#spark-gpu"))
        assert rows and not BAR_CELLS & set("".join(rows)), rows  # blank: nothing drawn
        # the memory history beside it does draw its samples
        assert BAR_CELLS & set("".join(drawn(app.screen.query_one("#spark-mem"))))


async def test_gpu_history_bar_height_follows_the_utilization(fake):
    app = app_for(fake, probes=FakeProbes(spark_snapshot(util=35.0)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "35% now" in str(app.screen.query_one("#spark-gpu-label", Label).content))
        await pilot.pause(0.1)
        top, *_, bottom = drawn(app.screen.query_one("#spark-gpu"))
        # 35% of a 3-row sparkline is about one row: the bottom row filled, the top one empty
        assert set(bottom.strip()) == {"█"} and len(bottom.strip()) > 10
        assert not BAR_CELLS & set(top)


async def test_no_gpu_box_reads_na_with_reason(fake):
    app = app_for(fake, probes=FakeProbes(no_gpu_snapshot()))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "n/a (NVML" in app.screen.query_one("#gpu", Panel).content.plain)
        gpu = app.screen.query_one("#gpu", Panel).content.plain
        assert "util n/a" in gpu and "power n/a" in gpu
        pressure = app.screen.query_one("#pressure", Panel).content.plain
        assert "kernel has no PSI" in pressure
        assert "Host memory (no GPU)" in app.screen.query_one(BudgetBar).render().plain


async def test_low_memory_warning_and_throttle_are_loud(fake):
    probes = FakeProbes(spark_snapshot(available_gib=7.0, throttle=("hw_thermal_slowdown",)))
    app = app_for(fake, probes=probes)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "BELOW RESERVE" in app.screen.query_one(BudgetBar).render().plain)
        assert "at or below the 8.0 GiB reserve" in app.screen.query_one("#pressure", Panel).content.plain
        assert "hw_thermal_slowdown" in app.screen.query_one("#gpu", Panel).content.plain


async def test_history_grows_and_gpu_mismatch_is_flagged(fake):
    snap = spark_snapshot()
    # NVML sees the runner with 0 bytes while the engine claims 88 GiB on the GPU
    import dataclasses

    from sparkctl.core.snapshots import GpuProcess, GpuReport

    g = dataclasses.replace(gb10(), processes=(GpuProcess(4242, 0, "ollama"),))
    probes = FakeProbes(dataclasses.replace(snap, gpu=GpuReport(gpus=(g,))))
    app = app_for(fake, probes=probes)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(app.history_available) >= 3)
        await wait_for(pilot, lambda: "NVML attributes 0.0 GiB" in app.screen.query_one("#warnings").text)


async def test_bad_theme_falls_back_cleanly(fake, tmp_path):
    (tmp_path / "broken.toml").write_text('name = "broken"\nprimary = "not-a-colour"\n')
    cfg = Config(lanes=CFG.lanes, ui=type(CFG.ui)(theme="broken"))
    app = app_for(fake, cfg=cfg, user_theme_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        assert app.theme == "sparkctl-dark"
        assert any("primary: not a colour" in p for p in app.theme_problems)
        assert any("theme 'broken' not found" in p for p in app.theme_problems)


SNAPSHOT_PORT = 27911  # fixed: the engine URL is part of the picture (below the ephemeral ports a parallel run hands out)


def test_dashboard_snapshot_spark(snap_compare):
    server = FakeOllama(two_models_resident(), port=SNAPSHOT_PORT).start()
    # The fake's expiries follow the real clock; a clock pinned past them makes 'Until'
    # read a stable "Stopping..." for the 4-minute model and "Forever" for the other.
    fixed = datetime(2030, 1, 1, tzinfo=timezone.utc)
    app = app_for(server, clock=lambda: fixed, refresh_s=3600)  # one sample: a still picture

    async def settle(pilot):
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        await pilot.pause(0.1)

    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=settle)
    finally:
        server.stop()


async def test_manual_refresh_does_not_fork_the_sampling_loop(fake):
    probes = FakeProbes(spark_snapshot())
    app = app_for(fake, probes=probes, refresh_s=0.3)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        for _ in range(5):
            await pilot.press("r")
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        before = probes.reads
        await pilot.pause(3.0)
        # one chain: about 3.0 / 0.3 = 10 reads (a forked loop would read 5-6 times as often)
        assert probes.reads - before <= 14


async def test_the_budget_legend_names_every_model_s_lane_at_any_width():
    """Issue 30: at 140 columns with three models the legend's one-line form without lanes
    was taken over the lane-naming form on two lines. The budget is the real core's, from a
    FAKE Spark's meminfo and three resident models with long names."""
    from textual.app import App

    from sparkctl.core.budget import build_budget
    from sparkctl.core.snapshots import GIB, ResidentModel

    from sparkctl.core.names import model_key

    # at 140 columns the legend without lanes fits one line, the one with lanes does not
    lanes = {"gpt-oss:120b": "production", "llama3.2:3b-instruct-q8_0": "fast"}
    contender = "qwen3-coder:30b-a3b-q8_0"
    resident = [ResidentModel("gpt-oss:120b", int(68 * GIB), int(68 * GIB)),
                ResidentModel("llama3.2:3b-instruct-q8_0", int(3 * GIB), int(3 * GIB)),
                ResidentModel(contender, int(24 * GIB), int(24 * GIB))]
    snap = spark_snapshot()
    budget = build_budget(snap.meminfo, snap.gpu, resident, lanes.get, 8.0, 16.0)

    class Bar(App):
        def compose(self):
            yield BudgetBar()

    for width in (80, 100, 140, 200):
        app = Bar()
        async with app.run_test(size=(width, 10)) as pilot:
            bar = app.query_one(BudgetBar)
            bar.show(budget, contenders=(model_key(contender),))
            await pilot.pause()
            legend = " ".join(bar.render().plain.splitlines()[2:])
            for model, lane in (*lanes.items(), (contender, "contender")):
                assert f"{model} ({lane})" in legend, (width, legend)
            assert all(len(line) <= width - 2 for line in bar.render().plain.splitlines())
