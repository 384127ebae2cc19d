"""Issue 13 on the Models screen, under Pilot against the FAKE Ollama: the fit/load dialog
(context and keep-alive reach the engine), pull name completion, the load-anyway override
only where it could work, closable panels at 80x24, the contender mark, the command
palette, duplicate engine rows, did-you-mean and small sizes."""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.geometry import Region
from textual.widgets import DataTable, Input, Static

from sparkctl.core.snapshots import GIB
from sparkctl.tui.commands import app_commands
from sparkctl.tui.screens.models import ModelsScreen
from sparkctl.tui.widgets.model_dialogs import ConfirmDialog, LoadDialog, PullDialog, parse_context
from sparkctl.tui.widgets.pull_view import PullProgressView
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, make_model
from tests.tui.models_helpers import SIZE, build, info, open_models, select, settle, through_dialog

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake


def lane_cell(screen: ModelsScreen, name: str) -> str:
    return str(screen.query_one("#models", DataTable).get_cell(name, "lane"))


# ---------------------------------------------------------------------------- fit / load dialog


async def test_load_dialog_sends_context_and_keep_alive_and_marks_the_contender(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        assert lane_cell(screen, "qwen3:8b") == "-"
        await through_dialog(app, pilot, "l", ctx="8k", keep_alive="10m")
        loads = fake.calls("/api/generate")
        assert loads, "no load request reached the engine"
        body = loads[-1].body
        # what Ollama received: the runner option and the keep-alive in seconds
        assert body["options"]["num_ctx"] == 8192 and body["keep_alive"] == 600
        assert fake.state.resident["qwen3:8b"].context_length == 8192
        text = info(screen)
        assert "✔ loaded qwen3:8b" in text and "keep_alive 10m" in text and "num_ctx 8192" in text
        # side-loaded from sparkctl and without a lane: the contender, here and on the dashboard
        assert lane_cell(screen, "qwen3:8b") == "contender"
        assert lane_cell(screen, "gpt-oss:120b") == "production"
        await pilot.press("d")
        await pilot.pause(0.1)
        app.action_refresh_now()
        await settle(app, pilot)
        resident = app.screen.query_one("#resident", DataTable)
        lanes = {str(resident.get_row_at(i)[0]): str(resident.get_row_at(i)[1]) for i in range(resident.row_count)}
        assert lanes["qwen3:8b"] == "contender" and lanes["gpt-oss:120b"] == "production"
        await pilot.press("m")
        await pilot.pause(0.1)
        # the dialog starts from what was asked last time
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LoadDialog)
        assert app.screen.query_one("#load-ctx", Input).value == "8192"
        assert app.screen.query_one("#load-keep-alive", Input).value == "10m"
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("u")
        await settle(app, pilot)
        assert "unloaded qwen3:8b" in info(screen)
        assert lane_cell(screen, "qwen3:8b") == "-" and app.contenders == set()


async def test_a_promoted_contender_shows_its_lane(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "l")
        assert lane_cell(screen, "qwen3:8b") == "contender"
        app.config.lanes["fast"] = "qwen3:8b"  # what a promotion leaves in the config's lanes
        screen.refresh_list()
        await settle(app, pilot)
        assert lane_cell(screen, "qwen3:8b") == "fast" and app.contenders == set()


async def test_fit_dialog_context_changes_the_estimate_and_bad_input_stays(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "f")
        default = screen.last_fit.estimate
        assert default.num_ctx == 40960  # the engine's choice, capped at the trained context
        await pilot.press("f")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, LoadDialog) and not dialog.load
        assert "the engine's choice" in str(dialog.query_one(".default", Static).render())
        dialog.query_one("#load-ctx", Input).value = "lots"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LoadDialog)  # stays, with the reason
        assert "expected a number of tokens" in str(dialog.query_one("#load-error", Static).render())
        dialog.query_one("#load-ctx", Input).value = "4096"
        await pilot.press("enter")
        await settle(app, pilot)
        small = screen.last_fit.estimate
        assert small.num_ctx == 4096 and small.context_source == "user"
        # the KV cache scales with the context: 10x fewer tokens, a smaller estimate; the
        # weights do not change
        assert small.weights == default.weights and small.kv_cache * 9 < default.kv_cache
        assert small.total < default.total
        assert "num_ctx 4096: as asked" in info(screen)
        assert fake.calls("/api/generate") == []  # a fit loads nothing


def test_parse_context():
    assert parse_context("") is None and parse_context(" 8192 ") == 8192 and parse_context("32k") == 32768
    for bad in ("0", "-5", "8 GiB", "lots"):
        with pytest.raises(ValueError):
            parse_context(bad)


# ---------------------------------------------------------------------------- pull completion


