"""A first run with no engine reachable: the dashboard says what it looked for, how that
address was chosen and how to point elsewhere, keeps retrying, and clears once an engine
answers. The engine that comes up is the FAKE Ollama (testkit/fakes/ollama_server.py)."""

from __future__ import annotations

import asyncio
import socket

from textual.widgets import DataTable, Static

from sparkctl.config import load_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, no_gpu_snapshot
from testkit.fakes.ollama_server import FakeOllama, two_models_resident


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def until(pilot, cond, timeout=10.0):
    end = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < end, "timed out"
        await pilot.pause(0.05)


def app_at(url: str, cfg):
    engine = OllamaEngine(url, timeout=1.0, connect_timeout=0.5)
    app = make_app(cfg, engine=engine, probes=FakeProbes(no_gpu_snapshot()), recorder=lambda r: None)
    app.animation_level = "none"
    return app


async def test_no_engine_explains_where_it_looked_and_recovers(tmp_path, monkeypatch):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OLLAMA_HOST", url)
    cfg = load_config(None)  # no file anywhere: built-in defaults, the host from $OLLAMA_HOST
    cfg = type(cfg)(**{**cfg.__dict__, "ui": type(cfg.ui)(refresh_s=0.3, history_s=60)})
    app = app_at(url, cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.screen.query_one("#first-run", Static)
        await until(pilot, lambda: panel.display)
        text = str(panel.render())
        assert f"No engine at {url}" in text
        assert "($OLLAMA_HOST)" in text
        assert "sparkctl config --init" in text and "OLLAMA_HOST=http://HOST:11434" in text
        assert not app.screen.query_one("#resident", DataTable).display
        # an engine comes up on that port: the next sample finds it, the panel goes
        server = FakeOllama(two_models_resident(), port=port).start()
        try:
            await until(pilot, lambda: not panel.display)
            assert app.screen.query_one("#resident", DataTable).row_count == 2
        finally:
            server.stop()


async def test_the_configured_host_is_named_with_its_file(tmp_path, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"
    conf = tmp_path / "sparkctl.toml"
    conf.write_text(f'[engine]\nhost = "{url}"\n')
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    app = app_at(url, load_config(str(conf)))
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.screen.query_one("#first-run", Static)
        await until(pilot, lambda: panel.display)
        text = str(panel.render())
        assert f"([engine] host in {conf})" in text and f"host in\n{conf}" in text
