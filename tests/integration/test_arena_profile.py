"""Spark Arena's current profile (issue 31 point 4): `sparkctl sweep --profile arena-v2` runs
the published grid, in the published order, three runs a cell, and `export arena` writes the
submission bundle from that sweep. The sweep runs against the FAKE Ollama (a model whose
trained context holds depth 100000), recorded in MLflow on a real SQLite file.

The profile below is written here from its published file (spark-arena/recipe-registry,
`benchmarking/spark-arena-v2.yaml`, the revision that added `runs: 3`): the test parses it
and checks what sparkctl ran against it, cell by cell."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import yaml

from sparkctl import cli
from sparkctl.tracking.store import MlflowStore
from tests.arena_profiles import PUBLISHED_V2
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401

MODEL = "llama3.2:3b"  # trained for 131072 tokens in the fake: depth 100000 fits


def run_sweep(server_url: str, store: MlflowStore, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server_url}"\n[budget]\nreserve_gib = 0.0\nwarn_gib = 0.0\n'
                   f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    env = {k: v for k, v in os.environ.items() if k != "OLLAMA_HOST"}
    env.update(SPARKCTL_CONFIG=str(cfg), SPARKCTL_DATA_DIR=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    return subprocess.run([sys.executable, "-m", "sparkctl.cli", "sweep", MODEL, "--profile", "arena-v2",
                           "--warmup", "0", *extra], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)


def test_arena_v2_runs_the_published_cells_three_times_in_order_and_exports_the_bundle(serve, mlflow_store,  # noqa: F811
                                                                                       tmp_path, capsys):
    published = yaml.safe_load(PUBLISHED_V2)
    schedule = [(c["depth"], c["concurrency"]) for c in published["schedule"]]
    assert len(schedule) == 28
    state = bench_scenario(tokens_per_s=None, response_tokens=[" entry"] * 200)
    # 100000-token contexts in tens of milliseconds: slow enough that a cached prefill (a few
    # tokens) and a cold one (the whole context) differ by far more than the timing noise
    state.prefill_tokens_per_s = 2e6
    # Ollama 0.30.0 counts only the tokens it evaluated: what the cache served is then exact
    state.prompt_cache = "uncached_count"
    server = serve(state)
    export_file = tmp_path / "mlflow_export.json"
    proc = run_sweep(server.url, mlflow_store, tmp_path, "--mlflow-export", str(export_file))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cells in its published order (bucket_43521_seed42)" in proc.stderr

    runs = mlflow_store.search_runs(max_results=200)
    parents = [r for r in runs if r["tags"].get("sparkctl.kind") == "sweep"]
    assert len(parents) == 1
    parent = parents[0]
    cells = [r for r in runs if r["tags"].get("sparkctl.kind") == "sweep-cell"]
    assert len(cells) == 28
    # each cell is the sweep's child, in MLflow's own parent tag
    assert {c["tags"]["mlflow.parentRunId"] for c in cells} == {parent["run_id"]}
    by_order = sorted(cells, key=lambda c: int(c["tags"]["sweep.order"]))
    ran = [(int(c["tags"]["sweep.depth"]), int(c["tags"]["sweep.concurrency"])) for c in by_order]
    assert ran == schedule  # the published order, cell for cell
    assert [(c["tags"]["sweep.cell"], c["tags"]["guard.invalid_reasons"]) for c in by_order if c["tags"]["guard.invalid_reasons"]] == []
    starts = [c["start_time"] for c in by_order]
    assert starts == sorted(starts)  # and they ran in that order
    # runs: 3 -> three rounds of K requests per cell, every request a measured value
    for c in by_order:
        k = int(c["tags"]["sweep.concurrency"])
        ttfts = mlflow_store.metric_history(c["run_id"], "live.gen_ai.client.operation.time_to_first_chunk")
        assert len(ttfts) == 3 * k, c["tags"]["sweep.cell"]
        assert c["params"]["reps"] == "3" and c["params"]["num_predict"] == "128" and c["params"]["pp_tokens"] == "2048"
        assert c["params"]["cache_policy"] == "warm"  # prefix caching on
        # the context was loaded first: one request at a time, every measured request found it in
        # the engine's cache (the fake keeps one cache slot: concurrent prefills may overwrite it)
        if k == 1 and c["tags"]["sweep.depth"] != "0":
            evaluated = mlflow_store.metric_history(c["run_id"], "prompt_eval_count")
            # only the fresh pp text was prefilled (2048 tokens, as the calibration sized it: within
            # 5%), never the context
            assert all(abs(n - 2048) < 0.05 * 2048 for n in evaluated), (c["tags"]["sweep.cell"], evaluated)
    # the order is recorded with the sweep's own run too
    order = json.loads(mlflow_store.read_artifact(parent["run_id"], "sweep_order.json"))
    assert [(o["depth"], o["concurrency"]) for o in order] == schedule
    assert parent["params"]["grid"] == "arena-v2"
    assert json.loads(export_file.read_text())["run_id"] == parent["run_id"]

    # the submission bundle, from the sweep's own run
    out_dir = tmp_path / "bundle"
    code = cli.main(["--config", str(tmp_path / "sparkctl.toml"), "export", "arena", parent["run_id"][:8],
                     "--out", str(out_dir)])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in out_dir.iterdir()) == ["benchmark.csv", "metadata.json", "recipe.yaml"]
    rows = list(csv.DictReader(io.StringIO((out_dir / "benchmark.csv").read_text())))
    names = [r["test_name"] for r in rows]
    expected = []
    for d, k in schedule:  # llama-benchy's names, the bundle in the order the cells ran
        at = f" @ d{d}" if d else ""
        expected += [f"pp2048{at} (c{k})", f"tg128{at} (c{k})"]
    assert names == expected
    meta = json.loads((out_dir / "metadata.json").read_text())
    assert meta["benchmark"]["profile"] == "@official/spark-arena-v2"
    assert meta["benchmark"]["args"]["runs"] == 3 and meta["benchmark"]["args"]["depth"] == published["args"]["depth"]
    assert [(s["depth"], s["concurrency"]) for s in meta["benchmark"]["schedule"]] == schedule
    recipe = yaml.safe_load((out_dir / "recipe.yaml").read_text())
    assert recipe["recipe_version"] == "2" and recipe["model"] == MODEL and recipe["runtime"] == "ollama"


def test_arena_v2_refuses_flags_that_would_change_its_grid(serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(bench_scenario(tokens_per_s=None))
    proc = run_sweep(server.url, mlflow_store, tmp_path, "--depth", "0,4096")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "sparkctl: --profile arena-v2 fixes depth, concurrency, pp, tg, runs and prefix caching "
        "(@official/spark-arena-v2); drop --depth")
    assert server.state.request_log == []


def test_the_bundle_carries_no_credential_a_run_recorded(mlflow_store, tmp_path, capsys):  # noqa: F811
    """A run written by an older sparkctl kept its engine URL whole, password and token in it;
    the bundle made from it must hold neither."""
    from sparkctl.tracking.record import RunRecord

    run = RunRecord(experiment=TEST_EXPERIMENT, run_name="old bench", start_ms=1_000, end_ms=5_000,
                    params={"model": MODEL, "num_predict": "128", "num_ctx": "8192", "profile_prompt_tokens": "512",
                            "api_key": "sk-live-123"},
                    tags={"sparkctl.kind": "bench", "model.name": MODEL, "engine.kind": "llama.cpp",
                          "engine.version": "b6500", "engine.host": "http://bench:hunter2@10.0.0.5:8080/?token=s3cr3t"},
                    step_metrics={"engine_decode_tps": [50.0, 51.0], "prefill_tps": [900.0, 910.0],
                                  "ttft_s": [0.5, 0.6], "prompt_evaluated": [512.0, 512.0]})
    run_id = mlflow_store.write(run)
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    out_dir = tmp_path / "bundle"
    assert cli.main(["--config", str(cfg), "export", "arena", run_id, "--out", str(out_dir)]) == 0, \
        capsys.readouterr().err
    recipe = yaml.safe_load((out_dir / "recipe.yaml").read_text())
    assert recipe["metadata"]["endpoint"].startswith("http://") and "10.0.0.5:8080" in recipe["metadata"]["endpoint"]
    for f in out_dir.iterdir():
        text = f.read_text()
        assert "hunter2" not in text and "s3cr3t" not in text and "sk-live-123" not in text, f.name
