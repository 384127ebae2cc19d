"""Pilot and snapshot tests of the Bench screen against the FAKE Ollama server (paced
token streams over real HTTP) with FAKE Spark probes; MLflow is a real SQLite store."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import DataTable, Input, Label

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from sparkctl.tui.widgets.gauges import Gauges
from sparkctl.tui.widgets.stream_tail import StreamTail
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario, load_scenario
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401


def config(**bench) -> Config:
    base = Config(lanes={"production": "gpt-oss:120b"})
    b = dataclasses.replace(base.bench, **{"warmup": 1, "reps": 2, "num_predict": 30, **bench})
    return dataclasses.replace(base, bench=b, ui=dataclasses.replace(base.ui, refresh_s=5.0))


def build(server, cfg, recorder=None):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=recorder or (lambda r: None))
    app.animation_level = "none"
    return app


async def start(app, pilot, models: str, reps: str | None = None):
    await pilot.press("b")
    await pilot.pause(0.2)
    app.screen.query_one("#models", Input).value = models
    if reps is not None:
        app.screen.query_one("#reps", Input).value = reps
    await pilot.click("#run")
    await pilot.pause(0.1)


async def confirm_solo(app, pilot):
    """Solo asks first (the dialog names the models it unloads): answer yes."""
    from sparkctl.tui.widgets.model_dialogs import ConfirmDialog

    for _ in range(100):
        if isinstance(app.screen, ConfirmDialog):
            break
        await pilot.pause(0.05)
    assert isinstance(app.screen, ConfirmDialog), "solo started without asking"
    await pilot.press("y")
    await pilot.pause(0.1)


async def finish(app, pilot):
    from textual.worker import WorkerCancelled

    for worker in list(app.workers):
        try:
            await worker.wait()
        except WorkerCancelled:
            # Esc cancels the bench's worker; its task ends after the wrap-up (KILLED recorded,
            # lanes put back), which the callers assert. Whether Textual then calls it
            # cancelled or finished depends on when the cancel lands: either is a stop.
            pass
    await pilot.pause(0.1)


@pytest.fixture
def serve():
    servers = []

    def go(state, **kw):
        s = FakeOllama(state, **kw).start()
        servers.append(s)
        return s

    yield go
    for s in servers:
        s.stop()


async def test_streams_thinking_apart_and_shows_a_stable_summary(serve, mlflow_store, tmp_path):  # noqa: F811
    # 60 tok/s: steps of ~17 ms, so a busy CI box's scheduling delays stay well under the
    # 5% CV that "stable" allows (the fake's durations are measured, like the real server's)
    server = serve(bench_scenario(tokens_per_s=60.0))
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, config(), recorder=lambda r: record_run(r, spool, mlflow_store))
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "qwen3:8b")
        await finish(app, pilot)
        thinking = app.screen.query_one("#thinking", StreamTail).text
        answer = app.screen.query_one("#answer", StreamTail).text
        assert "Okay, the user asks" in thinking and "Okay" not in answer
        assert "The sky is blue" in answer
        gauges = app.screen.query_one(Gauges).values
        assert gauges["rep"] == "qwen3:8b 2/2" and int(gauges["tokens"]) > 0
        table = app.screen.query_one("#summary", DataTable)
        row = [str(c) for c in table.get_row_at(0)]
        assert row[0] == "qwen3:8b" and row[13] == "stable"
        assert row[11] == "100% GPU" and row[9] != "-"  # placement and roofline %, as the CLI prints
        assert row[14] != "-"  # an MLflow run id
    (landed,) = mlflow_store.search_runs(experiment="sparkctl-bench")
    assert landed["status"] == "FINISHED" and landed["tags"]["model.name"] == "qwen3:8b"


async def test_cpu_placement_is_refused_with_the_reason(serve):
    server = serve(load_scenario(spill=True))
    app = build(server, config())
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "qwen3:8b")
        await finish(app, pilot)
        phase = str(app.screen.query_one("#phase", Label).content)
        assert phase.startswith("REFUSED")
        assert "30%/70% CPU/GPU" in app.screen.query_one("#notes").text  # the reason, whole, in the notes
        assert app.screen.query_one("#summary", DataTable).row_count == 0


async def test_second_start_does_not_kill_a_running_bench(serve):
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    records = []
    app = build(server, config(num_predict=400, warmup=0, reps=1),
                recorder=lambda rec: records.append(rec))
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "llama3.2:3b")
        assert [w for w in app.screen.workers if w.group == "bench" and not w.is_finished]
        app.screen.action_start()  # ctrl+r / Enter again while it streams
        await finish(app, pilot)
    assert [r.status for r in records] == ["FINISHED"]


async def test_stop_kills_the_run_and_keeps_it(serve):
    server = serve(bench_scenario(tokens_per_s=200.0, runaway="response"))
    records = []

    def recorder(rec):
        records.append(rec)
        return type("R", (), {"message": "kept in spool", "run_id": None})()

    app = build(server, config(num_predict=100000, warmup=0), recorder=recorder)
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "llama3.2:3b")
        import asyncio

        for _ in range(100):
            await asyncio.sleep(0.05)
            if int(app.screen.query_one(Gauges).values["tokens"].strip("-") or 0) > 20:  # "-" before it streams
                break
        await pilot.press("escape")
        await finish(app, pilot)
        # the screen shows the stop and what was recorded, with no stale live figures
        phase = str(app.screen.query_one("#phase", Label).render())
        assert phase.startswith("bench stopped (KILLED)")
        row = [str(c) for c in app.screen.query_one("#summary", DataTable).get_row_at(0)]
        assert row[0] == "llama3.2:3b" and row[13].startswith("KILLED")
        assert app.screen.query_one(Gauges).values["tps"] == "-"
    assert [r.status for r in records] == ["KILLED"]


async def test_bad_input_is_refused_before_any_request(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "bad name!", reps="2")
        await pilot.pause(0.1)
        # what the user is told stays on screen, whole, in the notes under the results
        assert app.screen.query_one("#notes").text.startswith("✘ invalid model name 'name!'")
        # (the model field lists the local models for its completion: /api/tags)
        assert [r.path for r in server.requests if r.path not in ("/api/ps", "/api/version", "/api/tags")] == []


async def test_a_repetition_count_past_its_maximum_is_refused_before_any_request(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "llama3.2:3b", reps="99999999999999999999")
        await pilot.pause(0.1)
        assert app.screen.query_one("#notes").text.startswith(
            "✘ reps must be a whole number from 1 to 1000, not '99999999999999999999'")
        assert [r.path for r in server.requests if r.path not in ("/api/ps", "/api/version", "/api/tags")] == []


def test_bench_screen_snapshot(snap_compare):
    server = FakeOllama(bench_scenario(tokens_per_s=50.0), port=27912).start()  # paced: below the roofline
    app = build(server, config(reps=1, warmup=0))

    async def run(pilot):
        await start(app, pilot, "llama3.2:3b")
        await finish(app, pilot)
        # timings vary run to run: blank the figures that come from the clock
        app.screen.query_one(Gauges).set(elapsed="(t)", ttft="(t)", tps="(t)")
        table = app.screen.query_one("#summary", DataTable)
        table.clear(columns=True)  # auto column widths remember the cleared values
        from sparkctl.tui.screens.bench import SUMMARY_COLUMNS

        table.add_columns(*SUMMARY_COLUMNS)
        table.add_row("llama3.2:3b", "(t)", "(t)", "(t)", "-", "(t)", "(t)", "(t)", "(t)", "(t)", "-", "100% GPU", "0",
                      "- (1 rep)", "-")
        await pilot.pause(0.1)

    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=run)
    finally:
        server.stop()


async def test_quitting_mid_bench_still_restores_lanes_and_records_the_run(serve):
    """q during a solo bench: the app waits for the wrap-up (lane model back, run recorded)
    instead of cancelling it with the event loop."""
    state = bench_scenario(tokens_per_s=100.0, runaway="response")
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    state.models["qwen3:8b"].load_s = 0.3
    server = serve(state)
    records = []
    cfg = dataclasses.replace(config(num_predict=100000, warmup=0, mode="solo"), lanes={"production": "qwen3:8b"})
    app = build(server, cfg, recorder=records.append)
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "llama3.2:3b")
        await confirm_solo(app, pilot)
        for _ in range(100):
            await pilot.pause(0.05)
            if int(app.screen.query_one(Gauges).values["tokens"].strip("-") or 0) > 10:  # "-" before it streams
                break
        await app.stop_and_quit()  # what "Stop and quit" in the quit dialog runs
    assert [r.status for r in records] == ["KILLED"]
    assert records[0].tags["guard.lane_restore"].startswith("restored")
    r = state.resident.get("qwen3:8b")
    assert r is not None and r.context_length == 32768


async def test_engine_picker_benches_an_openai_server_with_the_settings_panel(serve):
    """Pick [engines.llama] (a FAKE llama-server) in the engine picker: its configured model
    fills in, the settings panel's num_predict reaches the requests, and the recorded run
    carries the engine's kind and build."""
    from testkit.fakes.openai_server import FakeOpenAI, OpenAIState

    ollama = serve(bench_scenario())
    llama = FakeOpenAI(OpenAIState(tokens_per_s=None)).start()
    try:
        records = []
        base = config(warmup=0, reps=2)
        from sparkctl.config import NamedEngineConfig

        cfg = dataclasses.replace(base, engines={"llama": NamedEngineConfig(name="llama", url=llama.url,
                                                                             model="smollm2-135m")})
        app = build(ollama, cfg, recorder=records.append)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("b")
            await pilot.pause(0.2)
            screen = app.screen
            from textual.widgets import Select

            await pilot.pause(0.5)  # the engines' reachability arrives from the app's sampler
            screen.query_one("#engine", Select).value = "llama"
            await pilot.pause(0.1)
            assert screen.query_one("#models", Input).value == "smollm2-135m"
            await pilot.press("ctrl+s")  # open the settings
            screen.query_one("#num_predict", Input).value = "7"
            await pilot.click("#run")
            await finish(app, pilot)
            assert not isinstance(app.focused, Input)  # keys work after a start
        (rec,) = records
        assert rec.tags["engine.kind"] == "llama.cpp" and rec.tags["engine.build"] == "b6500-3f4b3c2a"
        assert rec.params["num_predict"] == "7"
        chats = [r for r in llama.state.requests if r.get("path", "").endswith("/chat/completions")]
        assert chats and all(c["body"]["max_tokens"] == 7 for c in chats)
    finally:
        llama.stop()


