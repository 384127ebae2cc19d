"""The fleet facing hostile names and hosts, through real `sparkctl fleet` processes and a
FAKE `ssh` client on PATH (testkit/fakes/ssh_client.py: it logs its argv and stdin and runs
the remote command with `sh -c`, as a login shell would). The "remote sparkctl" is a script
that prints a status: a real one made by this sparkctl's own report code, or a hostile one.
Over a real sshd: tests/integration/test_fleet.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from sparkctl.config import parse_config
from sparkctl.core.snapshots import GIB, EngineStatus, ResidentModel
from sparkctl.services.status import build_report, report_to_dict
from testkit.fakes.host import spark_snapshot
from testkit.fakes.ssh_client import env_with_fake_ssh, install_fake_ssh, read_log
from tests.integration.sshd import lab  # noqa: F401

NOW = datetime.now(timezone.utc)


def status_text(resident=("qwen3:8b",), error: str | None = None, version: str = "0.13.0") -> str:
    """What `sparkctl status --json` prints on a host (this sparkctl's own report code)."""
    engine = EngineStatus("ollama", "http://127.0.0.1:11434", error is None, version if error is None else None,
                          resident=tuple(ResidentModel(n, 5 * GIB, 5 * GIB, context_length=8192) for n in resident),
                          error=error)
    cfg = parse_config('[lanes]\nproduction = "qwen3:8b"\n', "x.toml", env={})
    return json.dumps(report_to_dict(build_report(cfg, engine, spark_snapshot(), NOW)))


def remote_sparkctl(tmp_path: Path, status: str, exit_code: int = 0) -> Path:
    """A host's `sparkctl`: prints `status` and exits with `exit_code`."""
    body = tmp_path / "status.json"
    body.write_text(status)
    script = tmp_path / "remote-sparkctl"
    script.write_text(f"#!/bin/sh\ncat {body}\nexit {exit_code}\n")
    script.chmod(0o755)
    return script


def run_fleet(tmp_path: Path, config_text: str, *hosts: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    config = tmp_path / "fleet.toml"
    config.write_text(config_text)
    log = tmp_path / "ssh.log"
    log.unlink(missing_ok=True)
    bin_dir = tmp_path / "bin"
    install_fake_ssh(bin_dir)
    done = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", "--no-runs", *hosts],
                          capture_output=True, timeout=120, env=env_with_fake_ssh(bin_dir, log))
    return done, read_log(log)


def data_dir() -> Path:
    return Path(os.environ["SPARKCTL_DATA_DIR"])


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.json")} if root.exists() else set()


def test_a_host_name_with_a_path_in_it_never_writes_outside_the_fleet_cache(tmp_path):
    script = remote_sparkctl(tmp_path, status_text())
    top = data_dir().parent  # the victim's folder: two levels up from <data dir>/fleet
    before = files_under(top)
    # from the command line
    done, calls = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{script}"\n', "--json", "../../victim")
    assert done.returncode == 0, done.stderr
    assert calls and calls[0]["argv"][-2] == "../../victim"  # asked, as an ssh destination
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["state"] == "live"
    assert not (top / "victim.json").exists()
    written = files_under(top) - before
    assert len(written) == 1 and next(iter(written)).parent == data_dir() / "fleet", written

    # from an ssh config's Host line, through [fleet] ssh_hosts
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host ../../../../x spark-01\n  User alice\n")
    done, _ = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{script}"\nssh_config = "{ssh_config}"\nssh_hosts = "*"\n',
                        "--json")
    assert done.returncode == 0, done.stderr
    assert [h["name"] for h in json.loads(done.stdout)["hosts"]] == ["../../../../x", "spark-01"]
    assert not list(tmp_path.parents[1].glob("x.json")) and not (top / "x.json").exists()
    assert {p.parent for p in files_under(top) - before} == {data_dir() / "fleet"}
    assert (data_dir() / "fleet" / "spark-01.json").exists()  # a plain name keeps its readable file

    # the hashed cache is read back: the host gone, its last known state is still shown
    gone = remote_sparkctl(tmp_path, "", exit_code=255)
    done, _ = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{gone}"\n', "--json", "../../victim")
    (host,) = json.loads(done.stdout)["hosts"]
    assert done.returncode == 3 and host["state"] == "unreachable" and host["status"] is not None


SECRET_URL = "http://alice:s3cr3t-pass@127.0.0.1:11434/?api_key=KEY-42-SECRET"


