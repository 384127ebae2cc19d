"""The footer follows the terminal's width while the app runs: under 100 columns the
palette's key gives its place to the screens' keys, and comes back when the terminal is
wide again. The engine is the FAKE Ollama (testkit/fakes/ollama_server.py, real HTTP), the
host the FAKE Spark-like probes."""

from __future__ import annotations

from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_config
from testkit.fakes.ollama_server import FakeOllama, two_models_resident


def _palette_keys(app) -> int:
    return len(app.screen.query(".-command-palette"))


async def test_the_palette_key_leaves_the_footer_at_80_columns_and_comes_back(tmp_path):
    server = FakeOllama(two_models_resident()).start()
    try:
        app = make_app(spark_config(), engine=OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0),
                       probes=FakeProbes(spark_snapshot()), user_theme_dir=tmp_path, recorder=lambda r: None)
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.pause(0.3)
            assert _palette_keys(app) == 1
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            assert _palette_keys(app) == 0
            footer_text = " ".join(str(k.render()) for k in app.screen.query("FooterKey"))
            assert "Quit" in footer_text  # the screens' keys keep their place
            await pilot.resize_terminal(140, 45)
            await pilot.pause(0.3)
            assert _palette_keys(app) == 1
    finally:
        server.stop()
