"""Load the bench did not cause is seen and flagged (issue point 8). The Ollama is a FAKE
(testkit/fakes/ollama_server.py, real HTTP): like the real server, it moves a model's
expires_at when one of its requests ends, which is how a bench sees another client
being served while its own request runs."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import httpx
import pytest

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings
from sparkctl.services.bench.sampler import GpuSampler
from sparkctl.core.snapshots import GpuReport
from testkit.fakes.host import FakeProbes, gb10, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, default_state

CFG = Config()


def settings(**kw) -> BenchSettings:
    return replace(BenchSettings.from_config(CFG.bench), **{"warmup": 0, "reps": 3, "num_predict": 50,
                                                           "timeout_s": 30.0, "think": False, **kw})


async def test_another_client_served_during_the_bench_is_flagged_and_invalidates():
    state = default_state()
    state.tokens_per_s = 60.0
    state.add_resident("qwen3:8b", expires_in_s=600, context_length=8192)
    server = FakeOllama(state).start()
    stop = threading.Event()

    def other_client():  # someone else's traffic on another model, as on a shared Spark
        while not stop.is_set():
            try:
                httpx.post(f"{server.url}/api/generate", json={
                    "model": "qwen3:8b", "prompt": "hello there", "stream": False, "think": False,
                    "options": {"num_ctx": 8192, "num_predict": 3}}, timeout=10)
            except httpx.HTTPError:
                pass
            time.sleep(0.02)

    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    t = threading.Thread(target=other_client, daemon=True)
    try:
        runner = BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), settings())
        t.start()
        (run,) = await runner.run(["llama3.2:3b"])
    finally:
        stop.set()
        t.join(5)
        await engine.close()
        server.stop()
    flagged = [r for r in run.reps if "qwen3:8b served a request" in r.foreign]
    assert len(flagged) >= 2, [r.foreign for r in run.reps]  # a loaded CI box may miss one
    assert any(f.startswith("foreign load during") for f in run.invalid)
    assert run.summary["foreign_load_count"] == len([r for r in run.reps if r.foreign])


async def test_a_quiet_engine_is_not_flagged():
    state = default_state()
    state.tokens_per_s = None
    state.add_resident("qwen3:8b", expires_in_s=600, context_length=8192)
    server = FakeOllama(state).start()
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        (run,) = await BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), settings()).run(["llama3.2:3b"])
    finally:
        await engine.close()
        server.stop()
    assert not any(r.foreign for r in run.reps) and not run.invalid


def test_gpu_busy_between_requests_is_foreign_load_but_the_benchs_own_tail_is_not():
    """NVML utilization averages over ~1 s: a busy reading right after the bench's own request
    is that request; one seconds later, with no request running, is somebody else's."""
    sampler = GpuSampler(lambda: GpuReport())
    busy = sampler.aggregate(GpuReport(gpus=(replace(gb10(), utilization_pct=95.0),)))
    sampler.samples = [(10.3, busy), (14.0, busy)]
    windows = [(5.0, 10.0), (15.0, 20.0)]
    flagged = sampler.busy_outside(windows, 5.0, 20.0)
    assert flagged == [(14.0, 95.0)]


def test_sampler_reads_every_gpu_and_sums_power_of_the_engines_gpus():
    g0 = replace(gb10(), index=0, power_w=100.0, utilization_pct=90.0, sm_clock_mhz=1800)
    g1 = replace(gb10(), index=1, power_w=60.0, utilization_pct=5.0, sm_clock_mhz=1200)
    sampler = GpuSampler(lambda: GpuReport())
    both = sampler.aggregate(GpuReport(gpus=(g0, g1)))
    assert both["power_w"] == pytest.approx(160.0) and both["sm_clock_mhz"] == 1200
    assert [g["index"] for g in both["gpus"]] == [0, 1]
    sampler.indices = {1}  # the engine's process holds memory on GPU 1 only
    only = sampler.aggregate(GpuReport(gpus=(g0, g1)))
    assert only["power_w"] == pytest.approx(60.0) and only["util_pct"] == 5.0


async def test_a_request_queued_behind_someone_elses_is_foreign_load():
    """With OLLAMA_NUM_PARALLEL=1 another client's request on the same model makes the
    bench's wait for the runner: total_duration grows, the timed phases do not."""
    state = default_state()
    state.tokens_per_s = 80.0
    state.runaway = "response"  # every request runs to its num_predict: the other's take 1 s
    server = FakeOllama(state).start()
    stop = threading.Event()

    def same_model_client():
        while not stop.is_set():
            try:
                httpx.post(f"{server.url}/api/generate", json={
                    "model": "llama3.2:3b", "prompt": "tell me a long story", "stream": False,
                    "options": {"num_ctx": 8192, "num_predict": 80}}, timeout=30)
            except httpx.HTTPError:
                pass

    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    t = threading.Thread(target=same_model_client, daemon=True)
    try:
        runner = BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), settings(num_predict=10))
        t.start()
        for _ in range(200):  # the other client is generating before the bench starts
            r = state.resident.get("llama3.2:3b")
            if r is not None and r.busy:
                break
            time.sleep(0.01)
        (run,) = await runner.run(["llama3.2:3b"])
    finally:
        stop.set()
        await engine.close()
        t.join(10)
        server.stop()
    queued = [r for r in run.reps if "queued behind another request" in r.foreign]
    assert queued, [(r.queue_wait_s, r.foreign) for r in run.reps]
    assert all(r.queue_wait_s > 0.5 for r in queued)
    assert any(f.startswith("foreign load during") for f in run.invalid)
