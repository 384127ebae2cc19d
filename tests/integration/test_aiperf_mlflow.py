"""MLflow the way AIPerf writes it (issue 31 point 3): sparkctl's runs carry the OpenTelemetry
GenAI names AIPerf logs (live per-request scalars, in seconds), a sweep is one parent run with
a child per cell, `--mlflow-parent-run-id` puts runs under an existing run, each run names
itself in `exports/mlflow_export.json`, and `compare` and the model chart read AIPerf's runs
and sparkctl's by the same names. sparkctl's runs come from the REAL BenchRunner and
SweepRunner against the FAKE Ollama; AIPerf's are written by this test with MLflow's own
client in AIPerf's published layout (tests/integration/aiperf_runs.py); MLflow on a real
SQLite file."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics

import numpy as np
import pytest

from sparkctl import cli
from sparkctl.config import Config, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchSettings
from sparkctl.services.bench.profiles import resolve
from sparkctl.services.bench.sweep import SweepRunner
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.aiperf_runs import AIPerfRequest, AIPerfRun, log_aiperf_run
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)

A, B = "llama3.2:3b", "qwen3:8b"
TTFC = "gen_ai.client.operation.time_to_first_chunk"
# AIPerf's requests of A: made-up figures, their medians worked out below with numpy
AIPERF_A = [AIPerfRequest(0.21, 0.011, 1.9), AIPerfRequest(0.34, 0.012, 2.2), AIPerfRequest(0.27, 0.010, 2.0),
            AIPerfRequest(0.30, 0.013, 2.4), AIPerfRequest(0.25, 0.011, 2.1)]


@pytest.fixture
def config(mlflow_store, tmp_path):  # noqa: F811
    path = tmp_path / "sparkctl.toml"
    path.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    return str(path)


def sparkctl(config, capsys, *argv):
    code = cli.main(["--config", config, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
async def both_tools(serve, mlflow_store, tmp_path):  # noqa: F811
    """A and B benched by sparkctl on the fake Ollama, then an AIPerf run of A in the same experiment."""
    state = bench_scenario(tokens_per_s=None)
    state.models[A].tokens_per_s = 50.0
    state.models[B].tokens_per_s = 40.0
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=1, reps=3, num_predict=16)
    runs = await bench(A, B)
    aiperf_id = await asyncio.to_thread(log_aiperf_run, mlflow_store.uri, TEST_EXPERIMENT,
                                        AIPerfRun(A, AIPERF_A, concurrency=4), tmp_path / "aiperf-artifacts")
    return runs, aiperf_id


async def test_a_sparkctl_bench_and_an_aiperf_run_compare_by_the_same_genai_names(both_tools, mlflow_store,  # noqa: F811
                                                                                  config, capsys):
    runs, aiperf_id = both_tools
    a_run = runs[0]
    # sparkctl's run carries AIPerf's live name, one value per request, in seconds: its TTFT
    live = mlflow_store.metric_history(a_run.run_id, f"live.{TTFC}")
    assert live == pytest.approx(mlflow_store.metric_history(a_run.run_id, "ttft_s"))
    assert len(live) == 3
    # and the summary under the same name, searchable and sortable in MLflow
    found = mlflow_store.search_runs(f"attributes.run_id = '{a_run.run_id}'")[0]["metrics"]
    assert found[f"{TTFC}.p50"] == pytest.approx(float(np.median(live)))
    assert found[TTFC] == pytest.approx(float(np.mean(live)))
    # both runs hold the key, so MLflow's own compare view lines them up by it
    assert len(mlflow_store.metric_history(aiperf_id, f"live.{TTFC}")) == len(AIPERF_A)
    # each sparkctl run names itself as AIPerf's runs do
    export = json.loads(mlflow_store.read_artifact(a_run.run_id, "exports/mlflow_export.json"))
    assert export["run_id"] == a_run.run_id and export["experiment"] == TEST_EXPERIMENT
    assert f"live.{TTFC}" in export["metric_keys"]

    # `runs`: the AIPerf run is listed as AIPerf's, never as a bench of ours
    code, out, _ = sparkctl(config, capsys, "runs", "--json")
    assert code == 0
    rows = {r["run_id"]: r for r in json.loads(out)}
    assert rows[aiperf_id]["kind"] == "import" and rows[aiperf_id]["model"] == A
    assert rows[aiperf_id]["identity"]["profile"] == "aiperf" and rows[aiperf_id]["identity"]["concurrency"] == "4"
    code, out, _ = sparkctl(config, capsys, "runs", "--kind", "bench", "--json")
    assert aiperf_id not in {r["run_id"] for r in json.loads(out)}

    # compare: the decision is sparkctl's runs only; beside it, both tools by the same names
    code, out, err = sparkctl(config, capsys, "compare", A, B, "--community", "--json")
    assert code == 0, (err, [(r.model, r.status, r.invalid, r.flags) for r in runs])
    report = json.loads(out)
    assert {m["run_id"] for m in report["models"]} == {runs[0].run_id, runs[1].run_id}
    genai = {g["run_id"]: g for g in report["genai"]}
    aiperf = genai[aiperf_id]
    assert aiperf["tool"] == "aiperf" and aiperf["source"] == "live series" and aiperf["what"] == "aiperf c4"
    assert aiperf[f"{TTFC}.p50"] == pytest.approx(float(np.median([r.ttfc_s for r in AIPERF_A])))
    assert aiperf["gen_ai.client.operation.duration.p50"] == pytest.approx(
        float(np.median([r.duration_s for r in AIPERF_A])))
    assert aiperf["gen_ai.client.token.usage"] is None  # AIPerf mixes input and output counts under that key
    ours = genai[a_run.run_id]
    assert ours["tool"] == "sparkctl" and ours[f"{TTFC}.p50"] == pytest.approx(statistics.median(live))
    code, out, _ = sparkctl(config, capsys, "compare", A, B, "--community")
    assert "by the OpenTelemetry GenAI names" in out
    assert any(line.split()[:2] == [A, "aiperf"] for line in out.splitlines())


async def test_the_model_chart_draws_sparkctl_and_aiperf_runs_by_one_name(both_tools, mlflow_store, serve):  # noqa: F811
    from sparkctl.tui.app import make_app
    from sparkctl.tui.screens.run_charts import HistoryChartScreen

    base = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=5.0))
    server = serve(bench_scenario(tokens_per_s=None))
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=3.0)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=lambda r: None, store=mlflow_store)
    app.animation_level = "none"
    async with app.run_test(size=(100, 50)) as pilot:
        await app.push_screen(HistoryChartScreen(mlflow_store, A))
        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while app.screen.data is None:
            assert loop.time() < end
            await pilot.pause(0.05)
        text = app.screen.render_chart(96).plain
    assert f"{TTFC} p50, s (sparkctl and AIPerf runs)" in text
    chart = text.split(f"{TTFC} p50")[1].splitlines()[1:]
    aiperf_line = next(line for line in chart if line.startswith("aiperf"))
    sparkctl_line = next(line for line in chart if line.startswith("sparkctl"))
    assert aiperf_line.endswith(f"{np.median([r.ttfc_s for r in AIPERF_A]):.3f} s")
    assert "bench" in sparkctl_line


async def test_a_sweep_is_one_parent_run_with_its_cells_as_children_under_a_given_parent(serve, mlflow_store,  # noqa: F811
                                                                                        tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_store.uri)
    exp = client.get_experiment_by_name(TEST_EXPERIMENT) or None
    exp_id = exp.experiment_id if exp else client.create_experiment(
        TEST_EXPERIMENT, artifact_location=(mlflow_store.artifact_root).as_uri())
    # one A/B comparison: a parent made the way AIPerf's docs say (`mlflow runs create`)
    top = client.create_run(exp_id, run_name="ab-comparison").info.run_id
    state = bench_scenario(tokens_per_s=None)
    server = serve(state)
    cfg = Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT))
    spool = Spool(tmp_path / "spool.jsonl")
    s = dataclasses.replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=2, num_predict=8, timeout_s=30.0,
                            parent_run_id=top)
    engine = OllamaEngine(server.url, timeout=10.0)
    runner = SweepRunner(cfg, engine, FakeProbes(spark_snapshot()), s, resolve("prose", cfg.bench, 8), [0], [1, 2],
                         recorder=lambda rec: record_run(rec, spool, mlflow_store))
    try:
        result = await runner.run([A])
    finally:
        await engine.close()
    aiperf_child = await asyncio.to_thread(log_aiperf_run, mlflow_store.uri, TEST_EXPERIMENT,
                                           AIPerfRun(A, AIPERF_A, parent_run_id=top), tmp_path / "a")
    runs = {r["run_id"]: r for r in mlflow_store.search_runs(max_results=50)}
    sweep_run = runs[result.parent_run_id]
    assert sweep_run["tags"]["sparkctl.kind"] == "sweep" and sweep_run["tags"]["mlflow.parentRunId"] == top
    cells = [r for r in runs.values() if r["tags"].get("sparkctl.kind") == "sweep-cell"]
    assert len(cells) == 2 and {c["tags"]["mlflow.parentRunId"] for c in cells} == {result.parent_run_id}
    # under the one parent: sparkctl's sweep and AIPerf's run, side by side
    assert {rid for rid, r in runs.items() if r["tags"].get("mlflow.parentRunId") == top} == {
        result.parent_run_id, aiperf_child}
    cell_export = json.loads(mlflow_store.read_artifact(cells[0]["run_id"], "exports/mlflow_export.json"))
    assert cell_export["parent_run_id"] == result.parent_run_id


def test_a_cell_replayed_before_its_sweep_still_ends_under_one_parent(mlflow_store):  # noqa: F811
    """The spool replays records one at a time; a cell whose sweep's record is not written yet
    (written later, or never: its process died) gets a parent that the sweep's record fills."""
    parent_id = "a" * 32
    cell = RunRecord(experiment=TEST_EXPERIMENT, run_name="cell", start_ms=1_000, end_ms=2_000,
                     tags={"sparkctl.kind": "sweep-cell", "sweep.id": "S1", "sparkctl.parent_record_id": parent_id},
                     summary_metrics={"x": 1.0})
    cell_run = mlflow_store.write(cell)
    sweep = RunRecord(experiment=TEST_EXPERIMENT, run_name="sweep S1", start_ms=900, end_ms=2_100,
                      tags={"sparkctl.kind": "sweep", "sweep.id": "S1"}, params={"grid": "own"}, record_id=parent_id)
    sweep_run = mlflow_store.write(sweep)
    runs = {r["run_id"]: r for r in mlflow_store.search_runs(max_results=10)}
    assert len(runs) == 2  # one parent: the stub the cell made is the sweep's run
    assert runs[cell_run]["tags"]["mlflow.parentRunId"] == sweep_run
    assert runs[sweep_run]["params"]["grid"] == "own" and runs[sweep_run]["run_name"] == "sweep S1"
    assert runs[sweep_run]["status"] == "FINISHED" and "sparkctl.stub" not in runs[sweep_run]["tags"]
    assert mlflow_store.write(sweep) == sweep_run  # replayed again: nothing new


def test_a_parent_run_id_that_does_not_exist_writes_a_root_run_and_says_so(mlflow_store):  # noqa: F811
    missing = "f" * 32
    rec = RunRecord(experiment=TEST_EXPERIMENT, run_name="bench", start_ms=1_000, end_ms=2_000,
                    tags={"sparkctl.kind": "bench", "sparkctl.parent_run_id": missing}, summary_metrics={"x": 1.0})
    run_id = mlflow_store.write(rec)
    tags = mlflow_store.search_runs(f"attributes.run_id = '{run_id}'")[0]["tags"]
    assert "mlflow.parentRunId" not in tags and tags["sparkctl.parent_missing"] == missing
