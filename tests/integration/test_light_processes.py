"""What the dashboard, `sparkctl status` and the history commands load, seen in REAL child
processes: each answers as before, without importing MLflow (~2 s and ~180 MB), Textual
where it shows nothing, or the `ollama` client (its pydantic models, ~0.3 s) where plain
HTTP is enough. The engine is the FAKE Ollama (testkit/fakes/ollama_server.py, real HTTP);
the store a REAL MLflow SQLite file written by the REAL BenchRunner through sparkctl's
recorder. No timing is asserted: the budgets are measured by benchmarks/ (make bench)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.store import MlflowStore
from testkit.fakes.ollama_server import FakeOllama, bench_scenario, two_models_resident
from testkit.tracking import (  # noqa: F401  (pytest fixtures)
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
    recording_bench,
)

REPO = Path(__file__).resolve().parents[2]
A, B = "llama3.2:3b", "qwen3:8b"
NEVER = {"mlflow", "ollama", "pydantic"}


def _child(code: str, env: dict, cwd: Path, timeout: float = 120,
           full: bool = False) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``code`` in a fresh interpreter; also the top-level names of every module it
    loaded (``full``: the modules' whole names)."""
    out = cwd / "modules.json"
    wrapper = ("import atexit, json, sys\n"
               f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n" + code)
    done = subprocess.run([sys.executable, "-c", wrapper], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return done, {m if full else m.split(".")[0] for m in json.loads(out.read_text())}


def _cli(args: list[str], env: dict, cwd: Path):
    return _child(f"from sparkctl.cli import main\nsys.exit(main({args!r}))", env, cwd)


@pytest.fixture(scope="module")
def history(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """A and B benched on Ollama 0.12.6 (the FAKE engine) into a REAL SQLite store, and a
    config that names it, with A as the production lane."""
    folder = tmp_path_factory.mktemp("light")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        bench = recording_bench(server.url, store, folder / "spool.jsonl", warmup=0, reps=3, num_predict=12)
        asyncio.run(bench(A))
        asyncio.run(bench(B))
    finally:
        server.stop()
    config = folder / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n\n'
                      f'[lanes]\nproduction = "{A}"\n')
    return folder, config


def test_runs_and_compare_answer_from_sqlite_without_importing_mlflow(history, tmp_path):
    folder, config = history
    env = {"SPARKCTL_CONFIG": str(config)}
    done, mods = _cli(["runs", "--json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["model"] for r in json.loads(done.stdout)) == [A, B]
    assert not mods & NEVER, mods & NEVER
    done, mods = _cli(["compare", A, B, "--json", "--community"], env, tmp_path)  # --community: issue 22
    assert done.returncode == 0, done.stderr
    assert [m["model"] for m in json.loads(done.stdout)["models"]] == [A, B]
    assert json.loads(done.stdout)["community"] == []  # asked of the store, found no imports
    assert not mods & NEVER, mods & NEVER


def test_status_json_answers_without_mlflow_textual_or_the_ollama_client(tmp_path):
    server = FakeOllama(two_models_resident()).start()
    try:
        done, mods = _cli(["status", "--json"], {"OLLAMA_HOST": server.url}, tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["engine"]["reachable"] and [r["name"] for r in report["resident"]] == ["gpt-oss:120b",
                                                                                       "qwen3:30b-a3b"]
    assert not mods & (NEVER | {"textual"}), mods & (NEVER | {"textual"})


DASHBOARD = """
import asyncio
from sparkctl.config import load_config
from sparkctl.tui.app import make_app

async def run():
    app = make_app(load_config(None))  # the real engine, probes and tracking, from the config
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(1200):
            if app.report is not None and app.report.engine.reachable and app.stale_lanes:
                break
            await pilot.pause(0.05)
        table = app.screen.query_one("#resident")
        print(json.dumps({"rows": [str(table.get_cell_at((i, 0))) for i in range(table.row_count)],
                          "note": app.screen.query_one("#warnings").text}))

asyncio.run(run())
"""


def test_dashboard_shows_the_engine_change_note_without_importing_mlflow(history, tmp_path):
    """The engine moved to 0.13.0 since A (the production lane) was benched on 0.12.6: the
    dashboard says so, reading the SQLite store itself, and its process never loads MLflow
    or the ollama client."""
    _, config = history
    state = two_models_resident()
    state.version = "0.13.0"
    server = FakeOllama(state).start()
    try:
        done, mods = _child(DASHBOARD, {"SPARKCTL_CONFIG": str(config), "OLLAMA_HOST": server.url}, tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["rows"] == ["gpt-oss:120b", "qwen3:30b-a3b"]
    assert "engine 0.13.0 since last bench of production (0.12.6): re-bench" in shown["note"]
    assert not mods & NEVER, mods & NEVER


def test_engine_change_note_asks_a_child_process_where_the_reader_cannot(history, monkeypatch):
    """A store only MLflow's client can read (here: a schema revision the reader is told it
    does not know): the note is still made, by a short-lived child process."""
    from sparkctl.services.runs.drift import engine_change_notes
    from sparkctl.tracking import sqlite_reader
    from sparkctl.tracking.store import MlflowStore, NeedsMlflow

    folder, _ = history
    store = MlflowStore(f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}", None, TEST_EXPERIMENT)
    monkeypatch.setattr(sqlite_reader, "KNOWN_REVISIONS", frozenset())
    with pytest.raises(NeedsMlflow):
        store.without_mlflow().search_runs()
    notes = engine_change_notes(store, {"production": A, "fast": B}, "ollama", "0.13.0")
    # (lane, message, whether there is a bench to repeat: the dashboard offers B only then)
    assert notes[:2] == [("production", "engine 0.13.0 since last bench of production (0.12.6): re-bench", True),
                         ("fast", "engine 0.13.0 since last bench of fast (0.12.6): re-bench", True)]
    # and why it took a child process: a note without a lane, for the dashboard
    assert len(notes) == 3 and notes[2][0] == ""
    assert notes[2][1].startswith(f"note: {store.display_uri} is read through MLflow's client (seconds slower): "
                                  "its schema revision dc11669786a5 is not one sparkctl's reader knows")


# a store written by an MLflow whose schema revision sparkctl's reader does not know (a
# release newer than pyproject's range): the child forgets every known revision first
UNKNOWN_REVISION = "from sparkctl.tracking import sqlite_reader\nsqlite_reader.KNOWN_REVISIONS = {}\n"


def test_runs_and_compare_say_once_that_mlflow_s_client_read_the_store(history, tmp_path):
    """Where the reader cannot answer, the command still answers (through MLflow's client)
    and says why it was slow: one line on stderr, however many reads it made."""
    _, config = history
    env = {"SPARKCTL_CONFIG": str(config)}
    for args in (["runs", "--json"], ["compare", A, B, "--json", "--community"]):
        done, mods = _child(UNKNOWN_REVISION + f"from sparkctl.cli import main\nsys.exit(main({args!r}))", env,
                            tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)  # the answer, as without the note
        notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
        assert len(notes) == 1, done.stderr
        assert "is read through MLflow's client (seconds slower): its schema revision dc11669786a5" in notes[0]
        assert "mlflow" in mods  # the client did read


def test_dashboard_says_when_its_engine_change_note_came_through_mlflow_s_client(history, tmp_path):
    _, config = history
    state = two_models_resident()
    state.version = "0.13.0"
    server = FakeOllama(state).start()
    try:
        done, mods = _child(UNKNOWN_REVISION + DASHBOARD, {"SPARKCTL_CONFIG": str(config),
                                                          "OLLAMA_HOST": server.url}, tmp_path, timeout=240)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    note = json.loads(done.stdout.strip().splitlines()[-1])["note"]
    assert "engine 0.13.0 since last bench of production (0.12.6): re-bench" in note
    assert "is read through MLflow's client (seconds slower): its schema revision dc11669786a5" in note
    assert "mlflow" not in mods  # a child process of its own asked MLflow's client


# What `sparkctl` (the dashboard) may have imported when its first frame is drawn: the
# config, the engine adapter, the host probes, the status report and the dashboard's own
# widgets. Each module more is start-up CPU the first frame pays for (benchmarks/
# first_frame.py measures it; its budget is 1.5x a bare Textual app): what the frame does
# not draw (the run record and its readers, the other screens, the CLI's commands, the
# fleet, the web server, statistics) is imported when first used. A module added to the
# dashboard's path belongs here only if the first frame draws something with it.
FIRST_FRAME_MODULES = {
    "sparkctl", "sparkctl.cli", "sparkctl.cli.exitcodes", "sparkctl.config", "sparkctl.paths",
    "sparkctl.statefile", "sparkctl.themes",
    "sparkctl.core", "sparkctl.core.budget", "sparkctl.core.fmt", "sparkctl.core.gpu", "sparkctl.core.margins",
    "sparkctl.core.names", "sparkctl.core.placement", "sparkctl.core.redact", "sparkctl.core.snapshots",
    "sparkctl.core.textfile", "sparkctl.core.loopback", "sparkctl.core.termtext", "sparkctl.core.limits",
    "sparkctl.core.safeload", "sparkctl.core.rebench",
    "sparkctl.engines", "sparkctl.engines.base", "sparkctl.engines.ollama",
    "sparkctl.probes", "sparkctl.probes.host", "sparkctl.probes.meminfo", "sparkctl.probes.nvml",
    "sparkctl.services", "sparkctl.services.factory", "sparkctl.services.prefetch", "sparkctl.services.status",
    "sparkctl.services.tracking",
    "sparkctl.tui", "sparkctl.tui.app", "sparkctl.tui.breakpoints", "sparkctl.tui.hangup", "sparkctl.tui.messages",
    "sparkctl.tui.themes", "sparkctl.tui.shown", "sparkctl.tui.screens", "sparkctl.tui.screens.dashboard",
    "sparkctl.tui.widgets", "sparkctl.tui.widgets.budget_bar", "sparkctl.tui.widgets.drift_gate",
    "sparkctl.tui.widgets.notes",
    "sparkctl.tui.widgets.warning_lines",
}
# never before the first frame, whatever else changes: MLflow and the run record's readers
# (SQLite), the HTTP and model clients sparkctl does not use for the dashboard, psutil (the
# host's CPU use is shown nowhere; /proc is read directly), the statistics (the history's
# sparklines come after the first frame), the text reports, argparse (no command, no parser),
# zipfile (the shipped themes are files), Rich's emoji table (no markup read before the frame)
NOT_BEFORE_FIRST_FRAME = {"mlflow", "sqlite3", "_sqlite3", "httpx", "ollama", "pydantic", "sqlalchemy", "psutil",
                          "statistics", "sparkctl.cli.textreport", "zipfile", "argparse", "rich._emoji_codes"}

FIRST_FRAME_CHILD = """
import gc, json, sys
from textual.css import stylesheet
from sparkctl.tui import app as tui_app

parses = []  # the app's stylesheet (app.tcss) parsed: once is enough
from textual.screen import Screen
thrown_away = []  # frames rendered inside App.run's start-up batch, which Textual never writes
render = Screen._compositor_refresh
def counted_render(self):
    if self.app._batch_count:
        thrown_away.append(type(self).__name__)
    return render(self)
Screen._compositor_refresh = counted_render
parse = stylesheet.parse
def counted(scope, css, read_from, *args, **kwargs):
    if str(read_from[0]).endswith("app.tcss"):
        parses.append(read_from)
    return parse(scope, css, read_from, *args, **kwargs)
stylesheet.parse = counted
styled = {}  # how many times each of the first screen's nodes was styled
apply = stylesheet.Stylesheet.apply
def counted_apply(self, node, *args, **kwargs):
    styled[repr(node)] = styled.get(repr(node), 0) + 1
    return apply(self, node, *args, **kwargs)
stylesheet.Stylesheet.apply = counted_apply

seen = {}  # what the process had done when its first frame was written to the terminal
display = tui_app.SparkApp._display
def model_rows(app):  # the lines of the resident box's rows, as the frame just written shows them
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    box = next((i for i, line in enumerate(lines) if "Resident models" in line), None)
    rows = []
    for line in lines[box + 2:] if box is not None else ():
        if not line.startswith("│"):
            break  # the box's end
        first = (line[1:].split() or [""])[0]
        if ":" in first:  # a model's name (name:tag), not a warning line
            rows.append(line)
    return lines, rows
def first_display(self, screen, renderable):
    written = renderable is not None and not self._batch_count
    display(self, screen, renderable)
    if written and "with_models" not in seen and self.screen.query("#resident"):
        lines, rows = model_rows(self)
        if rows:  # the first frame that shows a resident model (on a busy box the engine may answer later)
            seen["with_models"] = rows
    if not written or "modules" in seen:
        return
    seen.update(modules=sorted(sys.modules), collections=collections() - at_start, stylesheet_parses=len(parses),
                frames_thrown_away=len(thrown_away), screen_styled=styled.get(repr(self.screen), 0),
                history_boxes=len(self.screen.query("HistorySparkline")),
                lines=model_rows(self)[0])
    table = self.screen.query_one("#resident")

    def rows_shown():  # then the engine's models, as they reach the table
        rows = [str(table.get_cell_at((i, 0))) for i in range(table.row_count)]
        if rows and self.screen.query("HistorySparkline") and "with_models" in seen:
            with open(sys.argv[1], "w") as fh:
                json.dump({**seen, "rows": rows, "gc_enabled_after": gc.isenabled()}, fh)
            self.exit()

    self.set_interval(0.05, rows_shown)
    self.set_timer(30, self.exit)  # never a hung test: no file written, the test says so

tui_app.SparkApp._display = first_display
from sparkctl.cli import main
collections = lambda: sum(g["collections"] for g in gc.get_stats())
at_start = collections()  # this child's own imports above are not the command's
sys.exit(main([]))
"""


def _first_frame(tmp_path) -> dict:
    """The `sparkctl` command, as a user starts it (a real terminal: a pseudo-terminal of
    140x45), beside a FAKE Ollama with two models: what its process had done when its first
    frame was drawn (FIRST_FRAME_CHILD)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    server = FakeOllama(two_models_resident()).start()
    out = tmp_path / "first_frame.json"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 140, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "OLLAMA_HOST": server.url,
           "SPARKCTL_DATA_DIR": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("SPARKCTL_CONFIG", None)
    try:
        child = subprocess.Popen([sys.executable, "-c", FIRST_FRAME_CHILD, str(out)], stdin=slave, stdout=slave,
                                 stderr=slave, env=env, cwd=tmp_path, close_fds=True)
        os.close(slave)
        screen = b""
        try:
            while child.poll() is None:  # the terminal is read, as a terminal would, until the app exits
                if select.select([master], [], [], 0.1)[0]:
                    try:
                        screen += os.read(master, 65536)
                    except OSError:
                        break
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
            os.close(master)
    finally:
        server.stop()
    assert out.exists(), screen[-2000:].decode(errors="replace")
    seen = json.loads(out.read_text())
    assert seen["rows"] == ["gpt-oss:120b", "qwen3:30b-a3b"]  # the dashboard it started shows the engine
    return seen


def test_the_dashboards_first_frame_imports_only_what_it_draws(tmp_path):
    """When the first frame is drawn the process has imported the modules of
    FIRST_FRAME_MODULES and no other of sparkctl's, and none of NOT_BEFORE_FIRST_FRAME."""
    modules = set(_first_frame(tmp_path)["modules"])
    assert {m for m in modules if m.startswith("sparkctl")} - FIRST_FRAME_MODULES == set()
    assert modules & NOT_BEFORE_FIRST_FRAME == set()


def test_the_dashboards_start_neither_collects_garbage_nor_parses_its_css_twice(tmp_path):
    """Start-up work the first frame waited for, ~0.1 s of CPU on a 2-core box: no garbage
    collection runs before the first frame (the ~100,000 objects Textual and the dashboard
    build all live on) and the collector runs again after it; the stylesheet is parsed once
    (Textual parsed it twice more for the first screen, for the theme it already had); no
    frame is rendered only to be thrown away (Textual writes nothing during its start-up
    batch, and rendered the whole screen there first)."""
    seen = _first_frame(tmp_path)
    assert seen["collections"] == 0
    assert seen["gc_enabled_after"] is True
    assert seen["stylesheet_parses"] == 1
    assert seen["frames_thrown_away"] == 0


def test_the_history_boxes_and_the_run_record_come_after_the_first_frame_is_written(tmp_path):
    """Textual's Ready, and a call_after_refresh from on_mount, come before the first frame
    reaches the terminal (the refresh they follow is the one Textual drops in its start-up
    batch): work started there was paid for by the first frame. When the first frame is
    written, the history's sparklines are not mounted yet and nothing of the run record
    (the spool's recovery) was imported; both come right after."""
    seen = _first_frame(tmp_path)
    assert seen["history_boxes"] == 0
    assert not [m for m in seen["modules"] if m.startswith("sparkctl.tracking")]


def test_the_first_frame_is_the_whole_dashboard(tmp_path):
    """A frame holds what the dashboard says, not a part of it followed a frame later by the
    rest: the first frame has the title bar with the version and the engine's address (set
    in the app's on_mount, they reached the header a frame late), and the first frame that
    shows a resident model shows them all (a DataTable works its height out when it next
    idles: that frame showed one row of two)."""
    from sparkctl import __version__

    seen = _first_frame(tmp_path)
    assert f"sparkctl — v{__version__} · http://127.0.0.1:" in seen["lines"][0]
    assert [line.split()[1] for line in seen["with_models"]] == ["gpt-oss:120b", "qwen3:30b-a3b"]


def test_the_dashboard_is_styled_once_before_its_first_frame(tmp_path):
    """Textual styles a screen's widgets as they are composed and then, when the screen is
    first shown, styles the whole screen again though nothing changed in between (~30
    widgets, 10-20 ms of CPU on a 2-core box): the dashboard is styled once."""
    assert _first_frame(tmp_path)["screen_styled"] == 1


def test_the_engine_change_note_comes_from_what_sparkctl_benched_without_searching_the_store(
        mlflow_template_db, tmp_path):  # noqa: F811
    """A benched with sparkctl's own recorder (as the TUI and `sparkctl bench` build it) on
    the FAKE Ollama 0.12.6; the engine is now 0.13.0: the dashboard says so from what this
    machine's sparkctl noted when it recorded the run, without searching the store (the
    history query modules are never loaded); a lane it never benched is still asked of the
    store, and a store emptied since (here: another experiment) has nothing noted."""
    from sparkctl.services.bench import BenchRunner, BenchSettings
    from sparkctl.services.benched import notes_from_file
    from sparkctl.services.tracking import recorder_for
    from sparkctl.tracking.spool import Spool
    from testkit.fakes.host import FakeProbes, spark_snapshot

    store = copy_template_store(mlflow_template_db, tmp_path / "mlflow")
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
        settings = replace(BenchSettings.from_config(cfg.bench), think=False, timeout_s=30.0, warmup=0, reps=2,
                           num_predict=12)

        async def bench():
            engine = OllamaEngine(server.url, timeout=5.0)
            try:
                runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), settings,
                                     recorder=recorder_for(Spool(tmp_path / "spool.jsonl"), store))
                return await runner.run([A])
            finally:
                await engine.close()

        asyncio.run(bench())
    finally:
        server.stop()
    stale = "engine 0.13.0 since last bench of production (0.12.6): re-bench"
    assert notes_from_file(store, {"production": A, "fast": B}, "ollama", "0.13.0") == (
        [("production", stale, True)], {"fast": B})
    assert notes_from_file(store, {"production": A}, "ollama", "0.12.6") == ([], {})  # benched on this one
    other = MlflowStore(store.uri, None, "another-experiment")
    assert notes_from_file(other, {"production": A}, "ollama", "0.13.0") == ([], {"production": A})

    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n\n'
                      f'[lanes]\nproduction = "{A}"\n')
    state = two_models_resident()
    state.version = "0.13.0"
    server = FakeOllama(state).start()
    try:
        done, mods = _child(DASHBOARD, {"SPARKCTL_CONFIG": str(config), "OLLAMA_HOST": server.url}, tmp_path,
                            full=True)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert stale in json.loads(done.stdout.strip().splitlines()[-1])["note"]
    assert "sparkctl.services.runs.query" not in mods and "mlflow" not in mods
