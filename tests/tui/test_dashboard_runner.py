"""The dashboard shows each resident model's runner (issue 31 point 1): its context per slot
and slots, KV cache type, flash attention and build, read from a REAL llama-server started
by a stand-in Ollama process (testkit/fakes/ollama_standin.py) with Ollama's flags. The host
probes are the fake Spark's; the runner read happens off the UI thread, after the first frame."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.integration.ollama_standin_proc import MODEL, running_standin
from tests.tui.test_dashboard import app_for, table_rows, wait_for

pytestmark = pytest.mark.llama


@pytest.fixture
def scans(monkeypatch):
    """Every runner scan: the thread it ran in and whether the first frame had been drawn."""
    import sparkctl.probes.ollama_runner as probe

    calls: list[tuple[str, bool]] = []
    real = probe.scan
    holder: dict = {}

    def watched(url):
        app = holder.get("app")
        calls.append((threading.current_thread().name, bool(app and app._painted)))
        return real(url)

    monkeypatch.setattr(probe, "scan", watched)
    return calls, holder


async def test_the_resident_table_shows_each_models_runner(tmp_path, scans):
    calls, holder = scans
    with running_standin(tmp_path / "standin", parallel=2, kv_type="q8_0", flash_attn="on") as standin:
        props = httpx.get(f"http://127.0.0.1:{standin.runner_port}/props", timeout=5).json()
        app = app_for(standin)
        holder["app"] = app
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: len(table_rows(app)) == 1 and len(table_rows(app)[0]) == 8, timeout=20)
            table = app.screen.query_one("#resident")
            assert [str(c.label) for c in table.ordered_columns][-1] == "Runner"
            row = table_rows(app)[0]
            assert row[0] == MODEL
            assert row[7] == f"{props['default_generation_settings']['n_ctx']}x{props['total_slots']} · KV q8_0 · " \
                             f"FA on · {props['build_info']}"
            assert row[7].startswith("512x2")
            # a refresh with the same resident set reads nothing again
            n = len(calls)
            await pilot.pause(1.0)
            assert len(calls) == n
            # an 80-column terminal has no room for it
            await pilot.resize_terminal(80, 30)
            await wait_for(pilot, lambda: len(table_rows(app)[0]) == 6)
    assert calls and all(painted for _, painted in calls)  # never for the first frame
    assert all(name != "MainThread" for name, _ in calls)  # never on the UI thread


async def test_no_runner_column_without_a_runner_and_nothing_said_for_a_listener_that_is_not_ollama(scans):
    """The fake Ollama answers from inside this test process: no Ollama process, no runner, no
    toast (it may be a proxy the user cannot change); the table is as it always was."""
    from testkit.fakes.ollama_server import FakeOllama, two_models_resident

    calls, holder = scans
    server = FakeOllama(two_models_resident()).start()
    try:
        app = app_for(server)
        holder["app"] = app
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: len(table_rows(app)) == 2)
            await wait_for(pilot, lambda: bool(calls), timeout=10)
            await pilot.pause(0.5)
            assert all(len(r) == 7 for r in table_rows(app))
            assert not any("runner" in m[0] for m in app.messages)
    finally:
        server.stop()
