"""Residency is borrowed, not taken (issue 17, points 3 and 4): after a bench the engine holds
the models it held before, with their contexts and keep-alive sessions, and nothing the bench
loaded. The Ollama here is a FAKE (testkit/fakes/ollama_server.py: Ollama's wire format over
real HTTP; a runner's session length kept as server/sched.go keeps it: a request with
keep_alive sets it, one without keeps it, the expiry restarts from it when a request ends)."""

from __future__ import annotations

import asyncio
import time

import pytest

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRefused, BenchRunner, RepStarted
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, make_model
from testkit.lanes import FOREVER_AFTER_S, HALF_HOUR, lanes_state, ps, router_request
from tests.integration.test_bench_lanes import settings

LANES = {"production": "qwen3:8b", "fast": "qwen3:4b"}


def spark_lanes(fast_left_s: float = 600.0):
    """The lanes of testkit/lanes.py, the fast one idle for 20 minutes of its 30 (10 left), as a
    router would leave it; gemma3:4b and a CPU-only model on disk; unpaced streams."""
    state = lanes_state(tokens_per_s=None, runaway=None)
    state.add_model(make_model("gemma3:4b", size_gib=3.3, parameter_size="4.3B", context_length=131072))
    state.add_model(make_model("cpuonly:7b", size_gib=4.1, parameter_size="7.6B", vram_fraction=0.0))
    fast = state.resident["qwen3:4b"]
    fast.expires_at_ns = time.time_ns() + int(fast_left_s * 1e9)  # session 30m, 10m of it left
    return state


async def bench(server: FakeOllama, cfg: Config, models, s, sink=None):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s, sink=sink)
        try:
            runs = await runner.run(models)
        except BenchRefused:
            runs = None
        return runner, runs
    finally:
        await engine.close()


# ---- point 3: a restored timed lane gets its whole session back --------------------------


async def test_a_timed_lane_unloaded_by_solo_comes_back_with_its_configured_session(serve):
    """Today's restore sent the 10 minutes the fast lane had left as keep_alive: Ollama keeps
    that as the runner's session, so the router's next request left it 10 minutes, not 30."""
    server = serve(spark_lanes())
    cfg = Config(lanes=LANES, lane_keep_alive={"fast": "30m"})
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    assert run.status == "FINISHED" and runner.lane_restore.ok
    router_request(server, "qwen3:4b", 8192)
    now = ps(server)
    ctx, left = now["qwen3:4b"]
    assert ctx == 8192
    assert abs(left - HALF_HOUR) < 60, f"fast lane session is {left:.0f} s after the router's request, not 30 min"
    assert now["qwen3:8b"][0] == 32768 and now["qwen3:8b"][1] > FOREVER_AFTER_S
    assert "llama3.2:3b" not in now
    note = " ".join(runner.lane_restore.notes)
    assert "[lanes.keep_alive] fast" in note and "could not be kept exactly" in note


async def test_without_a_configured_session_the_engine_default_is_used_and_said(serve):
    state = spark_lanes()
    state.default_keep_alive_s = 300.0  # OLLAMA_KEEP_ALIVE unset: 5m
    server = serve(state)
    cfg = Config(lanes=LANES)
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    loads = [c.body for c in server.calls("/api/generate")
             if c.body.get("model") == "qwen3:4b" and not c.body.get("prompt") and c.body.get("keep_alive") != 0]
    assert loads and all("keep_alive" not in b for b in loads)  # the server's own default applies
    ctx, left = ps(server)["qwen3:4b"]
    assert ctx == 8192 and abs(left - 300) < 60
    assert "the engine's default" in " ".join(runner.lane_restore.notes)


async def test_a_resident_timed_lane_benched_in_place_keeps_its_session(serve):
    """Benching the fast lane itself: its requests carry no keep_alive, so the router's next
    request still finds a 30-minute session (the bench's 30m keep-alive used to replace it,
    and a 2m bench keep-alive would have shortened it)."""
    server = serve(spark_lanes())
    cfg = Config(lanes=LANES)
    _, (run,) = await bench(server, cfg, ["qwen3:4b"], settings(cfg, keep_alive="2m"))
    assert run.status == "FINISHED" and run.num_ctx == 8192
    assert not [c for c in server.calls("/api/generate") if c.body.get("model") == "qwen3:4b"
                and "keep_alive" in c.body]
    router_request(server, "qwen3:4b", 8192)
    assert abs(ps(server)["qwen3:4b"][1] - HALF_HOUR) < 60


