"""The bench against a FAKE Ollama (testkit/fakes/ollama_server.py: Ollama's wire format over
real HTTP, paced token streams) with MLflow on a REAL SQLite store copied from a template."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from sparkctl.config import Config
from sparkctl.engines.base import EngineUnreachable
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRefused, BenchRunner, BenchSettings, RepStarted
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import MlflowStore
from sparkctl.tracking.sync import record_run, sync_pending
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario, load_scenario
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401

CFG = Config(lanes={"production": "gpt-oss:120b"})


def settings(**kw) -> BenchSettings:
    base = BenchSettings.from_config(CFG.bench)
    return replace(base, **{"warmup": 1, "reps": 3, "num_predict": 40, "timeout_s": 30.0,
                            "reload_threshold_s": 0.5, **kw})


async def bench(server, models, s, *, recorder=None, sink=None, probes=None):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        runner = BenchRunner(CFG, engine, probes or FakeProbes(spark_snapshot()), s, sink=sink, recorder=recorder)
        return await runner.run(models)
    finally:
        await engine.close()


async def test_steady_stream_client_and_engine_rates_agree(serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(bench_scenario(tokens_per_s=200.0, response_tokens=[" word"] * 60))
    spool = Spool(tmp_path / "spool.jsonl")
    runs = await bench(server, ["llama3.2:3b"], settings(), recorder=lambda r: record_run(r, spool, mlflow_store))
    (run,) = runs
    assert len(run.reps) == 3 and len(run.warmups) == 1
    for r in run.reps:
        assert r.eval_count == 40 and r.client_tokens == 40
        # engine: 40 tokens over the 39 decode steps it timed; client: 39 steps over its window
        assert r.engine_decode_tps == pytest.approx(r.client_decode_tps * 40 / 39, rel=0.05)
        assert r.client_decode_tps == pytest.approx(200.0, rel=0.10)
        assert 0 < r.ttft_s < r.wall_s
        assert r.done_reason == "length"
    assert run.summary["decode_tps_median"] == pytest.approx(200.0 * 40 / 39, rel=0.05)
    assert run.stable and not run.invalid
    assert run.placement_before == run.placement_after == "100% GPU"

    # what landed in MLflow
    (landed,) = mlflow_store.search_runs(experiment=CFG.tracking.experiment)
    assert landed["run_id"] == run.run_id and landed["status"] == "FINISHED"
    assert landed["params"]["num_ctx"] == "8192" and landed["params"]["reps"] == "3"
    assert len(landed["params"]["prompt_sha256"]) == 64
    tags = landed["tags"]
    assert tags["engine.kind"] == "ollama" and tags["engine.version"] == server.state.version
    assert tags["gpu.name"] == "NVIDIA GB10" and tags["guard.valid"] == "true"
    assert tags["guard.placement_before"] == "100% GPU" and tags["model.quantization"]
    assert landed["metrics"]["decode_tps_median"] == pytest.approx(run.summary["decode_tps_median"])
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_store.uri)
    history = client.get_metric_history(run.run_id, "engine_decode_tps")
    assert sorted(m.step for m in history) == [0, 1, 2]
    art = Path(client.download_artifacts(run.run_id, "final_chunks.json", str(tmp_path)))
    chunks = json.loads(art.read_text())
    assert len(chunks) == 4 and all(c["done"] for c in chunks) and chunks[-1]["eval_count"] == 40
    assert spool.pending() == []  # written, so nothing left to replay


async def test_thinking_tokens_are_counted_and_kept_apart(serve):
    server = serve(bench_scenario(tokens_per_s=None))
    runs = await bench(server, ["qwen3:8b"], settings(reps=1, warmup=0))
    r = runs[0].reps[0]
    assert r.thinking_tokens == len(server.state.thinking_tokens)
    assert r.thinking.startswith("Okay") and "Okay" not in r.output
    assert r.output.startswith("The sky")
    assert r.eval_count == r.client_tokens  # eval_count includes the thinking tokens


async def test_runaway_model_is_dnf_and_the_run_goes_on(serve):
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    runs = await bench(server, ["llama3.2:3b"], settings(reps=2, warmup=0, timeout_s=0.6, num_predict=100000))
    run = runs[0]
    assert [r.dnf for r in run.reps] == [True, True]
    assert all(20 <= r.client_tokens <= 80 for r in run.reps)  # what it produced before the ceiling
    assert run.summary["dnf_count"] == 2
    assert any("did not finish within 0.6 s" in f for f in run.flags)


async def test_reload_mid_run_marks_the_repetition(serve):
    state = bench_scenario(tokens_per_s=None)
    state.models["llama3.2:3b"].load_s = 0.8
    server = serve(state)

    def evict_before_second(ev):
        if isinstance(ev, RepStarted) and not ev.warmup and ev.index == 1:
            with state.lock:
                state.resident.clear()

    runs = await bench(server, ["llama3.2:3b"], settings(reps=3), sink=evict_before_second)
    assert [r.reload for r in runs[0].reps] == [False, True, False]
    assert "reload detected after warm-up" in runs[0].flags


async def test_truncated_prompt_is_flagged(serve):
    state = bench_scenario(tokens_per_s=None)
    state.prompt_tokens = 12  # the engine kept 12 tokens of a ~1,300-character prompt
    server = serve(state)
    runs = await bench(server, ["llama3.2:3b"], settings(reps=1))
    assert any(f.startswith("prompt truncated") for f in runs[0].flags)


async def test_cpu_placement_is_refused_or_marked_invalid(serve):
    server = serve(load_scenario(spill=True))
    with pytest.raises(BenchRefused, match=r"30%/70% CPU/GPU.*--allow-cpu"):
        await bench(server, ["qwen3:8b"], settings(reps=1))
    runs = await bench(server, ["qwen3:8b"], settings(reps=1, allow_cpu=True))
    assert runs[0].invalid and "30%/70% CPU/GPU" in runs[0].invalid[0]


async def test_engine_dropping_mid_stream_fails_the_run_and_records_it(serve, tmp_path):
    server = serve(bench_scenario(tokens_per_s=None))
    spool = Spool(tmp_path / "spool.jsonl")
    records = []

    def recorder(rec):
        records.append(rec)
        spool.append(rec)
        return type("R", (), {"message": "spooled", "run_id": None})()

    def drop_on_second(ev):
        if isinstance(ev, RepStarted) and not ev.warmup and ev.index == 1:
            server.state.drop_stream("/api/generate", after=2)

    with pytest.raises(EngineUnreachable):
        await bench(server, ["llama3.2:3b"], settings(reps=3), recorder=recorder, sink=drop_on_second)
    assert [r.status for r in records] == ["FAILED"]
    assert records[0].step_metrics["eval_count"][0] is not None  # the finished repetition is kept
    assert len(spool.pending()) == 1


async def test_preflight_refuses_below_reserve(serve):
    server = serve(bench_scenario(tokens_per_s=None))
    with pytest.raises(BenchRefused, match="reserve"):
        await bench(server, ["llama3.2:3b"], settings(), probes=FakeProbes(spark_snapshot(available_gib=6.0)))


async def test_two_models_interleave(serve):
    server = serve(bench_scenario(tokens_per_s=None))
    order = []
    await bench(server, ["llama3.2:3b", "qwen3:8b"], settings(reps=2, warmup=0),
                sink=lambda ev: order.append(ev.model) if isinstance(ev, RepStarted) else None)
    assert order == ["llama3.2:3b", "qwen3:8b", "llama3.2:3b", "qwen3:8b"]


async def test_mlflow_down_keeps_the_run_in_the_spool_then_sync_writes_it(serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(bench_scenario(tokens_per_s=None))
    spool = Spool(tmp_path / "spool.jsonl")
    down = MlflowStore("http://127.0.0.1:9", None, "sparkctl-bench", timeout_s=1)
    runs = await bench(server, ["llama3.2:3b"], settings(reps=2), recorder=lambda r: record_run(r, spool, down))
    assert "kept in spool" in runs[0].sync_message and runs[0].run_id is None
    assert len(spool.pending()) == 1
    synced, failed = await asyncio.to_thread(sync_pending, spool, mlflow_store)
    assert (synced, failed) == (1, [])
    assert spool.pending() == []
    (landed,) = mlflow_store.search_runs(experiment=CFG.tracking.experiment)
    assert landed["tags"]["model.name"] == "llama3.2:3b" and landed["status"] == "FINISHED"


def test_sync_command_replays_the_spool(mlflow_store, tmp_path, monkeypatch, capsys):  # noqa: F811
    """`sparkctl sync` as a user runs it after MLflow came back."""
    from sparkctl import paths
    from sparkctl.cli import main
    from sparkctl.tracking.record import RunRecord

    spool = Spool(paths.spool_file())
    rec = RunRecord(experiment="sparkctl-bench", run_name="x", start_ms=1, end_ms=2,
                    params={"model": "qwen3:8b"}, summary_metrics={"decode_tps_median": 42.0})
    down = MlflowStore("http://127.0.0.1:9", None, "sparkctl-bench", timeout_s=1)
    assert not record_run(rec, spool, down).synced
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\n')
    assert main(["--config", str(cfg), "sync", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"pending": 1, "synced": 1, "recovered": 0, "failed": []}
    (landed,) = mlflow_store.search_runs(experiment="sparkctl-bench")
    assert landed["metrics"]["decode_tps_median"] == 42.0
    assert main(["--config", str(cfg), "sync", "--json"]) == 0  # nothing left: a no-op
    assert json.loads(capsys.readouterr().out)["pending"] == 0


async def test_solo_benches_each_model_alone_without_reloads(serve):
    state = bench_scenario(tokens_per_s=None)
    state.add_resident("llama3.2:3b", expires_in_s=None)  # something else is loaded
    state.models["qwen3:8b"].load_s = 0.8  # a reload would show in load_duration
    server = serve(state)
    seen_resident = []

    def watch(ev):
        if isinstance(ev, RepStarted) and not ev.warmup:
            seen_resident.append((ev.model, sorted(state.resident_names())))

    runs = await bench(server, ["qwen3:8b", "llama3.2:3b"], settings(reps=2, mode="solo"), sink=watch)
    # each measured repetition ran with only its own model in memory
    assert seen_resident == [("qwen3:8b", ["qwen3:8b"])] * 2 + [("llama3.2:3b", ["llama3.2:3b"])] * 2
    assert not any(r.reload for run in runs for r in run.reps)
    assert all(run.status == "FINISHED" for run in runs)


async def test_every_repetition_failing_fails_the_run(serve):
    server = serve(bench_scenario(tokens_per_s=None))
    records = []
    recorder = lambda rec: records.append(rec)  # noqa: E731

    def fail_after_warmup(ev):
        if isinstance(ev, RepStarted) and not ev.warmup:
            server.state.fail_in_stream("/api/generate", "model runner has unexpectedly stopped", after=1)

    runs = await bench(server, ["llama3.2:3b"], settings(reps=2), sink=fail_after_warmup, recorder=recorder)
    assert [r.error for r in runs[0].reps] == ["model runner has unexpectedly stopped"] * 2
    assert runs[0].status == "FAILED" and records[0].status == "FAILED"


def test_sigterm_mid_bench_records_the_run_killed(serve, tmp_path):
    """`kill` (or a dropped ssh session) during `sparkctl bench`: the run is spooled KILLED."""
    import os
    import signal
    import subprocess
    import sys
    import time

    server = serve(bench_scenario(tokens_per_s=50.0, runaway="response"))
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "http://127.0.0.1:9"\n'
                   "[bench]\nwarmup = 0\nreps = 3\nnum_predict = 100000\n")
    env = {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "llama3.2:3b"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 20
    while not server.calls("/api/generate") or len(server.calls("/api/generate")) < 2:
        assert time.monotonic() < deadline, "the bench never started streaming"
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "recorded as KILLED" in err and "Traceback" not in err
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED"
    assert record.step_metrics["client_tokens"][0] > 10  # what streamed before the signal is kept


async def test_a_model_that_does_not_fit_is_refused_before_loading(serve):
    server = serve(load_scenario())  # production gpt-oss:120b resident; qwen3:8b on disk
    tight = FakeProbes(spark_snapshot(available_gib=11.0))  # 3 GiB above the 8 GiB reserve
    with pytest.raises(BenchRefused, match=r"qwen3:8b .*gpt-oss:120b.*--solo"):
        await bench(server, ["qwen3:8b"], settings(reps=1, num_ctx=8192), probes=tight)
    assert not [c for c in server.calls("/api/generate")]  # nothing was loaded


async def test_gpu_samples_belong_to_the_model_that_was_running(serve):
    import dataclasses as dc

    from testkit.fakes.host import gb10

    server = serve(bench_scenario(tokens_per_s=40.0, response_tokens=[" w"] * 80))
    watts = {"now": 0.0}

    class PowerFollowsModel(FakeProbes):  # FAKE: GB10 power that depends on which model runs
        def read(self):
            snap = super().read()
            g = dc.replace(gb10(), power_w=watts["now"])
            return dc.replace(snap, gpu=dc.replace(snap.gpu, gpus=(g,)))

    def switch(ev):
        if isinstance(ev, RepStarted):
            watts["now"] = 100.0 if ev.model == "llama3.2:3b" else 200.0

    records = []
    runs = await bench(server, ["llama3.2:3b", "qwen3:8b"], settings(reps=1, warmup=0, num_predict=50, think=False),
                       sink=switch, probes=PowerFollowsModel(spark_snapshot()), recorder=records.append)
    by_model = {r.model: r for r in runs}
    assert by_model["llama3.2:3b"].summary["gpu_power_w_mean"] == pytest.approx(100.0)
    assert by_model["qwen3:8b"].summary["gpu_power_w_mean"] == pytest.approx(200.0)
    samples = {rec.params["model"]: rec.artifacts["gpu_samples.json"] for rec in records}
    assert {s["power_w"] for s in samples["qwen3:8b"]} == {200.0}


def test_a_model_typed_with_a_stray_space_is_benched_and_recorded_under_its_name(serve, tmp_path, capsys):
    """Issue 33: `sparkctl bench` parses each MODEL once, where it is typed, and the bench sends
    and records that parsed name. The name used to be checked and then passed on as typed, so
    the engine was asked for ' llama3.2:3b' and the run recorded under it."""
    from sparkctl.cli import main

    server = serve(bench_scenario(tokens_per_s=None))
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[bench]\nwarmup = 0\nreps = 2\nnum_predict = 10\n')
    assert main(["--config", str(cfg), "bench", " llama3.2:3b", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["model"] == "llama3.2:3b"
    assert {c.body.get("model") for c in server.calls("/api/generate")} == {"llama3.2:3b"}
