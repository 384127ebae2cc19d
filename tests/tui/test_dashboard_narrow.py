"""The dashboard at 80x24, the ssh default (issue 20): three resident models (production,
the fast lane and a contender) all on screen without scrolling, the legend whole and in
the table's words, the panels' key facts in their three lines. FAKE Ollama, FAKE Spark
probes, fixed clock."""

from __future__ import annotations

from textual.widgets import DataTable

from testkit.tracking import copy_template_store, mlflow_template_db  # noqa: F401
from tests.tui.screen_text import screen_text
from tests.tui.test_screen_states import resident_app, still


async def test_three_resident_models_the_legend_and_the_panels_fit_80x24(tmp_path):
    server, app = resident_app(0, tmp_path)  # any free port
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.3)
            await still(app, pilot)
            assert app.screen.max_scroll_y == 0  # nothing below the fold
            text = screen_text(app)
            lines = text.splitlines()
            table = app.screen.query_one("#resident", DataTable)
            assert table.max_scroll_x == 0 and table.max_scroll_y == 0  # no scrolling either way
            for model, lane in (("gpt-oss:120b", "production"), ("llama3.2:3b", "fast"),
                                ("qwen3:30b-a3b", "contender")):
                assert any(model in line and lane in line for line in lines), model  # a table row
                assert f"{model} ({lane})" in text  # the legend names the same lane, never "(other)"
            assert "(other)" not in text and "reserve 8.0" in text
            for fact in ("reachable", "NVIDIA GB10", "available 61.0 GiB"):
                assert fact in text
            assert "d m b h e screens" in lines[-1] and "q Quit" in lines[-1]
    finally:
        server.stop()


def four_warnings_app(tmp_path, store):
    """The walkthrough's fresh install (issue 30): production gpt-oss:120b, the fast lane's
    llama3.2:3b SPILLED to the CPU and the contender qwen3:30b-a3b resident; no bench of
    either lane in the (REAL, empty) MLflow store: two "no valid bench yet"; NVML cannot
    attribute per-process memory. Four warnings. FAKE Ollama, FAKE Spark probes."""
    import dataclasses

    from sparkctl.core.snapshots import GpuReport, Unavailable
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tui.app import make_app
    from testkit.fakes.host import FakeProbes, gb10, spark_snapshot
    from testkit.fakes.model_scenarios import spark_config
    from testkit.fakes.ollama_server import GIB, FakeOllama, two_models_resident
    from tests.tui.test_screen_states import FIXED

    state = two_models_resident()
    state.add_resident("llama3.2:3b", size=3 * GIB, size_vram=2 * GIB, expires_in_s=None, context_length=131072)
    server = FakeOllama(state).start()
    gpu = dataclasses.replace(gb10(), processes=Unavailable("Not Supported"))
    probes = FakeProbes(dataclasses.replace(spark_snapshot(), gpu=GpuReport(gpus=(gpu,), driver="580.95.05")))
    cfg = dataclasses.replace(spark_config(), contenders=("qwen3:30b-a3b",))
    cfg = dataclasses.replace(cfg, ui=dataclasses.replace(cfg.ui, refresh_s=3600, history_s=60))
    app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0), probes=probes,
                   clock=lambda: FIXED, user_theme_dir=tmp_path, recorder=lambda r: None, store=store)
    app.animation_level = "none"
    return server, app


