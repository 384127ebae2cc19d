"""`?` opens help for the screen underneath: the keys that work there (read from the live
bindings) and what its columns mean. Against the FAKE Ollama."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario


@pytest.fixture
def app():
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    engine = OllamaEngine(server.url, timeout=5.0)
    a = make_app(Config(), engine=engine, probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
    a.animation_level = "none"
    yield a
    server.stop()


def help_text(app) -> str:
    from textual.widgets import Markdown

    return app.screen.query_one("#help-text", Markdown).source


@pytest.mark.parametrize("mode, keys, words", [
    ("dashboard", ["`r`", "`m`", "`h`"], ["Memory budget", "size_vram", "PSI"]),
    ("models", ["`p`", "`f`", "`l`", "`u`"], ["Fit", "evict a lane"]),
    ("runs", ["`space`", "`v`", "`c`"], ["score%", "J/tok", "dnf=N"]),
])
async def test_question_mark_explains_the_screen_underneath(app, mode, keys, words):
    async with app.run_test(size=(80, 24)) as pilot:
        await app.switch_mode(mode)
        await pilot.pause(0.2)
        under = type(app.screen).__name__
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "HelpScreen"
        text = help_text(app)
        for k in keys + ["`q`", "`?`"]:
            assert k in text, (k, text)
        for w in words:
            assert w in text
        assert app.screen.name_of == under
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == under


@pytest.mark.parametrize("mode, first", [("bench", "`^r`"), ("models", "`p`"), ("eval", "`^r`")])
async def test_help_lists_the_screens_own_keys_first_and_each_once(app, mode, first):
    async with app.run_test(size=(80, 24)) as pilot:
        await app.switch_mode(mode)
        await pilot.pause(0.3)
        app.screen.focus_next()  # a focused table or field brings its own generic keys
        await pilot.pause(0.1)
        if isinstance(app.focused, Input):
            await pilot.press("escape")  # a field takes `?` as text: leave it first
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        text = help_text(app)
        about = text.index("**" + {"bench": "Bench", "models": "Models", "eval": "Eval"}[mode])
        rows = [line for line in text[:about].splitlines() if line.startswith("- `")]  # the keys come first
        assert rows[0].startswith(f"- {first} ")  # the screen's own key, before the generic ones
        keys = [row.split("`")[1] for row in rows]
        assert len(keys) == len(set(keys)) and keys.count("?") == 1
        assert not any(word in text for word in ("Copy selected text", "Focus Next", "Cursor"))
