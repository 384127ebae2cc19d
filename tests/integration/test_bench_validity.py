"""guard.valid means "these numbers can be compared": a reload, a truncated prompt or a
throttled GPU make it false and say why; flags that do not count are listed apart. The
Ollama is a FAKE (testkit/fakes/ollama_server.py, real HTTP); the GB10 readings are FAKE
probes (testkit/fakes/host.py)."""

from __future__ import annotations

from dataclasses import replace

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, RepStarted
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario

CFG = Config()


def settings(**kw) -> BenchSettings:
    return replace(BenchSettings.from_config(CFG.bench), **{"warmup": 1, "reps": 3, "num_predict": 20,
                                                           "timeout_s": 30.0, "think": False, **kw})


async def run_bench(state, s, *, probes=None, sink=None):
    server = FakeOllama(state).start()
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    records = []
    try:
        runner = BenchRunner(CFG, engine, probes or FakeProbes(spark_snapshot()), s, sink=sink,
                             recorder=records.append)
        (run,) = await runner.run(["llama3.2:3b"])
        return run, records[0]
    finally:
        await engine.close()
        server.stop()


async def test_a_reload_inside_the_run_makes_it_invalid_and_says_so():
    state = bench_scenario(tokens_per_s=None)
    state.models["llama3.2:3b"].load_s = 0.8

    def evict_before_second(ev):
        if isinstance(ev, RepStarted) and not ev.warmup and ev.index == 1:
            with state.lock:
                state.resident.clear()

    run, record = await run_bench(state, settings(reload_threshold_s=0.5), sink=evict_before_second)
    assert record.tags["guard.valid"] == "false"
    assert "reload detected" in record.tags["guard.invalid_reasons"]


async def test_a_throttled_gpu_makes_the_run_invalid():
    probes = FakeProbes(spark_snapshot(throttle=("hw_thermal_slowdown",)))
    run, record = await run_bench(bench_scenario(tokens_per_s=200.0), settings(), probes=probes)
    assert record.tags["guard.valid"] == "false"
    assert "GPU throttled" in record.tags["guard.invalid_reasons"]


async def test_a_dnf_is_reported_but_does_not_invalidate():
    state = bench_scenario(tokens_per_s=100.0, runaway="response")
    run, record = await run_bench(state, settings(reps=1, warmup=0, timeout_s=0.5, num_predict=100000))
    assert record.tags["guard.valid"] == "true"
    assert "did not finish" in record.tags["guard.flags_not_invalidating"]
