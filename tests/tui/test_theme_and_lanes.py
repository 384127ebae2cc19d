"""The theme picked in the TUI is saved through sparkctl's owned state file (never the
user's sparkctl.toml) and restored at the next start; user themes load, a broken one is
skipped with a notice naming the file and key; the dashboard marks a lane whose model is
not resident. FAKE Ollama (testkit/fakes/ollama_server.py) and FAKE host probes."""

from __future__ import annotations

import asyncio

from sparkctl import paths
from sparkctl.config import load_config
from sparkctl.statefile import read_state
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, two_models_resident

USER = """\
# mine: keep this comment
[lanes]
production = "gpt-oss:120b"  # prod
fast = "llama3.2:3b"
"""


async def wait_for(pilot, predicate, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline
        await pilot.pause(0.05)


def app(cfg, server, theme_dir=None):
    from sparkctl.engines.ollama import OllamaEngine

    return make_app(cfg, engine=OllamaEngine(server.url, timeout=2.0), probes=FakeProbes(spark_snapshot()),
                    user_theme_dir=theme_dir, recorder=lambda rec: None)


async def test_theme_choice_is_saved_to_the_owned_file_and_restored(tmp_path):
    user = tmp_path / "sparkctl.toml"
    user.write_text(USER)
    server = FakeOllama(two_models_resident()).start()
    try:
        first = app(load_config(str(user)), server, tmp_path / "themes")
        async with first.run_test(size=(120, 40)) as pilot:
            assert first.theme == "sparkctl-dark"
            first.theme = "sparkctl-light"  # what the palette's "Change theme" does
            await wait_for(pilot, lambda: read_state(paths.state_file()).theme == "sparkctl-light")
        assert user.read_text() == USER  # the user's file is never rewritten
        cfg = load_config(str(user))
        assert cfg.ui.theme == "sparkctl-light" and cfg.sources["ui.theme"] == str(paths.state_file())
        second = app(cfg, server, tmp_path / "themes")
        async with second.run_test(size=(120, 40)):
            assert second.theme == "sparkctl-light"
    finally:
        server.stop()


async def test_user_theme_loads_and_a_broken_one_is_named_with_its_key(tmp_path):
    themes = tmp_path / "themes"
    themes.mkdir()
    (themes / "mine.toml").write_text('name = "mine"\nprimary = "#ff8800"\n[lanes]\nproduction = "#00ff00"\n')
    (themes / "broken.toml").write_text('name = "broken"\nprimary = "#ff8800"\n[lanes]\nfast = "not-a-colour"\n')
    user = tmp_path / "sparkctl.toml"
    user.write_text(USER + '\n[ui]\ntheme = "mine"\n')
    server = FakeOllama(two_models_resident()).start()
    try:
        a = app(load_config(str(user)), server, themes)
        async with a.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.1)
            assert a.theme == "mine"
            (problem,) = [p for p in a.theme_problems if "broken.toml" in p]
            assert problem == f"{themes / 'broken.toml'}: [lanes] fast: not a colour: 'not-a-colour'"
    finally:
        server.stop()


async def test_dashboard_marks_a_lane_whose_model_is_not_resident(tmp_path):
    user = tmp_path / "sparkctl.toml"
    user.write_text(USER)
    server = FakeOllama(two_models_resident()).start()  # gpt-oss:120b resident; llama3.2:3b is not
    try:
        a = app(load_config(str(user)), server)
        async with a.run_test(size=(120, 40)) as pilot:
            label = a.screen.query_one("#warnings")
            await wait_for(pilot, lambda: label.display and "NOT RESIDENT" in str(label.render()))
            text = str(label.render())  # the line on screen
            assert "lane fast: llama3.2:3b NOT RESIDENT" in text and "production" not in text
    finally:
        server.stop()
