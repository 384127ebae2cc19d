"""The Models screen at 80x24 and the contender mark (issue 20): the columns a decision
needs on screen, Home on the first row, the screen's own words, and a contender that is
still one after a restart (sparkctl's own state file). Against the FAKE Ollama with the
Spark-like scenario of testkit/fakes/model_scenarios.py."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from sparkctl.config import layer_state
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.statefile import read_state
from sparkctl.tui.app import make_app
from sparkctl.tui.widgets.budget_bar import BudgetBar
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import FIXED_NOW, spark_config
from testkit.fakes.ollama_server import FakeOllama
from tests.tui.models_helpers import build, info, open_models, select, settle, through_dialog
from tests.tui.screen_text import screen_text


@pytest.fixture
def fake(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake


async def test_at_80x24_the_lane_and_loaded_columns_are_on_screen_and_home_goes_to_the_first_row(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_models(app, pilot)
        lines = screen_text(app).splitlines()
        head = next(line for line in lines if " Model " in line)
        assert "Lane" in head and "Loaded" in head and "Size" in head
        prod = next(line for line in lines if "gpt-oss:120b" in line)
        assert "production" in prod and "GPU 68.0 GiB" in prod
        table = screen.query_one("#models", DataTable)
        table.focus()
        select(screen, "deepseek-r1:671b")
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1


async def test_a_fit_names_the_screens_own_context_field_not_a_cli_flag(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "f")  # blank context: the engine's choice
        text = info(screen)
        assert "num_ctx" in text and "--ctx" not in text
        assert "give a context in the fit dialog (f)" in text


async def test_the_contender_mark_outlives_a_restart_and_the_legend_says_contender(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "l")
        assert str(screen.query_one("#models", DataTable).get_cell("qwen3:8b", "lane")) == "contender"
        await settle(app, pilot)
    assert read_state().contenders == ("qwen3:8b",)  # sparkctl's own state file

    # a new sparkctl, its config read as the CLI reads it (the owned file layered over the user's)
    again = make_app(layer_state(spark_config(), read_state()),
                     engine=OllamaEngine(fake.url, timeout=5.0, connect_timeout=1.0, load_timeout=10.0),
                     probes=FakeProbes(spark_snapshot(61.0, runner_gib=78.5)), clock=lambda: FIXED_NOW,
                     user_theme_dir=tmp_path)
    again.animation_level = "none"
    async with again.run_test(size=(140, 44)) as pilot:
        await pilot.pause(0.3)
        await settle(again, pilot)
        resident = again.screen.query_one("#resident", DataTable)
        lanes = {str(resident.get_row_at(i)[0]): str(resident.get_row_at(i)[1]) for i in range(resident.row_count)}
        assert lanes["qwen3:8b"] == "contender"
        legend = again.screen.query_one(BudgetBar).render().plain
        assert "qwen3:8b (contender)" in legend and "(other)" not in legend
        screen = await open_models(again, pilot)
        assert str(screen.query_one("#models", DataTable).get_cell("qwen3:8b", "lane")) == "contender"
        # unloaded from sparkctl: no longer a contender, here and in the file
        select(screen, "qwen3:8b")
        await pilot.press("u")
        await settle(again, pilot)
    assert read_state().contenders == ()