async def test_pull_dialog_completes_a_local_name_from_its_prefix(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_models(app, pilot)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, PullDialog)
        await pilot.press(*"qwen3:3")
        await pilot.pause(0.1)
        field = app.screen.query_one(Input)
        assert field._suggestion == "qwen3:30b-a3b"
        await pilot.press("right")  # accepts the suggestion, as the hint says
        assert field.value == "qwen3:30b-a3b"
        await pilot.press("escape")
        await pilot.pause()
        assert fake.calls("/api/pull") == []


async def test_pull_of_an_unknown_name_suggests_a_close_local_one(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        screen._pull_chosen("qwen3:8")  # the registry has no such manifest
        await settle(app, pilot)
        out = str(screen.query_one("#pull-outcome", Static).render())
        assert "file does not exist" in out and "did you mean qwen3:8b" in out


# ---------------------------------------------------------------------------- load anyway


def rendered(widget) -> list[str]:
    w, h = widget.size
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, w, h))]


async def test_load_anyway_offered_only_where_it_could_work_and_the_whole_reason_shows(fake, tmp_path):
    app = build(fake, tmp_path, FakeProbes(spark_snapshot(20.0, runner_gib=100)))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_models(app, pilot)
        # 17 GiB of weights with 12 GiB free above the reserve: fits once production is evicted
        select(screen, "qwen3:30b-a3b")
        await through_dialog(app, pilot, "l")
        assert "press L to load anyway" in info(screen)
        await pilot.press("L")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        question = dialog.query_one("#confirm-question", Static)
        lines = rendered(question)
        assert len([line for line in lines if line]) >= 3  # wrapped, not cut to one line
        shown = " ".join(" ".join(lines).split())
        reason = screen.override_fit and screen.last_refusal
        assert " ".join(reason.split()) in shown  # every word of the reason, in order
        await pilot.press("n")
        await pilot.pause()
        assert fake.calls("/api/generate") == []
        # 376 GiB of weights: short by hundreds of GiB even with everything evicted
        select(screen, "deepseek-r1:671b")
        await through_dialog(app, pilot, "l")
        assert "press L" not in info(screen) and "no override can load it" in info(screen)
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, ModelsScreen) and fake.calls("/api/generate") == []


# ---------------------------------------------------------------------------- panels at 80x24


