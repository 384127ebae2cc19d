"""The dashboard's "Bench engines" panel: each [engines.NAME] reachable or not, with its model.
Engines: the FAKE Ollama and the FAKE OpenAI-compatible server (testkit/fakes/) over real HTTP."""

from __future__ import annotations

import socket

from sparkctl.config import parse_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.dashboard import Panel
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama
from testkit.fakes.openai_server import FakeOpenAI, OpenAIState


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _text(app) -> str:
    return str(app.screen.query_one("#engines", Panel).render())


async def _wait_for(app, pilot, predicate, tries: int = 50) -> None:
    for _ in range(tries):
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError(f"panel never matched; it shows: {_text(app)!r}")


async def test_engines_panel_shows_reachable_and_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    ollama = FakeOllama().start()
    llama = FakeOpenAI(OpenAIState()).start()
    try:
        cfg = parse_config(f"""
[engines.llama]
kind = "openai"
url = "{llama.url}"
model = "smollm2-135m"

[engines.spare]
kind = "openai"
url = "http://127.0.0.1:{_free_port()}"
model = "qwen3"
""")
        engine = OllamaEngine(ollama.url, timeout=5.0, connect_timeout=1.0)
        app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), user_theme_dir=tmp_path)
        app.animation_level = "none"
        async with app.run_test(size=(140, 44)) as pilot:
            await _wait_for(app, pilot, lambda: "UNREACHABLE" in _text(app))
            text = _text(app)
            assert "llama  llama.cpp b6500-3f4b3c2a" in text and "smollm2-135m" in text
            assert "spare  UNREACHABLE" in text and "cannot connect" in text
            llama.state.model_id = "other-model"
            app.sample_named_engines()
            await _wait_for(app, pilot, lambda: "NOT served" in _text(app))
            assert "serves other-model" in _text(app)
    finally:
        llama.stop()
        ollama.stop()


async def test_no_engines_configured_no_panel(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    ollama = FakeOllama().start()
    try:
        engine = OllamaEngine(ollama.url, timeout=5.0, connect_timeout=1.0)
        app = make_app(parse_config(""), engine=engine, probes=FakeProbes(spark_snapshot()), user_theme_dir=tmp_path)
        async with app.run_test(size=(140, 44)) as pilot:
            await pilot.pause(0.2)
            assert not app.screen.query("#engines")
            assert app.named_engines == {}
    finally:
        ollama.stop()


async def test_engine_answering_500_shows_engine_error_not_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    ollama = FakeOllama().start()
    llama = FakeOpenAI(OpenAIState()).start()
    llama.state.fail("/v1/models", 500, "llama_model_load: failed to load model")
    try:
        cfg = parse_config(f'[engines.llama]\nkind = "openai"\nurl = "{llama.url}"\nmodel = "smollm2-135m"\n')
        engine = OllamaEngine(ollama.url, timeout=5.0, connect_timeout=1.0)
        app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), user_theme_dir=tmp_path)
        app.animation_level = "none"
        async with app.run_test(size=(140, 44)) as pilot:
            await _wait_for(app, pilot, lambda: "failed to load model" in _text(app))
            text = _text(app)
            assert "llama  ENGINE ERROR" in text and "engine error:" in text and "UNREACHABLE" not in text
    finally:
        llama.stop()
        ollama.stop()
