"""The Eval screen without focus traps, with its own engine timeout and `eval score`
(issue 20). Against the FAKE Ollama server (real HTTP) with FAKE Spark probes and a small
GSM8K-format suite written here (scores known by construction)."""

from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, Input

from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from sparkctl.tui.screens.eval import EvalScreen
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama
from tests.integration.test_eval import QUESTIONS, write_gsm8k
from tests.tui.screen_text import joined, screen_text
from tests.tui.test_eval_screen import A, B, answering_state, build, config, finish, serve  # noqa: F401


async def open_eval(app, pilot) -> EvalScreen:
    await pilot.press("e")
    await pilot.pause(0.3)
    await app.workers.wait_for_complete()
    await pilot.pause(0.1)
    assert isinstance(app.screen, EvalScreen)
    return app.screen


def eval_requests(server) -> list[str]:
    return [r.path for r in server.requests if r.path in ("/api/chat", "/api/generate")]


async def test_keys_are_keys_when_the_screen_opens_and_enter_never_starts_an_eval(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        assert not isinstance(app.focused, Input)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.pause(0.1)
        models = screen.query_one("#models", Input)
        models.focus()
        await pilot.press(*B, "enter")  # Enter leaves the field: it does not run IFEval or anything
        await pilot.pause(0.5)
        assert models.value == B and app.focused is None
        assert not [w for w in screen.workers if w.group == "eval"] and eval_requests(server) == []
        text = screen_text(app)
        for key in ("d", "m", "b", "h", "e"):  # the keys to the other screens stay in the footer
            assert f" {key} " in text.splitlines()[-1]
        await pilot.press("d")
        await pilot.pause(0.2)
        assert app.current_mode == "dashboard"


async def test_escape_leaves_a_field_before_it_stops_the_eval(serve, tmp_path):
    server = serve(answering_state(tokens_per_s=20.0))
    records = []
    app = build(server, config(write_gsm8k(tmp_path / "suites")), recorder=records.append)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        screen.query_one("#models", Input).value = A
        screen.query_one("#n", Input).value = "all"
        await pilot.press("ctrl+r")
        for _ in range(100):
            if eval_requests(server):
                break
            await pilot.pause(0.05)
        seed = screen.query_one("#seed", Input)
        seed.focus()
        await pilot.pause(0.1)
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.focused is not seed
        assert [w for w in screen.workers if w.group == "eval" and not w.is_finished]  # still running
        await pilot.press("escape")
        for _ in range(200):
            if not [w for w in screen.workers if w.group == "eval" and not w.is_finished]:
                break
            await pilot.pause(0.05)
    assert [r.status for r in records] == ["KILLED"]


async def test_a_slow_first_token_waits_the_evals_read_timeout_not_the_dashboards(serve, tmp_path):
    # the dashboard's engine gives up on a silent stream after 0.5 s; the model takes 1.5 s to
    # load. The eval's items may wait their ceiling times the concurrency: they pass.
    state = answering_state()
    state.models[A].load_s = 1.5
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"), timeout_s=30.0, n=2)
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0, load_timeout=0.5)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        screen.query_one("#models", Input).value = A
        await pilot.press("ctrl+r")
        await finish(app, pilot)
        (run,) = screen._runs.values()
        assert run.status == "FINISHED"
        assert run.summary["gsm8k_strict"] == 1.0 and int(run.summary.get("error_count", 0)) == 0


async def test_eval_score_scores_a_picked_file_of_saved_responses(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    # 4 saved answers: 3 right, 1 wrong (GSM8K strict reads "#### N" or "The answer is N.")
    saved = tmp_path / "responses.jsonl"
    answers = [(q, a if i != 2 else a + 1) for i, (q, a) in enumerate(QUESTIONS[:4])]
    saved.write_text("".join(json.dumps({"prompt": q, "response": f"The answer is {n}."}) + "\n" for q, n in answers))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        await pilot.press("s")
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "ScoreFileDialog"
        app.screen.query_one("#score-path", Input).value = str(saved)
        await pilot.click("#score-go")
        await pilot.pause(0.2)
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        assert app.screen is screen
        table = screen.query_one("#results", DataTable)
        row = [str(c) for c in table.get_row_at(0)]
        assert row[:3] == ["responses.jsonl", "4", "75.0"]
        assert eval_requests(server) == []  # no model involved
        # a file that is not there: one line, on screen
        await pilot.press("s")
        await pilot.pause(0.3)
        app.screen.query_one("#score-path", Input).value = str(tmp_path / "missing.jsonl")
        await pilot.click("#score-go")
        await pilot.pause(0.2)
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        notes = screen.query_one("#eval-notes")
        assert notes.display and notes.text.endswith("missing.jsonl: file not found")


async def test_a_mistyped_model_is_refused_with_the_close_local_names(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        screen.query_one("#models", Input).value = "llama3.2"
        await pilot.press("ctrl+r")
        await pilot.pause(0.3)
        assert "did you mean llama3.2:3b?" in joined(screen_text(app))
        assert eval_requests(server) == []


async def test_at_80x24_the_results_show_the_headline_and_status_without_scrolling(serve, tmp_path):
    server = serve(answering_state())
    app = build(server, config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_eval(app, pilot)
        screen.query_one("#models", Input).value = f"{A} {B}"
        screen.query_one("#n", Input).value = "6"
        await pilot.press("ctrl+r")
        await finish(app, pilot)
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        head = next(line for line in lines if " Model " in line and "strict" in line)
        assert "95% CI" in head and "status" in head
        assert any(B in line and "50.0" in line and "FINISHED" in line for line in lines)
        assert screen.max_scroll_y == 0  # the whole screen fits: nothing below the fold
