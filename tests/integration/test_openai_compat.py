"""The OpenAI-compatible adapter against a FAKE server (testkit/fakes/openai_server.py: the
wire format of llama-server, vLLM and SGLang over real HTTP), the factory and CLI flags
that choose it, and the status of configured `[engines.NAME]` entries. The real
llama-server runs in test_llama_e2e.py."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

from sparkctl.cli import main
from sparkctl.config import Config, NamedEngineConfig, parse_config
from sparkctl.engines.base import DoneEvent, EngineError, EngineStalled, EngineUnreachable, ModelNotFound, TokenEvent
from sparkctl.engines.openai_compat import OpenAICompatEngine, normalize_url
from sparkctl.services.bench import BenchRunner, BenchSettings
from sparkctl.services.factory import EngineChoiceError, make_engine
from sparkctl.services.status import engine_status, openai_engines_status
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.openai_server import QWEN3_TEMPLATE, R1_TEMPLATE, FakeOpenAI, OpenAIState


@pytest.fixture
def serve():
    servers: list[FakeOpenAI] = []

    def start(**kw) -> FakeOpenAI:
        s = FakeOpenAI(OpenAIState(**kw)).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def engine_for(server: FakeOpenAI, **kw) -> OpenAICompatEngine:
    return OpenAICompatEngine(server.url, timeout=kw.pop("timeout", 3.0), connect_timeout=1.0,
                              load_timeout=kw.pop("load_timeout", 5.0), **kw)


async def collect(engine, model="smollm2-135m", **kw):
    events = []
    async for ev in engine.generate(model, "Why is the sky blue?", **kw):
        events.append(ev)
    return events


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- identity ---------------------------------------------------------------------------


def test_normalize_url():
    assert normalize_url("127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert normalize_url("http://box:8000/v1/") == "http://box:8000"
    assert normalize_url("https://gpu.example/llm/v1") == "https://gpu.example/llm"
    for bad in ("", "ftp://x", "http://", "http://h:99999", "http://h:8080/?a=1"):
        with pytest.raises(ValueError):
            normalize_url(bad)


@pytest.mark.parametrize(
    "flavor, kind, version",
    [("llama.cpp", "llama.cpp", "b6500-3f4b3c2a"), ("vllm", "vllm", "0.11.0"), ("sglang", "sglang", "0.11.0"),
     ("openai", "openai", "fake-openai/1.0")],
)
async def test_detects_kind_and_version(serve, flavor, kind, version):
    server = serve(flavor=flavor)
    async with engine_for(server) as engine:
        assert engine.kind == "openai"  # nothing asked yet
        assert await engine.version() == version
        assert engine.kind == kind
        ident = engine.identity()
        assert ident["engine.build"] == version
        if flavor == "llama.cpp":
            assert ident["engine.server_header"] == "llama.cpp"
            assert ident["engine.model_path"].endswith(".gguf") and ident["engine.n_ctx"] == "4096"


async def test_show_tags_ps_from_llama_meta(serve):
    server = serve(aliases=["smol"])
    async with engine_for(server) as engine:
        show = await engine.show("smollm2-135m")
        assert show.model_info["general.parameter_count"] == 134_515_008
        assert show.model_info["server.n_ctx"] == 4096
        assert show.details["quantization_level"] == "Q4_1" and show.details["parameter_size"] == "135M"
        assert (await engine.show("smol")).name == "smol"  # an alias is the same model
        (tag,) = await engine.tags()
        assert tag.name == "smollm2-135m" and tag.size == 98_000_000
        (res,) = await engine.ps()
        assert res.size == 98_000_000 and res.size_vram == 0 and res.context_length == 4096
        assert engine.reports_placement is False
        with pytest.raises(ModelNotFound, match="does not serve 'qwen3:8b'.*smollm2-135m"):
            await engine.show("qwen3:8b")
        assert "cannot unload" in await engine.unload("smollm2-135m")


async def test_vllm_context_from_max_model_len(serve):
    server = serve(flavor="vllm", model_id="Qwen/Qwen3-0.6B", n_ctx=32768)
    async with engine_for(server) as engine:
        show = await engine.show("Qwen/Qwen3-0.6B")
        assert show.model_info["server.n_ctx"] == 32768
        assert show.details == {}  # vLLM tells no size or quantization


# ---- streaming --------------------------------------------------------------------------


async def test_stream_yields_tokens_then_done_from_llama_timings(serve):
    server = serve(tokens_per_s=None)
    async with engine_for(server) as engine:
        await engine.version()
        events = await collect(engine, options={"temperature": 0.0, "seed": 7, "num_predict": 20, "num_ctx": 8192})
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    done = events[-1]
    assert isinstance(done, DoneEvent) and len(tokens) == 20
    assert "".join(t.text for t in tokens).startswith("The sky is blue")
    # "Why is the sky blue?": 5 words + the template's 20 tokens, as the server counted them
    assert done.done_reason == "length" and done.eval_count == 20 and done.prompt_eval_count == 25
    assert done.prompt_eval_duration_ns == 8_000_000 and done.eval_duration_ns > 0
    assert done.raw["usage"]["completion_tokens"] == 20 and done.raw["timings"]["predicted_n"] == 20
    assert done.raw["system_fingerprint"] == "b6500-3f4b3c2a" and done.raw["finish_reason"] == "length"
    (body,) = server.chat_requests()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.0 and body["seed"] == 7 and body["max_tokens"] == 20
    assert body["cache_prompt"] is False  # llama.cpp only: every repetition prefills the prompt
    assert "num_ctx" not in body and body["messages"] == [{"role": "user", "content": "Why is the sky blue?"}]


async def test_vllm_stream_reasoning_and_usage_without_timings(serve):
    server = serve(flavor="vllm", reasoning=["Okay", ",", " think"], tokens=["Blue", "."], tokens_per_s=None,
                   chat_template=QWEN3_TEMPLATE, prompt_tokens=40)
    async with engine_for(server) as engine:
        await engine.version()
        events = await collect(engine)  # think=None: the model's default, which thinks
        no_think = await collect(engine, think=False)
    thinking = [e.text for e in events if isinstance(e, TokenEvent) and e.thinking]
    answer = [e.text for e in events if isinstance(e, TokenEvent) and not e.thinking]
    assert thinking == ["Okay", ",", " think"] and answer == ["Blue", "."]
    done = events[-1]
    assert done.done_reason == "stop" and done.eval_count == 5 and done.prompt_eval_count == 40
    assert done.eval_duration_ns == 0  # no server timings: the bench relies on its own clock
    assert [e.text for e in no_think if isinstance(e, TokenEvent)] == ["Blue", "."]  # no reasoning at all
    default, off = server.chat_requests()
    assert "cache_prompt" not in default and "chat_template_kwargs" not in default
    assert off["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_budget_tokens" not in off  # llama.cpp's field: vLLM would only warn about it


async def test_server_ignoring_include_usage_still_finishes(serve):
    server = serve(flavor="openai", honour_include_usage=False, tokens_per_s=None)
    async with engine_for(server) as engine:
        events = await collect(engine)
    assert isinstance(events[-1], DoneEvent) and events[-1].done_reason == "stop" and events[-1].eval_count == 0


# ---- errors -----------------------------------------------------------------------------


async def test_connection_refused_names_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    async with OpenAICompatEngine(url, timeout=2.0, connect_timeout=1.0) as engine:
        with pytest.raises(EngineUnreachable, match=f"cannot connect to {url}"):
            await engine.version()
        with pytest.raises(EngineUnreachable, match=url):
            await collect(engine)
        status = await engine.status()
        assert status.reachable is False and url in status.error


async def test_loading_server_is_an_engine_error_with_503(serve):
    server = serve(loading=True)
    async with engine_for(server) as engine:
        with pytest.raises(EngineError, match="503.*Loading model") as info:
            await engine.version()
        assert info.value.status == 503 and not isinstance(info.value, EngineUnreachable)


async def test_unknown_model_on_vllm_is_model_not_found(serve):
    server = serve(flavor="vllm")
    async with engine_for(server) as engine:
        with pytest.raises(ModelNotFound, match="does not exist"):
            await collect(engine, model="nope")


async def test_error_inside_the_stream(serve):
    server = serve(error_after=3, tokens_per_s=None)
    async with engine_for(server) as engine:
        await engine.version()
        with pytest.raises(EngineError, match="KV cache is full") as info:
            await collect(engine)
        assert info.value.status == 500


async def test_stream_cut_mid_way_is_unreachable(serve):
    server = serve(drop_after=5, tokens_per_s=None)
    async with engine_for(server) as engine:
        await engine.version()
        with pytest.raises(EngineUnreachable, match="dropped during generate|without its final chunk"):
            await collect(engine)


async def test_silent_server_times_out(serve):
    server = serve(stall_s=2.0)
    async with engine_for(server, load_timeout=0.5) as engine:
        await engine.version()
        with pytest.raises(EngineStalled, match="sent nothing for 0.5s during generate"):
            await collect(engine)
    assert issubclass(EngineStalled, EngineUnreachable)  # a bench still treats it as the engine gone


async def test_not_an_openai_server(serve):
    server = serve()
    server.state.flavor = "plain"
    async with OpenAICompatEngine(server.url + "/elsewhere", timeout=2.0) as engine:
        with pytest.raises(EngineError, match="no OpenAI-compatible API"):
            await engine.version()


# ---- thinking ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state, thinks",
    [
        (dict(flavor="llama.cpp"), False),  # SmolLM2's ChatML template
        (dict(flavor="llama.cpp", chat_template=QWEN3_TEMPLATE), True),  # enable_thinking switch
        (dict(flavor="llama.cpp", chat_template=R1_TEMPLATE), True),  # always opens <think>
        (dict(flavor="vllm", chat_template=QWEN3_TEMPLATE), False),  # vLLM shows nothing by default
        (dict(flavor="vllm", chat_template=QWEN3_TEMPLATE, tokenizer_info_endpoint=True), True),
        (dict(flavor="sglang", model_id="Qwen/Qwen3-8B"), False),
        (dict(flavor="sglang", model_id="Qwen/Qwen3-8B", reasoning_parser="qwen3"), True),
    ],
    ids=["llama.cpp-chatml", "llama.cpp-qwen3", "llama.cpp-r1", "vllm-default", "vllm-tokenizer-info",
         "sglang-no-parser", "sglang-qwen3-parser"],
)
async def test_thinking_capability_only_where_the_server_shows_it(serve, state, thinks):
    server = serve(**state)
    async with engine_for(server) as engine:
        show = await engine.show(state.get("model_id", "smollm2-135m"))
    assert ("thinking" in show.capabilities) is thinks


def _bench_settings(**kw):
    return replace(BenchSettings.from_config(Config().bench), warmup=0, reps=1, num_predict=40, timeout_s=20.0, **kw)


class _Recorded:
    message, run_id = "recorded", "r1"


@pytest.mark.parametrize(
    "flavor, template, extra",
    [
        ("llama.cpp", QWEN3_TEMPLATE, {}),
        ("llama.cpp", R1_TEMPLATE, {}),  # no switch in the template: only the reasoning budget stops it
        ("vllm", QWEN3_TEMPLATE, {"tokenizer_info_endpoint": True}),
        ("sglang", QWEN3_TEMPLATE, {"reasoning_parser": "qwen3"}),
    ],
    ids=["llama.cpp-qwen3", "llama.cpp-r1", "vllm-qwen3", "sglang-qwen3"],
)
async def test_bench_no_think_reaches_the_server_and_stops_the_thinking(serve, flavor, template, extra):
    """`sparkctl bench --no-think` on a thinking model served by llama-server, vLLM or SGLang:
    the request says so in the server's own terms and the run has no thinking tokens."""
    server = serve(flavor=flavor, model_id="qwen3-8b", chat_template=template, tokens_per_s=None,
                   reasoning=["Okay", ",", " let", " me", " think"], **extra)
    records = []
    async with engine_for(server) as engine:
        thinking = BenchRunner(Config(), engine, FakeProbes(spark_snapshot()), _bench_settings(think=True),
                               recorder=lambda r: records.append(r) or _Recorded())
        (on,) = await thinking.run(["qwen3-8b"])
        quiet = BenchRunner(Config(), engine, FakeProbes(spark_snapshot()), _bench_settings(think=False),
                            recorder=lambda r: records.append(r) or _Recorded())
        (off,) = await quiet.run(["qwen3-8b"])
    assert on.reps[0].thinking_tokens == 5  # the model does think when asked to
    assert off.reps[0].thinking_tokens == 0 and off.reps[0].output.startswith("The sky is blue")
    body = server.chat_requests()[-1]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    if flavor == "llama.cpp":
        assert body["reasoning_budget_tokens"] == 0
    else:
        assert "reasoning_budget_tokens" not in body


