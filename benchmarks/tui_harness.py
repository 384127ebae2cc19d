"""Run an app in a real pseudo-terminal as a user meets it, and watch it from outside.

The `sparkctl` command (no arguments: the dashboard) or a bare Textual app (one Static,
the reference every TUI figure is a ratio to) is started in a 140x45 terminal beside a
FAKE Ollama server (testkit/fakes/ollama_server.py) holding two models. The harness reads
what the app writes to the terminal and notes when a text first appears (the first frame;
the first resident model's name: the first frame with engine data), samples the CPU time
and RSS of the process tree, and quits it with ctrl+q as a user would. What only the
process can say (was MLflow imported?) it writes at exit (benchmarks/_launch.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _launch import BARE_TEXT  # noqa: E402,F401  (what the bare app shows)
from testkit.fakes.ollama_server import FakeOllama, two_models_resident  # noqa: E402

LAUNCH = ROOT / "benchmarks" / "_launch.py"
COLUMNS, LINES = 140, 45
FIRST_MODEL = "gpt-oss:120b"  # the first model /api/ps lists in two_models_resident()
SPARKCTL_FIRST_FRAME = "Memory budget"  # a border title of the dashboard's first paint


def fake_engine(version: str | None = None) -> FakeOllama:
    state = two_models_resident()
    if version is not None:
        state.version = version
    return FakeOllama(state).start()


class AppRun:
    """One app in a pty. ``what``: "sparkctl" or "bare"."""

    def __init__(self, what: str, engine_url: str, *, config: str = "", env: dict | None = None,
                 watch: tuple[str, ...] = (BARE_TEXT, SPARKCTL_FIRST_FRAME, FIRST_MODEL)) -> None:
        self.what = what
        self.watch = tuple(watch)  # texts whose first appearance is noted, whatever is waited for
        self.tmp = tempfile.TemporaryDirectory(prefix="sparkctl-bench-")
        folder = Path(self.tmp.name)
        (folder / "data").mkdir()
        (folder / "config").mkdir()
        if config:
            (folder / "sparkctl.toml").write_text(config)  # ./sparkctl.toml: the cwd's config
        self.marks_file = folder / "marks.json"
        self.env = {**os.environ, "TERM": "xterm-256color", "OLLAMA_HOST": engine_url,
                    "SPARKCTL_DATA_DIR": str(folder / "data"), "XDG_CONFIG_HOME": str(folder / "config"),
                    "SPARKCTL_BENCH_MARKS": str(self.marks_file), "COLUMNS": str(COLUMNS), "LINES": str(LINES),
                    **(env or {})}
        # as installed: with bytecode caches (a wheel's install writes them; a checkout gets
        # them on its first run), not compiling every module from source at each start
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.seen: dict[str, float] = {}
        self._tail = b""
        self.proc: subprocess.Popen | None = None

    def start(self) -> "AppRun":
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.master = master
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, str(LAUNCH), self.what], stdin=slave, stdout=slave,
                                     stderr=slave, env=self.env, cwd=self.tmp.name, close_fds=True)
        os.close(slave)
        self.ps = psutil.Process(self.proc.pid)
        return self

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def pump(self, seconds: float, texts: tuple[str, ...] = ()) -> None:
        """Read the terminal for ``seconds`` (the app never blocks on output), noting the
        first time each of ``texts`` appears."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.master], [], [], min(left, 0.05))
            if not ready:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            now = self.elapsed()
            window = self._tail + data
            for text in self.watch + tuple(texts):
                if text not in self.seen and text.encode() in window:
                    self.seen[text] = now
            self._tail = window[-200:]

    def wait_for(self, text: str, timeout: float = 30.0) -> float | None:
        """Seconds from spawn to ``text`` on screen (None: not within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen and time.monotonic() < deadline and self.proc.poll() is None:
            self.pump(0.05, (text,))
        return self.seen.get(text)

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process and its children so far."""
        total = 0.0
        for p in [self.ps, *self.ps.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                pass
        return total

    def rss_mb(self) -> float:
        total = 0
        for p in [self.ps, *self.ps.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total / 2**20

    def quit(self) -> dict:
        """ctrl+q, as a user quits; the process's own notes (see _launch.py)."""
        try:
            if self.proc.poll() is None:
                os.write(self.master, b"\x11")
                deadline = time.monotonic() + 15
                while self.proc.poll() is None and time.monotonic() < deadline:
                    self.pump(0.1)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            os.close(self.master)
        marks = json.loads(self.marks_file.read_text()) if self.marks_file.exists() else {}
        self.tmp.cleanup()
        return marks