def env_recording_sparkctl(tmp_path: Path) -> tuple[Path, Path]:
    """A host's `sparkctl` that notes the OLLAMA_HOST it was started with, then answers."""
    seen = tmp_path / "seen-ollama-host"
    body = tmp_path / "status.json"
    body.write_text(status_text())
    script = tmp_path / "remote-sparkctl-env"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$OLLAMA_HOST" > {seen}\ncat {body}\n')
    script.chmod(0o755)
    return script, seen


def test_an_engine_url_with_a_credential_never_stands_in_ssh_argv_and_still_reaches_the_host(tmp_path):
    script, seen = env_recording_sparkctl(tmp_path)
    done, calls = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{script}"\n[hosts.spark-01]\nengine = "{SECRET_URL}"\n',
                            "--json")
    assert done.returncode == 0, done.stderr
    (call,) = calls
    argv = " ".join(call["argv"])
    assert "s3cr3t-pass" not in argv and "KEY-42-SECRET" not in argv  # `ps` shows argv to every user
    assert seen.read_text() == SECRET_URL  # the host's sparkctl got it all the same (ssh's stdin)
    assert "s3cr3t-pass" not in done.stdout.decode() and "KEY-42-SECRET" not in done.stdout.decode()

    # a URL without a credential still goes on the command line, as before
    plain = "http://127.0.0.1:11434"
    done, calls = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{script}"\n[hosts.spark-01]\nengine = "{plain}"\n')
    assert done.returncode == 0 and f"OLLAMA_HOST={plain}" in calls[0]["argv"][-1] and calls[0]["stdin"] == ""
    assert seen.read_text() == plain


def test_sparkctl_config_redacts_a_credential_in_a_hosts_engine_url(tmp_path):
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[hosts.spark-01]\nengine = "{SECRET_URL}"\n[lanes]\non_change = "curl -s '
                      'https://hooks.example/x?token=HOOK-TOKEN-9"\n')
    done = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "config"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "s3cr3t-pass" not in done.stdout and "KEY-42-SECRET" not in done.stdout and "alice" not in done.stdout
    assert "HOOK-TOKEN-9" not in done.stdout
    assert 'engine = "http://***@127.0.0.1:11434/?api_key=***"' in done.stdout  # still says where it points


def test_over_real_ssh_the_remote_shell_reads_the_secret_url_from_stdin(lab, tmp_path):  # noqa: F811
    lab.alias("spark-a", lab.server("a"))
    script, seen = env_recording_sparkctl(tmp_path)
    config = tmp_path / "fleet.toml"
    config.write_text(f'[fleet]\nssh_config = "{lab.ssh_config}"\nsparkctl = "{script}"\ntimeout_s = 20\n'
                      f'[hosts.a]\nssh = "spark-a"\nengine = "{SECRET_URL}"\n')
    done = subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), "fleet", "--no-runs", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hosts"][0]["state"] == "live"
    assert seen.read_text() == SECRET_URL


HOSTILE = "\x1b]0;PWNED-TITLE\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m"


def test_a_hostile_hosts_status_reaches_the_terminal_without_escape_sequences(tmp_path):
    status = json.loads(status_text(resident=(f"qwen3:8b{HOSTILE}",)))
    status["host"]["hostname"] = f"spark{HOSTILE}"
    status["warnings"] = [f"all fine{HOSTILE}"]
    script = remote_sparkctl(tmp_path, json.dumps(status))
    config = f'[fleet]\nsparkctl = "{script}"\n[hosts.spark-01]\n'
    for argv in ((), ("--json",)):
        done, _ = run_fleet(tmp_path, config, *argv)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out
        for payload in (b"\x1b", b"\x07", "\x9b".encode(), b"PWNED-TITLE", b"cHduZWQ=", b"\\u001b", b"\\u009b"):
            assert payload not in out, (argv, payload, out[-800:])
        assert b"qwen3:8b" in out  # shown, as plain text

    # an engine error and ssh's own stderr from that host, too
    down = json.loads(status_text(error=f"connection refused{HOSTILE}"))
    script = remote_sparkctl(tmp_path, json.dumps(down), exit_code=3)
    done, _ = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{script}"\n[hosts.spark-01]\n')
    assert b"connection refused" in done.stdout and b"PWNED" not in done.stdout + done.stderr
    noisy = tmp_path / "noisy-sparkctl"
    noisy.write_text(f"#!/bin/sh\nprintf 'sparkctl: broken{HOSTILE}\\n' >&2\nexit 2\n")
    noisy.chmod(0o755)
    done, _ = run_fleet(tmp_path, f'[fleet]\nsparkctl = "{noisy}"\n[hosts.spark-01]\n', "--json")
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["reason"] == "sparkctl there failed: sparkctl: broken"
