"""What a dead bench left at the TUI's start (issue 17, point 2; issue 28, point 5: views only
read): the dashboard shows it and touches nothing; `P` puts the models its residency journal
names back once the TUI holds the engine's bench lock, and a restore that fails stays a loud
warning on the dashboard. Pilot tests against the FAKE Ollama (testkit/fakes/ollama_server.py,
real HTTP) and FAKE Spark probes."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone


from sparkctl import paths
from sparkctl.config import Config
from sparkctl.core.names import model_key
from sparkctl.core.residency import Held
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench.lock import engine_key
from sparkctl.tracking.owner import boot_id
from sparkctl.tracking.residency_journal import ResidencyJournal
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, default_state

FOREVER_AFTER_S = 100 * 365 * 86400


def dead_bench_left(server: FakeOllama) -> None:
    """A solo bench of llama3.2:3b killed -9: production unloaded, the contender resident."""
    server.state.add_resident("llama3.2:3b", expires_in_s=1800, context_length=8192)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names a process that is no more
    now = datetime.now(timezone.utc)
    ResidencyJournal("0123456789abcdef", engine_key(server.url), server.url, "bench", ["llama3.2:3b"], "solo", False,
                     [Held("qwen3:8b", "production", 32768, now + timedelta(days=365 * 290), True)],
                     [model_key("qwen3:8b")], {}, {"pid": gone.pid, "create_time": time.time(), "boot_id": boot_id(),
                                                    "host": socket.gethostname()},
                     now.isoformat(timespec="seconds")).save(paths.residency_dir())


def build(server):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(Config(lanes={"production": "qwen3:8b"}), engine=engine, probes=FakeProbes(spark_snapshot()),
                   recorder=lambda r: None)
    app.animation_level = "none"
    return app


async def test_the_tui_start_shows_what_a_dead_bench_changed_and_p_puts_it_back():
    server = FakeOllama(default_state()).start()
    try:
        dead_bench_left(server)
        app = build(server)
        async with app.run_test(size=(140, 45)) as pilot:
            label = app.screen.query_one("#warnings")
            for _ in range(100):
                await pilot.pause(0.05)
                if label.display and "not put back yet" in label.text:
                    break
            await app.workers.wait_for_complete()
            assert "not put back yet" in label.text and "P puts them back" in label.text  # as N shows it
            assert "(P)" in str(label.render())  # the line on screen names the key
            assert server.state.resident_names() == ["llama3.2:3b"]  # shown, not touched
            await pilot.press("P")
            for _ in range(200):
                await pilot.pause(0.05)
                if "qwen3:8b" in server.state.resident_names():
                    break
            await app.workers.wait_for_complete()
            said = " ".join(str(n.message) for n in app._notifications)
        assert server.state.resident_names() == ["qwen3:8b"]
        r = server.state.resident["qwen3:8b"]
        assert r.context_length == 32768 and (r.expires_at_ns - time.time_ns()) / 1e9 > FOREVER_AFTER_S
        assert "put back what a bench of llama3.2:3b" in said
        assert not list(paths.residency_dir().glob("*.json"))
    finally:
        server.stop()


async def test_a_restore_that_fails_is_a_loud_warning_on_the_dashboard():
    state = default_state()
    state.models["qwen3:8b"].load_error = (500, "model requires more system memory (20 GiB) than is available")
    server = FakeOllama(state).start()
    try:
        dead_bench_left(server)
        app = build(server)
        async with app.run_test(size=(140, 45)) as pilot:
            label = app.screen.query_one("#warnings")
            await pilot.pause(0.2)
            await pilot.press("P")
            for _ in range(200):
                await pilot.pause(0.05)
                if label.display and "not put back" in label.text:
                    break
            text = label.text  # whole, as N shows it
        assert "models not put back after a bench of llama3.2:3b" in text and "qwen3:8b" in text
        assert "sparkctl lanes --restore" in text
    finally:
        server.stop()
