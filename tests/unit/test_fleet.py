"""The fleet's pieces without ssh: reading a host's status by its schema version, the
read-only dashboard's report rebuilt from it, what an ssh answer means, the ssh command
line, [hosts.NAME] and the ssh config's host names. (Over real ssh: tests/integration/
test_fleet.py and tests/tui/test_fleet_screen.py.) Host facts are FAKE probes
(testkit/fakes/host.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from sparkctl.config import ConfigError, HostConfig, parse_config
from sparkctl.core.host_status import STATUS_SCHEMA, StatusFormatError, fleet_warnings, parse_status
from sparkctl.core.snapshots import GIB, EngineStatus, ModelDetails, ResidentModel
from sparkctl.services.fleet.hosts import fleet_hosts, ssh_config_names
from sparkctl.services.fleet.report import report_from_status
from sparkctl.services.fleet.ssh import (
    BAD_ANSWER,
    MISSING,
    REMOTE_ERROR,
    SSH_ERROR,
    TOO_OLD,
    classify,
    remote_command,
    ssh_argv,
)
from sparkctl.services.status import build_report, report_to_dict
from testkit.fakes.host import h200_snapshot, spark_snapshot

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
CFG = parse_config('[lanes]\nproduction = "gpt-oss:120b"\nfast = "qwen3:30b-a3b"\nmini = "llama3.2:3b"\n',
                   "x.toml", env={})


def status_json(snapshot=None, engine=None) -> dict:
    engine = engine or EngineStatus("ollama", "http://127.0.0.1:11434", True, "0.13.0", resident=(
        ResidentModel("gpt-oss:120b", 68 * GIB, 68 * GIB, expires_at=NOW + timedelta(days=3650),
                      context_length=131072, details=ModelDetails(quantization_level="MXFP4")),
        ResidentModel("qwen3:30b-a3b", 24 * GIB, 20 * GIB, expires_at=NOW + timedelta(minutes=4),
                      context_length=262144)))
    report = build_report(CFG, engine, snapshot or spark_snapshot(), NOW)
    # through JSON text, as it crosses ssh
    return json.loads(json.dumps(report_to_dict(report)))


def test_a_status_is_read_by_its_schema_and_an_older_or_newer_one_is_named():
    d = status_json()
    assert d["schema"] == STATUS_SCHEMA
    s = parse_status(d)
    assert s.schema == STATUS_SCHEMA and s.engine_state == "up" and s.engine_version == "0.13.0"
    assert [(r.name, r.lane) for r in s.resident] == [("gpt-oss:120b", "production"), ("qwen3:30b-a3b", "fast")]
    assert s.hardware.gpu == "NVIDIA GB10" and s.hardware.memory_gib == 121  # the fake's MemTotal

    old = {k: v for k, v in d.items() if k != "schema"}  # what sparkctl wrote before the version
    s_old = parse_status(old)
    assert s_old.schema == 1 and s_old.resident == s.resident
    from sparkctl.core.host_status import schema_note

    assert "older sparkctl (status schema 1" in schema_note(1)
    assert schema_note(STATUS_SCHEMA) is None
    newer = parse_status({**d, "schema": STATUS_SCHEMA + 1, "something_new": [1]})
    assert newer.engine_version == "0.13.0" and "newer sparkctl" in schema_note(newer.schema)
    for bad in ({**d, "schema": "2"}, {**d, "schema": 0}, ["not", "a", "status"], {"at": "x"}):
        with pytest.raises(StatusFormatError):
            parse_status(bad)


def test_warnings_name_missing_and_spilled_lanes_and_an_engine_changed_since_the_last_bench():
    from sparkctl.core.host_status import LaneBench

    s = parse_status(status_json())
    warnings = fleet_warnings(s, None, (LaneBench("production", "gpt-oss:120b", "0.12.6", 41.0),
                                        LaneBench("fast", "qwen3:30b-a3b", "0.13.0", 80.0)))
    assert warnings == [
        "lane mini: llama3.2:3b not resident",
        "lane fast: qwen3:30b-a3b spilled (17%/83% CPU/GPU)",  # 4 of 24 GiB on the CPU
        "lane production: engine 0.13.0 since its last bench (0.12.6): re-bench",
    ]
    # [hosts.NAME.lanes] overrides what the host's own config says it serves
    assert fleet_warnings(s, {"production": "qwen3:30b-a3b", "big": "gpt-oss:20b"}) == [
        "lane big: gpt-oss:20b not resident", "lane production: qwen3:30b-a3b spilled (17%/83% CPU/GPU)"]
    down = parse_status(status_json(engine=EngineStatus("ollama", "http://127.0.0.1:11434", False,
                                                        error="connection refused")))
    assert fleet_warnings(down) == ["engine down: connection refused"]  # lanes unknown, not "missing"
    # what the host warned about itself comes first; its lane warnings are recomputed here
    restore = "qwen3:8b not put back after a dead bench (pid 4242): run `sparkctl lanes --restore`"
    own = parse_status({**status_json(), "warnings": [restore, "lane fast: qwen3:30b-a3b spilled to the CPU"]})
    assert fleet_warnings(own, None) == [restore, "lane mini: llama3.2:3b not resident",
                                         "lane fast: qwen3:30b-a3b spilled (17%/83% CPU/GPU)"]


@pytest.mark.parametrize("snapshot", [spark_snapshot, h200_snapshot], ids=["gb10", "h200"])
def test_the_read_only_dashboard_shows_what_the_host_itself_reported(snapshot):
    d = status_json(snapshot())
    rebuilt = report_from_status(d, NOW)
    # every figure the host sent comes back out unchanged: nothing recomputed here
    assert json.loads(json.dumps(report_to_dict(rebuilt))) == d


def test_what_an_ssh_answer_means():
    host = HostConfig("spark-02", ssh="alice@spark-02")
    d = json.dumps(status_json()).encode()
    assert classify(0, d, b"", host, CFG).status.engine_state == "up"
    down = json.dumps(status_json(engine=EngineStatus("ollama", "h", False, error="refused"))).encode()
    a = classify(3, down, b"", host, CFG)  # sparkctl's exit 3: it answered, its engine did not
    assert a.failure is None and a.status.engine_state == "down"
    a = classify(255, b"", b"Warning: Permanently added '[h]:22' (ED25519) to the list of known hosts.\r\n"
                           b"ssh: connect to host spark-02 port 22: No route to host\r\n", host, CFG)
    assert (a.failure, a.reason) == (SSH_ERROR, "ssh: connect to host spark-02 port 22: No route to host")
    a = classify(127, b"", b"bash: line 1: sparkctl: command not found\n", host, CFG)
    assert a.failure == MISSING and "set [hosts.spark-02] sparkctl" in a.reason
    a = classify(2, b"", b"usage: sparkctl [-h]\nsparkctl: error: unrecognized arguments: --json\n", host, CFG)
    assert a.failure == TOO_OLD and "too old" in a.reason
    # one with `status --json` but not --no-repair would put back a dead bench's models: not asked
    a = classify(2, b"", b"usage: sparkctl [-h]\nsparkctl: error: unrecognized arguments: --no-repair\n", host, CFG)
    assert a.failure == TOO_OLD and "too old to be read without repairing" in a.reason
    a = classify(2, b"", b"sparkctl: /home/a/sparkctl.toml:3: [engine] host: expected a URL\n", host, CFG)
    assert a.failure == REMOTE_ERROR and a.reason.endswith("[engine] host: expected a URL")
    assert classify(0, b"{not json", b"", host, CFG).failure == BAD_ANSWER
    a = classify(255, b"", b"ssh: Could not resolve hostname http: https://bob:hunter2@x/\n", host, CFG)
    assert "hunter2" not in a.reason  # whatever ssh echoes, a credential is never shown


def test_the_ssh_command_never_prompts_and_never_reads_a_destination_as_an_option():
    cfg = parse_config('[fleet]\nssh_config = "/etc/team/ssh_config"\ntimeout_s = 7.5\n'
                       '[hosts.spark-01]\nengine = "http://127.0.0.1:11434/x?a=1&b=2"\nsparkctl = "~/.venvs/o\'brien/bin/sparkctl"\n',
                       "x.toml", env={})
    host = cfg.hosts["spark-01"]
    argv = ssh_argv(host, cfg)
    assert argv[:2] == ["ssh", "-o"] and "BatchMode=yes" in argv and "ConnectTimeout=8" in argv
    assert argv[argv.index("-F") + 1] == "/etc/team/ssh_config"
    assert argv[-3:-1] == ["--", "spark-01"]  # the name is the destination when ssh is not given
    # the remote shell sees one quoted word per value; ~/ is left for it to expand
    assert argv[-1] == ("OLLAMA_HOST='http://127.0.0.1:11434/x?a=1&b=2' "
                        "~/'.venvs/o'\"'\"'brien/bin/sparkctl' status --json --no-repair")
    # the fleet only reads: the host repairs nothing while it is looked at
    assert remote_command(HostConfig("b"), parse_config("", "x", env={})) == "sparkctl status --json --no-repair"


HOSTS_OK = """
[fleet]
ssh_hosts = "spark-*"
[hosts.lab-01]
ssh = "alice@10.0.0.7"
[hosts.lab-01.lanes]
production = "gpt-oss:120b"
"""


@pytest.mark.parametrize("text, message", [
    ('[hosts.a]\nssh = "-oProxyCommand=touch /tmp/x"\n', r"bad.toml:2: \[hosts.a\] ssh: expected an ssh destination"),
    ('[hosts.a]\nport = 22\n', r"bad.toml:2: \[hosts.a\] port: unknown key; expected one of engine, lanes, sparkctl, ssh"),
    ('[hosts.a]\nlanes = "x"\n', r"\[hosts.a\] lanes: expected a table of lane = model"),
    ('[hosts.a.lanes]\nproduction = ""\n', r"\[hosts.a.lanes\] production: expected a model name"),
    ('[hosts."a b"]\nssh = "x"\n', r"\[hosts.a b\]: expected a host name"),
    ('[fleet]\ntimeout_s = 0\n', r"\[fleet\] timeout_s: expected a number > 0"),
])
def test_bad_hosts_and_fleet_entries_are_one_line_naming_the_key(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(text, "bad.toml", env={})


def test_hosts_come_from_the_config_then_the_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "sparks.conf").write_text("Host spark-03\n  HostName 10.0.0.13\n")
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text('Host spark-01 spark-02 *.lab !spark-09\n  User alice\nHost=github.com\n'
                          '# Host spark-commented\nInclude sparks.conf\nHost "spark-04"\n')
    assert ssh_config_names(ssh_config) == ["spark-01", "spark-02", "github.com", "spark-03", "spark-04"]
    cfg = parse_config(HOSTS_OK.replace("[fleet]\n", f'[fleet]\nssh_config = "{ssh_config}"\n'), "x.toml", env={})
    hosts = fleet_hosts(cfg)
    assert [h.name for h in hosts] == ["lab-01", "spark-01", "spark-02", "spark-03", "spark-04"]
    assert hosts[0].destination == "alice@10.0.0.7" and hosts[0].lanes == {"production": "gpt-oss:120b"}
    assert hosts[1].destination == "spark-01"  # ssh resolves the alias with the same config
    assert [h.destination for h in fleet_hosts(cfg, ["spark-02", "bob@other"])] == ["spark-02", "bob@other"]


def test_figures_past_a_float_or_an_index_are_left_out_not_a_crash():
    # a status decoded by anything but sparkctl's bounded reader may hold any integer
    status = parse_status({"schema": STATUS_SCHEMA, "engine": {"kind": "ollama", "reachable": True},
                           "gpus": [{"name": "GB10", "power_w": 10 ** 400, "utilization_pct": 7}],
                           "budget": {"total": 10 ** 400, "available": 2 ** 63, "reserve": 8}})
    (gpu,) = status.gpus
    assert gpu.power_w is None and gpu.utilization_pct == 7.0
    assert status.total is None and status.available is None and status.reserve == 8