# ---- an engine that answers with an error ---------------------------------------------


@pytest.mark.parametrize("flavor", ["llama.cpp", "vllm"])
async def test_http_500_is_an_engine_error_not_unreachable(serve, flavor):
    server = serve(flavor=flavor)
    server.state.fail("/v1/models", 500, "CUDA error: out of memory")
    async with engine_for(server) as engine:
        with pytest.raises(EngineError, match="500.*CUDA error: out of memory") as info:
            await engine.version()
        assert info.value.status == 500 and not isinstance(info.value, EngineUnreachable)
        status = await engine_status(engine)
        assert status.reachable is True and "CUDA error: out of memory" in status.error
        assert status.resident == ()
        server.state.clear_faults()
        status = await engine_status(engine)
        assert status.reachable and status.error is None and status.resident


async def test_named_engine_answering_500_is_failing_not_unreachable(serve):
    server = serve()
    cfg = parse_config(CFG_TEXT.format(port=server.port, dead=free_port()))
    server.state.fail("/v1/models", 500, "llama_model_load: failed to load model")
    llama, gone = await openai_engines_status(cfg)
    assert llama.reachable and llama.failing and "failed to load model" in llama.error
    assert llama.model_served is None  # what it serves cannot be said while it fails
    assert not gone.reachable and not gone.failing


