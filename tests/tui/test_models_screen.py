"""The Models screen under Pilot, against the FAKE Ollama over real HTTP and FakeProbes
shaped like a Spark (121 GiB unified memory)."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import DataTable, Input, ProgressBar, Static

from sparkctl.tui.screens.models import COLUMNS, ModelsScreen
from sparkctl.tui.widgets.model_dialogs import ConfirmDialog, PullDialog
from sparkctl.tui.widgets.pull_view import PullProgressView
from sparkctl.core.snapshots import GIB
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_state
from testkit.fakes.ollama_server import FakeOllama, FakeState, pull_scenario
from tests.tui.models_helpers import SIZE, build, info, open_models, select, settle, through_dialog


@pytest.fixture
def fake(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake  # the Spark-like fake Ollama shared by the models tests (tests/conftest.py)


async def test_table_lists_the_engines_models_with_lane_and_residency(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        table = screen.query_one("#models", DataTable)
        assert list(screen.rows) == ["gpt-oss:120b", "qwen3:8b", "llama3.2:3b", "qwen3:30b-a3b", "deepseek-r1:671b"]
        prod = {key: str(table.get_cell("gpt-oss:120b", key)) for _, key in COLUMNS}
        assert prod["name"] == "gpt-oss:120b" and prod["lane"] == "production" and prod["loaded"] == "GPU 68.0 GiB"
        assert prod["context"] == "128K" and prod["caps"] == "think tools" and prod["modified"] == "3 days ago"
        assert str(table.get_cell("qwen3:8b", "loaded")) == "-"
        assert "5 model(s) · Ollama 0.12.6" in str(screen.query_one("#models-status").render())


async def test_fit_verdict_is_shown(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "f")
        text = info(screen)
        assert "qwen3:8b: fits: needs 12.0 GiB of 53.0 GiB available above the 8.0 GiB reserve" in text
        assert "num_ctx 40960" in text and "262144" in text
        assert screen.last_fit.verdict.kind.value == "fits"
        select(screen, "deepseek-r1:671b")
        await through_dialog(app, pilot, "f")
        # hundreds of GiB short even with everything evicted: no override is offered
        text = info(screen)
        assert "does not fit" in text and "press L" not in text
        assert "no override can load it" in text
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, ModelsScreen)  # no "load anyway?" dialog
        assert "no override can load it" in info(screen) and fake.calls("/api/generate") == []


async def test_refused_load_shows_the_reason_and_force_loads_after_confirming(fake, tmp_path):
    app = build(fake, tmp_path, FakeProbes(spark_snapshot(20.0, runner_gib=100)))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:30b-a3b")
        await through_dialog(app, pilot, "l")
        assert "refused: qwen3:30b-a3b fits only by evicting gpt-oss:120b (lane production)" in info(screen)
        assert fake.calls("/api/generate") == []
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle(app, pilot)
        assert "forced past: qwen3:30b-a3b fits only by evicting" in info(screen)
        assert screen.last_load.forced and fake.calls("/api/generate")


async def test_load_shows_verification_and_the_loaded_column_follows(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "l")
        text = info(screen)
        assert "✔ loaded qwen3:8b" in text and "gpt-oss:120b (lane production) still resident" in text
        resident = fake.state.resident["qwen3:8b"].size / GIB  # /api/ps: weights + KV + buffers
        assert f"vs resident {resident:.1f} GiB: +" in text and "(over-estimate)" in text
        assert str(screen.query_one("#models", DataTable).get_cell("qwen3:8b", "loaded")) == f"GPU {resident:.1f} GiB"
        await pilot.press("u")
        await settle(app, pilot)
        assert "unloaded qwen3:8b" in info(screen)
        assert str(screen.query_one("#models", DataTable).get_cell("qwen3:8b", "loaded")) == "-"
    assert "MainThread" not in app.probes.threads  # host reads happen off the UI thread


async def test_spill_and_out_of_memory_are_loud_in_the_panel(fake, tmp_path):
    fake.state = spark_state(spill=True)
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "l")
        assert "✘ loaded qwen3:8b" in info(screen) and "!! CPU SPILL" in info(screen)
        resident = fake.state.resident["qwen3:8b"].size / GIB
        assert str(screen.query_one("#models", DataTable).get_cell("qwen3:8b", "loaded")) == f"30% CPU {resident:.1f} GiB"

        fake.state = spark_state(out_of_memory=True)  # the server reads its state per request
        await through_dialog(app, pilot, "l")
        assert "load of qwen3:8b failed: model requires more system memory (70.3 GiB)" in info(screen)
        assert screen.busy is None


async def pull(app, pilot, name: str) -> None:
    await pilot.press("p")
    await pilot.pause()
    assert isinstance(app.screen, PullDialog)
    app.screen.query_one(Input).value = name  # typing it key by key costs ~70 ms a key
    await pilot.press("enter")
    await pilot.pause()


async def test_pull_view_progresses_to_success(fake, tmp_path):
    fake.state = pull_scenario()
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        await pull(app, pilot, "qwen3:8b")
        await settle(app, pilot)
        view = screen.query_one(PullProgressView)
        assert view.last.outcome == "success" and view.border_subtitle.startswith("success")
        assert view.query_one("#pull-bar", ProgressBar).percentage == 1.0
        layers = str(view.query_one("#pull-layers", Static).render())
        assert "already present" in layers and layers.count("done") == 3
        assert list(view.query_one("#pull-log").lines) == [
            "pulling manifest", "verifying sha256 digest", "writing manifest", "success"]
        assert "qwen3:8b" in screen.rows  # the list refreshed after the pull


async def test_pull_errors_are_shown_with_the_engine_version(fake, tmp_path):
    fake.state = pull_scenario()
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        await pull(app, pilot, "future")
        await settle(app, pilot)
        out = str(screen.query_one("#pull-outcome", Static).render())
        assert "requires a newer version of Ollama" in out and "0.12.6" in out
        await pull(app, pilot, "broken")
        await settle(app, pilot)
        assert "max retries exceeded" in str(screen.query_one("#pull-outcome", Static).render())


async def test_bad_name_stays_in_the_dialog(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_models(app, pilot)
        await pilot.press("p")
        await pilot.pause()
        app.screen.query_one(Input).value = "bad name"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PullDialog)
        assert "invalid model name 'bad name'" in str(app.screen.query_one("#pull-error").render())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ModelsScreen) and fake.calls("/api/pull") == []


def _slow(state: FakeState) -> FakeState:
    # The fake writes into socket buffers whatever the client reads, so the weights layer
    # must take longer (~10 s) than a busy test event loop takes to see the key press.
    state.pull_chunks = 1000
    state.pull_line_interval_s = 0.01
    return state


async def test_cancel_closes_the_stream_and_pulling_again_resumes(fake, tmp_path):
    state = fake.state = _slow(pull_scenario())
    weights = state.registry["qwen3:8b"].layers[0]
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        screen._pull_chosen("qwen3:8b")  # what the dialog's callback does (the dialog is tested above)
        for _ in range(100):
            await asyncio.sleep(0.02)
            if state.blobs.get(weights.digest, 0) > weights.total // 10:
                break
        await pilot.press("c")
        await settle(app, pilot)
        view = screen.query_one(PullProgressView)
        assert view.border_subtitle.startswith("cancelled") and not view.running
        assert "pull qwen3:8b again to resume" in str(view.query_one("#pull-outcome", Static).render())
        await asyncio.sleep(0.1)
        kept = state.blobs[weights.digest]
        await asyncio.sleep(0.1)
        assert 0 < kept < weights.total and state.blobs[weights.digest] == kept  # the server stopped
        state.pull_chunks = 4
        await pull(app, pilot, "qwen3:8b")
        await settle(app, pilot)
        assert view.last.outcome == "success" and view.last.layers[0].start_completed == kept
        assert "resumed from" in str(view.query_one("#pull-layers", Static).render())


async def test_delete_asks_and_lane_models_are_refused(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "llama3.2:3b")
        await pilot.press("x")
        await pilot.pause()
        assert "serves lane fast" in info(screen) and isinstance(app.screen, ModelsScreen)
        select(screen, "qwen3:8b")
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")
        await pilot.pause()
        assert fake.calls("/api/delete") == []
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert "deleted qwen3:8b" in info(screen) and "qwen3:8b" not in screen.rows