def box_lines(text: str) -> list[str]:
    """The resident box's inside lines (between its title and its bottom border)."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if "Resident models" in line)
    bottom = next(i for i in range(top + 1, len(lines)) if lines[i].startswith("╰"))
    return [line[1:-1] for line in lines[top + 1:bottom]]


async def test_three_resident_models_stay_on_screen_with_four_warnings_at_80x24(
        tmp_path, mlflow_template_db, monkeypatch):  # noqa: F811
    """Issue 30: the warnings pushed two of three resident models off an 80x24 dashboard,
    were cut mid-word ("0.8 Gi│"), started in column 0 and left lines behind after a resize.
    Now the rows come first and each warning takes one line, whole, or is counted in a line
    that says N opens them; N shows every one of them whole."""
    import sparkctl.tui.app as app_module
    from sparkctl.tui.widgets.notes import NotesScreen

    monkeypatch.setattr(app_module, "DRIFT_DELAY_S", 0.05)
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server, app = four_warnings_app(tmp_path, store)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if len(app.stale_lanes) == 2 and app.report is not None and app.report.rows:
                    break
            await still(app, pilot)
            assert len(app.report.warnings) == 1 and len(app.stale_lanes) == 2  # the spilled lane; never benched
            first = screen_text(app)
            inside = box_lines(first)
            rows = [line for line in inside if line.split()[:2] in (["gpt-oss:120b", "production"],
                                                                     ["llama3.2:3b", "fast"],
                                                                     ["qwen3:30b-a3b", "contender"])]
            assert len(rows) == 3, first  # every resident model has its row
            assert app.screen.max_scroll_y == 0
            warnings = [line for line in inside if line.strip() and line not in rows and "Model" not in line]
            assert warnings, first
            for line in warnings:
                assert line.startswith(" ") and not line.startswith("  "), line  # the panel's padding, no more
                assert line.rstrip().endswith(("(h then B)", "(b)", "(spilled: not now)", "n/a", "opens them",
                                               "host memory", "cold)")), line  # whole, never cut
            shown = " ".join(warnings)
            if "opens them" not in shown:  # all four whole on their own line
                assert len(warnings) == 4
            else:
                assert warnings[-1].strip().startswith("⚠") and "N opens them" in warnings[-1]
            # the never-benched lanes point to b, the spilled one says why not now: nowhere B
            assert "(h then B)" not in shown
            await pilot.press("N")
            await pilot.pause(0.2)
            assert isinstance(app.screen, NotesScreen)
            whole = screen_text(app)
            assert "host memory bandwidth" in " ".join(whole.split())  # the spill warning whole
            assert "NVML per-process memory: n/a" in whole
            await pilot.press("escape")
            await pilot.pause(0.1)
            await pilot.resize_terminal(140, 45)
            await pilot.pause(0.3)
            wide = box_lines(screen_text(app))
            wide_shown = [line.strip() for line in wide if line.strip().startswith(("⚠", "NVML", "○"))]
            assert len(wide_shown) == 4 and not any("opens them" in line for line in wide_shown), wide_shown
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            assert screen_text(app) == first  # nothing of the wide picture left behind
    finally:
        server.stop()


async def test_a_long_model_name_at_80_columns_scrolls_sideways_and_hides_no_row(tmp_path):
    """Review of issue 32: the table's height was set to its rows, and a horizontal
    scrollbar (columns wider than 80 cells: a long Hugging Face name) took the last row's
    line. FAKE Ollama with a fourth resident model of a long name."""
    import dataclasses

    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tui.app import make_app
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.model_scenarios import spark_config
    from testkit.fakes.ollama_server import GIB, FakeOllama
    from tests.tui.test_screen_states import FIXED, three_resident

    long_name = "hf.co/unsloth/gpt-oss-20b-GGUF:Q4_K_M"
    state = three_resident()
    state.add_resident(long_name, size=13 * GIB, size_vram=13 * GIB, expires_in_s=None, context_length=131072)
    server = FakeOllama(state).start()
    cfg = dataclasses.replace(spark_config(), contenders=("qwen3:30b-a3b",))
    cfg = dataclasses.replace(cfg, ui=dataclasses.replace(cfg.ui, refresh_s=3600, history_s=60))
    app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0),
                   probes=FakeProbes(spark_snapshot()), clock=lambda: FIXED, user_theme_dir=tmp_path,
                   recorder=lambda r: None)
    app.animation_level = "none"
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.3)
            await still(app, pilot)
            table = app.screen.query_one("#resident", DataTable)
            assert table.row_count == 4
            assert table.max_scroll_x > 0  # wider than the screen: it scrolls sideways
            assert table.max_scroll_y == 0  # and every row is on show above the scrollbar
            text = screen_text(app)
            for model in ("gpt-oss:120b", "llama3.2:3b", "qwen3:30b-a3b", long_name):
                assert model in text, model
    finally:
        server.stop()
