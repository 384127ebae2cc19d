"""The TUI closes runs whose sparkctl died mid-bench when it starts (KILLED, with the
repetitions they finished) and says so. The Ollama is a FAKE (testkit/fakes/ollama_server.py)."""

from __future__ import annotations

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.spool import Spool
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, default_state
from tests.integration.test_tracking_journal import crashed_bench


async def test_a_crashed_bench_is_closed_killed_when_the_tui_starts(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    rid, _pid = crashed_bench(spool, reps=2)
    server = FakeOllama(default_state()).start()
    try:
        app = make_app(Config(), engine=OllamaEngine(server.url), probes=FakeProbes(spark_snapshot()),
                       recorder=lambda r: None, spool=spool)
        app.animation_level = "none"
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if spool.pending():
                    break
            await pilot.pause(0.1)
            messages = [n.message for n in app._notifications]
        (rec,) = spool.pending()
        assert rec.record_id == rid and rec.status == "KILLED"
        assert any("recovered 1 interrupted run(s) of qwen3:8b as KILLED" in m for m in messages), messages
    finally:
        server.stop()
