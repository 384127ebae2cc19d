"""Shared by the Models screen's Pilot and snapshot tests: an app on the FAKE Ollama with
Spark-like FakeProbes and a fixed clock, and small steps that wait for its workers."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.models import ModelStore
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.models import ModelsScreen
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import FIXED_NOW, spark_config
from testkit.fakes.ollama_server import FakeOllama

SIZE = (140, 44)


def build(fake: FakeOllama, tmp_path, probes: FakeProbes | None = None):
    engine = OllamaEngine(fake.url, timeout=5.0, connect_timeout=1.0, load_timeout=10.0)
    probes = probes or FakeProbes(spark_snapshot(61.0, runner_gib=78.5))
    app = make_app(spark_config(), engine=engine, probes=probes, clock=lambda: FIXED_NOW, user_theme_dir=tmp_path)
    app.animation_level = "none"
    return app


async def settle(app, pilot) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def open_models(app, pilot) -> ModelsScreen:
    await pilot.press("m")
    await pilot.pause(0.1)
    screen = app.screen
    assert isinstance(screen, ModelsScreen)
    screen.model_store = ModelStore(None, "not checked in tests")
    await settle(app, pilot)
    return screen


def select(screen: ModelsScreen, name: str) -> None:
    screen.query_one("#models", DataTable).move_cursor(row=list(screen.rows).index(name))


def info(screen: ModelsScreen) -> str:
    return str(screen.query_one("#model-info-text", Static).render())


async def through_dialog(app, pilot, key: str, ctx: str = "", keep_alive: str = "") -> None:
    """Press f or l and answer the context / keep-alive dialog (blank keeps the defaults)."""
    from textual.widgets import Input

    from sparkctl.tui.widgets.model_dialogs import LoadDialog

    await pilot.press(key)
    await pilot.pause()
    dialog = app.screen
    assert isinstance(dialog, LoadDialog), dialog
    dialog.query_one("#load-ctx", Input).value = ctx
    if dialog.load:
        dialog.query_one("#load-keep-alive", Input).value = keep_alive
    await pilot.press("enter")
    await pilot.pause()
    await settle(app, pilot)
