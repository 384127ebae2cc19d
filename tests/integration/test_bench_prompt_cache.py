"""Every measured repetition pays its whole prefill (issue point 1). The Ollama is a FAKE
(testkit/fakes/ollama_server.py) with a prompt cache like the real server's: it keeps the
last request's tokens and evaluates only what follows the longest shared prefix, reporting
either the whole prompt with the uncached time ("whole_count": 0.12-era Ollama and the
llama-server runner) or only the uncached tokens ("uncached_count": Ollama 0.30.x).

The expectations are physical, not the fake's numbers read back: a cold request cannot
show its first token before the server has prefilled the whole prompt at the fake's
prefill speed, and no prefill rate can exceed that speed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparkctl.config import Config
from sparkctl.core import prefill
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, coldness
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario

CFG = Config()
WORDS = 1500
BODY = " ".join(f"w{i % 97}" for i in range(WORDS))  # a long prompt: ~1,500 tokens in the fake
PREFILL_TPS = 5000.0
COLD_PREFILL_S = WORDS / PREFILL_TPS  # 0.3 s: the least a cold request's TTFT can be


def settings(**kw) -> BenchSettings:
    return replace(BenchSettings.from_config(CFG.bench), **{
        "warmup": 1, "reps": 3, "num_predict": 10, "timeout_s": 30.0, "think": False,
        "prompt": BODY, "num_ctx": 8192, **kw})


async def run_bench(mode: str, s: BenchSettings, records=None):
    state = bench_scenario(tokens_per_s=None)
    state.prompt_cache = mode
    state.prefill_tokens_per_s = PREFILL_TPS
    server = FakeOllama(state).start()
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        runner = BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), s,
                             recorder=records.append if records is not None else None)
        (run,) = await runner.run(["llama3.2:3b"])
        return run, server
    finally:
        await engine.close()
        server.stop()


@pytest.mark.parametrize("mode", ["whole_count", "uncached_count"])
async def test_cold_repetitions_pay_their_whole_prefill(mode):
    records = []
    run, server = await run_bench(mode, settings(), records)
    for r in run.reps:
        assert r.ttft_s >= 0.9 * COLD_PREFILL_S, r.ttft_s  # a cache hit answers in milliseconds
        assert r.prefill_tps <= 1.1 * PREFILL_TPS  # a hit in whole_count mode reads ~1000x faster
        assert r.prefill_cached is False and r.prompt_eval_count >= WORDS
    assert not any(f.startswith(("prompt truncated", "prefill cached")) for f in run.flags), run.flags
    assert run.summary["prefill_cached_count"] == 0
    # each request started differently, and the fixed body followed unchanged (the two
    # probes that measure the template's shared opening come first, with their own body)
    prompts = [c.body["prompt"] for c in server.calls("/api/generate") if c.body.get("prompt")]
    assert sum(p.endswith(coldness.PROBE_BODY) for p in prompts) == 2
    prompts = [p for p in prompts if not p.endswith(coldness.PROBE_BODY)]
    assert len({p.split()[0] for p in prompts}) == len(prompts) == 4
    assert all(p.endswith(BODY) for p in prompts)
    (record,) = records
    assert record.params["cache_policy"] == "cold" and record.tags["guard.prefill_cached"] == "false"
    assert record.params["prompt_sha256"] == settings().prompt_sha256  # of the body, not the preamble


@pytest.mark.parametrize("mode", ["whole_count", "uncached_count"])
async def test_requests_served_from_the_cache_are_flagged_and_left_out(mode, monkeypatch):
    """What the bench did before: the same prompt every time. Now it must notice."""
    monkeypatch.setattr(prefill, "cold_prompt", lambda body, nonce, k: body)
    run, _ = await run_bench(mode, settings())
    assert [r.prefill_cached for r in run.reps] == [True, True, True]
    assert any(f.startswith("prefill cached: 3 of 3") for f in run.flags)
    assert not any(f.startswith("prompt truncated") for f in run.flags)  # a hit is not a truncation
    assert "prefill_tps_median" not in run.summary and "ttft_s_median" not in run.summary
    assert "decode_tps_median" in run.summary  # decode is still measured


async def test_warm_cache_measures_a_cached_follow_up_on_purpose():
    cold, _ = await run_bench("whole_count", settings())
    records = []
    warm, server = await run_bench("whole_count", settings(cache="warm", warmup=0), records)
    assert len(warm.warmups) == 1  # the priming request, even with warmup 0
    assert warm.summary["ttft_s_median"] < cold.summary["ttft_s_median"] / 5
    assert "prefill_tps_median" not in warm.summary  # the uncached count is not known here
    assert all(r.prefill_cached for r in warm.reps)
    assert not any("warm requested" in f for f in warm.flags)
    prompts = [c.body["prompt"] for c in server.calls("/api/generate") if c.body.get("prompt")]
    assert all(p.startswith(BODY) for p in prompts) and len(set(prompts)) == len(prompts)
    (record,) = records
    assert record.params["cache_policy"] == "warm" and record.tags["guard.cache_policy"] == "warm"


# ---------------------------------------------------------------------------- an engine that stalls mid-probe


@pytest.mark.parametrize("kind", ["bench", "sweep"])
async def test_a_probe_that_stalls_is_bounded_by_the_ceiling(kind):
    # The two probes that measure the template's opening are requests like any other: an
    # engine that sends a token of one and then nothing (the connection open) is given up on
    # at the per-request ceiling, not at the 600 s the engine adapter allows between bytes.
    import time

    from sparkctl.services.bench.profiles import resolve
    from sparkctl.services.bench.sweep import SweepRunner

    state = bench_scenario(tokens_per_s=None)
    state.stall_in_stream("/api/generate", 60.0, after=1, match=coldness.PROBE_BODY)
    server = FakeOllama(state).start()
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    records = []
    s = settings(timeout_s=2.0, warmup=0, reps=1, prompt="Say something.")
    started = time.monotonic()
    try:
        if kind == "bench":
            runner = BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), s, recorder=records.append)
            await runner.run(["llama3.2:3b"])
        else:
            runner = SweepRunner(CFG, engine, FakeProbes(spark_snapshot()), s, resolve("prose", CFG.bench, 10),
                                 [0], [1], None, recorder=records.append)
            await runner.run(["llama3.2:3b"])
    finally:
        await engine.close()
        server.stop()
    took = time.monotonic() - started
    assert took < 15, f"the {kind} took {took:.0f} s"
    probes = [c for c in server.calls("/api/generate") if coldness.PROBE_BODY in (c.body.get("prompt") or "")
              + (c.body.get("system") or "")]
    assert len(probes) == 1  # the first one stalled; the second was never sent
    # a sweep also records its own run (the cells' parent, no measurement of its own): the
    # opening's tags belong to each measured run
    measured = [r for r in records if r.tags.get("sparkctl.kind") != "sweep"]
    assert measured and all(r.tags["bench.shared_prefix_tokens"] == "unknown" for r in measured)
    assert {r.tags["bench.shared_prefix_method"] for r in measured} == {
        "not measured: the engine did not answer a probe within the 2 s per-request ceiling"}
    assert all(r.status == "FINISHED" for r in records)  # the repetitions themselves ran
