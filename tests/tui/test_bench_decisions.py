"""The Bench screen at the moment of decision (issue 20): a refusal and every note read
whole at 80x24 in the TUI's own words, config keys literal, no stale gauges, no focus
trap, a sweep only as a visible mode. Against the FAKE Ollama server (real HTTP, paced
streams) and FAKE Spark probes; the terminal text is what Textual draws."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Button, DataTable, Input, Label, Select

from sparkctl.services.runs import list_runs
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.widgets.gauges import Gauges
from sparkctl.tui.widgets.notes import NotesPanel, NotesScreen
from testkit.fakes.ollama_server import FakeOllama, bench_scenario, load_scenario
from tests.tui.screen_text import joined, screen_text
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401
from tests.tui.test_bench_screen import build, config, finish, serve  # noqa: F401


async def open_bench(app, pilot):
    await pilot.press("b")
    await pilot.pause(0.3)
    await app.workers.wait_for_complete()  # the model field's list of local names
    await pilot.pause(0.1)
    return app.screen


async def run(app, pilot, models: str):
    app.screen.query_one("#models", Input).value = models
    await pilot.click("#run")
    await pilot.pause(0.1)
    await finish(app, pilot)


async def test_a_refusal_reads_whole_at_80x24_in_the_screens_words_and_clears_the_gauges(
        serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(load_scenario(spill=True))  # qwen3:8b loads 30% on the CPU: refused
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, config(warmup=0, reps=1, num_predict=5), recorder=lambda r: record_run(r, spool, mlflow_store))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        await run(app, pilot, "llama3.2:3b")  # a bench that runs: the gauges hold its figures
        assert screen.query_one(Gauges).values["rep"] == "llama3.2:3b 1/1"
        await run(app, pilot, "qwen3:8b")
        phase = str(screen.query_one("#phase", Label).render())
        assert phase.startswith("REFUSED")
        text = joined(screen_text(app))
        # the whole sentence is on screen, wrapped, naming the screen's own setting
        assert ("qwen3:8b placement before the run: 30%/70% CPU/GPU; the bench needs 100% GPU "
                "(use the 'allow CPU' setting to run it marked invalid)") in text
        assert "--allow-cpu" not in text
        # nothing of the earlier model's run is left in the gauges
        assert set(screen.query_one(Gauges).values.values()) == {"-"}
        assert screen.query_one("#summary", DataTable).row_count == 0
    # the refused run is on record as refused and not valid (MLflow's own status: FAILED)
    refused = [r for r in list_runs(mlflow_store, experiment="sparkctl-bench") if r.model == "qwen3:8b"]
    assert [(r.status, r.valid) for r in refused] == [("REFUSED", False)]
    (raw,) = [r for r in mlflow_store.search_runs(experiment="sparkctl-bench") if r["tags"]["model.name"] == "qwen3:8b"]
    assert raw["status"] == "FAILED" and "30%/70% CPU/GPU" in raw["tags"]["guard.refused"]


async def test_a_runs_notes_keep_config_keys_and_open_whole_with_enter(serve):
    # a runaway answer past a 0.3 s ceiling: did not finish, explained with its config key
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    app = build(server, config(warmup=0, reps=1, num_predict=100000, timeout_s=0.3))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        await run(app, pilot, "llama3.2:3b")
        panel = screen.query_one("#notes", NotesPanel)
        assert "[bench] timeout_s" in panel.text  # the key as the user types it in sparkctl.toml
        assert "[bench] timeout_s" in joined(screen_text(app))
        assert "note(s) below" in str(screen.query_one("#phase", Label).render())
        screen.query_one("#summary", DataTable).focus()
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, NotesScreen)
        whole = joined(screen_text(app))
        assert "did not finish" in whole and "[bench] timeout_s" in whole
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.screen is screen


async def test_the_screen_opens_with_no_field_focused_and_enter_never_starts_a_run(serve):
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    records = []
    app = build(server, config(warmup=0, reps=1, num_predict=100000), recorder=records.append)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        assert not isinstance(app.focused, Input)
        await pilot.press("question_mark")  # a key, not a letter typed into a field
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.pause(0.1)
        field = screen.query_one("#models", Input)
        field.focus()
        await pilot.press(*"llama3.2:3b", "enter")
        await pilot.pause(0.3)
        assert field.value == "llama3.2:3b"
        assert not [w for w in screen.workers if w.group == "bench"]  # Enter left the field, nothing ran
        assert app.focused is None
        assert "ctrl+r" in str(screen.query_one("#phase", Label).render())
        await pilot.press("ctrl+r")  # the run key does start it
        await pilot.pause(0.5)
        assert [w for w in screen.workers if w.group == "bench" and not w.is_finished]
        # escape in a field while it runs leaves the field; the bench goes on
        field.focus()
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.focused is not field
        assert [w for w in screen.workers if w.group == "bench" and not w.is_finished]
        await pilot.press("escape")  # now it stops the bench
        for _ in range(100):
            if not [w for w in screen.workers if w.group == "bench" and not w.is_finished]:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.1)
    assert [r.status for r in records] == ["KILLED"]


async def test_a_sweep_is_a_mode_you_can_see_and_its_fields_keep_their_labels(serve):
    state = bench_scenario(tokens_per_s=300.0, response_tokens=[" word"] * 10)
    server = serve(state)
    records = []
    app = build(server, config(warmup=0, reps=1, num_predict=5), recorder=records.append)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        assert not screen.query_one("#sweep-row").display  # bench mode: no sweep fields
        await pilot.press("w")
        await pilot.pause(0.1)
        assert screen.query_one("#kind", Select).value == "sweep"
        assert str(screen.query_one("#run", Button).label) == "Run sweep"
        depth = screen.query_one("#depth", Input)
        depth.focus()
        await pilot.press(*"0,256", "escape")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "depths" in text and "0,256" in text and "concurrency" in text  # typed into, still labelled
        await pilot.press("w")  # back to bench: the filled sweep fields are not used
        await pilot.pause(0.1)
        assert str(screen.query_one("#run", Button).label) == "Run"
        await run(app, pilot, "llama3.2:3b")
    assert len(records) == 1 and "sweep.id" not in records[0].tags


async def test_the_model_field_completes_and_names_close_local_models(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        field = screen.query_one("#models", Input)
        assert "llama3.2:3b" in field.placeholder and field.border_title == "models"
        field.focus()
        await pilot.press(*"qw")
        await pilot.pause(0.2)
        await pilot.press("right")  # accepts the completion
        assert field.value == "qwen3:8b"
        field.value = "qwen3:8"
        await pilot.press("escape", "ctrl+r")
        await pilot.pause(0.2)
        assert not [w for w in screen.workers if w.group == "bench"]
        assert "did you mean qwen3:8b?" in joined(screen_text(app))
        assert [r.path for r in server.requests if r.path in ("/api/chat", "/api/generate")] == []


async def test_the_settings_leave_the_live_panes_on_screen_at_80x24(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(app, pilot)
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        answer = screen.query_one("#answer-box")
        assert screen.query_one("#num_predict").region.height >= 1  # the settings are open
        assert answer.region.height >= 5 and answer.region.bottom <= 24


async def test_a_toast_keeps_config_keys_and_stays_readable_after_it_goes(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:  # (tests hide toasts by default)
        await pilot.pause(0.2)
        said = "repetitions past [bench] timeout_s are DNF; raise [bench] bandwidth_gbps if the roofline is wrong"
        app.notify(said, severity="warning", timeout=1.5)
        await pilot.pause(0.3)
        assert "[bench] timeout_s" in joined(screen_text(app))  # literal in the toast, not eaten as markup
        for _ in range(60):
            await pilot.pause(0.1)
            if "timeout_s" not in screen_text(app):
                break
        assert "timeout_s" not in screen_text(app)  # the toast is gone...
        await pilot.press("N")  # ...and the message is still there, whole
        await pilot.pause(0.2)
        assert isinstance(app.screen, NotesScreen)
        assert said in app.screen.query_one("#notes-full").render().plain
