"""Snapshots of the Models screen (pytest-textual-snapshot). Fixed data: the FAKE Ollama
with fixed modification times, Spark-like FakeProbes, a fixed clock, animations off.
Regenerate with `pytest tests/tui/test_models_snapshots.py --snapshot-update` and look
at the SVGs before committing them."""

from __future__ import annotations


import pytest

from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, make_model, pull_scenario
from tests.tui.models_helpers import build, open_models, select, settle, through_dialog

SNAP_SIZE = (120, 36)


@pytest.fixture
def fake(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake  # the Spark-like fake Ollama shared by the models tests (tests/conftest.py)


def test_models_screen_with_a_fit_verdict(snap_compare, fake, tmp_path):
    app = build(fake, tmp_path)

    async def run_before(pilot) -> None:
        screen = await open_models(pilot.app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(pilot.app, pilot, "f")

    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=run_before)


def test_models_screen_with_a_refused_load(snap_compare, fake, tmp_path):
    app = build(fake, tmp_path, FakeProbes(spark_snapshot(20.0, runner_gib=78.5)))

    async def run_before(pilot) -> None:
        screen = await open_models(pilot.app, pilot)
        select(screen, "qwen3:30b-a3b")
        await through_dialog(pilot.app, pilot, "l")

    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=run_before)


def test_pull_view_after_a_pull(snap_compare, fake, tmp_path):
    fake.state = pull_scenario()
    for model in fake.state.models.values():
        model.modified_at_ns = 1_700_000_000 * 1_000_000_000
    app = build(fake, tmp_path)

    async def run_before(pilot) -> None:
        screen = await open_models(pilot.app, pilot)
        screen._pull_chosen("qwen3:8b")  # what the pull dialog's callback does
        await settle(pilot.app, pilot)
        # the new model's /api/show details come with the listing after the pull; on a busy
        # machine that listing can still be on its way when the workers first look idle
        from textual.widgets import DataTable

        table = screen.query_one(DataTable)
        for _ in range(100):
            rows = [[str(c) for c in table.get_row_at(r)] for r in range(table.row_count)]
            if any(row[0] == "qwen3:8b" and "think tools" in row for row in rows):
                break
            await pilot.pause(0.1)
            await settle(pilot.app, pilot)

    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=run_before)


def test_models_at_80x24_after_a_fit_and_a_pull(snap_compare, fake, tmp_path):
    """The ssh default size with both panels open: the list keeps five rows."""
    fake.state.add_registry_model("tiny", [300_000, 120], model=make_model("tiny", size_gib=0.0003))
    app = build(fake, tmp_path)

    async def run_before(pilot) -> None:
        screen = await open_models(pilot.app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(pilot.app, pilot, "f")
        screen._pull_chosen("tiny")  # pulled "now", after the fixed clock: "just now"
        await settle(pilot.app, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_load_dialog(snap_compare, fake, tmp_path):
    app = build(fake, tmp_path)

    async def run_before(pilot) -> None:
        screen = await open_models(pilot.app, pilot)
        select(screen, "qwen3:8b")
        await pilot.press("l")
        await pilot.pause()
        await pilot.press(*"32k")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SNAP_SIZE, run_before=run_before)
