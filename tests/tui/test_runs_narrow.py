"""The Runs screen at 80x24 (issue 20): whether a run counts (its status and flags) shows
without scrolling sideways, a refused run reads REFUSED, Home and End move the cursor, and
the footer keeps the keys to the other screens. The runs are made by the REAL BenchRunner
against the FAKE Ollama and recorded into a REAL SQLite MLflow store."""

from __future__ import annotations

from textual.widgets import DataTable

from testkit.fakes.ollama_server import FakeOllama, load_scenario
from testkit.tracking import mlflow_template_db  # noqa: F401
from tests.tui.screen_text import screen_text
from tests.tui.test_runs_screen import build, until
from tests.tui.test_screen_states import refused_history  # noqa: F401


async def test_at_80x24_status_model_kind_speed_and_score_come_first_and_a_refused_run_reads_refused(
        refused_history):  # noqa: F811
    server = FakeOllama(load_scenario()).start()  # the screen's own engine: the runs are in the store
    store = refused_history
    app = build(server, store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 2)
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        head = next(line for line in lines if "Status" in line)
        # issue 30: what a decision reads comes first, within 80 columns (it took ~20 presses
        # of → to reach tok/s); the flags follow, Enter shows a run whole
        assert head.split()[1:6] == ["Status", "Model", "Kind", "tok/s", "score%"]
        table = app.screen.query_one("#runs", DataTable)
        keys = [c.key.value for c in table.ordered_columns]
        upto = keys.index("score") + 1
        assert sum(c.get_render_width(table) for c in table.ordered_columns[:upto]) <= 78
        refused = next(line for line in lines if "qwen3:8b" in line)
        assert refused.split()[1:3] == ["REFUSED", "qwen3:8b"]  # not "FAILED"
        benched = next(line for line in lines if "llama3.2:3b" in line)
        decode = next(r for r in app.screen.rows if r.model == "llama3.2:3b").decode_tps_median
        assert f"{decode:.1f}" in benched.split()  # its tok/s on screen without scrolling
        footer = lines[-1]
        assert "d m b h e screens" in footer and "q Quit" in footer and "? Help" in footer
        table = app.screen.query_one("#runs", DataTable)
        table.move_cursor(row=1)
        await pilot.press("home")
        assert table.cursor_row == 0
        await pilot.press("end")
        assert table.cursor_row == 1
    app = build(server, store)
    async with app.run_test(size=(140, 45)) as pilot:  # wide: every column in its usual order
        await pilot.press("h")
        await until(pilot, lambda: app.current_mode == "runs" and len(app.screen.rows) == 2)
        await pilot.pause(0.2)
        head = next(line for line in screen_text(app).splitlines() if "Status" in line)
        assert head.split()[1:4] == ["Date", "Status", "Kind"]
    server.stop()
