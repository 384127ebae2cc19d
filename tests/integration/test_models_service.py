"""The models service against the FAKE Ollama over real HTTP, on a Spark-like budget
(FakeProbes with spark_snapshot: 121 GiB unified memory, 61 GiB available, 8 GiB reserve)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from sparkctl.core.fit import FitKind, kv_cache_bytes
from sparkctl.core.names import InvalidModelName
from sparkctl.core.snapshots import GIB, HostSnapshot, Unavailable
from sparkctl.engines.base import EngineError, ModelNotFound, PullEvent
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services import models as ms
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import spark_config, spark_state
from testkit.fakes.ollama_server import FakeOllama, FakeState, pull_scenario

CFG = spark_config()


@pytest.fixture
def server(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake  # the Spark-like fake Ollama shared by the models tests (tests/conftest.py)


@pytest.fixture
async def engine(server: FakeOllama) -> AsyncIterator[OllamaEngine]:
    e = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0, load_timeout=10.0)
    try:
        yield e
    finally:
        await e.close()


def use(server: FakeOllama, state: FakeState) -> FakeState:
    server.state = state
    return state


def probes(available_gib: float = 61.0, runner_gib: float = 78.5) -> FakeProbes:
    return FakeProbes(spark_snapshot(available_gib, runner_gib=runner_gib))


async def collect(gen) -> list[ms.PullView]:
    return [v async for v in gen]


NO_STORE = ms.ModelStore(None, "not checked in this test")


# ---------------------------------------------------------------------------- listing


async def test_list_models_has_show_fields_lane_and_residency(engine, server):
    listing = await ms.list_models(CFG, engine)
    rows = {r.name: r for r in listing.rows}
    assert listing.engine_version == "0.12.6"
    prod = rows["gpt-oss:120b"]
    assert (prod.lane, prod.loaded, prod.placement.label) == ("production", True, "100% GPU")
    assert (prod.family, prod.parameter_size, prod.quantization) == ("gptoss", "116.8B", "MXFP4")
    assert prod.context_length == 131072
    assert prod.notable_capabilities == ("thinking", "tools")
    contender = rows["qwen3:8b"]
    assert not contender.loaded and contender.lane is None and contender.context_length == 40960
    assert rows["llama3.2:3b"].lane == "fast"
    assert listing.missing_lanes == ()


async def test_list_models_caches_show_and_names_missing_lanes(engine, server):
    cache: ms.ShowCache = {}
    await ms.list_models(CFG, engine, cache=cache)
    shows = len(server.calls("/api/show"))
    cfg = spark_config('bench_only = "mistral:7b"\n')
    listing = await ms.list_models(cfg, engine, cache=cache)
    assert len(server.calls("/api/show")) == shows  # nothing new to ask about
    assert listing.missing_lanes == (("bench_only", "mistral:7b"),)


async def test_list_models_keeps_a_model_whose_show_fails(engine, server):
    server.state.fail("/api/show", 500, "broken manifest", times=1)
    listing = await ms.list_models(CFG, engine)
    broken = [r for r in listing.rows if r.show_error]
    assert len(broken) == 1 and broken[0].show_error == "broken manifest"
    assert broken[0].family  # /api/tags' details still fill the row


# ---------------------------------------------------------------------------- pull


async def test_pull_with_totals_reports_layers_status_and_percent(engine, server):
    use(server, pull_scenario())
    views = await collect(ms.pull_model(engine, "qwen3:8b", store=NO_STORE))
    last = views[-1]
    assert last.outcome == "success" and last.error is None
    assert last.log == ("pulling manifest", "verifying sha256 digest", "writing manifest", "success")
    states = [layer.state for layer in last.layers]
    assert states == ["done", "present", "done", "done"]  # the template layer was on disk
    assert last.total == 5_225_374_688 + 1_723 + 11_338 + 487
    assert last.percent == 100.0
    # Ollama fetches layers one after another, so the overall total grows as they are
    # announced; while the weights (first, and nearly all the bytes) download it only rises.
    weights = [v.percent for v in views if len(v.layers) == 1 and v.percent is not None]
    assert weights == sorted(weights) and any(0 < p < 100 for p in weights)
    assert last.engine_version == "0.12.6"
    assert any(r.name == "qwen3:8b" for r in await engine.tags())


async def test_pull_lines_without_totals_are_indeterminate(engine, server):
    use(server, pull_scenario())
    views = await collect(ms.pull_model(engine, "nototals", store=NO_STORE))
    running = [v for v in views if v.outcome is None and v.layers]
    assert running and all(v.percent is None and v.sizes_unknown and v.eta_s is None for v in running)
    assert views[-1].outcome == "success" and views[-1].total is None


async def test_pull_in_band_error_names_the_engine_version(engine, server):
    use(server, pull_scenario())
    last = (await collect(ms.pull_model(engine, "broken", store=NO_STORE)))[-1]
    assert (last.outcome, last.error_kind) == ("failed", "engine")
    assert "max retries exceeded: unexpected EOF" in last.error and "Ollama 0.12.6" in last.error


async def test_pull_newer_version_error_says_upgrade_and_names_version(engine, server):
    use(server, pull_scenario())
    last = (await collect(ms.pull_model(engine, "future", store=NO_STORE)))[-1]
    assert last.error_kind == "newer_version"
    assert "requires a newer version of Ollama" in last.error
    assert "0.12.6" in last.error and "https://ollama.com/download" in last.error
    assert "\n" not in last.error


async def test_pull_unknown_model_shows_the_engine_text(engine, server):
    use(server, pull_scenario())
    last = (await collect(ms.pull_model(engine, "nosuchmodel", store=NO_STORE)))[-1]
    assert last.error_kind == "not_found"
    assert last.error.startswith("pull model manifest: file does not exist")


async def test_pull_rejects_a_bad_name_before_any_request(engine, server):
    with pytest.raises(InvalidModelName, match="bad name"):
        await collect(ms.pull_model(engine, "bad name", store=NO_STORE))
    assert server.requests == []


def _slow_pull_state() -> FakeState:
    state = pull_scenario()
    state.pull_chunks = 40
    state.pull_line_interval_s = 0.01
    return state


async def test_cancel_closes_the_stream_and_the_next_pull_resumes(engine, server):
    state = use(server, _slow_pull_state())
    weights = state.registry["qwen3:8b"].layers[0]
    gen = ms.pull_model(engine, "qwen3:8b", store=NO_STORE)
    async for view in gen:
        if view.completed > 1_000_000_000:
            break
    await gen.aclose()  # cancel: Ollama has no cancel call, closing the connection is it
    await asyncio.sleep(0.1)
    kept = state.blobs[weights.digest]
    await asyncio.sleep(0.1)
    assert 0 < kept < weights.total and state.blobs[weights.digest] == kept  # the server stopped

    state.pull_chunks = 4
    views = await collect(ms.pull_model(engine, "qwen3:8b", store=NO_STORE))
    first = views[-1].layers[0]
    assert views[-1].outcome == "success"
    assert first.start_completed == kept and first.completed == weights.total
    assert any(v.layers and v.layers[0].state == "resumed" for v in views)


async def test_dropped_connection_fails_as_unreachable_and_resumes(engine, server):
    state = use(server, _slow_pull_state())
    state.drop_stream("/api/pull", after=10, times=1)
    last = (await collect(ms.pull_model(engine, "qwen3:8b", store=NO_STORE)))[-1]
    assert last.error_kind == "unreachable" and "0.12.6" in last.error
    state.pull_chunks = 4
    again = (await collect(ms.pull_model(engine, "qwen3:8b", store=NO_STORE)))[-1]
    assert again.outcome == "success" and again.layers[0].start_completed > 0


async def test_pull_stops_when_the_download_would_not_fit_on_disk(engine, server):
    state = use(server, _slow_pull_state())
    store = ms.ModelStore("/models", "a test store")
    last = (await collect(ms.pull_model(engine, "qwen3:8b", store=store, disk_free=lambda p: 2 * GIB)))[-1]
    assert (last.outcome, last.error_kind) == ("failed", "disk")
    assert "not enough disk space" in last.error and "2.0 GiB free at /models" in last.error
    await asyncio.sleep(0.1)
    weights = state.registry["qwen3:8b"].layers[0]
    assert state.blobs.get(weights.digest, 0) < weights.total  # stopped, not finished


async def test_pull_checks_disk_and_reports_it_when_it_fits(engine, server):
    use(server, pull_scenario())
    store = ms.ModelStore("/models", "a test store")
    last = (await collect(ms.pull_model(engine, "qwen3:8b", store=store, disk_free=lambda p: 900 * GIB)))[-1]
    assert last.outcome == "success" and last.disk.ok is True and "900.0 GiB free" in last.disk.note
    odd = (await collect(ms.pull_model(engine, "qwen3:8b", store=store,
                                       disk_free=lambda p: Unavailable("permission denied"))))[-1]
    assert odd.outcome == "success" and odd.disk.ok is None and "permission denied" in odd.disk.note


def test_model_store_from_the_servers_variable_remote_and_missing(tmp_path):
    from sparkctl.core.engine_settings import ServerVariable

    said = ServerVariable("OLLAMA_MODELS", str(tmp_path / "m"), "OLLAMA_MODELS in the server's environment (PID 9)",
                          True)
    found = ms.find_model_store("http://127.0.0.1:11434", said)
    assert found.path == str(tmp_path) and found.why == "from OLLAMA_MODELS in the server's environment (PID 9)"
    remote = ms.find_model_store("http://spark-02:11434", said)
    assert remote.path is None and "another machine" in remote.why


def test_pull_tracker_speed_eta_and_resume_accounting():
    t = ms.PullTracker("m", started=100.0)
    t.feed(PullEvent("pulling manifest"), 100.0)
    t.feed(PullEvent("pulling aa", "sha256:aa", total=1000, completed=400), 100.0)  # 400 kept from before
    t.feed(PullEvent("pulling aa", "sha256:aa", total=1000, completed=600), 101.0)
    v = t.view(101.0)
    assert v.layers[0].state == "resumed" and v.percent == 60.0
    assert v.speed_bps == 200.0 and v.eta_s == 2.0  # only this pull's bytes count toward speed
    t.feed(PullEvent("pulling bb", "sha256:bb", total=50, completed=50), 101.5)
    assert t.layers["sha256:bb"].state == "present"
    t.succeed(102.0)
    assert t.view(102.0).layers[0].state == "done" and t.view(102.0).percent == 100.0


# ---------------------------------------------------------------------------- fit


async def test_fit_fits_on_a_spark_and_says_which_context(engine):
    report = await ms.fit_check(CFG, engine, probes(), "qwen3:8b")
    assert report.verdict.kind is FitKind.FITS and not report.refused_by_default
    assert report.estimate.num_ctx == 40960 and report.estimate.context_source == "engine default"
    assert "262144" in report.context_note and "capped at the model's trained context 40960" in report.context_note
    assert report.request_num_ctx is None
    assert report.verdict.headroom == 53 * GIB


async def test_fit_with_user_context_adds_up(engine, server):
    report = await ms.fit_check(CFG, engine, probes(), "qwen3:8b", 8192)
    e = report.estimate
    info = server.state.models["qwen3:8b"].model_info()
    assert e.context_source == "user" and e.num_ctx == 8192 and report.request_num_ctx == 8192
    assert e.kv_cache == kv_cache_bytes(info, 8192) == 2 * 36 * 8 * 128 * 8192 * 2
    assert e.total == e.weights + e.kv_cache + e.overhead
    assert "as asked" in report.context_note


async def test_fit_needs_evicting_production_is_refused_by_default(engine):
    report = await ms.fit_check(CFG, engine, probes(available_gib=20), "qwen3:30b-a3b")
    v = report.verdict
    assert v.kind is FitKind.FITS_BY_EVICTING
    assert v.evicts == ("gpt-oss:120b",) and v.evicts_lanes == ("gpt-oss:120b",)
    assert "gpt-oss:120b (lane production)" in v.reason
    assert report.refused_by_default and "qwen3:30b-a3b fits only by evicting" in ms.refusal_reason(report)


async def test_fit_does_not_fit(engine):
    report = await ms.fit_check(CFG, engine, probes(), "deepseek-r1:671b")
    assert report.verdict.kind is FitKind.DOES_NOT_FIT
    assert "even after evicting every resident model" in report.verdict.reason


async def test_fit_of_an_unknown_model_is_the_engines_404(engine):
    with pytest.raises(ModelNotFound, match="model 'mistral:latest' not found"):
        await ms.fit_check(CFG, engine, probes(), "mistral")


async def test_fit_without_a_readable_budget_has_no_verdict(engine):
    snap = spark_snapshot()
    blind = FakeProbes(HostSnapshot(Unavailable("/proc/meminfo unreadable"), snap.pressure, snap.gpu))
    report = await ms.fit_check(CFG, engine, blind, "qwen3:8b")
    assert report.verdict is None and report.refused_by_default
    assert "unreadable" in report.summary()


# ---------------------------------------------------------------------------- side-load


async def test_load_beside_production_verifies_gpu_lane_nvml_and_estimate(engine, server):
    report = await ms.side_load(CFG, engine, probes(), "qwen3:8b")
    v = report.verification
    assert report.ok and v.problems == () and v.warnings == ()
    assert v.placement.label == "100% GPU"
    assert v.lane_models_resident == ("gpt-oss:120b",) and v.evicted == ()
    assert v.attribution.nvml_bytes == int(78.5 * GIB) and v.attribution.mismatch is None
    # What /api/ps reported (the fake's weights + KV + compute buffers, not sparkctl's
    # formula), and the estimate's error against it: an over-estimate, but a modest one.
    resident = server.state.resident["qwen3:8b"].size
    assert v.resident_bytes == resident
    assert v.error_pct == pytest.approx((report.fit.estimate.total - resident) / resident * 100)
    assert 0 < v.error_pct < 15
    body = server.calls("/api/generate")[-1].body
    assert body["prompt"] == "" and body["keep_alive"] == -1 and "options" not in body


async def test_load_sends_keep_alive_and_context(engine, server):
    report = await ms.side_load(CFG, engine, probes(runner_gib=74.1), "qwen3:8b", keep_alive="30m", num_ctx=8192)
    body = server.calls("/api/generate")[-1].body
    assert body["keep_alive"] == 1800 and body["options"]["num_ctx"] == 8192  # seconds: always accepted
    assert report.verification.actual_ctx == 8192
    resident = server.state.resident["qwen3:8b"].size
    assert report.verification.error_pct == pytest.approx(
        (report.fit.estimate.total - resident) / resident * 100) and 0 < report.verification.error_pct < 25


async def test_load_with_cpu_spill_is_reported_loudly(engine, server):
    use(server, spark_state(spill=True))
    report = await ms.side_load(CFG, engine, probes(), "qwen3:8b")
    assert not report.ok
    spill = [p for p in report.verification.problems if p.startswith("CPU SPILL")]
    r = server.state.resident["qwen3:8b"]
    on_cpu = f"{(r.size - r.size_vram) / GIB:.1f} GiB of {r.size / GIB:.1f} GiB on the CPU"
    assert spill and "30%/70% CPU/GPU" in spill[0] and on_cpu in spill[0]


async def test_load_that_evicts_production_is_reported_loudly(engine, server):
    use(server, spark_state(evict="gpt-oss:120b"))
    report = await ms.side_load(CFG, engine, probes(runner_gib=10.4), "qwen3:8b")
    v = report.verification
    assert v.evicted == v.evicted_lanes == ("gpt-oss:120b",)
    assert any(p.startswith("EVICTED: gpt-oss:120b (lane production)") for p in v.problems)
    assert not report.ok


async def test_load_out_of_memory_500_is_an_engine_error_with_the_text(engine, server):
    use(server, spark_state(out_of_memory=True))
    with pytest.raises(ms.LoadFailed) as err:
        await ms.side_load(CFG, engine, probes(), "qwen3:8b")
    assert err.value.status == 500
    assert err.value.message == "model requires more system memory (70.3 GiB) than is available (45.1 GiB)"
    assert err.value.lost_lanes == ()


async def test_load_refused_when_it_would_evict_production_and_forced_past(engine, server):
    with pytest.raises(ms.ModelsRefused) as err:
        await ms.side_load(CFG, engine, probes(available_gib=20), "qwen3:30b-a3b")
    assert "gpt-oss:120b (lane production)" in err.value.reason and "\n" not in err.value.reason
    assert server.calls("/api/generate") == []  # refused before anything was loaded
    server.state.models["qwen3:30b-a3b"].evicts = ["gpt-oss:120b"]
    forced = await ms.side_load(CFG, engine, probes(available_gib=20), "qwen3:30b-a3b", force=True)
    assert forced.overridden == err.value.reason
    assert forced.verification.evicted_lanes == ("gpt-oss:120b",)


async def test_load_refused_below_the_reserve(engine, server):
    with pytest.raises(ms.ModelsRefused, match="does not fit"):
        await ms.side_load(CFG, engine, probes(), "deepseek-r1:671b")


async def test_load_may_evict_a_model_without_a_lane(engine, server):
    server.state.add_resident("qwen3:8b", expires_in_s=120)  # a contender from earlier
    server.state.models["qwen3:30b-a3b"].evicts = ["qwen3:8b"]
    report = await ms.side_load(CFG, engine, probes(available_gib=20, runner_gib=88), "qwen3:30b-a3b",
                                num_ctx=8192)
    assert report.fit.verdict.evicts == ("qwen3:8b",) and report.fit.verdict.evicts_lanes == ()
    assert report.verification.evicted == ("qwen3:8b",) and report.ok
    assert "evicted qwen3:8b (no lane)" in report.verification.notes


async def test_load_nvml_disagreement_is_a_problem_and_no_process_a_warning(engine, server):
    report = await ms.side_load(CFG, engine, probes(runner_gib=5), "qwen3:8b")
    assert any(p.startswith("NVML DISAGREES") for p in report.verification.problems)
    await ms.unload_model(engine, "qwen3:8b")
    snap = spark_snapshot()
    gpu = snap.gpu.gpus[0].__class__(**{**snap.gpu.gpus[0].__dict__, "processes": ()})
    blind = FakeProbes(HostSnapshot(snap.meminfo, snap.pressure, snap.gpu.__class__(gpus=(gpu,))))
    report = await ms.side_load(CFG, engine, blind, "qwen3:8b")
    assert report.ok and report.verification.warnings


async def test_load_estimate_lower_than_resident_is_a_problem(engine, server):
    server.state.models["qwen3:8b"].resident_size = 16 * GIB
    report = await ms.side_load(CFG, engine, probes(runner_gib=84), "qwen3:8b")
    assert any(p.startswith("ESTIMATE LOW") for p in report.verification.problems)


def test_keep_alive_parsing():
    assert ms.parse_keep_alive("-1") == -1 and ms.parse_keep_alive("300") == 300
    assert ms.parse_keep_alive("1.5") == 1.5 and ms.parse_keep_alive("30m") == 1800
    assert ms.keep_alive_label(-1) == "forever" and ms.keep_alive_label("1h30m") == "1h30m"
    with pytest.raises(ValueError, match="invalid keep-alive"):
        ms.parse_keep_alive("soon")


# ---------------------------------------------------------------------------- unload / delete


async def test_unload_waits_until_ps_no_longer_lists_it(engine, server):
    server.state.add_resident("qwen3:8b", expires_in_s=600)
    server.state.unload_delay_s = 0.4  # the engine frees memory after answering
    started = time.monotonic()
    report = await ms.unload_model(engine, "qwen3:8b")
    assert report.was_loaded and report.waited_s >= 0.3 and time.monotonic() - started >= 0.3
    assert len(server.calls("/api/ps")) >= 3
    assert "qwen3:8b" not in [m.name for m in await engine.ps()]


async def test_unload_of_a_model_not_loaded_says_so(engine):
    report = await ms.unload_model(engine, "qwen3:8b")
    assert not report.was_loaded and "was not loaded" in report.line()


async def test_delete_guards_lane_models_and_unloads_first(engine, server):
    with pytest.raises(ms.ModelsRefused, match="serves lane production"):
        await ms.delete_model(CFG, engine, "gpt-oss:120b")
    assert server.calls("/api/delete") == []
    report = await ms.delete_model(CFG, engine, "gpt-oss:120b", force=True)
    assert report.unloaded_first and report.lane == "production"
    names = [m.name for m in await engine.tags()]
    assert "gpt-oss:120b" not in names
    plain = await ms.delete_model(CFG, engine, "qwen3:8b")
    assert not plain.unloaded_first and "deleted qwen3:8b" in plain.line()
    with pytest.raises(ModelNotFound):
        await ms.delete_model(CFG, engine, "qwen3:8b")


async def test_engine_errors_pass_through(engine, server):
    server.state.fail("/api/ps", 500, "boom")
    with pytest.raises(EngineError, match="boom"):
        await ms.unload_model(engine, "qwen3:8b")
