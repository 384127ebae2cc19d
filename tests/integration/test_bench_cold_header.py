"""Cold means cold with a realistic chat-template header (issue 22 point 1). The Ollama is a
FAKE (testkit/fakes/ollama_server.py) that renders prompts per model family
(testkit/fakes/templates.py): chatml (Qwen), llama3 and harmony (gpt-oss), each with ~100
tokens before the user's text (fixed markers plus the model's Modelfile SYSTEM). Its prompt
cache reuses the longest shared token prefix, and its prefill runs at a measured
(jittered) rate: the true rate a bench must report.

The expectation is the fake's physical prefill speed, not anything sparkctl computed: a bench
that lets every "cold" request share the header, and divides the whole prompt count by the
time of the uncached part, reports ~57% more than that speed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import header_state
from testkit.fakes.ollama_server import FakeOllama
from testkit.fakes.templates import FORMATS, render

CFG = Config()
TRUE_PREFILL_TPS = 2000.0
# ~175 words: with a 100-token header the whole prompt is ~280 tokens, the bench's default
# prompt size; the header is then a third of it
BODY = " ".join(f"w{i % 89}" for i in range(175))


def settings() -> BenchSettings:
    return replace(BenchSettings.from_config(CFG.bench), warmup=1, reps=3, num_predict=4, timeout_s=30.0,
                   think=False, prompt=BODY, num_ctx=8192)


async def bench(chat_format: str, prompt_cache: str, records: list):
    state = header_state(chat_format, 100, prefill_tokens_per_s=TRUE_PREFILL_TPS, prompt_cache=prompt_cache)
    state.tokens_per_s = None
    server = FakeOllama(state).start()
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        (model,) = state.models.values()
        runner = BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), settings(), recorder=records.append)
        (run,) = await runner.run([model.name])
        return run, server, model
    finally:
        await engine.close()
        server.stop()


@pytest.mark.parametrize("chat_format", ["chatml", "llama3", "harmony"])
async def test_a_100_token_header_does_not_inflate_the_prefill_rate(chat_format):
    for prompt_cache in ("whole_count", "uncached_count"):  # Ollama before/after 0.30.1, and 0.30.0
        records: list = []
        run, server, model = await bench(chat_format, prompt_cache, records)
        rate = run.summary["prefill_tps_median"]
        assert rate == pytest.approx(TRUE_PREFILL_TPS, rel=0.05), (prompt_cache, rate)
        assert not any(f.startswith(("prefill cached", "prompt truncated")) for f in run.flags), run.flags
        # what the last repetition really shared with the one before: the template's fixed
        # opening only (the fake's own count), which is what the bench recorded
        shared_by_engine, _evaluated = server.state.last_prefill[model.name]
        opening = render(FORMATS[chat_format], model.system, "x")[1]
        assert shared_by_engine == opening < 60
        (record,) = records
        assert record.tags["bench.shared_prefix_tokens"] == str(opening)
        assert record.tags["bench.nonce_position"] == "system"  # the model has a SYSTEM: it renders first
        assert record.summary_metrics["shared_prefix_tokens"] == opening
        # each measured request carried the model's own system prompt, after its nonce
        systems = [c.body.get("system") for c in server.calls("/api/generate")
                   if c.body.get("prompt") == BODY]
        assert len(systems) == 4 and len(set(systems)) == 4
        assert all(s.endswith(model.system) for s in systems)
