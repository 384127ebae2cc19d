"""Tests of the FAKE Ollama itself (testkit/fakes/ollama_server.py), over real HTTP: keep_alive
parsing and expiry, reloads on a changed runner option, and resident sizes, checked against
what a real server does (Go's time.ParseDuration, api.Duration, server/sched.go), with
expectations worked out by hand rather than through the fake's or sparkctl's formulas."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from testkit.fakes.ollama_server import GIB, BadRequest, FakeOllama, parse_go_duration

MIN = 60.0


@pytest.fixture
def server(raw_fake: FakeOllama) -> FakeOllama:
    return raw_fake  # tests/integration/conftest.py


def generate(server: FakeOllama, **body: Any) -> httpx.Response:
    body.setdefault("model", "llama3.2:3b")
    body.setdefault("prompt", "hi")
    body.setdefault("stream", False)
    return server.http.post("/api/generate", json=body)


def ps(server: FakeOllama) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in server.http.get("/api/ps").json()["models"]}


def expires_in_s(server: FakeOllama, name: str = "llama3.2:3b") -> float:
    expires = datetime.fromisoformat(ps(server)[name]["expires_at"].replace("Z", "+00:00"))
    return (expires - datetime.now(timezone.utc)).total_seconds()


# ---------------------------------------------------------------------------- keep_alive parsing


@pytest.mark.parametrize(
    "text, ns",
    [
        ("0", 0), ("-0", 0), ("+0", 0), ("5m", 300 * 10**9), ("1h2m3.5s", 3723_500_000_000),
        ("1.5h", 5400 * 10**9), (".5s", 500_000_000), ("1.s", 10**9), ("300ms", 300_000_000),
        ("2us", 2000), ("2µs", 2000), ("-1m", -60 * 10**9), ("1m1m", 120 * 10**9),
    ],
)
def test_go_durations_that_parse(text, ns):
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(
    "text, message",
    [
        ("-1", 'time: missing unit in duration "-1"'),
        ("300", 'time: missing unit in duration "300"'),
        ("5m3", 'time: missing unit in duration "5m3"'),
        ("5d", 'time: unknown unit "d" in duration "5d"'),
        ("5 m", 'time: unknown unit " m" in duration "5 m"'),
        ("", 'time: invalid duration ""'),
        (".", 'time: invalid duration "."'),
        ("-", 'time: invalid duration "-"'),
        ("m", 'time: invalid duration "m"'),
        ("3000000h", 'time: invalid duration "3000000h"'),  # past 1<<63 ns
    ],
)
def test_go_durations_that_do_not(text, message):
    with pytest.raises(BadRequest) as err:
        parse_go_duration(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "keep_alive, message",
    [
        ("-1", 'time: missing unit in duration "-1"'),
        ("300", 'time: missing unit in duration "300"'),
        (True, "Unsupported type: 'bool'"),
        ([5], "Unsupported type: '[]interface {}'"),
        ({"m": 5}, "Unsupported type: 'map[string]interface {}'"),
    ],
)
def test_bad_keep_alive_is_a_400_before_the_model_is_looked_up(server, keep_alive, message):
    for model in ("llama3.2:3b", "no-such-model"):
        response = generate(server, model=model, keep_alive=keep_alive)
        assert (response.status_code, response.json()) == (400, {"error": message})


@pytest.mark.parametrize(
    "keep_alive, seconds",
    [(90, 90.0), (2.5, 2.5), ("90s", 90.0), ("1h", 3600.0), ("1.5m", 90.0)],
)
def test_keep_alive_sets_the_expiry(server, keep_alive, seconds):
    assert generate(server, keep_alive=keep_alive).status_code == 200
    assert expires_in_s(server) == pytest.approx(seconds, abs=1.0)


@pytest.mark.parametrize("keep_alive", [-1, -0.5, "-1s", "-1m", "-5h"])
def test_negative_keep_alive_is_forever(server, keep_alive):
    assert generate(server, keep_alive=keep_alive).status_code == 200
    assert expires_in_s(server) > 200 * 365 * 86400  # math.MaxInt64 ns: ~292 years


def test_keep_alive_zero_string_unloads_after_the_request(server):
    assert generate(server, keep_alive="0").status_code == 200
    assert "llama3.2:3b" not in ps(server)


# ---------------------------------------------------------------------------- expiry


def test_a_request_without_keep_alive_keeps_the_runner_session(server):
    generate(server, keep_alive="10m")
    generate(server)  # no keep_alive: sched.go keeps the runner's sessionDuration
    assert expires_in_s(server) == pytest.approx(10 * MIN, abs=1.0)
    generate(server, keep_alive="1m")  # one with a keep_alive replaces it
    assert expires_in_s(server) == pytest.approx(1 * MIN, abs=1.0)


def test_a_new_load_without_keep_alive_gets_the_server_default(server):
    generate(server)
    assert expires_in_s(server) == pytest.approx(5 * MIN, abs=1.0)  # OLLAMA_KEEP_ALIVE 5m


def test_a_bench_request_turns_forever_into_its_own_keep_alive(server):
    generate(server, prompt="", keep_alive=-1)  # the lane's "load forever"
    assert expires_in_s(server) > 200 * 365 * 86400
    generate(server, keep_alive="30m")
    assert expires_in_s(server) == pytest.approx(30 * MIN, abs=1.0)


def test_expiry_restarts_when_the_request_ends_not_when_it_starts(server):
    state = server.state
    state.tokens_per_s = 50.0
    state.jitter_pct = 0.0
    state.response_tokens = [" w"] * 16  # 15 steps of 20 ms: 0.3 s
    generate(server, keep_alive=30)
    ended = time.time()
    assert expires_in_s(server) == pytest.approx(30, abs=0.15)
    expires = datetime.fromisoformat(ps(server)["llama3.2:3b"]["expires_at"].replace("Z", "+00:00"))
    assert expires.timestamp() == pytest.approx(ended + 30, abs=0.1)


def test_a_busy_model_does_not_expire(server):
    state = server.state
    state.tokens_per_s = 100.0
    state.runaway = "response"
    before = time.monotonic()
    with server.http.stream("POST", "/api/generate", json={
        "model": "llama3.2:3b", "prompt": "go", "keep_alive": 0.1, "options": {"num_predict": 40},
    }) as response:
        lines = 0
        for _ in response.iter_lines():
            lines += 1
            if lines == 25:  # ~0.25 s in, well past the 0.1 s keep_alive
                assert time.monotonic() - before > 0.2
                assert "llama3.2:3b" in ps(server)
    assert "llama3.2:3b" in ps(server)  # the expiry starts now: 0.1 s from the end
    time.sleep(0.2)
    assert "llama3.2:3b" not in ps(server)


# ---------------------------------------------------------------------------- reloads


def test_changed_num_ctx_reloads_the_runner(server):
    state = server.state
    state.models["llama3.2:3b"].load_s = 0.05
    cold = generate(server, options={"num_ctx": 4096}).json()
    warm = generate(server, options={"num_ctx": 4096}).json()
    small = ps(server)["llama3.2:3b"]
    reload = generate(server, options={"num_ctx": 16384}).json()
    big = ps(server)["llama3.2:3b"]
    assert cold["load_duration"] >= 0.05e9 and warm.get("load_duration", 0) < 0.05e9
    assert reload["load_duration"] >= 0.05e9
    assert (small["context_length"], big["context_length"]) == (4096, 16384)
    assert big["size"] > small["size"]


def test_no_num_ctx_on_a_resident_at_another_context_reloads_at_the_default(server):
    state = server.state
    state.default_num_ctx = 4096
    state.models["llama3.2:3b"].load_s = 0.05
    generate(server, options={"num_ctx": 16384})
    again = generate(server).json()  # no num_ctx: the request asks for the server default
    assert again["load_duration"] >= 0.05e9
    assert ps(server)["llama3.2:3b"]["context_length"] == 4096


def test_no_num_ctx_uses_the_modelfile_parameter(server):
    state = server.state
    state.models["llama3.2:3b"].parameters = "num_ctx                        8192"
    generate(server)
    assert ps(server)["llama3.2:3b"]["context_length"] == 8192


def test_auto_context_resident_is_kept_by_an_auto_request(server):
    """0.30+ with OLLAMA_CONTEXT_LENGTH unset: auto/auto does not reload."""
    state = server.state
    state.num_ctx_auto = True
    state.default_num_ctx = 4096
    state.add_resident("llama3.2:3b", context_length=32768, num_ctx_auto=True)
    state.models["llama3.2:3b"].load_s = 0.05
    kept = generate(server).json()
    assert kept.get("load_duration", 0) < 0.05e9
    assert ps(server)["llama3.2:3b"]["context_length"] == 32768
    named = generate(server, options={"num_ctx": 4096}).json()  # naming one is not auto
    assert named["load_duration"] >= 0.05e9


def test_num_ctx_is_capped_at_the_trained_context(server):
    generate(server, model="qwen3:8b", think=False, options={"num_ctx": 262144})
    assert ps(server)["qwen3:8b"]["context_length"] == 40960


# ---------------------------------------------------------------------------- resident size


def test_resident_size_is_more_than_weights_plus_kv_cache(server):
    model = server.state.models["llama3.2:3b"]
    generate(server, options={"num_ctx": 4096})
    at_4k = ps(server)["llama3.2:3b"]["size"]
    generate(server, options={"num_ctx": 8192})
    at_8k = ps(server)["llama3.2:3b"]["size"]
    # llama3.2:3b: 28 layers, 8 KV heads of 128 (3072 / 24), f16: 2*28*8*128*2 bytes a token.
    kv_per_token = 2 * 28 * 8 * 128 * 2
    weights = int(1.88 * GIB)
    assert model.size == weights
    graph_4k = at_4k - weights - kv_per_token * 4096
    graph_8k = at_8k - weights - kv_per_token * 8192
    assert 100 * 2**20 < graph_4k < 2 * GIB  # compute buffers: hundreds of MiB, not zero
    assert graph_8k > graph_4k  # and they grow with the context


def test_scripted_compute_buffer_and_projector(server):
    model = server.state.models["llama3.2:3b"]
    model.compute_buffer_bytes = 300 * 2**20
    model.projector_bytes = 800 * 2**20
    generate(server, options={"num_ctx": 2048})
    size = ps(server)["llama3.2:3b"]["size"]
    assert size == int(1.88 * GIB) + 2 * 28 * 8 * 128 * 2 * 2048 + 300 * 2**20 + 800 * 2**20
    model.resident_size = 5 * GIB  # a scripted size wins outright
    generate(server, options={"num_ctx": 4096})
    assert ps(server)["llama3.2:3b"]["size"] == 5 * GIB