# ---- point 4: the residency set after a bench is the set before it ------------------------


async def test_a_model_the_bench_loaded_is_unloaded_when_it_finishes(serve):
    server = serve(spark_lanes())
    cfg = Config(lanes=LANES)
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg))
    assert run.status == "FINISHED"
    assert set(ps(server)) == {"qwen3:8b", "qwen3:4b"}
    assert "unloaded: llama3.2:3b" in run.residency
    record = runner.to_record(run, 0, 1, None)
    assert "unloaded: llama3.2:3b" in record.tags["guard.residency"]


async def test_keep_loaded_leaves_it_resident_and_says_so(serve):
    server = serve(spark_lanes())
    cfg = Config(lanes=LANES)
    _, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, keep_loaded=True))
    assert "llama3.2:3b" in ps(server)
    assert "kept loaded: llama3.2:3b" in run.residency


async def test_a_refused_model_does_not_stay_resident_at_100_percent_cpu(serve):
    """cpuonly:7b loads on the CPU only: the placement guard refuses the bench, and the
    model it loaded used to stay resident for the bench's 30 minutes."""
    server = serve(spark_lanes())
    cfg = Config(lanes=LANES)
    runner, runs = await bench(server, cfg, ["cpuonly:7b"], settings(cfg))
    assert runs is None  # refused
    assert set(ps(server)) == {"qwen3:8b", "qwen3:4b"}
    assert runner.lane_restore.unloaded == ["cpuonly:7b"]


async def test_a_failed_bench_unloads_what_it_loaded(serve):
    """Every repetition fails (the runner crashed): the run is FAILED, and the model goes."""
    state = spark_lanes()
    server = serve(state)
    cfg = Config(lanes=LANES)

    def sink(ev):
        if isinstance(ev, RepStarted) and not ev.warmup:
            state.fail_in_stream("/api/generate", "llama runner process has terminated: exit status 2")

    _, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, warmup=0), sink=sink)
    state.clear_faults()
    assert run.status == "FAILED"
    assert set(ps(server)) == {"qwen3:8b", "qwen3:4b"}


async def test_a_stopped_bench_unloads_what_it_loaded(serve):
    state = spark_lanes()
    state.tokens_per_s = 40.0
    state.runaway = "response"
    server = serve(state)
    cfg = Config(lanes=LANES)
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), settings(cfg, num_predict=100000))
    task = asyncio.ensure_future(runner.run(["llama3.2:3b"]))
    for _ in range(200):
        if any(c.body.get("prompt") for c in server.calls("/api/generate")):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await engine.close()
    assert set(ps(server)) == {"qwen3:8b", "qwen3:4b"}
    assert runner.lane_restore.unloaded == ["llama3.2:3b"]


async def test_a_resident_contender_benched_keeps_forever_and_others_get_no_request(serve):
    """gemma3:4b was side-loaded forever (no lane): benching it beside the lanes must leave it
    forever, and the lane models, not measured, must see no request at all."""
    state = spark_lanes()
    state.add_resident("gemma3:4b", expires_in_s=None, context_length=8192)
    server = serve(state)
    cfg = Config(lanes=LANES)
    _, (run,) = await bench(server, cfg, ["gemma3:4b"], settings(cfg))
    assert run.status == "FINISHED" and run.num_ctx == 8192
    after = ps(server)
    assert after["gemma3:4b"][1] > FOREVER_AFTER_S
    assert {c.body.get("model") for c in server.calls("/api/generate")} == {"gemma3:4b"}
    assert set(after) == {"qwen3:8b", "qwen3:4b", "gemma3:4b"}


