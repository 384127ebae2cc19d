"""Solo asks first (issue 17, point 5): starting a solo bench in the TUI names each model it
will unload, for about how long, and what can be known about their use; the switch is
visibly on in the Bench form and goes back to the config's mode after the run. And the
Bench screen's "keep loaded" switch (point 4). Pilot tests
against the FAKE Ollama (testkit/fakes/ollama_server.py, real HTTP) and FAKE Spark probes."""

from __future__ import annotations

import dataclasses
import threading
import time

import httpx
from textual.widgets import Input, Label, Switch

from sparkctl.config import Config
from sparkctl.tui.widgets.model_dialogs import ConfirmDialog
from sparkctl.tui.widgets.notes import NotesPanel
from testkit.fakes.ollama_server import FakeOllama, default_state, make_model
from tests.tui.screen_text import joined, screen_text
from tests.tui.test_bench_screen import build

LANES = {"production": "qwen3:8b", "fast": "qwen3:4b"}


def lanes_state():
    """production kept forever; fast with a 30-minute session whose last request ended 4
    minutes ago (26 minutes left), as the user's router leaves it."""
    state = default_state()
    state.tokens_per_s = None
    state.add_model(make_model("qwen3:4b", size_gib=2.5, parameter_size="4.0B", context_length=40960))
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    fast = state.add_resident("qwen3:4b", expires_in_s=1800, context_length=8192)
    fast.expires_at_ns = time.time_ns() + 26 * 60 * 10**9
    return state


def config(mode: str = "beside") -> Config:
    base = Config(lanes=LANES, lane_keep_alive={"fast": "30m"})
    b = dataclasses.replace(base.bench, warmup=0, reps=1, num_predict=5, mode=mode)
    return dataclasses.replace(base, bench=b, ui=dataclasses.replace(base.ui, refresh_s=5.0))


async def open_bench(app, pilot, models: str, solo: bool | None = True):
    await pilot.press("b")
    await pilot.pause(0.2)
    app.screen.query_one("#models", Input).value = models
    if solo is not None:
        app.screen.query_one("#solo", Switch).value = solo
    await pilot.pause(0.05)


async def dialog(app, pilot) -> ConfirmDialog:
    for _ in range(100):
        if isinstance(app.screen, ConfirmDialog):
            return app.screen
        await pilot.pause(0.05)
    raise AssertionError("solo started without asking")


async def run_solo(app, pilot) -> None:
    """Run, answer the solo question yes, wait for the bench to end."""
    await pilot.click("#run")
    await dialog(app, pilot)
    await pilot.press("y")
    await pilot.pause(0.2)
    await app.workers.wait_for_complete()
    await pilot.pause(0.2)


def prompts(server) -> list:
    return [c for c in server.calls("/api/generate") if c.body.get("prompt")]


def unloads(server) -> list:
    return [c for c in server.calls("/api/generate") if c.body.get("keep_alive") == 0]


async def test_solo_names_what_it_unloads_and_no_changes_nothing():
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(140, 45)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b")
            await pilot.click("#run")
            question = (await dialog(app, pilot)).question
            assert "lane production: qwen3:8b — context 32768, kept forever" in question
            assert "lane fast: qwen3:4b — context 8192, session 30m" in question
            assert "last request ended about 4 min ago" in question
            assert "at most" in question and "Ollama does not list requests in flight" in question
            await pilot.press("n")
            await pilot.pause(0.3)
            assert not [w for w in app.screen.workers if w.group == "bench"]
        assert prompts(server) == [] and unloads(server) == []
        assert set(server.state.resident_names()) >= {"qwen3:8b", "qwen3:4b"}
    finally:
        server.stop()


async def test_a_request_seen_while_it_asks_is_reported(monkeypatch):
    monkeypatch.setattr("sparkctl.services.bench.solo.WATCH_S", 3.0)  # room for the router's request
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(140, 45)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b")

            def router():  # the user's router serves someone while the dialog is prepared
                time.sleep(1.0)
                httpx.post(f"{server.url}/api/generate", json={"model": "qwen3:4b", "prompt": "hi", "stream": False,
                                                               "options": {"num_ctx": 8192, "num_predict": 2}})

            t = threading.Thread(target=router)
            t.start()
            await pilot.click("#run")
            question = (await dialog(app, pilot)).question
            t.join()
            assert "qwen3:4b served a request in the last" in question
            await pilot.press("n")
    finally:
        server.stop()


async def test_the_switch_is_visible_in_the_form_and_resets_after_the_run():
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(140, 45)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b", solo=None)
            badge = app.screen.query_one("#solo-badge", Label)
            assert not badge.display
            app.screen.query_one("#solo", Switch).value = True
            await pilot.pause(0.05)
            assert badge.display and "SOLO" in str(badge.render())
            assert app.screen.query_one("#settings").collapsed  # visible although the settings are closed
            await run_solo(app, pilot)
            assert prompts(server) and unloads(server)  # it ran solo
            assert app.screen.query_one("#solo", Switch).value is False  # back to the config's beside
            assert not badge.display
        assert {"qwen3:8b", "qwen3:4b"} <= set(server.state.resident_names())
    finally:
        server.stop()


async def test_solo_pinned_in_the_config_stays_on_after_the_run():
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config(mode="solo"))
        async with app.run_test(size=(140, 45)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b", solo=None)
            assert app.screen.query_one("#solo-badge", Label).display
            await run_solo(app, pilot)
            assert app.screen.query_one("#solo", Switch).value is True
    finally:
        server.stop()


async def test_keep_loaded_in_the_bench_settings_leaves_the_model_resident():
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(140, 45)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b", solo=None)
            app.screen.query_one("#keep_loaded", Switch).value = True
            await pilot.pause(0.05)
            assert "keep loaded" in app.screen.query_one("#settings").title
            await pilot.click("#run")
            await pilot.pause(0.2)
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            assert "llama3.2:3b" in server.state.resident_names()
            app.screen.query_one("#keep_loaded", Switch).value = False
            with server.state.lock:  # gone again: a model resident before a bench is left resident after it
                server.state.resident.pop("llama3.2:3b", None)
            await pilot.click("#run")
            await pilot.pause(0.2)
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            assert "llama3.2:3b" not in server.state.resident_names()  # the default: unloaded at its end
    finally:
        server.stop()


async def test_when_solo_cannot_read_the_engine_the_reason_stays_on_screen():
    # issue 20, seen item 1: nothing important only in a toast. Ollama (the FAKE) goes down
    # between opening the form and Run: solo cannot say what it would unload.
    server = FakeOllama(lanes_state()).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(80, 24)) as pilot:
            await open_bench(app, pilot, "llama3.2:3b")
            server.down()
            await pilot.click("#run")
            for _ in range(200):
                if "cannot read" in str(app.screen.query_one("#phase", Label).render()):
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.1)
            assert not isinstance(app.screen, ConfirmDialog)
            assert not [w for w in app.screen.workers if w.group == "bench"]
            phase = str(app.screen.query_one("#phase", Label).render())
            assert phase.startswith("not started: solo: cannot read the engine's resident models")
            assert "cannot read the engine's resident models" in app.screen.query_one("#notes", NotesPanel).text
            assert "cannot read the engine's resident models" in joined(screen_text(app))
    finally:
        server.stop()
