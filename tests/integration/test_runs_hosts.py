"""Runs from several hosts in one REAL MLflow SQLite store: `runs --host/--by-host`, the Runs
screen's host filter and grouping, and `compare` within one hardware class.

Seeded by the REAL BenchRunner against the FAKE Ollama (testkit/fakes/ollama_server.py, real
HTTP), with FAKE host probes (testkit/fakes/host.py) standing in for three machines: two
GB10 Sparks (spark-01, spark-02: one hardware class) and an H200 box (another class).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from textual.widgets import DataTable, Input

from sparkctl.cli import EXIT_OK, EXIT_REFUSED, main
from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings
from sparkctl.services.runs import list_runs
from sparkctl.services.runs.comparison import NothingToCompare, compare_models
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import MlflowStore, default_tracking_uri
from sparkctl.tracking.sync import record_run
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, h200_snapshot, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    copy_template_store,
    mlflow_template_db,
)

LLAMA, QWEN = "llama3.2:3b", "qwen3:8b"
MIXED = "mixed-hosts"


@pytest.fixture(scope="module")
def three_hosts(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """Experiment TEST_EXPERIMENT, oldest first: qwen3:8b on spark-02, qwen3:8b on h200-box,
    llama3.2:3b on spark-01, llama3.2:3b on h200-box. Experiment MIXED: llama3.2:3b on
    spark-01, qwen3:8b on spark-02, llama3.2:3b on h200-box. Read-only for the tests."""
    folder = tmp_path_factory.mktemp("hosts")
    store = copy_template_store(mlflow_template_db, folder / "mlflow")
    mixed = MlflowStore(default_tracking_uri(folder / "mlflow"), None, MIXED)
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    spool = Spool(folder / "spool.jsonl")
    settings = dataclasses.replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=3, num_predict=12,
                                   think=False, timeout_s=30.0)
    hosts = {"spark-01": dataclasses.replace(spark_snapshot(), hostname="spark-01"),
             "spark-02": dataclasses.replace(spark_snapshot(), hostname="spark-02"),
             "h200-box": h200_snapshot()}

    async def bench(host: str, model: str, to):
        engine = OllamaEngine(server.url, timeout=5.0)
        try:
            # the record names its experiment (the config's): the store's own is for reading
            run_cfg = Config(tracking=TrackingConfig(experiment=to.experiment))
            runner = BenchRunner(run_cfg, engine, FakeProbes(hosts[host]), settings,
                                 recorder=lambda rec: record_run(rec, spool, to))
            (run,) = await runner.run([model])
            assert run.run_id, run.sync_message
        finally:
            await engine.close()

    try:
        for host, model in (("spark-02", QWEN), ("h200-box", QWEN), ("spark-01", LLAMA), ("h200-box", LLAMA)):
            asyncio.run(bench(host, model, store))
        for host, model in (("spark-01", LLAMA), ("spark-02", QWEN), ("h200-box", LLAMA)):
            asyncio.run(bench(host, model, mixed))
    finally:
        server.stop()
    config = folder / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.display_uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    return store, config


def cli(config, *args, capsys):
    capsys.readouterr()
    code = main(["--config", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_filter_and_group_by_host(three_hosts, capsys):
    store, config = three_hosts
    assert [r.host for r in list_runs(store, host="h200-box")] == ["h200-box", "h200-box"]
    code, out, _ = cli(config, "runs", "--host", "spark-02", "--json", capsys=capsys)
    assert code == EXIT_OK and [(r["host"], r["model"]) for r in json.loads(out)] == [("spark-02", QWEN)]
    code, out, _ = cli(config, "runs", "--by-host", "--json", capsys=capsys)
    groups = json.loads(out)
    assert list(groups) == ["h200-box", "spark-01", "spark-02"]
    assert [r["model"] for r in groups["h200-box"]] == [LLAMA, QWEN]  # newest first within a host
    # the host's hardware class comes back with each run
    h200 = groups["h200-box"][0]
    assert h200["gpu_name"] == "NVIDIA H200" and h200["gpu_driver"] == "580.159.04"
    assert round(h200["mem_total_gib"]) == 2000
    code, text, _ = cli(config, "runs", "--by-host", capsys=capsys)
    blocks = text.strip().split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["h200-box · 2 run(s)", "spark-01 · 1 run(s)",
                                                   "spark-02 · 1 run(s)"]


def test_compare_stays_within_one_hardware_class_unless_asked(three_hosts, capsys):
    store, config = three_hosts
    # llama3.2:3b's newest run is the H200's: qwen3:8b is taken from the H200 too, and the
    # GB10 runs of both are left out, by name
    cmp = compare_models(store, [LLAMA, QWEN], experiment=TEST_EXPERIMENT)
    assert [s.run.host for s in cmp.sides] == ["h200-box", "h200-box"]
    assert any(n.startswith("llama3.2:3b: runs on other hardware left out: spark-01 (NVIDIA GB10")
               for n in cmp.notes), cmp.notes
    assert any(n.startswith("qwen3:8b: runs on other hardware left out: spark-02 (NVIDIA GB10")
               for n in cmp.notes), cmp.notes

    # MIXED: qwen3:8b ran on spark-02 only; the newest llama3.2:3b on the H200
    cmp = compare_models(store, [QWEN, LLAMA], experiment=MIXED)
    assert [s.run.host for s in cmp.sides] == ["spark-02", "spark-01"]  # the GB10 run, not the newer H200 one
    assert any(n.startswith("runs from different hosts (spark-01, spark-02) of one hardware class (NVIDIA GB10")
               for n in cmp.notes), cmp.notes
    with pytest.raises(NothingToCompare, match=r"no run of qwen3:8b on NVIDIA H200.*--any-hardware"):
        compare_models(store, [LLAMA, QWEN], experiment=MIXED)
    cmp = compare_models(store, [LLAMA, QWEN], experiment=MIXED, any_hardware=True)
    assert [s.run.host for s in cmp.sides] == ["h200-box", "spark-02"]
    assert any(n.startswith("runs on different hardware are compared (--any-hardware)") for n in cmp.notes)

    mixed_config = config.with_name("mixed.toml")
    mixed_config.write_text(config.read_text().replace(TEST_EXPERIMENT, MIXED))
    code, _out, err = cli(mixed_config, "compare", LLAMA, QWEN, capsys=capsys)
    assert code == EXIT_REFUSED and "--any-hardware" in err
    code, out, err = cli(mixed_config, "compare", LLAMA, QWEN, "--any-hardware", "--json", capsys=capsys)
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert [(m["host"], m["hardware"].split(",")[0]) for m in data["models"]] == [
        ("h200-box", "NVIDIA H200"), ("spark-02", "NVIDIA GB10")]


async def test_runs_screen_filters_by_host_and_groups_by_host(three_hosts):
    store, _config = three_hosts
    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    try:
        app = make_app(base, engine=OllamaEngine(server.url, timeout=5.0), probes=FakeProbes(spark_snapshot()),
                       recorder=lambda r: None, store=store)
        app.animation_level = "none"
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("h")
            table = None
            for _ in range(400):
                await pilot.pause(0.05)
                if app.screen.query("#runs"):
                    table = app.screen.query_one("#runs", DataTable)
                    if table.row_count == 4:
                        break
            assert table is not None and table.row_count == 4

            def hosts() -> list[str]:
                col = [c.key.value for c in table.ordered_columns].index("host")
                return [str(table.get_cell_at((i, col))) for i in range(table.row_count)]

            assert hosts() == ["h200-box", "spark-01", "h200-box", "spark-02"]  # newest first
            await pilot.press("g")
            await pilot.pause(0.1)
            assert hosts() == ["h200-box", "h200-box", "spark-01", "spark-02"]
            assert "grouped by host (3)" in str(app.screen.query_one("#runs-status").render())
            app.screen.query_one("#runs-filter", Input).value = "host:spark"
            await pilot.pause(0.2)
            assert hosts() == ["spark-01", "spark-02"]
            app.screen.query_one("#runs-filter", Input).value = "host:spark qwen3"
            await pilot.pause(0.2)
            assert hosts() == ["spark-02"]
    finally:
        server.stop()


def test_the_fleet_shows_each_lanes_last_bench_on_that_host_and_an_engine_changed_since(three_hosts):
    from sparkctl.core.host_status import fleet_warnings, parse_status
    from sparkctl.services.fleet.lastbench import lane_benches

    store, _config = three_hosts
    (run,) = list_runs(store, host="spark-01")
    benched_on = run.engine_version
    # spark-01's status now: llama3.2:3b on its production lane, resident, on a newer engine
    status = parse_status({
        "schema": 2, "host": {"hostname": "spark-01"},
        "engine": {"kind": "ollama", "reachable": True, "version": "0.99.0", "error": None},
        "resident": [{"name": LLAMA, "lane": "production", "placement": "100% GPU"}],
        "lanes": [{"lane": "production", "model": LLAMA, "resident": True},
                  {"lane": "fast", "model": QWEN, "resident": False}]})
    benches = lane_benches(store, status, experiment=TEST_EXPERIMENT)
    # spark-01's own run only: qwen3:8b ran on spark-02 and the H200, never on spark-01
    assert [(b.lane, b.model, b.engine_version) for b in benches] == [
        ("production", LLAMA, benched_on), ("fast", QWEN, None)]
    assert benches[0].decode_tps == run.decode_tps_median
    assert f"lane production: engine 0.99.0 since its last bench ({benched_on}): re-bench" in \
        fleet_warnings(status, None, benches)
