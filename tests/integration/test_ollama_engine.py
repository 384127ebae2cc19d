"""OllamaEngine against a FAKE Ollama server.

The server is testkit/fakes/ollama_server.py: not Ollama, but real HTTP on 127.0.0.1 that
follows Ollama's wire format (NDJSON streams, omitted zero metrics, in-band errors,
404/400/500 bodies) with scripted scenarios. Each test checks something a sparkctl
user would notice: a size, a placement, an error message, a stream that stops.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from sparkctl.core.snapshots import GIB
from sparkctl.engines.base import (
    DoneEvent,
    Engine,
    EngineError,
    EngineStalled,
    EngineUnreachable,
    ModelNotFound,
    TokenEvent,
)
from sparkctl.engines.ollama import OllamaEngine, normalize_host, same_model
from sparkctl.services.status import engine_status
from testkit.fakes.ollama_server import (
    RUNNER_DIED_ERROR,
    FakeOllama,
    bench_scenario,
    load_scenario,
    pull_scenario,
    two_models_resident,
)

pytestmark = pytest.mark.timeout(30)


async def collect(stream):
    return [event async for event in stream]


def tokens(events, *, thinking: bool | None = None) -> list[str]:
    return [
        e.text for e in events if isinstance(e, TokenEvent) and (thinking is None or e.thinking == thinking)
    ]


def done_of(events) -> DoneEvent:
    assert isinstance(events[-1], DoneEvent)
    return events[-1]


# ------------------------------------------------------------------------ host handling


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", "http://127.0.0.1:11434"),
        ("spark.local", "http://spark.local:11434"),
        (":8080", "http://127.0.0.1:8080"),
        ("10.0.0.5:11434", "http://10.0.0.5:11434"),
        ("http://spark", "http://spark:80"),
        ("https://spark:8443/ollama/", "https://spark:8443/ollama"),
        ("[::1]", "http://[::1]:11434"),
    ],
)
def test_host_is_normalised_like_ollama_host(given: str, expected: str) -> None:
    assert normalize_host(given) == expected


def test_host_defaults_to_ollama_host_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:9999")
    assert OllamaEngine().host == "http://0.0.0.0:9999"
    monkeypatch.delenv("OLLAMA_HOST")
    assert OllamaEngine().host == "http://127.0.0.1:11434"


def test_model_names_match_with_default_tag() -> None:
    assert same_model("qwen3", "qwen3:latest")
    assert not same_model("qwen3:8b", "qwen3:latest")


async def test_engine_satisfies_protocol(ollama_engine: OllamaEngine) -> None:
    assert isinstance(ollama_engine, Engine)
    assert ollama_engine.kind == "ollama"


# ------------------------------------------------------------------------ reading state


async def test_version_follows_an_engine_upgrade(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state.version = "0.12.6"
    assert await ollama_engine.version() == "0.12.6"
    fake_ollama.state.version = "0.13.1"  # the server was upgraded under us
    assert await ollama_engine.version() == "0.13.1"


async def test_two_resident_models_give_sizes_placement_and_expiry(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = two_models_resident()
    resident = await ollama_engine.ps()
    by_name = {r.name: r for r in resident}
    assert set(by_name) == {"gpt-oss:120b", "qwen3:30b-a3b"}

    production = by_name["gpt-oss:120b"]
    assert type(production.size) is int and type(production.size_vram) is int
    assert production.size == production.size_vram == 68 * GIB  # 100% GPU
    assert production.context_length == 131072
    assert len(production.digest) == 64 and not production.digest.startswith("sha256:")
    assert production.details.family == "gptoss"
    assert production.details.quantization_level == "MXFP4"

    contender = by_name["qwen3:30b-a3b"]
    assert (contender.size, contender.size_vram) == (24 * GIB, 20 * GIB)  # a CPU/GPU split
    cpu_share = round((contender.size - contender.size_vram) / contender.size * 100)
    assert cpu_share == 17

    now = datetime.now(timezone.utc)
    # negative keep_alive: Ollama reports an expiry ~292 years ahead ("Forever")
    assert production.expires_at is not None and production.expires_at.tzinfo is not None
    assert production.expires_at - now > timedelta(days=365 * 20)
    assert contender.expires_at is not None and contender.expires_at.tzinfo is not None
    assert timedelta(minutes=3) < contender.expires_at - now <= timedelta(minutes=4, seconds=5)
    # longest remaining keep-alive first, as `ollama ps` lists them
    assert [r.name for r in resident] == ["gpt-oss:120b", "qwen3:30b-a3b"]


async def test_tags_and_show_give_what_the_fit_estimate_needs(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = two_models_resident()
    local = {m.name: m for m in await ollama_engine.tags()}
    assert set(local) == {"gpt-oss:120b", "qwen3:30b-a3b", "llama3.2:3b"}
    assert local["qwen3:30b-a3b"].size == fake_ollama.state.models["qwen3:30b-a3b"].size
    assert local["qwen3:30b-a3b"].details.parameter_size == "30.5B"
    assert local["qwen3:30b-a3b"].modified_at is not None and local["qwen3:30b-a3b"].modified_at.tzinfo

    info = await ollama_engine.show("qwen3:30b-a3b")
    arch = info.model_info["general.architecture"]
    assert arch == "qwen3moe"
    assert info.model_info[f"{arch}.block_count"] == 48
    assert info.model_info[f"{arch}.attention.head_count_kv"] == 4
    assert info.model_info[f"{arch}.embedding_length"] // info.model_info[f"{arch}.attention.head_count"] == 64
    assert info.model_info[f"{arch}.context_length"] == 262144
    assert info.model_info["general.parameter_count"] == 30_532_122_624
    assert "thinking" in info.capabilities
    assert info.details["quantization_level"] == "Q4_K_M"


async def test_show_unknown_model_names_it_with_latest_tag(ollama_engine: OllamaEngine) -> None:
    with pytest.raises(ModelNotFound) as caught:
        await ollama_engine.show("qwen9")
    assert caught.value.status == 404
    assert "qwen9:latest" in caught.value.message


async def test_status_reports_version_and_residents_or_why_not(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = two_models_resident()
    status = await ollama_engine.status()
    assert status.reachable and status.version == fake_ollama.state.version
    assert len(status.resident) == 2
    fake_ollama.down()
    status = await ollama_engine.status()
    assert not status.reachable and fake_ollama.url.split("//")[1] in (status.error or "")


# ------------------------------------------------------------------------ failures


async def test_engine_down_fails_fast_and_names_the_host(fake_ollama: FakeOllama) -> None:
    engine = OllamaEngine(fake_ollama.url, timeout=5.0, connect_timeout=1.0)
    fake_ollama.down()
    try:
        started = time.monotonic()
        for call in (engine.version(), engine.ps(), engine.tags(), engine.show("qwen3:8b")):
            with pytest.raises(EngineUnreachable) as caught:
                await call
            assert engine.host in caught.value.message
        with pytest.raises(EngineUnreachable):
            await collect(engine.generate("qwen3:8b", "hi"))
        with pytest.raises(EngineUnreachable):
            await collect(engine.pull("qwen3:8b"))
        assert time.monotonic() - started < 3.0
    finally:
        await engine.close()


async def test_engine_coming_back_on_the_same_port_is_picked_up(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    port = fake_ollama.port
    assert await ollama_engine.ps() == []  # a pooled keep-alive connection now exists
    fake_ollama.down()
    with pytest.raises(EngineUnreachable):
        await ollama_engine.ps()
    fake_ollama.up()
    assert fake_ollama.port == port
    assert await ollama_engine.version() == fake_ollama.state.version
    assert await ollama_engine.ps() == []


async def test_hung_engine_times_out_instead_of_hanging(fake_ollama: FakeOllama) -> None:
    engine = OllamaEngine(fake_ollama.url, timeout=0.3, connect_timeout=1.0, load_timeout=0.3)
    fake_ollama.state.stall("/api/ps", 1.0, times=1)
    fake_ollama.state.stall("/api/generate", 1.0, times=1)
    try:
        started = time.monotonic()
        with pytest.raises(EngineUnreachable, match="did not answer ps within 0.3s"):
            await engine.ps()
        # a stream that sends nothing is "stalled" (still an EngineUnreachable for the bench;
        # an eval scores that item DNF)
        with pytest.raises(EngineStalled, match="sent nothing for 0.3s during generate"):
            await collect(engine.generate("llama3.2:3b", "hi"))
        assert time.monotonic() - started < 1.5
    finally:
        await engine.close()


async def test_server_500_is_an_engine_error_with_its_text(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state.fail("/api/ps", 500, "something broke", times=1)
    with pytest.raises(EngineError) as caught:
        await ollama_engine.ps()
    assert not isinstance(caught.value, EngineUnreachable)
    assert (caught.value.status, caught.value.message) == (500, "something broke")
    assert await ollama_engine.ps() == []  # the next call is fine again


@pytest.mark.parametrize("path", ["/api/ps", "/api/version"])
async def test_engine_status_after_a_500_is_up_but_failing(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine, path: str
) -> None:
    """A 500 means Ollama answered: the status says "engine error", not "unreachable"."""
    fake_ollama.state.fail(path, 500, RUNNER_DIED_ERROR)
    status = await engine_status(ollama_engine)
    assert status.reachable is True and status.error == RUNNER_DIED_ERROR
    assert status.resident == ()
    fake_ollama.state.clear_faults()
    status = await engine_status(ollama_engine)
    assert status.reachable and status.error is None and status.version == fake_ollama.state.version


async def test_load_refused_for_memory_says_how_much(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = load_scenario(out_of_memory=True)
    with pytest.raises(EngineError) as caught:
        await ollama_engine.load("qwen3:8b")
    assert caught.value.status == 500
    assert "model requires more system memory (70.3 GiB) than is available (45.1 GiB)" == caught.value.message
    assert [r.name for r in await ollama_engine.ps()] == ["gpt-oss:120b"]  # production untouched


async def test_runner_crash_on_load_is_reported(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = load_scenario(runner_died=True)
    with pytest.raises(EngineError) as caught:
        await collect(ollama_engine.generate("qwen3:8b", "hello"))
    assert caught.value.status == 500 and caught.value.message == RUNNER_DIED_ERROR


async def test_generate_unknown_model_is_model_not_found(ollama_engine: OllamaEngine) -> None:
    with pytest.raises(ModelNotFound) as caught:
        await collect(ollama_engine.generate("nosuch:7b", "hello"))
    assert caught.value.status == 404 and "nosuch:7b" in caught.value.message


async def test_delete_removes_model_and_second_delete_is_not_found(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    await ollama_engine.delete("llama3.2:3b")
    assert "llama3.2:3b" not in {m.name for m in await ollama_engine.tags()}
    with pytest.raises(ModelNotFound):
        await ollama_engine.delete("llama3.2:3b")


# ------------------------------------------------------------------------ pull


async def test_pull_reports_progress_per_layer_and_lands_in_tags(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = pull_scenario()
    registry = fake_ollama.state.registry["qwen3:8b"]
    weights, template = registry.layers[0], registry.layers[1]
    events = await collect(ollama_engine.pull("qwen3:8b"))

    statuses = [e.status for e in events]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    assert all(e.total is None and e.digest is None for e in events if not e.status.startswith("pulling "))

    weight_lines = [e for e in events if e.digest == f"sha256:{weights.digest}"]
    assert weight_lines[0].status == f"pulling {weights.digest[:12]}"
    assert all(e.total == weights.total for e in weight_lines)
    assert weight_lines[0].completed is None  # zero is omitted on the wire
    done = [e.completed for e in weight_lines[1:]]
    assert done == sorted(done) and done[-1] == weights.total

    template_lines = [e for e in events if e.digest == f"sha256:{template.digest}"]
    assert len(template_lines) == 1  # already on disk: one line, completed == total
    assert template_lines[0].completed == template_lines[0].total == template.total

    assert "qwen3:8b" in {m.name for m in await ollama_engine.tags()}


async def test_pull_without_totals_still_streams(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = pull_scenario()
    events = await collect(ollama_engine.pull("nototals"))
    layer_lines = [e for e in events if e.digest]
    assert layer_lines and all(e.total is None and e.completed is None for e in layer_lines)
    assert events[-1].status == "success"


async def test_pull_of_unknown_model_is_model_not_found(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = pull_scenario()
    seen = []
    with pytest.raises(ModelNotFound) as caught:
        async for event in ollama_engine.pull("doesnotexist:1b"):
            seen.append(event.status)
    assert seen == ["pulling manifest"]  # the error came in-band, after the stream started
    assert caught.value.status == -1
    assert "file does not exist" in caught.value.message


async def test_pull_needing_newer_ollama_says_so_on_one_line(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = pull_scenario()
    with pytest.raises(EngineError) as caught:
        await collect(ollama_engine.pull("future"))
    message = caught.value.message
    assert "requires a newer version of Ollama" in message
    assert "\n" not in message and "\t" not in message
    assert caught.value.status == -1


async def test_pull_failing_midway_reports_the_error(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = pull_scenario()
    with pytest.raises(EngineError) as caught:
        await collect(ollama_engine.pull("broken"))
    assert "unexpected EOF" in caught.value.message


async def test_cancelled_pull_keeps_partial_download_and_resumes(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    state = pull_scenario()
    state.pull_chunks = 20
    state.pull_line_interval_s = 0.03
    fake_ollama.state = state
    weights = state.registry["qwen3:8b"].layers[0]

    stream = ollama_engine.pull("qwen3:8b")
    async for event in stream:
        if event.digest == f"sha256:{weights.digest}" and (event.completed or 0) >= weights.total // 10:
            break
    await stream.aclose()  # the user cancelled: the connection closes
    await asyncio.sleep(0.25)
    kept = state.blobs[weights.digest]
    assert 0 < kept < weights.total  # the server stopped and kept what it had
    assert "qwen3:8b" not in {m.name for m in await ollama_engine.tags()}

    state.pull_line_interval_s = 0.001
    events = await collect(ollama_engine.pull("qwen3:8b"))
    resumed = [e for e in events if e.digest == f"sha256:{weights.digest}"]
    assert resumed[0].completed is not None and resumed[0].completed >= kept  # not from zero
    assert events[-1].status == "success"


# ------------------------------------------------------------------------ load / unload


async def test_load_beside_production_honours_keep_alive(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = load_scenario()
    done = await ollama_engine.load("qwen3:8b", keep_alive="10m", options={"num_ctx": 8192})
    assert done.done_reason == "load"
    resident = {r.name: r for r in await ollama_engine.ps()}
    assert set(resident) == {"gpt-oss:120b", "qwen3:8b"}  # beside, nothing evicted
    contender = resident["qwen3:8b"]
    assert contender.size_vram == contender.size  # all on the GPU
    assert contender.context_length == 8192
    remaining = contender.expires_at - datetime.now(timezone.utc)
    assert timedelta(minutes=9) < remaining <= timedelta(minutes=10, seconds=5)


async def test_load_with_negative_keep_alive_stays_forever(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = load_scenario()
    await ollama_engine.load("qwen3:8b", keep_alive=-1)
    contender = next(r for r in await ollama_engine.ps() if r.name == "qwen3:8b")
    assert contender.expires_at - datetime.now(timezone.utc) > timedelta(days=365 * 20)


async def test_load_spilling_to_cpu_shows_in_placement(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = load_scenario(spill=True)
    await ollama_engine.load("qwen3:8b")
    contender = next(r for r in await ollama_engine.ps() if r.name == "qwen3:8b")
    assert 0 < contender.size_vram < contender.size
    assert round((contender.size - contender.size_vram) / contender.size * 100) == 30


async def test_load_that_evicts_production_is_visible(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = load_scenario(evict="gpt-oss:120b")
    await ollama_engine.load("qwen3:8b")
    assert [r.name for r in await ollama_engine.ps()] == ["qwen3:8b"]


async def test_unload_waits_until_memory_is_freed(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = load_scenario()
    fake_ollama.state.unload_delay_s = 0.4
    await ollama_engine.load("qwen3:8b")
    started = time.monotonic()
    await ollama_engine.unload("qwen3:8b", wait_s=5.0, poll_s=0.05)
    assert time.monotonic() - started >= 0.35  # it waited for /api/ps, not just the 200
    assert [r.name for r in await ollama_engine.ps()] == ["gpt-oss:120b"]
    unload_call = fake_ollama.calls("/api/generate")[-1].body
    assert unload_call["keep_alive"] == 0 and unload_call["prompt"] == ""


@pytest.mark.parametrize("spelling", ["library/qwen3:8b", "registry.ollama.ai/library/qwen3:8b"])
async def test_unload_by_a_qualified_name_waits_for_the_short_name_to_leave_ps(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine, spelling: str
) -> None:
    """`sparkctl unload library/qwen3:8b`: /api/ps lists it as "qwen3:8b"; the unload must
    wait until that entry is gone (its memory freed), not return at once nor time out."""
    fake_ollama.state = load_scenario()
    fake_ollama.state.unload_delay_s = 0.4
    # Ollama resolves every spelling to one model (ParseName fills in host, namespace and
    # tag); the fake matches names literally, so the spelling is registered as an alias.
    fake_ollama.state.models[spelling] = fake_ollama.state.find_model("qwen3:8b")
    await ollama_engine.load("qwen3:8b")
    assert "qwen3:8b" in [r.name for r in await ollama_engine.ps()]
    started = time.monotonic()
    await ollama_engine.unload(spelling, wait_s=5.0, poll_s=0.05)
    assert 0.35 <= time.monotonic() - started < 4.0  # waited for /api/ps, then stopped
    assert [r.name for r in await ollama_engine.ps()] == ["gpt-oss:120b"]
    assert fake_ollama.calls("/api/generate")[-1].body["model"] == spelling


def test_model_names_match_by_ollamas_rules() -> None:
    assert same_model("library/qwen3:8b", "qwen3:8b")
    assert same_model("registry.ollama.ai/library/qwen3:8b", "Qwen3:8B")
    assert not same_model("someone/qwen3:8b", "qwen3:8b")


async def test_unload_that_never_frees_memory_is_an_error(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = load_scenario()
    fake_ollama.state.unload_delay_s = 30
    await ollama_engine.load("qwen3:8b")
    with pytest.raises(EngineError, match="still loaded"):
        await ollama_engine.unload("qwen3:8b", wait_s=0.3, poll_s=0.05)


# ------------------------------------------------------------------------ generate


async def test_generate_streams_at_the_engine_rate(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    words = [f" w{i}" for i in range(60)]
    fake_ollama.state = bench_scenario(tokens_per_s=300.0, response_tokens=words)
    started = time.monotonic()
    arrivals = []
    events = []
    async for event in ollama_engine.generate("llama3.2:3b", "Why is the sky blue?", options={"temperature": 0, "seed": 42}):
        events.append(event)
        if isinstance(event, TokenEvent):
            arrivals.append(time.monotonic())
    assert tokens(events) == words
    done = done_of(events)
    assert done.done_reason == "stop"
    assert done.eval_count == len(words)
    # The engine times eval_count tokens over eval_count - 1 decode steps (the first token
    # comes out of the prefill), as the client sees them between its first and last token.
    client_window_ns = (arrivals[-1] - arrivals[0]) * 1e9
    assert done.eval_duration_ns == pytest.approx(client_window_ns, rel=0.15)
    client_rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    assert client_rate == pytest.approx(300.0, rel=0.15)  # the pace the fake was asked for
    assert time.monotonic() - started >= 59 / 300
    assert done.prompt_eval_count > 0 and done.prompt_eval_duration_ns > 0
    assert done.load_duration_ns > 0 and done.total_duration_ns > done.eval_duration_ns


async def test_thinking_tokens_are_flagged_and_counted(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = bench_scenario(tokens_per_s=None)
    events = await collect(ollama_engine.generate("qwen3:8b", "hi"))  # thinks by default
    thought = tokens(events, thinking=True)
    answer = tokens(events, thinking=False)
    assert "".join(thought) == "".join(fake_ollama.state.thinking_tokens)
    assert "".join(answer) == "".join(fake_ollama.state.response_tokens)
    first_answer = next(i for i, e in enumerate(events) if isinstance(e, TokenEvent) and not e.thinking)
    assert all(e.thinking for e in events[:first_answer])
    assert done_of(events).eval_count == len(thought) + len(answer)  # eval_count includes thinking

    events = await collect(ollama_engine.generate("qwen3:8b", "hi", think=False))
    assert tokens(events, thinking=True) == []


async def test_think_on_model_without_thinking_is_refused(ollama_engine: OllamaEngine) -> None:
    with pytest.raises(EngineError) as caught:
        await collect(ollama_engine.generate("llama3.2:3b", "hi", think=True))
    assert caught.value.status == 400
    assert caught.value.message == '"llama3.2:3b" does not support thinking'


async def test_chat_streams_thinking_and_content(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    events = await collect(ollama_engine.chat("qwen3:8b", [{"role": "user", "content": "hi"}]))
    assert tokens(events, thinking=True) and tokens(events, thinking=False)
    assert done_of(events).done_reason == "stop"


async def test_changing_num_ctx_reloads_the_model(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    state = bench_scenario(tokens_per_s=None)
    state.models["llama3.2:3b"].load_s = 0.2
    fake_ollama.state = state
    cold = done_of(await collect(ollama_engine.generate("llama3.2:3b", "a", options={"num_ctx": 4096})))
    warm = done_of(await collect(ollama_engine.generate("llama3.2:3b", "a", options={"num_ctx": 4096})))
    reload = done_of(await collect(ollama_engine.generate("llama3.2:3b", "a", options={"num_ctx": 8192})))
    assert cold.load_duration_ns >= 0.2e9
    assert warm.load_duration_ns < 0.1e9
    assert reload.load_duration_ns >= 0.2e9  # a changed runner option means a reload
    assert next(r for r in await ollama_engine.ps() if r.name == "llama3.2:3b").context_length == 8192


async def test_long_prompt_is_truncated_to_the_context(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = bench_scenario(tokens_per_s=None)
    fake_ollama.state.prompt_tokens = 10_000
    fake_ollama.state.prefill_tokens_per_s = 1e6
    done = done_of(await collect(ollama_engine.generate("llama3.2:3b", "long", options={"num_ctx": 2048})))
    assert done.prompt_eval_count == 2048


async def test_runaway_model_stops_at_num_predict(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state = bench_scenario(tokens_per_s=None, runaway="thinking")
    events = await collect(ollama_engine.generate("qwen3:8b", "loop", options={"num_predict": 500}))
    done = done_of(events)
    assert (done.done_reason, done.eval_count) == ("length", 500)
    assert len(tokens(events, thinking=True)) == 500  # it never got to an answer


async def test_closing_a_runaway_stream_stops_the_server(
    fake_ollama: FakeOllama, ollama_engine: OllamaEngine
) -> None:
    fake_ollama.state = bench_scenario(tokens_per_s=500.0, runaway="response")
    stream = ollama_engine.generate("llama3.2:3b", "go on forever")
    received = 0
    async for event in stream:
        received += isinstance(event, TokenEvent)
        if received == 20:
            break
    await stream.aclose()  # the per-request ceiling fired: the client gives up
    deadline = time.monotonic() + 3
    resident = fake_ollama.state.resident["llama3.2:3b"]
    while resident.busy and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert resident.busy == 0  # the server noticed the disconnect and stopped generating


async def test_stream_dropped_midway_is_unreachable(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state.drop_stream("/api/generate", after=3)
    received = []
    with pytest.raises(EngineUnreachable) as caught:
        async for event in ollama_engine.generate("llama3.2:3b", "hi"):
            received.append(event)
    assert len(received) == 3
    assert ollama_engine.host in caught.value.message


async def test_error_inside_a_stream_is_an_engine_error(fake_ollama: FakeOllama, ollama_engine: OllamaEngine) -> None:
    fake_ollama.state.fail_in_stream("/api/generate", "CUDA error: out of memory", after=2)
    received = []
    with pytest.raises(EngineError) as caught:
        async for event in ollama_engine.generate("llama3.2:3b", "hi"):
            received.append(event)
    assert len(received) == 2
    assert (caught.value.status, caught.value.message) == (-1, "CUDA error: out of memory")
    assert not isinstance(caught.value, EngineUnreachable)


# ------------------------------------------------------------------------ the fake's wire format


def test_fake_wire_format_matches_ollama(fake_ollama: FakeOllama) -> None:
    """Spot checks of the bytes the fake sends, so the tests above rest on the real format."""
    with httpx.Client(base_url=fake_ollama.url, verify=False) as client:
        load = client.post("/api/generate", json={"model": "llama3.2:3b", "prompt": "", "stream": True})
        assert load.headers["content-type"] == "application/json; charset=utf-8"
        assert set(load.json()) == {"model", "created_at", "response", "done", "done_reason"}  # zero metrics omitted
        ps = client.get("/api/ps").json()["models"][0]
        assert list(ps) == [
            "name", "model", "size", "digest", "details", "expires_at", "size_vram", "context_length"
        ]
        assert len(ps["expires_at"].split(".")[1].rstrip("Z")) <= 9
        with client.stream("POST", "/api/generate", json={"model": "llama3.2:3b", "prompt": "x"}) as stream:
            assert stream.headers["content-type"] == "application/x-ndjson"
            assert stream.headers["transfer-encoding"] == "chunked"
            lines = list(stream.iter_lines())
        assert lines[0].startswith('{"model":"llama3.2:3b","created_at":"') and lines[-1].count('"done":true') == 1
        missing = client.request("DELETE", "/api/delete", json={"model": "nope"})
        assert (missing.status_code, missing.text) == (404, '{"error":"model \'nope\' not found"}')
        deleted = client.request("DELETE", "/api/delete", json={"model": "qwen3:8b"})
        assert (deleted.status_code, deleted.content) == (200, b"")