async def test_escape_leaves_the_model_field_so_the_footer_keys_work(serve):
    server = serve(bench_scenario())
    app = build(server, config())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("b")
        await pilot.pause(0.2)
        app.screen.query_one("#models", Input).focus()
        await pilot.press("q")  # typed: the field has the focus
        assert app.screen.query_one("#models", Input).value == "q"
        await pilot.press("escape", "d")
        await pilot.pause(0.2)
        assert app.current_mode == "dashboard"


async def test_quitting_during_a_bench_asks_first(serve):
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    records = []
    app = build(server, config(num_predict=100000, warmup=0, reps=1), recorder=records.append)
    async with app.run_test(size=(120, 40)) as pilot:
        await start(app, pilot, "llama3.2:3b")
        await pilot.press("q")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "ConfirmDialog"
        assert "A bench is running. Quit anyway?" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")  # no: the bench goes on
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "BenchScreen" and app.is_running
        assert any(w.group == "bench" and not w.is_finished for w in app.workers)
        await pilot.press("q", "y")  # yes: stopped, recorded, then the app exits
        await pilot.pause(3)
    assert [r.status for r in records] == ["KILLED"]


async def test_a_refusal_s_reason_is_the_first_note(serve):
    """Issue 30: a refusal's reason was the second note, under a context note, so at 80x24
    the notes panel showed the context and hid why nothing ran. The contender qwen3:8b
    loads 30% on the CPU (FAKE Ollama) beside production, resident at its own context."""
    from sparkctl.tui.widgets.notes import NotesPanel

    server = serve(load_scenario(spill=True))
    app = build(server, config(warmup=0, reps=1, num_predict=5))
    async with app.run_test(size=(80, 24)) as pilot:
        await start(app, pilot, "gpt-oss:120b qwen3:8b")
        await finish(app, pilot)
        notes = app.screen.query_one("#notes", NotesPanel).notes
        assert len(notes) >= 2, notes  # the context the bench chose, and the refusal
        assert notes[0].level == "error" and notes[0].text.startswith("bench refused"), notes


