"""The fleet over REAL ssh: Debian's sshd on loopback ports (tests/integration/sshd.py),
the system's ssh client, and sparkctl "installs" behind them: wrapper scripts running this
sparkctl with their own config, each pointed at a FAKE Ollama (testkit/fakes/ollama_server.py,
real HTTP). One install is a FAKE older sparkctl (testkit/fakes/old_sparkctl.py: a status
without the schema version), one a FAKE sparkctl from before `status --json`
(testkit/fakes/ancient_sparkctl.py). The host probes are this machine's real ones."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from sparkctl.config import load_config
from sparkctl.services.fleet import FleetPoller, fleet_hosts
from sparkctl.services.fleet.ssh import MISSING, SSH_ERROR, TIMEOUT, TOO_OLD
from testkit.fakes.ollama_server import FakeOllama, default_state, two_models_resident
from tests.integration.sshd import SshLab, lab  # noqa: F401

FAKES = Path(__file__).resolve().parents[2] / "testkit" / "fakes"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fakes():
    servers: list[FakeOllama] = []

    def start(state) -> FakeOllama:
        servers.append(FakeOllama(state).start())
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def install(root: Path, name: str, engine_url: str = "", lanes: dict[str, str] | None = None,
            kind: str = "current") -> Path:
    """A sparkctl "install" on a host: a wrapper script with its own config and data dirs.
    kind: current (this sparkctl), old (status schema 1), ancient (no status --json), hang."""
    d = root / f"host-{name}"
    d.mkdir()
    toml = f'[engine]\nhost = "{engine_url}"\ntimeout_s = 2\n'
    if lanes:
        toml += "[lanes]\n" + "".join(f'{k} = "{v}"\n' for k, v in lanes.items())
    (d / "sparkctl.toml").write_text(toml)
    env = (f"export SPARKCTL_CONFIG={d}/sparkctl.toml SPARKCTL_DATA_DIR={d}/data "
           f"SPARKCTL_STATE_FILE={d}/state.toml XDG_CONFIG_HOME={d}/config MLFLOW_DISABLE_TELEMETRY=true\n"
           "unset OLLAMA_HOST\n")
    body = {
        "current": f'exec {sys.executable} -m sparkctl "$@"\n',
        "old": f'exec {sys.executable} {FAKES / "old_sparkctl.py"} "$@"\n',
        "ancient": f'exec {sys.executable} {FAKES / "ancient_sparkctl.py"} "$@"\n',
        "hang": "exec sleep 60\n",  # a host that accepts the login, then never answers
    }[kind]
    script = d / "sparkctl"
    script.write_text(f"#!/bin/sh\n{env}cd {REPO}\n{body}")
    script.chmod(0o755)
    return script


def fleet_config(path: Path, lab: SshLab, hosts: dict[str, dict[str, str]], timeout_s: float = 20,
                 refresh_s: float = 1) -> Path:
    lines = ["[fleet]", f'ssh_config = "{lab.ssh_config}"', f"timeout_s = {timeout_s}", f"refresh_s = {refresh_s}"]
    for name, keys in hosts.items():
        lines.append(f"[hosts.{name}]")
        lines += [f'{k} = "{v}"' for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_fleet(config: Path, *args: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", *args],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def by_name(out: str) -> dict[str, dict]:
    return {h["name"]: h for h in json.loads(out)["hosts"]}


def test_fleet_reads_every_host_over_ssh_and_says_why_the_others_gave_no_status(lab, fakes, tmp_path):
    sshd_a, sshd_b = lab.server("a"), lab.server("b")
    lab.alias("spark-a", sshd_a)
    lab.alias("spark-b", sshd_b)
    ollama_a = fakes(two_models_resident())  # gpt-oss:120b on the GPU, qwen3:30b-a3b partly on the CPU
    ollama_b = fakes(default_state())  # nothing loaded
    a = install(tmp_path, "a", ollama_a.url, {"production": "gpt-oss:120b", "fast": "qwen3:30b-a3b",
                                             "mini": "llama3.2:3b"})
    b = install(tmp_path, "b", ollama_b.url, {"production": "qwen3:8b"})
    old = install(tmp_path, "old", ollama_b.url, kind="old")
    ancient = install(tmp_path, "ancient", kind="ancient")
    cfg = fleet_config(tmp_path / "fleet.toml", lab, {
        "a": {"ssh": "spark-a", "sparkctl": str(a)},
        "b": {"ssh": "spark-b", "sparkctl": str(b)},
        "old": {"ssh": "spark-a", "sparkctl": str(old)},
        "gone": {"ssh": "spark-a", "sparkctl": "/opt/nowhere/sparkctl"},
        "ancient": {"ssh": "spark-b", "sparkctl": str(ancient)},
    })

    t0 = time.monotonic()
    code, out, err = run_fleet(cfg, "--json", "--no-runs")
    first_s = time.monotonic() - t0
    hosts = by_name(out)
    assert code == 3, err  # not every host answered: scripts can tell
    assert list(hosts) == ["a", "b", "old", "gone", "ancient"]

    ha = hosts["a"]
    assert ha["state"] == "live" and ha["status_is_current"] and ha["age_s"] < 20  # read during this call
    assert ha["status"]["engine"]["reachable"] is True and ha["status_schema"] == 2
    assert {r["name"] for r in ha["status"]["resident"]} == {"gpt-oss:120b", "qwen3:30b-a3b"}
    assert any(w.startswith("lane fast: qwen3:30b-a3b spilled") and "CPU/GPU" in w for w in ha["warnings"])
    assert "lane mini: llama3.2:3b not resident" in ha["warnings"]
    assert not any("production" in w for w in ha["warnings"])
    assert hosts["b"]["state"] == "live" and hosts["b"]["warnings"] == ["lane production: qwen3:8b not resident"]

    ho = hosts["old"]  # answers, with a status of schema 1: read, and said
    assert ho["state"] == "live" and ho["status_schema"] == 1 and ho["older_sparkctl"] is True
    assert "older sparkctl" in ho["note"] and any("older sparkctl" in w for w in ho["warnings"])

    assert hosts["gone"]["state"] == "unreachable" and hosts["gone"]["failure"] == MISSING
    assert "sparkctl not found there" in hosts["gone"]["reason"] and "/opt/nowhere/sparkctl" in hosts["gone"]["reason"]
    assert hosts["ancient"]["failure"] == TOO_OLD and "too old" in hosts["ancient"]["reason"]
    assert hosts["gone"]["status"] is None

    # spark-b goes away (its sshd and sessions killed); spark-a's engine stops
    sshd_b.stop()
    ollama_a.stop()
    time.sleep(1.1)  # so the remembered state has an age
    code, out, err = run_fleet(cfg, "--json", "--no-runs")
    hosts = by_name(out)
    assert code == 3
    ha = hosts["a"]  # the host answers; its engine does not
    assert ha["state"] == "engine-down" and ha["status_is_current"]
    assert ha["reason"] and any(w.startswith("engine down:") for w in ha["warnings"])
    hb = hosts["b"]
    assert hb["state"] == "unreachable" and hb["failure"] == SSH_ERROR
    assert "Connection refused" in hb["reason"] and str(sshd_b.port) in hb["reason"]
    # its last known state, from the first call, with its age
    assert hb["status_is_current"] is False and hb["status"]["engine"]["reachable"] is True
    assert hb["age_s"] >= 1.0 and hb["seen_at"] is not None
    assert hosts["ancient"]["failure"] == SSH_ERROR  # behind spark-b too

    code, text, _err = run_fleet(cfg, "b", "a", "--no-runs")
    assert code == 3
    assert text.splitlines()[0].startswith("b (spark-b): UNREACHABLE: ssh: connect to host 127.0.0.1")
    assert "last known state" in text and "a (spark-a): engine-down" in text
    print(f"first fleet call, 5 hosts over ssh: {first_s:.2f} s")


async def test_one_ssh_session_per_host_and_a_hung_host_never_holds_up_the_others(lab, fakes, tmp_path):
    sshd = lab.server("a")
    lab.alias("spark-a", sshd)
    lab.alias("spark-slow", sshd)
    ollama = fakes(default_state())
    live = install(tmp_path, "a", ollama.url)
    hang = install(tmp_path, "slow", kind="hang")
    path = fleet_config(tmp_path / "fleet.toml", lab, {"a": {"ssh": "spark-a", "sparkctl": str(live)},
                                                       "slow": {"ssh": "spark-slow", "sparkctl": str(hang)}})
    cfg = load_config(str(path), state=None)
    cfg = replace(cfg, fleet=replace(cfg.fleet, timeout_s=5.0))
    answers: list[tuple[str, str]] = []
    poller = FleetPoller(cfg, fleet_hosts(cfg), cache_dir=tmp_path / "cache",
                         on_update=lambda v: answers.append((v.name, v.state)))

    def sessions(alias: str) -> int:
        n = 0
        for p in psutil.Process().children(recursive=True):
            try:
                cmd = p.cmdline()
            except psutil.Error:
                continue
            if cmd and os.path.basename(cmd[0]) == "ssh" and alias in cmd:
                n += 1
        return n

    most = {"spark-a": 0, "spark-slow": 0}
    refreshes = []
    end = time.monotonic() + 11
    while time.monotonic() < end:  # a refresh every 0.25 s, far more often than a host answers
        refreshes.append(asyncio.ensure_future(poller.refresh()))
        for _ in range(5):
            await asyncio.sleep(0.05)
            for alias in most:
                most[alias] = max(most[alias], sessions(alias))
    await asyncio.gather(*refreshes)
    await poller.close()

    assert most == {"spark-a": 1, "spark-slow": 1}  # never two sessions to one host
    slow, a = poller.views["slow"], poller.views["a"]
    assert slow.failure == TIMEOUT and slow.reason == "no answer within 5 s"
    # 11 s of refreshes, 5 s per ask: asked again only once the last ask had ended
    assert 2 <= poller.asks_started["slow"] <= 3
    assert ("a", "live") in answers and poller.asks_started["a"] >= 3  # went on answering meanwhile
    assert answers.index(("a", "live")) < answers.index(("slow", "unreachable"))  # not held up
    assert sessions("spark-slow") == 0  # the timed-out ssh is gone, not left behind


def test_the_fleet_with_no_local_store_yet_shows_its_hosts_without_making_one(lab, fakes, tmp_path):
    """This machine has never recorded a run (no MLflow database in its data dir): the fleet
    lists each lane as never benched there, at once, without creating a store for the
    asking (MLflow's import and schema migrations took ~5 s before anything was printed)."""
    sshd = lab.server("a")
    lab.alias("spark-a", sshd)
    engine = fakes(two_models_resident())
    a = install(tmp_path, "a", engine.url, {"production": "gpt-oss:120b"})
    cfg = fleet_config(tmp_path / "fleet.toml", lab, {"a": {"ssh": "spark-a", "sparkctl": str(a)}})
    data = Path(os.environ["SPARKCTL_DATA_DIR"])  # this machine's (tests/conftest.py)
    code, out, err = run_fleet(cfg, "--json")
    assert code == 0, err
    host = by_name(out)["a"]
    assert host["state"] == "live"
    assert [(b["lane"], b["model"], b["engine_version"]) for b in host["last_bench"]] == [
        ("production", "gpt-oss:120b", None)]
    assert "last benches not shown" not in err
    assert not (data / "mlflow.db").exists()  # nothing made on this machine for a read
    code, text, err = run_fleet(cfg)
    assert code == 0, err
    assert "bench    production (gpt-oss:120b): never benched on this host" in text
    assert not (data / "mlflow.db").exists()
