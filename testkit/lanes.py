"""What the residency tests share: a Spark-like engine with a production lane kept forever and
a fast lane with a 30-minute session, /api/ps as a user reads it, the user's router, and
sparkctl's TUI in a real pseudo-terminal. The Ollama is a FAKE (testkit/fakes/ollama_server.py:
Ollama's wire format over real HTTP; a runner's session length kept as server/sched.go keeps it)."""

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

from testkit.fakes.ollama_server import FakeOllama, FakeState, default_state, make_model

REPO = Path(__file__).resolve().parents[1]
FOREVER_AFTER_S = 100 * 365 * 86400
HALF_HOUR = 1800
LANES_TOML = '[lanes]\nproduction = "qwen3:8b"\nfast = "qwen3:4b"\n[lanes.keep_alive]\nfast = "30m"\n'


def lanes_state(tokens_per_s: float | None = 40.0, runaway: str | None = "response") -> FakeState:
    """production qwen3:8b kept forever at 32768; fast qwen3:4b with a 30-minute session at
    8192; llama3.2:3b (the contender) streams at `tokens_per_s`, without end by default."""
    state = default_state()
    state.tokens_per_s = tokens_per_s
    state.runaway = runaway
    state.add_model(make_model("qwen3:4b", size_gib=2.5, parameter_size="4.0B", context_length=40960))
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    state.add_resident("qwen3:4b", expires_in_s=HALF_HOUR, context_length=8192)
    return state


@pytest.fixture
def lanes_fake():
    """The fake serving lanes_state() on a free port (import it into a test module to use it)."""
    server = FakeOllama(lanes_state()).start()
    yield server
    server.stop()


def write_config(tmp_path: Path, server: FakeOllama, bench: str = "") -> Path:
    """A user's sparkctl.toml for these lanes; the tracking server is unreachable on purpose
    (runs wait in the spool); a bench that streams until stopped. `bench`: more [bench] lines."""
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n{LANES_TOML}[tracking]\nuri = "http://127.0.0.1:9"\n'
                   f'[ui]\nrefresh_s = 2.0\n[bench]\n{bench}warmup = 0\nreps = 3\nnum_predict = 100000\n'
                   "timeout_s = 60\n")
    return cfg


def sparkctl_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data"), "SPARKCTL_LOCK_DIR": str(tmp_path / "locks"),
            "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}


def wait_for(predicate, what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {what}")
        time.sleep(0.05)


def ps(server: FakeOllama) -> dict[str, tuple[int, float]]:
    """/api/ps as a user reads it: name -> (context, seconds until it expires)."""
    body = httpx.get(f"{server.url}/api/ps", timeout=5).json()
    now = time.time()
    return {m["name"]: (m["context_length"], datetime.fromisoformat(m["expires_at"]).timestamp() - now)
            for m in body["models"]}


def router_request(server: FakeOllama, model: str, ctx: int) -> None:
    """What the user's router does next: a request with its own options and NO keep_alive."""
    httpx.post(f"{server.url}/api/generate", json={"model": model, "prompt": "hello", "stream": False,
                                                   "options": {"num_ctx": ctx, "num_predict": 3}},
               timeout=10).raise_for_status()


def streaming(server: FakeOllama) -> bool:
    return any(c.body.get("prompt") for c in server.calls("/api/generate"))


class Tui:
    """`sparkctl` (the TUI) in a pseudo-terminal of 120x40: keys in, the screen's bytes out."""

    def __init__(self, cfg: Path, tmp_path: Path) -> None:
        env = {**sparkctl_env(tmp_path), "COLUMNS": "120", "LINES": "40"}
        env.pop("TEXTUAL_DRIVER", None)
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: a session leader whose controlling terminal is the pty
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(sys.executable, [sys.executable, "-m", "sparkctl.cli", "--config", str(cfg)], env)
        self.seen = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.seen.extend(data)

    def has(self, text: str) -> bool:
        return text.encode() in self.seen

    def keys(self, data: str) -> None:
        os.write(self.master, data.encode())

    def hang_up(self) -> None:
        os.close(self.master)  # the ssh session is gone: SIGHUP, then EIO on the terminal

    def close(self) -> None:
        try:
            os.close(self.master)
        except OSError:
            pass

    def start_solo_bench(self, server: FakeOllama, model: str = "llama3.2:3b") -> None:
        """b, tab to the model field, type the model, enter, ctrl+r, answer the solo question
        yes, wait for the stream. The config pins [bench] mode = "solo", so the switch starts on."""
        wait_for(lambda: self.has("Resident models"), "the dashboard never drew")
        self.keys("b")
        wait_for(lambda: self.has("prompt sha256"), "the Bench screen never drew")  # its settings line
        time.sleep(0.5)
        self.keys("\t\t")  # the screen opens with no field focused: past the bench/sweep picker
        time.sleep(0.3)
        self.keys(model + "\r")  # enter leaves the field (it starts nothing)
        time.sleep(0.3)
        self.keys("\x12")  # ctrl+r: Run
        wait_for(lambda: self.has("Unload them and run solo"), "solo did not ask first")
        self.keys("y")
        wait_for(lambda: streaming(server), "the bench never streamed")
        time.sleep(0.5)

    def exit_code(self, timeout: float = 60.0) -> int | None:
        """Its exit code; None when a signal ended it, -9 when it had to be killed."""
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return -9
            time.sleep(0.1)
