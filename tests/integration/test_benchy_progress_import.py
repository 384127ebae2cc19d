"""llama-benchy's live stream imported (issue 31 point 5): `sparkctl import llama-benchy` reads
an --emit-progress file whole, or follows it as it grows (--follow, and the Bench screen's
`f`), and records each cell as a run of kind import whose steps are its requests. The streams
are written by tests/benchy_stream.py from the published schema (a writer thread appends them
line by line, as llama-benchy does); MLflow on a real SQLite file."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time

import pytest

from sparkctl import cli
from tests.benchy_stream import Plan, lines, ttft_of
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401

TTFC = "live.gen_ai.client.operation.time_to_first_chunk"


@pytest.fixture
def config(mlflow_store, tmp_path):  # noqa: F811
    path = tmp_path / "sparkctl.toml"
    path.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    return str(path)


def sparkctl(config, capsys, *argv):
    code = cli.main(["--config", config, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def write_slowly(path, text_lines, pause_s: float, hold_before: int | None = None, release: threading.Event | None = None):
    """Append the stream as llama-benchy does (line-buffered), a pause between lines; with
    `hold_before`, wait at that line until `release` is set (a request in the middle of its stream)."""
    def run():
        with open(path, "a", buffering=1) as f:
            for i, line in enumerate(text_lines):
                if hold_before is not None and i == hold_before and release is not None:
                    release.wait(30)
                f.write(line)
                time.sleep(pause_s)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_progress_file_imports_as_runs_with_each_request_a_step(config, capsys, mlflow_store, tmp_path):  # noqa: F811
    path = tmp_path / "progress.jsonl"
    plan = Plan(cells=((0, 1), (4096, 2)), runs=3)
    path.write_text("".join(lines(plan)))
    code, out, err = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--model", "llama3.2:3b", "--json")
    assert code == 0, err
    recorded = json.loads(out)
    assert [r["cell"] for r in recorded] == ["d0/c1", "d4096/c2"] and {r["status"] for r in recorded} == {"FINISHED"}
    rows = {r["run_id"]: r for r in json.loads(sparkctl(config, capsys, "runs", "--kind", "import", "--json")[1])}
    assert len(rows) == 2 and {r["model"] for r in rows.values()} == {"llama3.2:3b"}
    deep = next(r for r in recorded if r["cell"] == "d4096/c2")
    # the Runs screen's per-repetition TTFT column reads this history: one value per request
    assert mlflow_store.metric_history(deep["run_id"], "ttft_s") == pytest.approx(
        [ttft_of(4096, run, slot) for run in range(3) for slot in range(2)])
    assert len(mlflow_store.metric_history(deep["run_id"], "client_decode_tps")) == 6
    assert len(mlflow_store.metric_history(deep["run_id"], TTFC)) == 6  # and AIPerf's name
    # the same stream again: nothing new
    code, out, _ = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--model", "llama3.2:3b", "--json")
    assert code == 0 and {r["run_id"] for r in json.loads(out)} == set(rows)
    assert len(mlflow_store.search_runs()) == 2


def test_follow_reads_the_file_as_it_grows_and_records_at_bench_complete(config, capsys, mlflow_store, tmp_path):  # noqa: F811
    path = tmp_path / "progress.jsonl"
    path.write_text("")
    text = lines(Plan(cells=((0, 2),), runs=2, tg=4))
    writer = write_slowly(path, text, 0.01)
    code, out, err = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--follow", "--json")
    writer.join(5)
    assert code == 0, err
    (rec,) = json.loads(out)
    assert rec["status"] == "FINISHED" and rec["cell"] == "d0/c2"
    # it waited for the whole stream: every request of both runs is in the run
    assert len(mlflow_store.metric_history(rec["run_id"], "ttft_s")) == 4
    code, _, err = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--follow", "--idle-timeout", "0")
    assert code == 2 and err.strip() == "sparkctl: --idle-timeout must be > 0 seconds, got 0"


async def test_the_bench_screen_draws_a_followed_run_on_its_gauges(mlflow_store, tmp_path, serve):  # noqa: F811
    from textual.widgets import Input

    from sparkctl.config import Config, TrackingConfig
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tracking.spool import Spool
    from sparkctl.tracking.sync import record_run
    from sparkctl.tui.app import make_app
    from sparkctl.tui.widgets.gauges import Gauges
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.ollama_server import bench_scenario

    path = tmp_path / "progress.jsonl"
    path.write_text("")
    plan = Plan(cells=((0, 1),), runs=1, tg=8)
    text = lines(plan)
    # hold the stream after the 5th token of the one request: the gauges must show it mid-way
    held = next(i for i, line in enumerate(text) if '"snippet":" w5"' in line)
    release = threading.Event()
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    spool = Spool(tmp_path / "spool.jsonl")
    engine = OllamaEngine(serve(bench_scenario(tokens_per_s=None)).url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()),
                   recorder=lambda rec: record_run(rec, spool, mlflow_store), store=mlflow_store)
    app.animation_level = "none"
    loop = asyncio.get_running_loop()

    async def until(pilot, cond, timeout=20.0):
        end = loop.time() + timeout
        while not cond():
            assert loop.time() < end, "timed out"
            await pilot.pause(0.05)

    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("bench")
        await pilot.pause()
        screen = app.screen
        await pilot.press("f")
        await until(pilot, lambda: app.screen is not screen)
        app.screen.query_one("#follow-path", Input).value = str(path)
        await pilot.press("enter")
        write_slowly(path, text, 0.005, hold_before=held, release=release)
        gauges = screen.query_one(Gauges)
        await until(pilot, lambda: gauges.values["tokens"] == "5")
        assert gauges.values["ttft"] == f"{ttft_of(0, 0, 0):.2f} s"
        assert gauges.values["rep"].startswith(plan.model) and "d0 c1 run 1" in gauges.values["rep"]
        assert gauges.values["tps"] != "-"
        release.set()
        await until(pilot, lambda: str(screen.query_one("#phase").render()).startswith("llama-benchy run complete"))
    runs = mlflow_store.search_runs()
    assert len(runs) == 1 and runs[0]["tags"]["import.format"] == "progress"
    assert len(mlflow_store.metric_history(runs[0]["run_id"], "ttft_s")) == 1


@pytest.mark.parametrize("model", ["evil\x1b]0;PWNED-TITLE\x07", "m[/bold]x", "[bold]x\x1b[2J"])
async def test_a_followed_run_shows_its_model_name_as_plain_text(mlflow_store, tmp_path, serve, model):  # noqa: F811
    """The progress file is written by another program: an OSC in its model name must not
    retitle the terminal's pane, a CSI 2J must not clear it, and `[/bold]` or `[bold]` in it
    is text (the first was a MarkupError that ended the app, the second bolded the gauge and
    hid itself). The engine is the FAKE Ollama (the Bench screen needs one to start)."""
    from textual.widgets import Input

    from sparkctl.config import Config, TrackingConfig
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tracking.spool import Spool
    from sparkctl.tracking.sync import record_run
    from sparkctl.tui.app import make_app
    from sparkctl.tui.widgets.gauges import Gauges
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.ollama_server import bench_scenario
    from tests.tui.screen_text import escapes_in, screen_text, terminal_output

    path = tmp_path / "progress.jsonl"
    path.write_text("")
    text = lines(Plan(model=model, cells=((0, 1),), runs=1, tg=8))
    held = next(i for i, line in enumerate(text) if '"snippet":" w5"' in line)
    release = threading.Event()
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    engine = OllamaEngine(serve(bench_scenario(tokens_per_s=None)).url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()),
                   recorder=lambda rec: record_run(rec, Spool(tmp_path / "spool.jsonl"), mlflow_store),
                   store=mlflow_store)
    app.animation_level = "none"
    loop = asyncio.get_running_loop()

    async def until(pilot, cond, timeout=20.0):
        end = loop.time() + timeout
        while not cond():
            assert app.is_running, "the app ended"
            assert loop.time() < end, "timed out"
            await pilot.pause(0.05)

    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("bench")
        await pilot.pause()
        screen = app.screen
        await pilot.press("f")
        await until(pilot, lambda: app.screen is not screen)
        app.screen.query_one("#follow-path", Input).value = str(path)
        await pilot.press("enter")
        write_slowly(path, text, 0.005, hold_before=held, release=release)
        gauges = screen.query_one(Gauges)
        await until(pilot, lambda: gauges.values["tokens"] == "5")
        await pilot.pause()
        output = terminal_output(app)
        assert escapes_in(output) == [] and "PWNED" not in output and "\x1b[2J" not in output
        shown = screen_text(app)
        name = {"m[/bold]x": "m[/bold]x", "[bold]x\x1b[2J": "[bold]x"}.get(model, "evil")
        assert f"{name} d0 c1 run 1" in shown and f"streaming {name} (d0 c1" in shown
        release.set()
        await until(pilot, lambda: str(screen.query_one("#phase").render()).startswith("llama-benchy run complete"))
    (run,) = mlflow_store.search_runs()
    assert "PWNED" not in str(run["tags"]) and "\x1b" not in str(run["tags"])
