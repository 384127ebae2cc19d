"""A bench killed without its wrap-up (kill -9, an OOM kill, a Spark power-cycled) leaves the
lanes as it had them; the next sparkctl start puts them back (issue 17, point 2). `sparkctl`
runs as real subprocesses; the Ollama is a FAKE (tests/fakes/ollama_server.py: Ollama's wire
format over real HTTP, a runner's session length kept as server/sched.go keeps it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.fakes.ollama_server import FakeOllama, default_state, make_model

REPO = Path(__file__).resolve().parents[2]
FOREVER_AFTER_S = 100 * 365 * 86400
HALF_HOUR = 1800


@pytest.fixture
def lanes_fake():
    """production qwen3:8b kept forever at 32768; fast qwen3:4b, 30-minute session at 8192;
    llama3.2:3b (the contender) streams at 40 tok/s without end."""
    state = default_state()
    state.tokens_per_s = 40.0
    state.runaway = "response"
    state.add_model(make_model("qwen3:4b", size_gib=2.5, parameter_size="4.0B", context_length=40960))
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    state.add_resident("qwen3:4b", expires_in_s=HALF_HOUR, context_length=8192)
    server = FakeOllama(state).start()
    yield server
    server.stop()


def write_config(tmp_path: Path, server: FakeOllama) -> Path:
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n'
                   '[lanes]\nproduction = "qwen3:8b"\nfast = "qwen3:4b"\n[lanes.keep_alive]\nfast = "30m"\n'
                   '[tracking]\nuri = "http://127.0.0.1:9"\n'
                   "[bench]\nwarmup = 0\nreps = 3\nnum_predict = 100000\ntimeout_s = 60\n")
    return cfg


def env_for(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data"),
            "SPARKCTL_LOCK_DIR": str(tmp_path / "locks"), "PYTHONPATH": str(REPO)}


def sparkctl(cfg: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), *args],
                          capture_output=True, text=True, env=env_for(tmp_path), timeout=120)


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def ps(server: FakeOllama) -> dict[str, tuple[int, float]]:
    """/api/ps as a user reads it: name -> (context, seconds until it expires)."""
    body = httpx.get(f"{server.url}/api/ps", timeout=5).json()
    now = time.time()
    return {m["name"]: (m["context_length"], datetime.fromisoformat(m["expires_at"]).timestamp() - now)
            for m in body["models"]}


def router_request(server: FakeOllama, model: str, ctx: int) -> None:
    """The user's router: a request with its own options and no keep_alive."""
    httpx.post(f"{server.url}/api/generate", json={"model": model, "prompt": "hi", "stream": False,
                                                   "options": {"num_ctx": ctx, "num_predict": 2}},
               timeout=10).raise_for_status()


def kill_mid_solo_bench(server: FakeOllama, cfg: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "--solo",
                             "llama3.2:3b"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(tmp_path))
    try:
        wait_for(lambda: any(c.body.get("prompt") for c in server.calls("/api/generate")),
                 "the bench never started streaming")
        assert set(ps(server)) == {"llama3.2:3b"}  # solo: both lanes are out
        proc.send_signal(signal.SIGKILL)  # no handler runs
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    server.state.runaway = None  # the fake stops its endless stream for the client that died


def test_kill_9_mid_solo_bench_then_any_command_puts_both_lanes_back(lanes_fake, tmp_path):
    cfg = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg, tmp_path)
    assert list((tmp_path / "data" / "residency").glob("*.json"))  # journaled before it touched them
    status = sparkctl(cfg, tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert "put back what a bench of llama3.2:3b" in status.stderr and "Traceback" not in status.stderr
    assert json.loads(status.stdout)["warnings"] == []
    after = ps(lanes_fake)
    assert set(after) == {"qwen3:8b", "qwen3:4b"}  # and nothing the bench loaded
    assert after["qwen3:8b"][0] == 32768 and after["qwen3:8b"][1] > FOREVER_AFTER_S
    router_request(lanes_fake, "qwen3:4b", 8192)
    ctx, left = ps(lanes_fake)["qwen3:4b"]
    assert ctx == 8192 and abs(left - HALF_HOUR) < 60  # its 30-minute session, as before
    assert not list((tmp_path / "data" / "residency").glob("*.json"))
    again = sparkctl(cfg, tmp_path, "lanes")
    assert again.returncode == 0 and "put back" not in again.stderr  # done once


def test_a_failed_recovery_is_loud_in_status_until_lanes_restore(lanes_fake, tmp_path):
    cfg = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg, tmp_path)
    lanes_fake.state.models["qwen3:8b"].load_error = (500, "model requires more system memory (20 GiB) than "
                                                           "is available (4 GiB)")
    status = sparkctl(cfg, tmp_path, "status", "--json")
    warnings = json.loads(status.stdout)["warnings"]
    assert any("not put back" in w and "qwen3:8b" in w for w in warnings), warnings
    text = sparkctl(cfg, tmp_path, "status")
    assert "WARNING: models not put back after a bench of llama3.2:3b" in text.stdout
    lanes_fake.state.models["qwen3:8b"].load_error = None
    fixed = sparkctl(cfg, tmp_path, "lanes", "--restore")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "put back what a bench of llama3.2:3b" in fixed.stdout
    assert ps(lanes_fake)["qwen3:8b"][0] == 32768
    assert json.loads(sparkctl(cfg, tmp_path, "status", "--json").stdout)["warnings"] == []


def test_lanes_restore_with_nothing_to_do(lanes_fake, tmp_path):
    cfg = write_config(tmp_path, lanes_fake)
    out = sparkctl(cfg, tmp_path, "lanes", "--restore")
    assert out.returncode == 0 and "nothing to put back" in out.stdout
