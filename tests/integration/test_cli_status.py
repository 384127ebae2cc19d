"""`sparkctl status` as a user runs it: a subprocess, real probes of this machine, the engine
played by the FAKE Ollama server over real HTTP.

The machine is whatever runs the suite: a CI box without NVIDIA, a DGX Spark (GB10: unified
memory, NVML's memory calls unsupported), or a discrete GPU (an H200). What the budget
should be is read here from NVML directly (pynvml, not sparkctl's probe) and /proc/meminfo,
and the assertions follow what they find."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.fakes.ollama_server import RUNNER_DIED_ERROR, FakeOllama, two_models_resident


@dataclass(frozen=True)
class Machine:
    """This machine's memory, as NVML and /proc/meminfo report it."""

    mem_total: int  # MemTotal, bytes
    gpus: tuple[tuple[str, int | None], ...]  # (name, NVML memory total or None when unsupported)
    driver: str | None

    @property
    def pool(self) -> str:
        if not self.gpus:
            return "host"
        if any("GB10" in name or not total for name, total in self.gpus):
            return "unified"  # GB10: NVML memory NOT_SUPPORTED or 0; the pool is MemTotal
        if platform.machine().lower() in ("aarch64", "arm64") and any(
                abs(total - self.mem_total) <= 0.05 * self.mem_total for _, total in self.gpus):
            return "unified"  # a GB10 driver reporting MemTotal as the GPU's memory
        return "vram"

    @property
    def budget_total(self) -> int:
        if self.pool == "vram":
            return next(total for _, total in self.gpus if total)
        return self.mem_total


def this_machine() -> Machine:
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: no GPU for sparkctl either
        return Machine(mem_total, (), None)
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            try:
                total = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).total
            except pynvml.NVMLError:
                try:
                    total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
                except pynvml.NVMLError:
                    total = None
            gpus.append((name, total))
        driver = pynvml.nvmlSystemGetDriverVersion()
        return Machine(mem_total, tuple(gpus), driver.decode() if isinstance(driver, bytes) else driver)
    finally:
        pynvml.nvmlShutdown()


MACHINE = this_machine()


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
    # this machine, whatever it is: real /proc/meminfo, and the pool NVML implies
    assert data["memory"]["total"] == MACHINE.mem_total
    assert data["budget"]["pool"] == MACHINE.pool and data["budget"]["total"] == MACHINE.budget_total
    if not MACHINE.gpus:  # no NVIDIA driver: a reason, not a crash
        assert data["gpus"] == [] and data["gpu_unavailable"]
        return
    assert data["gpu_unavailable"] is None
    assert [g["name"] for g in data["gpus"]] == [name for name, _ in MACHINE.gpus]
    assert {g["driver"] for g in data["gpus"]} == {MACHINE.driver}
    for g, (_, total) in zip(data["gpus"], MACHINE.gpus):
        if MACHINE.pool == "unified":
            assert g["unified_memory"] is True and g["memory"] is None
        else:
            assert g["unified_memory"] is False and g["memory"]["total"] == total


def test_status_text(fake, tmp_path):
    proc, _ = run_cli("status", config_text=cfg_for(fake.url), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"ollama {fake.state.version} at {fake.url}: reachable" in proc.stdout
    assert "gpt-oss:120b" in proc.stdout and "Forever" in proc.stdout
    pool = {"unified": "unified memory", "vram": "GPU VRAM", "host": "host RAM (no GPU)"}[MACHINE.pool]
    assert f"budget   {pool}: " in proc.stdout
    if MACHINE.gpus:
        for i, (name, _) in enumerate(MACHINE.gpus):
            assert f"gpu {i}    {name}: util " in proc.stdout
    else:
        assert "gpu      n/a (" in proc.stdout


@pytest.mark.parametrize("path", ["/api/ps", "/api/version"])
def test_status_engine_answering_500_is_an_engine_error_exit_5(fake, tmp_path, path):
    """Ollama up, its runner dead: an HTTP 500 is an engine error (exit 5), not UNREACHABLE (3)."""
    fake.state.fail(path, 500, RUNNER_DIED_ERROR)
    proc, _ = run_cli("status", config_text=cfg_for(fake.url), tmp_path=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert f"engine error: {RUNNER_DIED_ERROR}" in proc.stdout
    assert "UNREACHABLE" not in proc.stdout
    assert "budget   " in proc.stdout and "host     " in proc.stdout  # the rest of the report is still there
    proc, _ = run_cli("status", "--json", config_text=cfg_for(fake.url), tmp_path=tmp_path)
    assert proc.returncode == 5, proc.stderr
    engine = json.loads(proc.stdout)["engine"]
    assert engine["reachable"] is True and engine["error"] == RUNNER_DIED_ERROR


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


def test_status_text_shows_a_bench_engine_answering_500_as_an_engine_error(fake, tmp_path):
    from testkit.fakes.openai_server import FakeOpenAI

    with FakeOpenAI() as llama:
        llama.state.fail("/v1/models", 500, "llama_model_load: failed to load model")
        text = cfg_for(fake.url) + f'[engines.llama]\nkind = "openai"\nurl = "{llama.url}"\nmodel = "smol"\n'
        proc, _ = run_cli("status", config_text=text, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr  # the exit code follows the main engine
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("bench    llama:"))
    assert "reachable, engine error:" in line and "failed to load model" in line and "UNREACHABLE" not in line


def test_config_init_writes_the_documented_default_once(tmp_path, capsys, monkeypatch):
    from sparkctl import cli, paths

    monkeypatch.chdir(tmp_path)  # no ./sparkctl.toml: the look-up ends at the built-in defaults
    target = paths.user_config_file()
    assert not target.exists()
    assert cli.main(["config"]) == 0  # no file: says where one would go, writes nothing
    out = capsys.readouterr().out
    assert "# source: built-in defaults" in out and f"--init` writes the documented default to {target}" in out
    assert not target.exists()
    assert cli.main(["config", "--init"]) == 0
    assert target.read_text() == (Path(cli.__file__).parents[2] / "sparkctl.toml").read_text()
    assert cli.main(["config", "--init"]) == 4
    assert "already exists; not overwritten" in capsys.readouterr().err
    other = tmp_path / "team.toml"
    assert cli.main(["--config", str(other), "config", "--init"]) == 0 and other.is_file()


def test_config_says_where_the_engine_host_came_from(tmp_path, capsys, monkeypatch):
    from sparkctl import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OLLAMA_HOST", "http://10.0.0.5:11434")
    assert cli.main(["config"]) == 0
    assert 'host = "http://10.0.0.5:11434"  # $OLLAMA_HOST' in capsys.readouterr().out


def test_a_lane_whose_model_is_not_resident_is_a_warning_in_text_and_json(fake, tmp_path):
    text = cfg_for(fake.url) + 'fast = "qwen3:4b"\n'  # production is loaded in the fake; fast is not
    proc, _ = run_cli("status", "--json", config_text=text, tmp_path=tmp_path)
    data = json.loads(proc.stdout)
    assert data["lanes"] == [{"lane": "production", "model": "gpt-oss:120b", "resident": True},
                             {"lane": "fast", "model": "qwen3:4b", "resident": False}]
    assert data["warnings"] == ["lane fast: qwen3:4b is not resident"]
    proc, _ = run_cli("status", config_text=text, tmp_path=tmp_path)
    assert "WARNING: lane fast: qwen3:4b is not resident" in proc.stdout
    assert "lane production" not in proc.stdout.split("WARNING")[-1]