async def test_panels_close_and_the_list_stays_usable_at_80x24(fake, tmp_path):
    fake.state.add_registry_model("tiny", [300_000, 120], model=make_model("tiny", size_gib=0.0003))
    app = build(fake, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_models(app, pilot)
        table = screen.query_one("#models", DataTable)
        alone = table.size.height
        assert not screen.query_one("#model-info").display  # no panel until there is a result
        select(screen, "qwen3:8b")
        await through_dialog(app, pilot, "f")
        screen._pull_chosen("tiny")
        await settle(app, pilot)
        pull = screen.query_one(PullProgressView)
        assert pull.last.outcome == "success" and pull.closable
        assert table.size.height >= 6  # header + five rows, with both panels open
        # escape closes them, and the footer says so while there is one
        assert screen.check_action("close_panel", ()) is True
        assert any(b.binding.action == "close_panel" and b.binding.show for b in screen.active_bindings.values())
        await pilot.press("escape")  # the result panel first
        await pilot.pause()
        assert not screen.query_one("#model-info").display and pull.display
        await pilot.press("escape")  # then the finished pull
        await pilot.pause()
        assert not pull.display
        assert table.size.height == alone >= 14
        assert screen.check_action("close_panel", ()) is False  # nothing left: gone from the footer


def _slow(state):
    state.pull_chunks = 1000
    state.pull_line_interval_s = 0.01
    return state


async def test_a_cancelled_pull_panel_goes_when_its_model_is_deleted(fake, tmp_path):
    state = _slow(fake.state)
    entry = state.add_registry_model("qwen3:8b", [2_000_000_000, 1_723], model=state.find_model("qwen3:8b"))
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        screen._pull_chosen("qwen3:8b")
        for _ in range(100):
            await asyncio.sleep(0.02)
            if state.blobs.get(entry.layers[0].digest, 0) > 0:
                break
        await pilot.press("c")
        await settle(app, pilot)
        pull = screen.query_one(PullProgressView)
        assert "again to resume" in str(pull.query_one("#pull-outcome", Static).render()) and pull.display
        select(screen, "qwen3:8b")
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert "deleted qwen3:8b" in info(screen)
        assert not pull.display  # "press p to resume" is moot now


# ---------------------------------------------------------------------------- command palette


async def test_palette_lists_app_commands_with_descriptions(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        names = {c.name: c.help for c in app_commands(app, app.screen)}
        assert "Pull a model" in names and "Run bench" in names and "Go to Models" in names
        assert "Go to Dashboard" not in names  # the screen you are on
        assert "Stop the bench" not in names  # nothing runs
        assert all(help_ for help_ in names.values())
        for query, wanted in (("pull", "Pull a model"), ("bench", "Run bench")):
            app.action_command_palette()
            await pilot.pause()
            assert isinstance(app.screen, CommandPalette)
            await pilot.press(*query)
            await pilot.pause(0.5)
            options = app.screen.query_one("CommandList")
            prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
            assert any(wanted in p for p in prompts), prompts
            await pilot.press("escape")
            await pilot.pause()
        # chosen from the palette, Pull switches to Models and opens its dialog
        app.action_command_palette()
        await pilot.pause()
        await pilot.press(*"pull a model")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, PullDialog)
        await pilot.press("escape")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        await settle(app, pilot)
        select(screen, "gpt-oss:120b")
        names = {c.name for c in app_commands(app, screen)}
        # on Models: named after the selection; a lane model is not offered for deletion
        assert {"Fit check gpt-oss:120b", "Load gpt-oss:120b", "Unload gpt-oss:120b"} <= names
        assert "Delete gpt-oss:120b" not in names and "Go to Models" not in names
        select(screen, "qwen3:8b")
        names = {c.name for c in app_commands(app, screen)}
        assert "Delete qwen3:8b" in names and "Unload qwen3:8b" not in names  # not loaded


# ---------------------------------------------------------------------------- engine answers


async def test_a_model_listed_twice_by_the_engine_does_not_crash(fake, tmp_path):
    state = fake.state
    # /api/tags and /api/ps show both copies by their short names: "qwen3:8b" twice,
    # "gpt-oss:120b" twice (the library/ prefix is not shown)
    twin = copy.copy(state.find_model("qwen3:8b"))
    twin.name = "library/qwen3:8b"
    state.models[twin.name] = twin
    prod = copy.copy(state.resident["gpt-oss:120b"])
    prod.name = "library/gpt-oss:120b"
    state.resident[prod.name] = prod
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        resident = app.screen.query_one("#resident", DataTable)
        assert [str(resident.get_row_at(i)[0]) for i in range(resident.row_count)] == ["gpt-oss:120b"]
        screen = await open_models(app, pilot)
        assert list(screen.rows).count("qwen3:8b") == 1
        assert screen.query_one("#models", DataTable).row_count == len(screen.rows) == 5
    assert app.return_code in (None, 0)


def test_a_crashing_tui_makes_sparkctl_exit_non_zero(tmp_path):
    config = tmp_path / "sparkctl.toml"
    config.write_text('[engine]\nhost = "http://127.0.0.1:9"\n')
    script = textwrap.dedent(f"""
        import sys
        from textual.app import App
        import sparkctl.tui.app as tui

        class Boom(App):
            def on_mount(self):
                raise RuntimeError("boom")
            def run(self, **kw):
                return super().run(headless=True)

        tui.make_app = lambda cfg, **kw: Boom()  # the CLI also passes its prefetched engine and probes
        from sparkctl.cli import main
        sys.exit(main(["--config", {str(config)!r}]))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "boom" in proc.stdout + proc.stderr


async def test_a_one_megabyte_model_shows_in_mib(fake, tmp_path):
    fake.state.add_model(make_model("tiny:1m", size_gib=1_000_000 / GIB))
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        assert str(screen.query_one("#models", DataTable).get_cell("tiny:1m", "size")) == "976.6 KiB"


async def test_unknown_model_names_get_a_close_local_name(fake, tmp_path):
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        screen.run_fit("qwen3:8")  # what a stale row or a palette entry could ask for
        await settle(app, pilot)
        assert "not found; did you mean qwen3:8b" in info(screen)


async def test_a_load_names_the_lane_the_contender_is_for_and_its_bench_runs_at_that_lanes_context(fake, tmp_path):
    """Review of issue 30: a contender's bench ran at production's context whatever lane it
    was evaluated for. The load dialog asks for the lane (two lanes here), the mark keeps it
    in sparkctl's state file, and the Bench screen's context is that lane model's. The
    engine is the FAKE Ollama."""
    from sparkctl.statefile import read_state
    from sparkctl.tui.context_hint import predicted_context

    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        select(screen, "llama3.2:3b")  # lane fast's model, resident at 16k
        await through_dialog(app, pilot, "l", ctx="16k")
        select(screen, "qwen3:8b")
        await pilot.press("l")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, LoadDialog)
        dialog.query_one("#load-ctx", Input).value = "8k"
        dialog.query_one("#load-lane", Input).value = "nope"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog  # not a lane: said in the dialog, nothing loaded
        assert "for lane: expected one of production, fast, got 'nope'" in str(
            dialog.query_one("#load-error", Static).render())
        dialog.query_one("#load-lane", Input).value = "fast"
        await pilot.press("enter")
        await pilot.pause()
        await settle(app, pilot)
        assert lane_cell(screen, "qwen3:8b") == "contender"
        await app.workers.wait_for_complete()
        assert read_state().contender_lanes == {"qwen3:8b": "fast"}
        app.action_refresh_now()
        await settle(app, pilot)
        choice = predicted_context(app, ["qwen3:8b"], None)
        assert (choice.num_ctx, choice.lane) == (16384, "fast"), choice
