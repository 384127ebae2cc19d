"""The Eval screen says which copy of a suite an eval would read (shipped, pulled, a chosen
directory) with its sha256, points at a directory of the user's own, and leaves no "reading the
suite…" behind when the suite cannot be read. FAKE Ollama (testkit/fakes/ollama_server.py) and
FAKE Spark probes; the suites are the package's own copies or small files written here."""

from __future__ import annotations

import hashlib
from pathlib import Path

from textual.widgets import Input, Label, Select

from sparkctl import paths
from sparkctl.tui.screens.eval import EvalScreen, EvalStats
from sparkctl.tui.widgets.suites_dialog import SuitesDirDialog
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.test_eval import write_gsm8k
from tests.tui.test_dashboard import wait_for as until
from tests.tui.test_eval_screen import A, build, config, serve, start  # noqa: F401

GSM8K_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"  # the published files
IFEVAL_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"


def default_config():
    cfg = config(Path("unused"))  # the test config, then without [eval] suites_dir
    return type(cfg)(**{**cfg.__dict__, "eval": type(cfg.eval)()})


def copy_line(app) -> str:
    return str(app.screen.query_one("#suite-copy", Label).render())


async def open_eval(app, pilot) -> EvalScreen:
    await pilot.press("e")
    await until(pilot, lambda: isinstance(app.screen, EvalScreen) and copy_line(app))
    return app.screen


async def choose_dir(app, pilot, folder: Path) -> None:
    """Suites dir…, type FOLDER, enter."""
    await pilot.click("#suites-dir")
    await until(pilot, lambda: isinstance(app.screen, SuitesDirDialog))
    app.screen.query_one("#suites-dir-path", Input).value = str(folder)
    await pilot.press("enter")


async def test_the_copy_line_names_the_shipped_copy_and_its_sha256(serve):
    app = build(serve(bench_scenario(tokens_per_s=None)), default_config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_eval(app, pilot)
        assert copy_line(app) == f"gsm8k: shipped copy · sha256 {GSM8K_SHA256[:12]}"
        screen.query_one("#suite", Select).value = "ifeval"
        await until(pilot, lambda: copy_line(app).startswith("ifeval"))
        assert copy_line(app) == f"ifeval: shipped copy · sha256 {IFEVAL_SHA256[:12]}"


async def test_suites_dir_points_at_a_directory_and_back_to_the_shipped_copy(serve, tmp_path):
    mine = write_gsm8k(tmp_path / "mine")
    mine_sha = hashlib.sha256((mine / "gsm8k-test.jsonl").read_bytes()).hexdigest()
    app = build(serve(bench_scenario(tokens_per_s=None)), default_config())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_eval(app, pilot)
        await choose_dir(app, pilot, mine)
        await until(pilot, lambda: "suites path copy" in copy_line(app))
        assert copy_line(app) == f"gsm8k: suites path copy · sha256 {mine_sha[:12]} · differs from the published file"
        # remembered as `sparkctl suites path` would: the CLI reads the same directory
        assert (paths.data_dir() / "suites" / "location").read_text().strip() == str(mine.resolve())

        await pilot.click("#suites-dir")
        await until(pilot, lambda: isinstance(app.screen, SuitesDirDialog))
        await pilot.click("#suites-dir-forget")
        await until(pilot, lambda: "shipped copy" in copy_line(app))
        assert not (paths.data_dir() / "suites" / "location").exists()


async def test_a_directory_without_suites_is_refused_and_nothing_changes(serve, tmp_path):
    app = build(serve(bench_scenario(tokens_per_s=None)), default_config())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_eval(app, pilot)
        await choose_dir(app, pilot, tmp_path)
        await until(pilot, lambda: any("holds none of" in n.message for n in app._notifications))
        assert copy_line(app).startswith("gsm8k: shipped copy")
        assert not (paths.data_dir() / "suites" / "location").exists()


async def test_a_suite_that_cannot_be_read_leaves_no_reading_line(serve, tmp_path):
    """A chosen directory with GSM8K only, and IFEval picked: the error is shown and the stats
    line says the run did not start, not "ifeval: reading the suite…" for ever."""
    app = build(serve(bench_scenario(tokens_per_s=None)), config(write_gsm8k(tmp_path / "suites")))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await start(app, pilot, A, suite="ifeval")
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        phase = str(screen.query_one("#eval-phase", Label).render())
        assert phase.startswith("no suite: IFEval (input prompts) not found at")
        summary = screen.query_one(EvalStats).summary
        assert summary == "ifeval: not run" and "reading" not in summary
        assert copy_line(app).startswith("ifeval: [eval] suites_dir copy missing")
