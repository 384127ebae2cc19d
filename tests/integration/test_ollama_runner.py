"""The runner beside an Ollama model (issue 31 point 1), against a REAL llama-server.

Ollama cannot run here. A stand-in process carrying Ollama's command line
(testkit/fakes/ollama_standin.py: `.../ollama serve`) answers Ollama's API and, as Ollama
0.30+ does, serves the model from a real llama-server child started with Ollama's flags
(SmolLM2-135M, drafting for itself). sparkctl must find that child by the model's weights
blob, read its /props, /slots and /metrics, and report what the runner itself answered to
each request (its `timings`, logged by the stand-in): acceptance, cache counts, context,
slots, KV type, build.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest

from sparkctl.config import parse_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, Phase
from sparkctl.services.factory import make_probes
from tests.integration.ollama_standin_proc import MODEL, running_standin

pytestmark = pytest.mark.llama

PROMPT = "List the planets of the solar system in order from the sun, one per line."
N_PREDICT = 24
CFG = parse_config("[budget]\nreserve_gib = 0.25\nwarn_gib = 0.5\n", "test config", env={})


def bench(url: str, reps: int = 2) -> tuple:
    """One cold bench of the stand-in's model (placement is the CPU's: allowed, recorded)."""
    settings = replace(BenchSettings.from_config(CFG.bench), warmup=1, reps=reps, num_predict=N_PREDICT,
                       timeout_s=120.0, think=False, prompt=PROMPT, allow_cpu=True)
    records: list = []
    events: list = []

    async def go():
        async with OllamaEngine(url, load_timeout=120.0) as engine:
            runner = BenchRunner(CFG, engine, make_probes(), settings, sink=events.append, recorder=records.append)
            return await runner.run([MODEL])

    (run,) = asyncio.run(go())
    return run, records[0], events


@pytest.fixture(scope="module")
def drafting(tmp_path_factory):
    """Two slots, a q8_0 KV cache, the model drafting for itself, /metrics on (as a user gets
    it: LLAMA_ARG_ENDPOINT_METRICS=1 in the Ollama server's environment)."""
    with running_standin(tmp_path_factory.mktemp("standin-draft"), parallel=2, kv_type="q8_0", draft=True,
                         metrics=True) as standin:
        run, record, events = bench(standin.url)
        props = httpx.get(f"http://127.0.0.1:{standin.runner_port}/props", timeout=5).json()
        yield standin, run, record, events, props


def test_an_ollama_bench_reports_acceptance_from_the_runner(drafting):
    standin, run, record, _events, _props = drafting
    truth = standin.requests()  # the runner's own timings, request by request
    assert len(truth) == 1 + len(run.reps)  # the warm-up and the repetitions: no cold-prefill probes
    for r, t in zip(run.reps, truth[1:]):
        assert t["timings"]["draft_n"] > 0
        assert (r.spec.drafted, r.spec.accepted) == (t["timings"]["draft_n"], t["timings"]["draft_n_accepted"])
    s = run.summary
    drafted = sum(t["timings"]["draft_n"] for t in truth[1:])
    accepted = sum(t["timings"]["draft_n_accepted"] for t in truth[1:])
    assert (s["spec_draft_tokens_total"], s["spec_accepted_tokens_total"]) == (drafted, accepted)
    # the rate is the runner's own counts divided, whatever llama.cpp accepted this time (greedy
    # self-drafting accepts most, not all: the target's q8_0 cache and batched verification can
    # pick another token; 85-100% seen here)
    assert accepted > 0
    assert s["spec_acceptance_pct_total"] == pytest.approx(100.0 * accepted / drafted)
    # per draft position, pooled over the repetitions, as the runner's counter has them
    positions = [s[k] for k in sorted(s) if k.startswith("spec_accepted_pos")]
    assert positions and sum(positions) == accepted
    tags = record.tags
    assert tags["spec.source"].startswith("Ollama's llama-server runner /metrics") and tags["spec.active"] == "true"
    assert tags["spec.draft"] == "runner --spec-type draft-simple, --spec-draft-n-max 4"
    assert "spec.acceptance" not in tags  # no longer "not exposed"


def test_each_requests_cache_count_is_the_runners(drafting):
    standin, run, record, _events, _props = drafting
    truth = standin.requests()[1:]
    for r, t in zip(run.reps, truth):
        timings = t["timings"]
        assert r.prompt_cached_tokens == timings["cache_n"]
        assert r.prompt_evaluated == timings["prompt_n"]  # Ollama counted cache_n + prompt_n
        assert r.prefill_tps == pytest.approx(timings["prompt_per_second"], rel=0.02)
        assert not r.prefill_cached  # the nonce kept every repetition cold
    assert record.tags["bench.shared_prefix_tokens"] == str(sorted(t["timings"]["cache_n"] for t in truth)[1])
    assert record.tags["bench.shared_prefix_method"].startswith("each request's count from Ollama's llama-server")
    assert "/metrics" in record.tags["bench.prompt_cache_count"]


def test_the_run_records_the_runner_it_ran_on(drafting):
    standin, _run, record, events, props = drafting
    t = record.tags
    assert t["runner.n_ctx"] == str(props["default_generation_settings"]["n_ctx"]) == "512"
    assert t["runner.slots"] == str(props["total_slots"]) == "2"
    assert (t["runner.kv_cache_type"], t["runner.flash_attn"]) == ("q8_0", "auto")
    assert t["runner.build"] == props["build_info"]
    assert t["runner.endpoints"] == "props, slots, metrics"
    assert t["engine.runner"] == "llama-server" and t["engine.runner_build"] == props["build_info"]
    said = [e.text for e in events if isinstance(e, Phase) and "runner" in e.text]
    assert any(f"512x2 · KV q8_0 · FA auto · draft-simple · {props['build_info']}" in x for x in said)


def test_without_metrics_the_cache_counts_come_from_slots_and_acceptance_is_said_missing(tmp_path):
    """Ollama as shipped: its runners have no /metrics. Each request's cache count is read
    from /slots while it runs; acceptance stays unavailable, and the run says how to get it."""
    with running_standin(tmp_path / "standin", draft=True) as standin:
        run, record, _events = bench(standin.url)
        truth = standin.requests()[1:]
    for r, t in zip(run.reps, truth):
        assert r.prompt_cached_tokens == t["timings"]["cache_n"]
        assert r.spec is None
    tags = record.tags
    assert "/slots" in tags["bench.prompt_cache_count"]
    assert "LLAMA_ARG_ENDPOINT_METRICS=1" in tags["spec.acceptance"]
    assert tags["runner.endpoints"] == "props, slots"


def test_a_runner_that_cannot_be_read_is_said_once_and_the_bench_runs_as_before(tmp_path):
    """The fake Ollama runs inside this test process: no Ollama process, no runner. The run
    says why once and records what Ollama's API gives, as before."""
    from testkit.fakes.ollama_server import FakeOllama, bench_scenario

    events: list = []
    records: list = []
    settings = replace(BenchSettings.from_config(CFG.bench), warmup=0, reps=1, num_predict=8, timeout_s=30.0)

    async def go():
        with FakeOllama(bench_scenario()) as server:
            async with OllamaEngine(server.url) as engine:
                models = [m.name for m in await engine.tags()][:2]
                runner = BenchRunner(CFG, engine, make_probes(), settings, sink=events.append,
                                     recorder=records.append)
                return await runner.run(models)

    runs = asyncio.run(go())
    assert len(runs) == 2
    said = [e.text for e in events if isinstance(e, Phase) and e.text.startswith("runner not read")]
    assert len(said) == 1 and "not Ollama" in said[0]
    for record in records:
        assert record.tags["runner.note"].startswith("runner not read: the process listening on port")
        assert record.tags["spec.source"] == "none (not exposed by Ollama's API)"
        assert "bench.prompt_cache_count" not in record.tags
