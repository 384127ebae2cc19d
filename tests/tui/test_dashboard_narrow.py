"""The dashboard at 80x24, the ssh default (issue 20): three resident models (production,
the fast lane and a contender) all on screen without scrolling, the legend whole and in
the table's words, the panels' key facts in their three lines. FAKE Ollama, FAKE Spark
probes, fixed clock."""

from __future__ import annotations

from textual.widgets import DataTable

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
