"""Fleet hosts that answer with something no status is: 5 MB of it, JSON nested thousands
deep, numbers past any range. The host is a FAKE `ssh` on PATH (a script that prints what
the host would have said and exits, as ssh does when the remote command ends); the fleet
runs as a user runs it (`sparkctl fleet`, a child process). Each is one line saying what was
wrong, at once: never "no answer within N s" from a host that did answer, never a
traceback or asyncio's "Event loop is closed"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkctl.core.host_status import STATUS_SCHEMA

STATUS = {"schema": STATUS_SCHEMA, "at": "2026-12-01T00:00:00+00:00", "host": {"hostname": "spark-01"},
          "engine": {"kind": "ollama", "version": "0.12.6", "reachable": True}, "resident": [], "lanes": [],
          "budget": {"pool": "unified", "total": 128 * 2**30, "available": 60 * 2**30, "reserve": 8 * 2**30,
                     "level": "ok"}, "memory": {"total": 128 * 2**30}, "gpus": [], "warnings": []}


def fake_ssh(bin_dir: Path, answer: Path) -> None:
    """`ssh` that prints the file `answer` (what the host's sparkctl said) and exits 0."""
    bin_dir.mkdir(exist_ok=True)
    ssh = bin_dir / "ssh"
    ssh.write_text(f"#!/bin/sh\nexec cat {answer}\n")
    ssh.chmod(0o755)


def fleet(tmp_path: Path, answer: bytes, *args: str, timeout_s: float = 20) -> tuple[int, dict, str, float]:
    (tmp_path / "answer.json").write_bytes(answer)
    fake_ssh(tmp_path / "bin", tmp_path / "answer.json")
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[fleet]\ntimeout_s = {timeout_s}\n[hosts.spark-01]\nssh = "spark-01"\n')
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", "--json", "--no-runs",
                        *args], capture_output=True, text=True, env=env, timeout=120)
    took = time.monotonic() - started
    assert "Traceback" not in p.stderr and "Event loop is closed" not in p.stderr, p.stderr[-2000:]
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p.stderr, took


def host(data: dict) -> dict:
    (h,) = data["hosts"]
    return h


def test_a_sane_status_through_the_fake_ssh_is_read(tmp_path):
    code, data, err, _ = fleet(tmp_path, json.dumps(STATUS).encode())
    assert host(data)["state"] == "live", (data, err)


def test_a_status_of_5_mb_is_refused_at_once_not_timed_out(tmp_path):
    big = dict(STATUS, padding="x" * (5 * 1024 * 1024))
    code, data, err, took = fleet(tmp_path, json.dumps(big).encode(), timeout_s=8)
    h = host(data)
    assert h["failure"] == "bad-answer", h
    assert h["reason"] == "it answered more than 4 MiB: not a status"
    assert took < 8  # it answered: no waiting for the timeout


@pytest.mark.parametrize("answer, why", [
    (b"[" * 100_000, "its status cannot be read: nested too deeply"),
    (json.dumps(dict(STATUS, budget={"total": 10 ** 400})).encode(),
     "its status cannot be read: a number of 401 digits (over 64 bits)"),
], ids=["deep", "huge-int"])
def test_a_status_that_cannot_be_read_safely_is_one_line(tmp_path, answer, why):
    code, data, err, _ = fleet(tmp_path, answer)
    h = host(data)
    assert h["failure"] == "bad-answer" and h["reason"] == why, h


@pytest.mark.parametrize("flag", ["nan", "inf"])
def test_a_timeout_that_would_wait_forever_is_refused(tmp_path, flag):
    (tmp_path / "answer.json").write_bytes(b"{}")
    config = tmp_path / "sparkctl.toml"
    config.write_text('[hosts.spark-01]\nssh = "spark-01"\n')
    p = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", "--timeout", flag],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr == (f"sparkctl: --timeout must be a number of seconds > 0 and at most 3600, "
                                              f"got {flag}\n")


def test_a_host_that_never_stops_talking_is_said_so_at_the_timeout(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text("#!/bin/sh\nexec yes '{\"padding\": \"xxxxxxxxxxxxxxxx\"}'\n")
    (bin_dir / "ssh").chmod(0o755)
    config = tmp_path / "sparkctl.toml"
    config.write_text('[fleet]\ntimeout_s = 3\n[hosts.spark-01]\nssh = "spark-01"\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    p = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", "--json", "--no-runs"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert "Traceback" not in p.stderr and "Event loop is closed" not in p.stderr, p.stderr[-2000:]
    h = host(json.loads(p.stdout))
    assert h["failure"] == "bad-answer" and h["reason"] == "it sent more than 4 MiB without finishing: not a status"
