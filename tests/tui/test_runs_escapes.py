"""Runs on a team's MLflow server are written by any of its users: what the Runs screen
shows of them has no escape sequences (Textual would hand them to the terminal). The store
is a REAL SQLite one; the hostile run goes in through sparkctl's own recorder; the engine
is the FAKE Ollama."""

from __future__ import annotations

import time

from textual.widgets import DataTable

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from testkit.tracking import TEST_EXPERIMENT, copy_template_store, mlflow_template_db  # noqa: F401
from tests.tui.test_runs_screen import build, open_runs

HOSTILE = "\x1b]0;PWNED\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m"


async def test_a_run_with_escape_sequences_in_its_tags_is_listed_as_plain_text(mlflow_template_db, tmp_path):  # noqa: F811
    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    now = int(time.time() * 1000)
    rec = RunRecord(experiment=TEST_EXPERIMENT, run_name=f"bench{HOSTILE}", status="FINISHED", start_ms=now,
                    end_ms=now + 1000, params={"model": "x"},
                    tags={"model.name": f"qwen3:8b{HOSTILE}", "engine.kind": "ollama",
                          "engine.version": f"0.13.0{HOSTILE}", "host.name": f"spark{HOSTILE}"},
                    summary_metrics={"decode_tps_median": 40.0})
    assert record_run(rec, Spool(tmp_path / "spool.jsonl"), store).synced
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store)
        async with app.run_test(size=(140, 40)) as pilot:
            screen = await open_runs(app, pilot)
            table = screen.query_one("#runs", DataTable)
            cells = [str(c) for c in table.get_row_at(0)]
            assert any(c.startswith("qwen3:8b") for c in cells) and any("spark" in c for c in cells)
            for c in cells:
                assert not any(ch in c for ch in "\x1b\x07\x9b") and "PWNED" not in c, c
    finally:
        server.stop()


async def test_the_run_detail_shows_hostile_tags_and_artifacts_as_plain_text(mlflow_template_db, tmp_path):  # noqa: F811
    """Opening a run whose bench flags, invalid reasons and output another user wrote:
    nothing in them acts on the terminal (an OSC title in `guard.flags` retitled the pane),
    and a `[/bold]` in its model name is text, not markup that ends the app."""
    from tests.tui.screen_text import escapes_in, screen_text, terminal_output
    from tests.tui.test_runs_screen import until

    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    now = int(time.time() * 1000)
    rec = RunRecord(experiment=TEST_EXPERIMENT, run_name="bench", status="FINISHED", start_ms=now,
                    end_ms=now + 1000, params={"model": "x"},
                    tags={"model.name": "m[/bold]x", "engine.kind": "ollama", "engine.version": "0.13.0",
                          "guard.flags": f"thermal{HOSTILE}", "guard.invalid_reasons": f"too hot{HOSTILE}"},
                    summary_metrics={"decode_tps_median": 40.0},
                    artifacts={"outputs.json": '[{"output": "forty\\u001b]0;PWNED\\u0007 two"}]'})
    assert record_run(rec, Spool(tmp_path / "spool.jsonl"), store).synced
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = build(server, store)
        async with app.run_test(size=(140, 40)) as pilot:
            await open_runs(app, pilot)
            await pilot.press("space")  # marked for a head to head: the status line names the model
            await pilot.pause()
            assert "marked m[/bold]x (v compares)" in screen_text(app)
            await pilot.press("enter")
            await until(pilot, lambda: type(app.screen).__name__ == "RunDetailScreen" and app.screen.decode is not None)
            await pilot.pause()
            output = terminal_output(app)
            assert escapes_in(output) == [] and "PWNED" not in output
            text = screen_text(app)
            assert "bench flags: thermal" in text and "invalid: too hot" in text and "m[/bold]x" in text
            assert "forty two" in text
    finally:
        server.stop()
