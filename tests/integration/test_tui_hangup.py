"""The TUI is what people launch over ssh: a dropped session (SIGHUP) or a `kill` (SIGTERM)
during a solo bench must stop it like "stop and quit" (issue 17, point 1): the lanes back as
they were, the run recorded KILLED, exit code 130 as the CLI's. `sparkctl` (the TUI) runs in
a real pseudo-terminal and gets real signals; the Ollama is a FAKE (tests/fakes/ollama_server.py:
Ollama's wire format over real HTTP, a runner's session length kept as server/sched.go does)."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import sys
import termios
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from sparkctl.tracking.spool import Spool
from tests.fakes.ollama_server import FakeOllama, default_state, make_model

REPO = Path(__file__).resolve().parents[2]
FOREVER_AFTER_S = 100 * 365 * 86400
HALF_HOUR = 1800


@pytest.fixture
def lanes_fake():
    """production qwen3:8b kept forever at 32768; fast qwen3:4b, 30-minute session at 8192;
    llama3.2:3b streams at 40 tok/s without end."""
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
    # solo pinned in the config: the Bench form opens with the switch on
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n'
                   '[lanes]\nproduction = "qwen3:8b"\nfast = "qwen3:4b"\n[lanes.keep_alive]\nfast = "30m"\n'
                   '[tracking]\nuri = "http://127.0.0.1:9"\n[ui]\nrefresh_s = 2.0\n'
                   '[bench]\nmode = "solo"\nwarmup = 0\nreps = 3\nnum_predict = 100000\ntimeout_s = 60\n')
    return cfg


def ps(server: FakeOllama) -> dict[str, tuple[int, float]]:
    body = httpx.get(f"{server.url}/api/ps", timeout=5).json()
    now = time.time()
    return {m["name"]: (m["context_length"], datetime.fromisoformat(m["expires_at"]).timestamp() - now)
            for m in body["models"]}


def wait_for(predicate, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class Tui:
    """`sparkctl` in a pseudo-terminal of 120x40: keys in, the screen's bytes out."""

    def __init__(self, cfg: Path, tmp_path: Path) -> None:
        env = {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data"), "SPARKCTL_LOCK_DIR": str(tmp_path / "locks"),
               "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        env.pop("TEXTUAL_DRIVER", None)
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: a session leader whose controlling terminal is the pty
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(sys.executable, [sys.executable, "-m", "sparkctl.cli", "--config", str(cfg)], env)
        self.seen = bytearray()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.seen.extend(data)

    def screen_has(self, text: str) -> bool:
        return text.encode() in self.seen

    def keys(self, data: str) -> None:
        os.write(self.master, data.encode())

    def hang_up(self) -> None:
        os.close(self.master)  # the ssh session is gone: SIGHUP, then EIO on the terminal

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                assert os.WIFEXITED(status), f"killed by signal {os.WTERMSIG(status)}"
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                pytest.fail("the TUI did not exit after the signal")
            time.sleep(0.1)


def start_solo_bench(tui: Tui, server: FakeOllama) -> None:
    wait_for(lambda: tui.screen_has("Resident models"), "the dashboard never drew")
    tui.keys("b")
    wait_for(lambda: tui.screen_has("models to bench"), "the Bench screen never drew")
    time.sleep(0.5)
    tui.keys("llama3.2:3b")
    time.sleep(0.3)
    tui.keys("\x12")  # ctrl+r: Run
    wait_for(lambda: tui.screen_has("Unload them and run solo"), "solo did not ask first")
    tui.keys("y")
    wait_for(lambda: any(c.body.get("prompt") for c in server.calls("/api/generate")), "the bench never streamed")
    assert set(ps(server)) == {"llama3.2:3b"}  # solo: both lanes unloaded
    time.sleep(0.5)


def check_back_as_before(server: FakeOllama, tmp_path: Path) -> None:
    after = ps(server)
    assert set(after) == {"qwen3:8b", "qwen3:4b"}  # both lanes, nothing the bench loaded
    assert after["qwen3:8b"][0] == 32768 and after["qwen3:8b"][1] > FOREVER_AFTER_S
    assert after["qwen3:4b"][0] == 8192 and abs(after["qwen3:4b"][1] - HALF_HOUR) < 60
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED" and record.tags["guard.lane_restore"].startswith("restored")
    assert not list((tmp_path / "data" / "residency").glob("*.json"))


def test_ssh_hangup_mid_solo_bench_puts_the_lanes_back_and_records_killed(lanes_fake, tmp_path):
    tui = Tui(write_config(tmp_path, lanes_fake), tmp_path)
    start_solo_bench(tui, lanes_fake)
    lanes_fake.state.runaway = None  # the next stream the fake starts ends by itself
    tui.hang_up()
    assert tui.wait() == 130
    check_back_as_before(lanes_fake, tmp_path)


def test_sigterm_mid_solo_bench_puts_the_lanes_back_and_records_killed(lanes_fake, tmp_path):
    tui = Tui(write_config(tmp_path, lanes_fake), tmp_path)
    try:
        start_solo_bench(tui, lanes_fake)
        os.kill(tui.pid, signal.SIGTERM)
        os.kill(tui.pid, signal.SIGTERM)  # an impatient second one changes nothing
        assert tui.wait() == 130
    finally:
        try:
            os.close(tui.master)
        except OSError:
            pass
    check_back_as_before(lanes_fake, tmp_path)
