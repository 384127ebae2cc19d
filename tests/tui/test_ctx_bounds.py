"""A context the engine cannot take is refused on the screens as the CLI refuses --ctx
(review of issues 28-31): past a 64-bit integer in the Bench and Eval forms and the load
dialog, and past the model's trained context when the bench reads it. Pilot tests against
the FAKE Ollama (its qwen3:8b says a trained context of 40960 in /api/show, as Ollama's
does) and FAKE Spark probes."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Label

from sparkctl.tui.widgets.model_dialogs import parse_context
from sparkctl.tui.widgets.notes import NotesPanel
from testkit.fakes.ollama_server import FakeOllama, default_state
from tests.tui.test_bench_screen import build
from tests.tui.test_solo_confirm import config, open_bench

HUGE = "9" * 25


def prompts(server) -> list:
    return [c for c in server.calls("/api/generate") if c.body.get("prompt")]


async def phase_of(app, pilot, start: str, timeout_s: float = 10.0) -> str:
    for _ in range(int(timeout_s / 0.05)):
        text = str(app.screen.query_one("#phase", Label).render())
        if text.startswith(start):
            return text
        await pilot.pause(0.05)
    raise AssertionError(f"the phase line never said {start!r}: {text!r}")


async def test_a_bench_num_ctx_past_64_bits_or_the_trained_context_is_refused_on_screen():
    state = default_state()
    state.tokens_per_s = None
    server = FakeOllama(state).start()
    try:
        app = build(server, config())
        async with app.run_test(size=(120, 40)) as pilot:
            await open_bench(app, pilot, "qwen3:8b", solo=False)
            app.screen.query_one("#num_ctx", Input).value = HUGE
            await pilot.click("#run")
            phase = await phase_of(app, pilot, "not started")
            assert phase.startswith("not started: num_ctx must be a whole number from 256 to 9223372036854775807")
            app.screen.query_one("#num_ctx", Input).value = "65536"
            await pilot.click("#run")
            await pilot.pause(0.2)
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            notes = app.screen.query_one("#notes", NotesPanel).text
            assert ("num_ctx 65536 is more than qwen3:8b's trained context (40960 tokens): the engine would run it "
                    "at 40960; ask for 40960 or less (the num_ctx setting)") in " ".join(notes.split()), notes
            assert app.is_running and prompts(server) == [] and "qwen3:8b" not in server.state.resident_names()
    finally:
        server.stop()


def test_the_load_dialog_context_has_the_same_bound():
    assert parse_context("9223372036854775807") == 2**63 - 1
    with pytest.raises(ValueError, match="context: at most 9223372036854775807 tokens"):
        parse_context(HUGE)
    with pytest.raises(ValueError, match="at most"):
        parse_context("9007199254740992k")