async def test_solo_puts_back_a_resident_non_lane_model_too(serve):
    """Solo unloads everything else; a side-loaded contender (no lane) used to be left out of
    the restore and stay unloaded."""
    state = spark_lanes()
    state.add_resident("gemma3:4b", expires_in_s=None, context_length=16384)
    server = serve(state)
    cfg = Config(lanes=LANES, lane_keep_alive={"fast": "30m"})
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    after = ps(server)
    assert set(after) == {"qwen3:8b", "qwen3:4b", "gemma3:4b"}
    assert after["gemma3:4b"][0] == 16384 and after["gemma3:4b"][1] > FOREVER_AFTER_S
    assert "restored: " in run.residency and "gemma3:4b" in run.residency
    assert "unloaded: llama3.2:3b" in run.residency


async def test_a_session_sparkctl_set_comes_back_as_set_after_a_bench(serve):
    """Issue 30: a model sparkctl itself loaded with `--keep-alive 30m` came back from a solo
    bench with the engine's default 5 minutes. sparkctl keeps the session it set in its
    state file and puts the model back with it."""
    from sparkctl.services.models import side_load
    from sparkctl.statefile import read_state

    state = spark_lanes()
    state.default_keep_alive_s = 300.0  # OLLAMA_KEEP_ALIVE unset: 5m
    server = serve(state)
    cfg = Config(lanes=LANES)
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        await side_load(cfg, engine, FakeProbes(spark_snapshot()), "gemma3:4b", keep_alive="30m", force=True)
    finally:
        await engine.close()
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    assert run.status == "FINISHED" and runner.lane_restore.ok, runner.lane_restore
    ctx, left = ps(server)["gemma3:4b"]
    assert abs(left - HALF_HOUR) < 60, f"gemma3:4b is back with {left:.0f} s, not the 30m sparkctl loaded it with"
    assert {m: k.keep_alive for m, k in read_state().sessions.items()} == {"gemma3:4b": "30m"}  # sparkctl's own file
    assert "as sparkctl loaded it" in " ".join(runner.lane_restore.summary() + runner.lane_restore.notes)


async def test_a_session_that_ended_is_not_given_back_to_a_later_load(serve):
    """Review of issue 30: the state file's [sessions] entry outlived the session it named.
    sparkctl loaded gemma3:4b for 30m; another client then unloaded it and loaded it again
    without keep_alive (the engine's 5m). A solo bench must put it back as that client left
    it (5m), not resurrect sparkctl's 30m: the FAKE Ollama keeps sessions as sched.go does."""
    import httpx

    from sparkctl.services.models import side_load

    state = spark_lanes()
    state.default_keep_alive_s = 300.0
    server = serve(state)
    cfg = Config(lanes=LANES)
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        await side_load(cfg, engine, FakeProbes(spark_snapshot()), "gemma3:4b", keep_alive="30m", force=True)
    finally:
        await engine.close()
    # another client: an unload, then a request of its own (no keep_alive)
    httpx.post(f"{server.url}/api/generate", json={"model": "gemma3:4b", "keep_alive": 0}, timeout=10
               ).raise_for_status()
    for _ in range(50):
        if "gemma3:4b" not in ps(server):
            break
        await asyncio.sleep(0.1)
    router_request(server, "gemma3:4b", 4096)
    assert ps(server)["gemma3:4b"][1] < 360
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    assert run.status == "FINISHED"
    _, left = ps(server)["gemma3:4b"]
    assert left < 360, f"gemma3:4b came back with {left:.0f} s: sparkctl's ended 30m session was given back"


async def test_sparkctls_own_unload_and_delete_forget_the_session_it_set(serve):
    """An entry for a model sparkctl unloaded or deleted names a session that is over: it
    goes from the state file (the FAKE Ollama serves the models)."""
    from sparkctl.services.models import delete_model, side_load, unload_model
    from sparkctl.statefile import read_state

    state = spark_lanes()
    server = serve(state)
    cfg = Config(lanes=LANES)
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        for model in ("gemma3:4b", "llama3.2:3b"):
            await side_load(cfg, engine, FakeProbes(spark_snapshot()), model, keep_alive="30m", force=True)
        assert list(read_state().sessions) == ["gemma3:4b", "llama3.2:3b"]
        assert (await unload_model(engine, "gemma3:4b", cfg=cfg)).was_loaded
        assert list(read_state().sessions) == ["llama3.2:3b"]
        await delete_model(cfg, engine, "llama3.2:3b")
        assert read_state().sessions == {}
    finally:
        await engine.close()
