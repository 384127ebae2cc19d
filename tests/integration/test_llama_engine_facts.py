"""What the bench learns from a REAL llama.cpp server (issue 22 points 1 and 2): the chat
template's shared opening and speculative decoding's acceptance, each checked against what
the server itself reports. Nothing is faked.

One llama-server serves SmolLM2-135M with
- a chat template whose fixed opening is ~100 tokens (`--jinja --chat-template-file`), the
  size of the headers real templates put before the user's text (gpt-oss, Llama 3 with a
  system prompt);
- the same GGUF as its own draft model (`-md`, `--spec-type draft-simple`): under greedy
  decoding the draft proposes exactly what the target would pick, so nearly every drafted
  token is accepted;
- flash attention off on its command line (`-fa off`), which the run's identity must show.
The bench runs cold (llama-server's cache_prompt false) at temperature 0 with a small
num_predict and -c 512, to keep CI short.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest

from sparkctl.config import parse_config
from sparkctl.engines.openai_compat import OpenAICompatEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, Live, RepDone
from sparkctl.services.factory import make_probes
from tests.integration.llama_proc import ALIAS, binary_and_model, running

pytestmark = pytest.mark.llama

# A ChatML template (SmolLM2's markers) whose system turn always opens with a fixed preamble;
# a request's own system message follows it, then the conversation.
HEADER_TEMPLATE = (
    "<|im_start|>system\n"
    "You are SmolLM, a small assistant answering in a benchmark of inference servers. This fixed "
    "preamble stands for the long headers real chat templates render before anything a request "
    "supplies: tool-calling policies, a knowledge cutoff, the current date, a reasoning level and "
    "the list of valid output channels. It is the same for every request, so an engine's prompt "
    "cache can reuse it from one request to the next."
    "{% for message in messages %}{% if message['role'] == 'system' %}\n{{ message['content'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n"
    "{% for message in messages %}{% if message['role'] != 'system' %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PROMPT = "List the planets of the solar system in order from the sun, one per line."
N_PREDICT = 24
CFG = parse_config("[budget]\nreserve_gib = 0.25\nwarn_gib = 0.5\n", "test config", env={})  # CI boxes are small


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _binary, model = binary_and_model()
    tmp = tmp_path_factory.mktemp("llama-facts")
    template = tmp / "header.jinja"
    template.write_text(HEADER_TEMPLATE)
    args = ["-m", str(model), "-md", str(model), "--spec-type", "draft-simple", "-fa", "off", "--jinja",
            "--chat-template-file", str(template), "-c", "512", "-np", "1", "-t", "1", "-tb", "2",
            "--alias", ALIAS, "--seed", "42"]
    with running(args, tmp / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def bench(server):
    """One cold bench of the model (this machine's real probes): its run, its record, and the
    events the UI was sent."""
    settings = replace(BenchSettings.from_config(CFG.bench), warmup=0, reps=2, num_predict=N_PREDICT,
                       timeout_s=120.0, think=False, prompt=PROMPT)
    records: list = []
    events: list = []

    async def go():
        async with OpenAICompatEngine(server, timeout=30.0, load_timeout=120.0) as engine:
            runner = BenchRunner(CFG, engine, make_probes(), settings, sink=events.append, recorder=records.append)
            return await runner.run([ALIAS])

    (run,) = asyncio.run(go())
    return run, records[0], events


def cache_n_of_second(url: str, first_words: tuple[str, str]) -> int:
    """The truth: two requests that differ from their first word on, the prompt cache on;
    llama-server's own count of the tokens the second reused."""
    timings = None
    for word in first_words:
        body = {"model": ALIAS, "messages": [{"role": "user", "content": f"{word} {PROMPT}"}],
                "max_tokens": 1, "temperature": 0, "cache_prompt": True}
        timings = httpx.post(url + "/v1/chat/completions", json=body, timeout=120).json()["timings"]
    return timings["cache_n"]


def test_the_shared_template_opening_is_what_the_engine_reuses(server, bench):
    run, record, _ = bench
    truth = cache_n_of_second(server, ("Alpha", "Bravo"))
    assert truth >= 90  # the template's fixed opening: ~100 tokens before the user's text
    assert record.tags["bench.shared_prefix_tokens"] == str(truth)
    assert record.tags["bench.nonce_position"] == "none"  # cache_prompt false: nothing is reused
    # every measured repetition evaluated its whole prompt, and the prefill rate is the
    # server's own (prompt tokens it evaluated over its prompt time)
    finals = record.artifacts["final_chunks.json"]
    assert len(finals) == len(run.reps) == 2
    for r, final in zip(run.reps, finals):
        t = final["timings"]
        assert t["cache_n"] == 0 and r.prompt_evaluated == t["prompt_n"] > truth
        assert r.prefill_tps == pytest.approx(t["prompt_per_second"], rel=0.05)


def test_speculative_decoding_acceptance_is_recorded_from_the_engine(bench):
    run, record, events = bench
    finals = record.artifacts["final_chunks.json"]
    for r, final in zip(run.reps, finals):
        t = final["timings"]
        assert t["draft_n"] > 0  # the draft model proposed tokens
        assert (r.spec.drafted, r.spec.accepted) == (t["draft_n"], t["draft_n_accepted"])
    s = run.summary
    drafted = sum(f["timings"]["draft_n"] for f in finals)
    accepted = sum(f["timings"]["draft_n_accepted"] for f in finals)
    assert s["spec_draft_tokens_total"] == drafted and s["spec_accepted_tokens_total"] == accepted
    # greedy decoding with the model as its own draft: acceptance near 100%
    assert s["spec_acceptance_pct_total"] >= 90.0 and s["spec_acceptance_pct_min"] >= 90.0
    # every step emits its accepted draft tokens and one of the target's own
    tokens = sum(r.eval_count for r in run.reps)
    assert s["spec_accept_len_total"] == pytest.approx(tokens / (tokens - accepted))
    assert record.tags["spec.source"].startswith("llama-server timings") and record.tags["spec.active"] == "true"
    assert record.step_metrics["spec_acceptance_pct"] == [r.spec.acceptance * 100 for r in run.reps]
    # the live view showed the first repetition's acceptance beside decode tok/s during the second
    done_first = next(i for i, e in enumerate(events) if isinstance(e, RepDone) and not e.result.warmup)
    later = [e for e in events[done_first:] if isinstance(e, Live)]
    assert later and later[-1].acceptance_pct == pytest.approx(run.reps[0].spec.acceptance * 100)


def test_the_engine_identity_comes_from_the_server_and_its_process(server, bench):
    _run, record, _ = bench
    props = httpx.get(server + "/props", timeout=5).json()
    t = record.tags
    assert t["engine.runner"] == "llama-server" and t["engine.runner_build"] == props["build_info"]
    assert t["engine.flash_attn"] == "off" and t["engine.flash_attn_source"] == "llama-server command line"
    assert t["engine.kv_cache_type"] == "f16" and "default" in t["engine.kv_cache_type_source"]
    assert t["engine.spec_type"] == "draft-simple"


def test_ollamas_runner_identity_is_read_from_its_llama_server_child(server):
    """Ollama >= 0.30 runs a GGUF model in an upstream llama-server child process. Ollama
    cannot run here, so its process is described (ProcessView) with this REAL llama-server as
    its runner child: the build must come from that runner's own /props, flash attention
    from its command line, the rest from Ollama's environment."""
    from sparkctl.engines.base import ShowInfo
    from sparkctl.probes.engine_process import ProcessView, engine_process
    from sparkctl.services.bench.engineid import _ollama

    runner = engine_process(server)  # the real server's own process: its command line
    assert runner is not None and "llama-server" in runner.cmdline[0]
    _binary, model = binary_and_model()
    ollama = ProcessView(pid=1, cmdline=("/usr/local/bin/ollama", "serve"),
                         environ={"OLLAMA_FLASH_ATTENTION": "1", "OLLAMA_KV_CACHE_TYPE": "q8_0"},
                         children=(runner.cmdline,))
    show = ShowInfo("smollm2", details={"format": "gguf"}, model_path=str(model))
    props = httpx.get(server + "/props", timeout=5).json()
    tags = asyncio.run(_ollama(ollama, show, "0.30.1"))
    assert tags["engine.runner"] == "llama-server" and "process table" in tags["engine.runner_source"]
    assert tags["engine.runner_build"] == props["build_info"]
    assert tags["engine.flash_attn"] == "off"  # the runner's -fa off wins over OLLAMA_FLASH_ATTENTION
    # no runner child seen (another model's, or none yet): Ollama's environment speaks
    env_only = asyncio.run(_ollama(ProcessView(1, ollama.cmdline, ollama.environ), show, "0.30.1"))
    assert (env_only["engine.flash_attn"], env_only["engine.kv_cache_type"]) == ("on", "q8_0")
    assert env_only["engine.runner"] == "llama-server" and env_only["engine.runner_source"].startswith("inferred")
    assert env_only["engine.runner_build"] == "unknown"
    # a remote Ollama: nothing but its API; an older version runs GGUF on its own runner
    remote = asyncio.run(_ollama(None, show, "0.12.6"))
    assert remote["engine.runner"] == "unknown" and remote["engine.runner_build"] == "unknown"
    assert "Ollama's API does not report" in remote["engine.runner_build_source"]