async def test_the_status_line_says_loading_only_for_a_load_and_recording_while_it_records(
        serve, mlflow_store, tmp_path):  # noqa: F811
    """Issue 30: "loading gpt-oss:120b" showed for a model already resident at the bench's
    context, and the wrap-up that records the runs (the first one creates the MLflow
    store: seconds) showed nothing. The phases the screen was given, in order."""
    from sparkctl.tui.screens.bench import BenchEvent

    seen: list = []
    server = serve(load_scenario())  # gpt-oss:120b resident (production), qwen3:8b on disk
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, config(warmup=0, reps=1, num_predict=5, num_ctx=131072),
                recorder=lambda rec: record_run(rec, spool, mlflow_store))
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await start(app, pilot, "gpt-oss:120b qwen3:8b")
        await finish(app, pilot)
    # (the hook sees each message where it is posted and where it is handled: once each here)
    phases = list(dict.fromkeys(m.event.text for m in seen
                                if isinstance(m, BenchEvent) and type(m.event).__name__ == "Phase"))
    assert "loading qwen3:8b" in phases, phases
    assert "loading gpt-oss:120b" not in phases, phases
    assert "gpt-oss:120b is resident at num_ctx 131072: checking where it runs" in phases
    recording = [i for i, text in enumerate(phases) if text.startswith("recording the run of")]
    assert len(recording) == 2 and recording[0] > phases.index("loading qwen3:8b"), phases
