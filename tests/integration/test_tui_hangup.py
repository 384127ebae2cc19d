"""The TUI is what people launch over ssh: a dropped session (SIGHUP) or a `kill` (SIGTERM)
during a solo bench must stop it like "stop and quit" (issue 17, point 1): the lanes back as
they were, the run recorded KILLED, exit code 130 as the CLI's. `sparkctl` (the TUI) runs in
a real pseudo-terminal and gets real signals; the Ollama is a FAKE (testkit/fakes/ollama_server.py:
Ollama's wire format over real HTTP, a runner's session length kept as server/sched.go does)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from sparkctl.tracking.spool import Spool
from testkit.fakes.ollama_server import FakeOllama
from testkit.lanes import FOREVER_AFTER_S, HALF_HOUR, Tui, lanes_fake, ps, write_config  # noqa: F401


def solo_config(tmp_path: Path, server: FakeOllama) -> Path:
    return write_config(tmp_path, server, 'mode = "solo"\n')  # pinned: the Bench form opens with solo on


def check_back_as_before(server: FakeOllama, tmp_path: Path) -> None:
    after = ps(server)
    assert set(after) == {"qwen3:8b", "qwen3:4b"}  # both lanes, nothing the bench loaded
    assert after["qwen3:8b"][0] == 32768 and after["qwen3:8b"][1] > FOREVER_AFTER_S
    assert after["qwen3:4b"][0] == 8192 and abs(after["qwen3:4b"][1] - HALF_HOUR) < 60
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED" and record.tags["guard.lane_restore"].startswith("restored")
    assert not list((tmp_path / "data" / "residency").glob("*.json"))


def test_ssh_hangup_mid_solo_bench_puts_the_lanes_back_and_records_killed(lanes_fake, tmp_path):
    tui = Tui(solo_config(tmp_path, lanes_fake), tmp_path)
    tui.start_solo_bench(lanes_fake)
    assert set(ps(lanes_fake)) == {"llama3.2:3b"}  # solo: both lanes unloaded
    lanes_fake.state.runaway = None  # the next stream the fake starts ends by itself
    tui.hang_up()
    assert tui.exit_code() == 130  # None: killed by the signal's default action
    check_back_as_before(lanes_fake, tmp_path)


def test_sigterm_mid_solo_bench_puts_the_lanes_back_and_records_killed(lanes_fake, tmp_path):
    tui = Tui(solo_config(tmp_path, lanes_fake), tmp_path)
    try:
        tui.start_solo_bench(lanes_fake)
        os.kill(tui.pid, signal.SIGTERM)
        os.kill(tui.pid, signal.SIGTERM)  # an impatient second one changes nothing
        assert tui.exit_code() == 130
    finally:
        tui.close()
    check_back_as_before(lanes_fake, tmp_path)