# ---- the bench over it ------------------------------------------------------------------


async def test_bench_records_unverified_placement_and_engine_build(serve):
    server = serve(tokens_per_s=300.0, n_ctx=2048)
    cfg = Config()
    settings = replace(BenchSettings.from_config(cfg.bench), warmup=1, reps=3, num_predict=30, timeout_s=20.0)
    records = []

    class Result:
        message, run_id = "recorded", "r1"

    def recorder(record):
        records.append(record)
        return Result()

    async with engine_for(server) as engine:
        runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), settings, recorder=recorder)
        (run,) = await runner.run(["smollm2-135m"])
    assert run.status == "FINISHED" and not run.invalid  # not refused, not marked invalid...
    assert run.placement_before.startswith("unknown (llama.cpp")  # ...but not claimed either
    assert any("placement not verified" in f for f in run.flags)
    for r in run.reps:
        assert r.eval_count == 30 and r.client_tokens == 30 and r.done_reason == "length"
        assert r.engine_decode_tps == pytest.approx(r.client_decode_tps, rel=0.10)
    (record,) = records
    assert record.tags["engine.kind"] == "llama.cpp" and record.tags["engine.version"] == "b6500-3f4b3c2a"
    assert record.tags["engine.build"] == "b6500-3f4b3c2a"
    assert record.params["num_ctx"] in (2048, "2048") and record.tags["bench.num_ctx_requested"] == "8192"


