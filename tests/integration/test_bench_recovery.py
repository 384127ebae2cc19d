"""A bench killed without its wrap-up (kill -9, an OOM kill, a Spark power-cycled) leaves the
lanes as it had them; the next sparkctl start puts them back (issue 17, point 2). `sparkctl`
runs as real subprocesses; the Ollama is a FAKE (testkit/fakes/ollama_server.py: Ollama's wire
format over real HTTP, a runner's session length kept as server/sched.go keeps it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from testkit.fakes.ollama_server import FakeOllama
from testkit.lanes import (  # noqa: F401
    FOREVER_AFTER_S, HALF_HOUR, lanes_fake, ps, router_request, sparkctl_env, streaming, wait_for, write_config,
)


def sparkctl(cfg: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), *args],
                          capture_output=True, text=True, env=sparkctl_env(tmp_path), timeout=120)


def kill_mid_solo_bench(server: FakeOllama, cfg: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "--solo",
                             "llama3.2:3b"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=sparkctl_env(tmp_path))
    try:
        wait_for(lambda: streaming(server), "the bench never started streaming")
        assert set(ps(server)) == {"llama3.2:3b"}  # solo: both lanes are out
        proc.send_signal(signal.SIGKILL)  # no handler runs
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    server.state.runaway = None  # the fake stops its endless stream for the client that died


def test_kill_9_mid_solo_bench_then_any_command_puts_both_lanes_back(lanes_fake, tmp_path):
    """Any command that may act; not `status`, a view (tests/integration/test_views_read_only.py)."""
    cfg = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg, tmp_path)
    assert list((tmp_path / "data" / "residency").glob("*.json"))  # journaled before it touched them
    lanes = sparkctl(cfg, tmp_path, "lanes")
    assert lanes.returncode == 0, lanes.stderr
    assert "put back what a bench of llama3.2:3b" in lanes.stderr and "Traceback" not in lanes.stderr
    assert json.loads(sparkctl(cfg, tmp_path, "status", "--json").stdout)["warnings"] == []
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
    tried = sparkctl(cfg, tmp_path, "lanes")  # a command that may act tries the repair (status only reads)
    assert "could not all be put back" in tried.stderr, tried.stderr
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
