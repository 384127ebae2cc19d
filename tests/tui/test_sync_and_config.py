"""The TUI's ways into `sparkctl sync` and `sparkctl config`: the header counts runs waiting
in the spool and `y` writes them to a REAL MLflow store; `o` shows every config value with
the file it came from. The engine is the FAKE Ollama."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from sparkctl.config import load_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from tests.integration.test_eval_suites import changed_gsm8k, http_mirror, mirror_dir  # noqa: F401  (fixtures)
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401


async def until(pilot, cond, timeout=15.0):
    end = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < end, "timed out"
        await pilot.pause(0.05)


def record(i: int) -> RunRecord:
    return RunRecord(experiment=TEST_EXPERIMENT, run_name=f"spooled {i}", start_ms=1_700_000_000_000 + i,
                     end_ms=1_700_000_001_000 + i, params={"model": "qwen3:8b"}, tags={"model.name": "qwen3:8b"},
                     summary_metrics={"decode_tps_median": 40.0 + i})


async def test_y_syncs_the_spooled_runs_and_the_header_counts_them(tmp_path, mlflow_store):  # noqa: F811
    spool = Spool(tmp_path / "spool.jsonl")
    for i in range(2):
        spool.append(record(i))  # as a bench leaves them when MLflow was away
    server = FakeOllama(bench_scenario()).start()
    try:
        cfg = load_config(None, state=None)
        app = make_app(cfg, engine=OllamaEngine(server.url, timeout=5.0), probes=FakeProbes(spark_snapshot()),
                       recorder=lambda r: None, spool=spool, store=mlflow_store)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.pending_runs == 2)
            assert "2 run(s) to sync (y)" in app.sub_title
            await pilot.press("y")
            await until(pilot, lambda: app.pending_runs == 0)
            assert "to sync" not in app.sub_title
        assert sorted(r["run_name"] for r in mlflow_store.search_runs()) == ["spooled 0", "spooled 1"]
        assert spool.pending() == []
    finally:
        server.stop()


async def test_o_shows_each_value_with_the_file_it_came_from(tmp_path, monkeypatch):
    conf = tmp_path / "team.toml"
    conf.write_text('[bench]\nreps = 9\n[tracking]\nuri = "http://alice:s3cret@mlflow.lan:5000"\n')
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    server = FakeOllama(bench_scenario()).start()
    try:
        app = make_app(load_config(str(conf), state=None), engine=OllamaEngine(server.url, timeout=5.0),
                       probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("o")
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "ConfigScreen"
            text = app.screen.text
            assert f"reps = 9  # {conf}" in text
            assert "s3cret" not in text and "***" in text  # a credential in a URI is never shown
            assert "num_predict = 512\n" in text  # a built-in default: no file named
            assert app.screen.query_one("#config-text", Static).display
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert type(app.screen).__name__ == "DashboardScreen"
    finally:
        server.stop()


async def test_the_palettes_pull_suites_checks_the_source_against_the_shipped_copy(http_mirror, tmp_path):  # noqa: F811
    """`sparkctl suites pull` from the TUI (palette: "Pull the quality suites"), from a
    loopback mirror: IFEval is the shipped file (nothing written), GSM8K is another file,
    refused until accepted, and the notice says the shipped copy stays in use."""
    from sparkctl import paths
    from sparkctl.tui.commands import app_commands

    changed_gsm8k(http_mirror, lines=9)
    server = FakeOllama(bench_scenario()).start()
    try:
        app = make_app(load_config(None, state=None), engine=OllamaEngine(server.url, timeout=5.0),
                       probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
        async with app.run_test(size=(120, 40)) as pilot:
            seen: list[tuple[str, str]] = []
            app.notify = lambda message, severity="information", **kw: seen.append((message, severity))
            names = [c.name for c in app_commands(app, app.screen)]
            assert "Pull the quality suites" in names and "Lanes" in names
            app.action_pull_suites()
            await until(pilot, lambda: any(m.startswith("gsm8k:") for m, _s in seen))
            message, severity = next((m, s) for m, s in seen if m.startswith("gsm8k:"))
            assert severity == "error" and "--accept-new" in message and "evals keep reading the shipped copy" in message
            assert "ifeval: up to date: the source's file is the shipped copy" in message
            assert not (paths.data_dir() / "suites" / "gsm8k-test.jsonl").exists()
    finally:
        server.stop()