# ---- factory and CLI --------------------------------------------------------------------


CFG_TEXT = """
[engines.llama]
kind = "openai"
url = "http://127.0.0.1:{port}"
model = "smollm2-135m"
timeout_s = 2

[engines.gone]
kind = "openai"
url = "http://127.0.0.1:{dead}"
model = "x"
"""


def test_factory_chooses_engines():
    cfg = Config(engines={"llama": NamedEngineConfig("llama", "openai", "http://127.0.0.1:8080", "m", 2.0)})
    assert make_engine(cfg).kind == "ollama"  # no arguments: [engine] as before
    named = make_engine(cfg, name="llama")
    assert isinstance(named, OpenAICompatEngine) and named.model == "m" and named.timeout == 2.0
    assert make_engine(cfg, kind="openai", url="box:8000/v1").host == "http://box:8000"
    assert make_engine(cfg, url="box:8000").kind == "openai"  # a URL alone means OpenAI-compatible
    assert make_engine(cfg, kind="ollama", url="http://box:11434").host == "http://box:11434"
    with pytest.raises(EngineChoiceError, match="no engine named 'nope'.*llama"):
        make_engine(cfg, name="nope")
    with pytest.raises(EngineChoiceError, match="needs a URL"):
        make_engine(cfg, kind="openai")
    with pytest.raises(EngineChoiceError, match="scheme"):
        make_engine(cfg, kind="openai", url="ftp://box")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--engine", "nope", "m"], "no engine named 'nope'"),
        (["--engine-kind", "openai", "m"], "needs --engine-url"),
        (["--engine-kind", "openai", "--engine-url", "ftp://x", "m"], "unsupported scheme"),
        (["--engine-url", "http://h:99999", "m"], "bad port"),
        (["--engine", "llama", "--engine-url", "http://h:1", "m"], "cannot be combined"),
        (["--engine-url", "http://h:1", "--solo", "m"], "--solo needs an engine that can unload"),
        (["--engine-kind", "bogus", "m"], "invalid choice"),
    ],
)
def test_cli_bad_engine_choice_is_one_line_exit_2(tmp_path, capsys, argv, message):
    conf = tmp_path / "sparkctl.toml"
    conf.write_text(CFG_TEXT.format(port=free_port(), dead=free_port()))
    try:
        code = main(["--config", str(conf), "bench", *argv])
    except SystemExit as exc:  # argparse's own errors (an invalid choice) exit from parse_args
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_unreachable_engine_exits_3(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    port = free_port()
    assert main(["bench", "--engine-kind", "openai", "--engine-url", f"http://127.0.0.1:{port}", "m"]) == 3
    assert f"cannot connect to http://127.0.0.1:{port}" in capsys.readouterr().err


# ---- the dashboard's view of [engines.NAME] ------------------------------------------------


async def test_named_engines_status(serve):
    server = serve()
    cfg = parse_config(CFG_TEXT.format(port=server.port, dead=free_port()))
    llama, gone = await openai_engines_status(cfg)
    assert llama.reachable and llama.kind == "llama.cpp" and llama.version == "b6500-3f4b3c2a"
    assert llama.model_served is True and llama.served == ("smollm2-135m",)
    assert not gone.reachable and "cannot connect" in gone.error and gone.model_served is None
    server.state.model_id = "other"
    (llama, _) = await openai_engines_status(cfg)
    assert llama.reachable and llama.model_served is False


async def test_bench_adds_nvml_evidence_for_a_local_engine(serve, monkeypatch):
    """A loopback engine's PID (found by its listening port) matched to NVML's per-process
    memory: recorded as evidence beside "unknown", never as a placement claim."""
    import os

    from sparkctl.core.snapshots import GIB, GpuProcess, HostSnapshot
    from testkit.fakes.host import h200_snapshot

    server = serve(tokens_per_s=None)
    snap = h200_snapshot()
    gpu = replace(snap.gpu.gpus[0], processes=(GpuProcess(os.getpid(), int(2.44 * GIB), "llama-server"),))
    host = HostSnapshot(snap.meminfo, snap.pressure, replace(snap.gpu, gpus=(gpu,)), "h200", 16)
    cfg = Config()
    settings = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=1, num_predict=5, timeout_s=20.0)
    records = []

    class Result:
        message, run_id = "recorded", "r1"

    async with engine_for(server) as engine:
        runner = BenchRunner(cfg, engine, FakeProbes(host), settings, recorder=lambda r: records.append(r) or Result())
        (run,) = await runner.run(["smollm2-135m"])
    # the fake listens in this very process, so the listening PID is ours
    assert run.placement_before.startswith("unknown (llama.cpp does not report placement); NVML: pid")
    assert "holds 2.44 GiB on GPU 0 for a 0.09 GiB model" in run.placement_before
    assert records[0].tags["guard.engine_pid"] == str(os.getpid())
    assert records[0].tags["guard.engine_gpu_bytes"] == str(int(2.44 * GIB))
