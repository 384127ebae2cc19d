"""Pilot and snapshot tests of the Eval screen (`e`) against the FAKE Ollama server (real
HTTP; its `answers` hook gives each question its own answer, as a real model does) with
FAKE Spark probes, a small GSM8K-format suite written here (so the scores are known by
construction), and a REAL MLflow SQLite store."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import deque
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Label, Select, Switch
from textual.worker import WorkerCancelled

from sparkctl.config import Config, EvalConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.eval import EvalScreen, EvalStats
from sparkctl.tui.widgets.item_grid import ItemGrid
from sparkctl.tui.widgets.stream_tail import StreamTail
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from tests.integration.test_eval import gold_of, write_gsm8k
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401

A, B = "llama3.2:3b", "qwen3:8b"


def config(suites: Path, **eval_overrides) -> Config:
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT),
                  eval=EvalConfig(suites_dir=str(suites), **eval_overrides))
    return dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))


def build(server, cfg, recorder=None):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=recorder or (lambda r: None))
    app.animation_level = "none"
    return app


async def start(app, pilot, models: str, n: str = "all", timeout: str | None = None, think: bool = False,
                suite: str = "gsm8k"):
    await pilot.press("e")
    await pilot.pause(0.2)
    screen = app.screen
    assert isinstance(screen, EvalScreen)
    screen.query_one("#models", Input).value = models
    screen.query_one("#n", Input).value = n
    if timeout is not None:
        screen.query_one("#timeout", Input).value = timeout
    screen.query_one("#think", Switch).value = think
    screen.query_one("#suite", Select).value = suite
    await pilot.click("#run")
    await pilot.pause(0.1)
    return screen


async def finish(app, pilot):
    # A stopped eval's worker ends CANCELLED by design (the runner re-raises after its
    # shielded wrap-up); whether it is still listed when we get here depends on the load.
    for worker in list(app.workers):
        try:
            await worker.wait()
        except WorkerCancelled:
            pass
    await pilot.pause(0.1)


def answering_state(tokens_per_s=None):
    """A answers every question right; B gets the ones with an odd number of apples wrong
    (off by one). Suite order: item 0 has 1 apple, item 1 has 2, ..."""
    state = bench_scenario(tokens_per_s=tokens_per_s)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        if gold is None:
            return None
        n = (gold - 3) // 2
        said = gold if (model.startswith("llama") or n % 2 == 0) else gold + 1
        return f"{n} plus {n + 3} makes {said}. The answer is {said}."

    state.answers = answers
    return state


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


def table_rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_grid_shows_each_items_verdict_and_the_runs_are_recorded(serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(answering_state())
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, config(write_gsm8k(tmp_path / "suites")),
                recorder=lambda r: record_run(r, spool, mlflow_store))
    async with app.run_test(size=(120, 40)) as pilot:  # every results column
        screen = await start(app, pilot, f"{A} {B}")
        await finish(app, pilot)
        grid = screen.query_one(ItemGrid)
        # n=all keeps the suite's order: B is wrong on every odd number of apples (items 0, 2, ...)
        assert grid.cells(A) == "✓" * 20
        assert grid.cells(B) == "✗✓" * 10
        lines = grid.lines_text
        assert lines[0].startswith(f"{A}  20/20") and lines[1] == " ".join(["✓" * 10] * 2)
        assert lines[2].startswith(f"{B}  20/20  ✓10  ✗10") and lines[3] == " ".join(["✗✓" * 5] * 2)
        stats = screen.query_one(EvalStats).summary
        assert stats.startswith(f"{B} (2/2) 20/20 · 0 left · acc 50.0% [95% CI 29.9–70.1]")
        assert "DNF 0" in stats
        rows = table_rows(screen.query_one("#results", DataTable))
        assert [r[0] for r in rows] == [A, B]
        # items, DNF, strict, flexible, 95% CI, the same over answered items, errors
        assert rows[0][1:9] == ["20", "0", "100.0", "100.0", "83.9–100.0", "100.0", "100.0", "0"]
        assert rows[1][1:9] == ["20", "0", "50.0", "50.0", "29.9–70.1", "50.0", "50.0", "0"]
        assert rows[1][9] == "FINISHED" and rows[1][10] != "-"  # an MLflow run id
        assert str(screen.query_one("#run").disabled) == "False"
    landed = {r["tags"]["model.name"]: r for r in mlflow_store.search_runs(experiment=TEST_EXPERIMENT)}
    assert set(landed) == {A, B}
    assert landed[B]["tags"]["sparkctl.kind"] == "eval" and landed[B]["status"] == "FINISHED"
    assert landed[B]["metrics"]["gsm8k_strict"] == pytest.approx(0.5)
    assert landed[B]["run_id"].startswith(rows[1][10])


async def test_a_dnf_item_has_its_own_cell_and_count_and_its_tokens_climb(serve, mlflow_store, tmp_path):  # noqa: F811
    state = bench_scenario(tokens_per_s=40.0)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        if gold == 5:  # item 0, "Sam has 1 apples": rambles far past the 1 s ceiling
            return " ".join(["hmm"] * 400) + " The answer is 5."
        return f"The answer is {gold}."

    state.answers = answers
    server = serve(state)
    spool = Spool(tmp_path / "spool.jsonl")
    app = build(server, config(write_gsm8k(tmp_path / "suites")),
                recorder=lambda r: record_run(r, spool, mlflow_store))
    async with app.run_test(size=(120, 40)) as pilot:  # every results column
        await pilot.press("e")
        await pilot.pause(0.2)
        stats = app.screen.query_one(EvalStats)
        seen: list[str] = []
        original = stats.set

        def spy(summary=None, current=None):
            if current is not None:
                seen.append(current)
            original(summary, current)

        stats.set = spy
        screen = await start(app, pilot, A, n="all", timeout="1")
        await finish(app, pilot)
        grid = screen.query_one(ItemGrid)
        assert grid.cells(A) == "D" + "✓" * 19  # DNF reads apart from a wrong answer without colour
        assert grid.counts(A)["dnf"] == 1 and "D1" in grid.lines_text[0]
        assert "DNF 1" in stats.summary and "acc 95.0%" in stats.summary
        row = table_rows(screen.query_one("#results", DataTable))[0]
        assert row[2] == "1"  # DNF column
        assert row[3] == "95.0" and row[6] == "100.0"  # all items vs answered items
        assert "[DNF after 1 s" in screen.query_one("#eval-answer", StreamTail).text
        # the runaway's token count climbed while it ran
        counts = [int(m.group(1)) for c in seen if (m := re.match(r"item 0 \(#1\): (\d+) tokens", c))]
        assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] > counts[0]
    (landed,) = mlflow_store.search_runs(experiment=TEST_EXPERIMENT)
    assert landed["metrics"]["dnf_count"] == 1.0


async def test_the_thinking_streams_apart_from_the_answer(serve, tmp_path):
    state = answering_state()
    state.thinking_tokens = ["Let", " me", " count", " apples."]
    server = serve(state)
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await start(app, pilot, B, n="2", think=True)
        await finish(app, pilot)
        thinking = screen.query_one("#eval-thinking", StreamTail).text
        answer = screen.query_one("#eval-answer", StreamTail).text
        assert "count apples." in thinking and "apples." not in answer.replace("apples and", "")
        assert "The answer is" in answer and "The answer is" not in thinking
        assert len(screen.query_one(ItemGrid).cells(B)) == 2


async def test_stop_records_killed_and_keeps_the_finished_items(serve, tmp_path):
    state = bench_scenario(tokens_per_s=100.0)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        if gold is not None and gold >= 11:  # from item 3 (4 apples) on: answers that run for minutes
            return " ".join(["hmm"] * 100000)
        return None if gold is None else f"The answer is {gold}."

    state.answers = answers
    server = serve(state)
    records = []
    app = build(server, config(write_gsm8k(tmp_path / "suites")), recorder=records.append)
    async with app.run_test(size=(120, 40)) as pilot:  # every results column
        screen = await start(app, pilot, A)
        grid = screen.query_one(ItemGrid)
        for _ in range(200):
            await asyncio.sleep(0.05)
            if grid.cells(A).startswith("✓✓✓»"):
                break
        assert grid.cells(A).startswith("✓✓✓»")  # the runaway item is in flight
        await pilot.press("escape")
        await finish(app, pilot)
        assert grid.cells(A) == "✓✓✓" + "·" * 17  # the stopped item is back to "to do"
        row = table_rows(screen.query_one("#results", DataTable))[0]
        assert row[1] == "3" and row[9] == "KILLED"
    assert [r.status for r in records] == ["KILLED"]


async def test_quitting_mid_eval_still_records_the_run(serve, tmp_path):
    """q during an eval: the app waits for the runner's wrap-up (lanes back, run recorded
    KILLED) instead of cancelling it with the event loop."""
    state = bench_scenario(tokens_per_s=100.0)
    state.answers = lambda model, prompt: " ".join(["hmm"] * 100000)
    server = serve(state)
    records = []

    def slow_recorder(rec):  # a store that takes its time: the wrap-up outlives a plain exit
        import time

        time.sleep(0.5)
        records.append(rec)

    app = build(server, config(write_gsm8k(tmp_path / "suites")), recorder=slow_recorder)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start(app, pilot, A)
        for _ in range(200):
            await pilot.pause(0.05)
            if "tokens" in screen.query_one(EvalStats).current:
                break
        await app.stop_and_quit()  # what "Stop and quit" in the quit dialog runs
    assert [r.status for r in records] == ["KILLED"]


async def test_bad_choices_are_refused_before_any_request(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(80, 24)) as pilot:
        def told() -> str:  # on screen, whole, in the notes under the results
            return app.screen.query_one("#eval-notes").text

        await start(app, pilot, A, n="zero")
        assert told() == "✘ n must be a whole number or 'all', not 'zero'"
        await start(app, pilot, "bad name!")
        assert told().startswith("✘ invalid model name")
        await start(app, pilot, A, timeout="0")
        assert told().startswith("✘ timeout must be")
        app.screen.query_one("#timeout", Input).value = "60"
        app.screen.query_one("#num_ctx", Input).value = "9" * 25  # past a 64-bit integer, as the CLI's --ctx
        await pilot.click("#run")
        await pilot.pause(0.1)
        assert told() == ("✘ num_ctx must be a whole number from 256 to 9223372036854775807, or empty for one context "
                          "chosen for every model, not a 25-character value")
        app.screen.query_one("#num_ctx", Input).value = ""
        await finish(app, pilot)
        assert not [r for r in server.requests if r.path == "/api/generate"]


async def test_a_missing_suite_says_how_to_get_it(serve, tmp_path):
    """A configured suites dir without the file: the way back to the shipped copy is named."""
    server = serve(answering_state())
    app = build(server, config(tmp_path / "no-suites"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start(app, pilot, A, suite="ifeval")
        await finish(app, pilot)
        phase = str(screen.query_one("#eval-phase", Label).content)
        assert phase.startswith("no suite:") and "remove [eval] suites_dir from the config" in phase
        assert "to read the shipped copy" in screen.query_one("#eval-notes").text  # whole, on screen
        assert str(screen.query_one("#run").disabled) == "False"


async def test_the_models_field_completes_local_model_names(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        await pilot.pause(0.3)
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        models = app.screen.query_one("#models", Input)
        assert A in models.placeholder and B in models.placeholder
        models.focus()
        models.value = f"{A} q"
        models.cursor_position = len(models.value)
        await pilot.press("w")
        await pilot.pause(0.2)
        await pilot.press("right")  # accepts the suggestion
        assert models.value == f"{A} {B}"


def test_eval_screen_snapshot(snap_compare, tmp_path):
    server = FakeOllama(answering_state(), port=27913).start()
    app = build(server, config(write_gsm8k(tmp_path / "suites")))

    async def run(pilot):
        await start(app, pilot, B)
        await finish(app, pilot)
        # timings vary run to run: blank the figures that come from the clock
        for view in app.screen.query(StreamTail):
            view.lines = deque((re.sub(r"\d+\.\d s", "(t) s", line) for line in view.lines), maxlen=view.lines.maxlen)
            view.refresh()
        stats = app.screen.query_one(EvalStats)
        stats.set(current=re.sub(r"\d+\.\d s", "(t) s", stats.current))
        await pilot.pause(0.1)

    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=run)
    finally:
        server.stop()


async def test_a_refusal_s_reason_is_the_first_note(serve, tmp_path):
    """Issue 30: why an eval did not run came after what was said on the way (the context
    chosen), hidden at 80x24. The contender qwen3:8b loads 30% on the CPU (FAKE Ollama)
    beside production, resident at its own context."""
    from testkit.fakes.ollama_server import load_scenario
    from tests.integration.test_eval import write_gsm8k

    from sparkctl.tui.widgets.notes import NotesPanel

    server = serve(load_scenario(spill=True))
    cfg = dataclasses.replace(config(write_gsm8k(tmp_path / "suites")), lanes={"production": "gpt-oss:120b"})
    app = build(server, cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(app, pilot, "gpt-oss:120b qwen3:8b", n="2")
        await finish(app, pilot)
        notes = app.screen.query_one("#eval-notes", NotesPanel).notes
        assert len(notes) >= 2, notes  # the context the eval chose, and the refusal
        assert notes[0].level == "error" and notes[0].text.startswith("eval failed"), notes
        # in the Eval screen's words: it has no 'allow CPU' setting, and it is not a bench
        assert "the eval needs 100% GPU" in notes[0].text and "allow CPU' setting" not in notes[0].text, notes[0]
        assert not any("the bench" in n.text for n in notes), notes
