"""`sparkctl status` as a user runs it: a subprocess, real probes of this machine (no NVIDIA
driver here), the engine played by the FAKE Ollama server over real HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.ollama_server import FakeOllama, two_models_resident


def run_cli(*args: str, config_text: str | None = None, tmp_path: Path, env_extra=None, timeout=30):
    env = {k: v for k, v in os.environ.items() if k != "OLLAMA_HOST"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["SPARKCTL_DATA_DIR"] = str(tmp_path / "data")
    if config_text is not None:
        cfg = tmp_path / "sparkctl.toml"
        cfg.write_text(config_text)
        env["SPARKCTL_CONFIG"] = str(cfg)
    env.update(env_extra or {})
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sparkctl.cli", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.fixture
def fake():
    server = FakeOllama(two_models_resident()).start()
    yield server
    server.stop()


def cfg_for(url: str) -> str:
    return f'[engine]\nhost = "{url}"\ntimeout_s = 3\n[lanes]\nproduction = "gpt-oss:120b"\n'


def test_status_json_reports_engine_models_budget_and_gpu(fake, tmp_path):
    proc, _ = run_cli("status", "--json", config_text=cfg_for(fake.url), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"at", "engine", "resident", "budget", "memory", "pressure", "gpus", "gpu_unavailable", "host"}
    assert data["engine"] == {"kind": "ollama", "host": fake.url, "reachable": True,
                              "version": fake.state.version, "error": None}
    by_name = {m["name"]: m for m in data["resident"]}
    assert by_name["gpt-oss:120b"]["lane"] == "production"
    assert by_name["gpt-oss:120b"]["until"] == "Forever"
    assert by_name["qwen3:30b-a3b"]["placement"] == "17%/83% CPU/GPU"
    assert by_name["qwen3:30b-a3b"]["size"] == 24 * 1024**3
    # this machine: real /proc/meminfo, and no NVIDIA driver -> a reason, not a crash
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    assert data["memory"]["total"] == mem_total
    assert data["budget"]["pool"] == "host" and data["budget"]["total"] == mem_total
    assert data["gpus"] == [] and data["gpu_unavailable"]


def test_status_text(fake, tmp_path):
    proc, _ = run_cli("status", config_text=cfg_for(fake.url), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"ollama {fake.state.version} at {fake.url}: reachable" in proc.stdout
    assert "gpt-oss:120b" in proc.stdout and "Forever" in proc.stdout
    assert "gpu      n/a (" in proc.stdout


def test_status_unreachable_exits_3_quickly(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc, took = run_cli("status", "--json", config_text=cfg_for(f"http://127.0.0.1:{port}"), tmp_path=tmp_path)
    assert proc.returncode == 3
    data = json.loads(proc.stdout)
    assert data["engine"]["reachable"] is False and "cannot connect" in data["engine"]["error"]
    assert took < 10


def test_status_hung_engine_times_out(tmp_path):
    # a socket that accepts but never answers: the connect succeeds, the read must time out
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        proc, took = run_cli("status", config_text=cfg_for(url) + "", tmp_path=tmp_path)
        assert proc.returncode == 3
        assert "UNREACHABLE" in proc.stdout
        assert took < 15
    finally:
        srv.close()


def test_ollama_host_env_is_honoured(fake, tmp_path):
    proc, _ = run_cli("status", "--json", tmp_path=tmp_path, env_extra={"OLLAMA_HOST": fake.url})
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["engine"]["host"] == fake.url


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[budget]\nreserve_gib = -1\n", "[budget] reserve_gib: expected a number >= 0, got -1"),
        ("[engine\n", "invalid TOML"),
        ("[ui]\nrefesh_s = 1\n", "[ui] refesh_s: unknown key"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, text, needle):
    proc, _ = run_cli("status", config_text=text, tmp_path=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "sparkctl.toml" in lines[0]
    assert "Traceback" not in proc.stderr


def test_unknown_command_and_missing_config_exit_2(tmp_path):
    proc, _ = run_cli("frobnicate", tmp_path=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc, _ = run_cli("--config", str(tmp_path / "nope.toml"), "status", tmp_path=tmp_path)
    assert proc.returncode == 2 and "config file not found" in proc.stderr


def test_version_is_fast_and_prints_version(tmp_path):
    proc, _ = run_cli("--version", tmp_path=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("sparkctl ")


def test_status_text_lists_configured_bench_engines(fake, tmp_path):
    with socket.socket() as s:  # an [engines.NAME] server that is not running
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = cfg_for(fake.url) + f'[engines.llama]\nkind = "openai"\nurl = "http://127.0.0.1:{port}"\nmodel = "smol"\n'
    proc, _ = run_cli("status", config_text=text, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr  # the exit code follows the main engine
    assert f"bench    llama: openai at http://127.0.0.1:{port}: UNREACHABLE" in proc.stdout
