"""Files sparkctl reads that someone else may have damaged or edited: its config, its own
state file, the residency journals and the run spool. Each hostile shape (nested thousands
deep, numbers of hundreds of digits, nan, a list where an object belongs) ends in one line
naming the file and what was wrong, or, for a journal entry or spool line, in that entry
skipped with a warning as a truncated one is; never a traceback. The commands run as a user
runs them (a child process); the engine is a closed port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool

DEEP = "[" * 50_000


def sparkctl(tmp_path, *argv, config_text='[engine]\nhost = "http://127.0.0.1:9"\n[lanes]\nproduction = "qwen3:8b"\n'):
    config = tmp_path / "sparkctl.toml"
    config.write_text(config_text)
    done = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), *argv],
                          capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


# ---------------------------------------------------------------------------- the config


@pytest.mark.parametrize("section, line, expected", [
    ("budget", "reserve_gib = nan", "[budget] reserve_gib: expected a finite number >= 0, got nan"),
    ("ui", "refresh_s = nan", "[ui] refresh_s: expected a finite number >= 0.1, got nan"),
    ("engine", "timeout_s = nan", "[engine] timeout_s: expected a finite number > 0, got nan"),
    ("fleet", "timeout_s = nan", "[fleet] timeout_s: expected a finite number > 0, got nan"),
    ("bench", "timeout_s = inf", "[bench] timeout_s: expected a finite number > 0, got inf"),
    ("eval", "timeout_s = -inf", "[eval] timeout_s: expected a finite number > 0, got -inf"),
    ("models", "num_ctx = 99999999999999999999999",
     "[models] num_ctx: expected an integer >= 0 that fits in 64 bits, got a 23-digit number"),
    ("bench", "seed = -99999999999999999999999",
     "[bench] seed: expected an integer that fits in 64 bits, got a 23-digit number"),
])
def test_a_config_number_that_is_not_finite_or_too_large_is_one_line(tmp_path, section, line, expected):
    done = sparkctl(tmp_path, "status", config_text=f"[{section}]\n{line}\n")
    assert done.returncode == 2
    assert done.stderr == f"sparkctl: {tmp_path / 'sparkctl.toml'}:2: {expected}\n"


@pytest.mark.parametrize("text, why", [
    ("a = " + DEEP, "nested too deeply"),
    ("[ui]\nhistory_s = " + "9" * 5000 + "\n", "an integer of thousands of digits"),
    ("# padding\n" * 200_000, "over 1048576 bytes"),
], ids=["deep", "long-integer", "huge"])
def test_a_config_that_cannot_be_parsed_safely_is_one_line(tmp_path, text, why):
    done = sparkctl(tmp_path, "status", config_text=text)
    assert done.returncode == 2
    assert done.stderr == f"sparkctl: {tmp_path / 'sparkctl.toml'}: cannot be read as a config: {why}\n"


def test_sparkctl_s_own_state_file_nested_deep_is_one_line(tmp_path):
    from sparkctl import paths

    state = paths.state_file()
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("lanes = " + DEEP)
    done = sparkctl(tmp_path, "status")
    assert done.returncode == 2
    assert done.stderr.startswith(f"sparkctl: {state}: invalid TOML: nested too deeply") and \
        done.stderr.count("\n") == 1


# ---------------------------------------------------------------------------- journals and the spool


@pytest.fixture
def hostile_journals():
    """Residency journals of the wrong shape beside one deep enough to break a parser."""
    from sparkctl import paths

    d = paths.residency_dir()
    d.mkdir(parents=True, exist_ok=True)
    (d / "a.json").write_text(json.dumps({"id": "a", "engine_key": "k", "before": ["x"], "models": ["m"],
                                          "owner": {"pid": 1}}))
    (d / "b.json").write_text(json.dumps({"id": "b", "engine_key": "k", "owner": [1, 2]}))
    (d / "c.json").write_text(DEEP)
    (d / "d.json").write_text(json.dumps({"id": "d", "engine_key": "k", "before": [
        {"name": "qwen3:8b", "context_length": 2 ** 40}]}))
    return d


@pytest.fixture
def hostile_spool():
    from sparkctl import paths

    now = int(time.time() * 1000)
    good = RunRecord(experiment="sparkctl-bench", run_name="fine", status="FINISHED", start_ms=now,
                     end_ms=now + 1, params={"model": "qwen3:8b"})
    spool = Spool(paths.spool_file())
    spool.append(good)
    with open(spool.path, "a") as f:
        f.write(json.dumps({"kind": "record", "record": [1, 2]}) + "\n")
        f.write(json.dumps({"kind": "record", "record": {**good.to_dict(), "record_id": "x2", "params": ["a"]}}) + "\n")
        f.write(json.dumps({"kind": "record", "record": {**good.to_dict(), "record_id": "x3",
                                                         "summary_metrics": {"decode_tps_median": 10 ** 400}}}) + "\n")
        f.write(json.dumps({"kind": "partial", "record": {"record_id": "x4", "step_metrics": "no"},
                            "owner": {"pid": 999999999}}) + "\n")
        f.write(DEEP + "\n")
    return spool, good


def test_lanes_restore_skips_journals_of_the_wrong_shape_with_a_warning(tmp_path, hostile_journals):
    done = sparkctl(tmp_path, "lanes", "--restore")
    assert done.returncode == 3  # the engine is a closed port; the journals were read and skipped
    d = hostile_journals
    for name, why in (("a", "a resident model is str, not an object"), ("b", "'owner' is list, not an object"),
                      ("c", "nested too deeply"), ("d", "qwen3:8b: context_length is not a context length")):
        assert f"residency journal {d / (name + '.json')} unreadable, skipped ({why})" in done.stderr


def test_status_and_bench_read_past_hostile_journals_and_spool_lines(tmp_path, hostile_journals, hostile_spool):
    done = sparkctl(tmp_path, "status")
    assert done.returncode == 3 and "UNREACHABLE" in done.stdout  # the closed engine port, nothing else
    done = sparkctl(tmp_path, "bench", "qwen3:8b")
    assert done.returncode == 3 and "engine unreachable" in done.stderr
    assert "unreadable, skipped" in done.stderr


def test_sync_skips_spool_lines_of_the_wrong_shape_and_writes_the_rest(tmp_path, hostile_spool):
    spool, good = hostile_spool
    done = sparkctl(tmp_path, "sync")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("1 of 1 spooled run(s) written to MLflow")
    for why in ("a run record is an object, not list", "params is list, not an object"):
        assert f"bad record skipped ({why})" in done.stderr
    assert f"spool {spool.path} line 4: unreadable line skipped (a number of 401 digits (over 64 bits))" \
        in done.stderr
    assert f"spool {spool.path}: journal of run x4 unreadable, not recovered (step_metrics is str, not an " \
           "object)" in done.stderr
    assert f"spool {spool.path} line 6: unreadable line skipped (nested too deeply)" in done.stderr
    assert spool.pending() == []
