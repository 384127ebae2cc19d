"""Every way a solo bench can end, against the fake Ollama, and what /api/ps shows after each.

The engine holds a production lane (qwen3:8b, kept forever, context 32768) and a fast lane
(qwen3:4b, 30-minute session, context 8192; `[lanes.keep_alive] fast = "30m"`). Each exit
path starts from that state, benches llama3.2:3b (solo where the path allows it), ends the
bench its way, and prints /api/ps. For the fast lane the session is read the way a user's
router would feel it: after one request with no keep_alive, how long until it expires.
`sparkctl` runs as real processes (the TUI in a real pseudo-terminal); only Ollama is a fake
(tests/fakes/ollama_server.py). Run: .venv/bin/python benchmarks/exit_paths.py [WORD...]
(WORDs pick the paths whose names contain them). Output: benchmarks/results/exit_paths.md.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.ollama_server import FakeOllama, default_state, make_model  # noqa: E402

FOREVER_S = 100 * 365 * 86400


def fake() -> FakeOllama:
    state = default_state()
    state.tokens_per_s = 40.0
    state.add_model(make_model("qwen3:4b", size_gib=2.5, parameter_size="4.0B", context_length=40960))
    state.add_model(make_model("cpuonly:7b", size_gib=4.1, parameter_size="7.6B", vram_fraction=0.0))
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    state.add_resident("qwen3:4b", expires_in_s=1800, context_length=8192)
    return FakeOllama(state).start()


def config(d: Path, server: FakeOllama, reps: int = 3, num_predict: int = 100000) -> Path:
    cfg = d / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n'
                   '[lanes]\nproduction = "qwen3:8b"\nfast = "qwen3:4b"\n[lanes.keep_alive]\nfast = "30m"\n'
                   '[tracking]\nuri = "http://127.0.0.1:9"\n[ui]\nrefresh_s = 2.0\n'
                   f'[bench]\nwarmup = 0\nreps = {reps}\nnum_predict = {num_predict}\ntimeout_s = 60\n')
    return cfg


def env(d: Path) -> dict[str, str]:
    return {**os.environ, "SPARKCTL_DATA_DIR": str(d / "data"), "SPARKCTL_LOCK_DIR": str(d / "locks"),
            "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}


def cli(d: Path, cfg: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(d))


def streaming(server: FakeOllama) -> bool:
    return any(c.body.get("prompt") for c in server.calls("/api/generate"))


def wait(pred, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.05)


def ps(server: FakeOllama) -> str:
    """/api/ps in one line; the fast lane's session measured after a router request."""
    if any(m["name"] == "qwen3:4b" for m in httpx.get(f"{server.url}/api/ps").json()["models"]):
        httpx.post(f"{server.url}/api/generate", json={"model": "qwen3:4b", "prompt": "hi", "stream": False,
                                                       "options": {"num_ctx": 8192, "num_predict": 2}}, timeout=30)
    now = time.time()
    out = []
    for m in httpx.get(f"{server.url}/api/ps").json()["models"]:
        left = datetime.fromisoformat(m["expires_at"]).timestamp() - now
        until = "forever" if left > FOREVER_S else f"{left / 60:.0f} min session" if m["name"] == "qwen3:4b" \
            else f"expires in {left / 60:.0f} min"
        out.append(f"{m['name']} ctx {m['context_length']} {until}")
    return "; ".join(sorted(out)) or "(nothing)"


def spool_status(d: Path) -> str:
    from sparkctl.tracking.spool import Spool

    recs = Spool(d / "data" / "spool.jsonl").pending()
    return ",".join(r.status for r in recs) or "-"


class Tui:
    def __init__(self, d: Path, cfg: Path) -> None:
        self.pid, self.master = pty.fork()
        if self.pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(sys.executable, [sys.executable, "-m", "sparkctl.cli", "--config", str(cfg)], env(d))
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

    def exit_code(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                return -9
            time.sleep(0.1)


def run_cli(path: str, d: Path, server: FakeOllama) -> tuple[str, str]:
    if path == "finished":
        p = cli(d, config(d, server, reps=2, num_predict=20), "bench", "--solo", "llama3.2:3b")
        p.communicate(timeout=120)
        return str(p.returncode), spool_status(d)
    if path == "refused":
        p = cli(d, config(d, server, reps=2, num_predict=20), "bench", "cpuonly:7b")
        p.communicate(timeout=120)
        return str(p.returncode), spool_status(d)
    if path == "failed":
        server.state.fail_in_stream("/api/generate", "llama runner process has terminated: exit status 2")
        p = cli(d, config(d, server, reps=2, num_predict=20), "bench", "--solo", "llama3.2:3b")
        p.communicate(timeout=120)
        server.state.clear_faults()
        return str(p.returncode), spool_status(d)
    server.state.runaway = "response"
    cfg = config(d, server)
    p = cli(d, cfg, "bench", "--solo", "llama3.2:3b")
    wait(lambda: streaming(server), "streaming")
    time.sleep(0.5)
    if path == "SIGINT (CLI)":
        p.send_signal(signal.SIGINT)
    elif path == "kill -9 (CLI), then `sparkctl status`":
        p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    server.state.runaway = None
    code = str(p.returncode)
    if path.startswith("kill -9"):
        left = ps(server)
        s = cli(d, cfg, "status", "--json")
        s.communicate(timeout=120)
        code += f" (before status: {left})"
    return code, spool_status(d)


def run_tui(path: str, d: Path, server: FakeOllama) -> tuple[str, str]:
    server.state.runaway = "response"
    cfg = config(d, server)
    cfg.write_text(cfg.read_text().replace("[bench]\n", '[bench]\nmode = "solo"\n'))  # the switch starts on
    t = Tui(d, cfg)
    wait(lambda: t.has("Resident models"), "dashboard")
    t.keys("b")
    wait(lambda: t.has("models to bench"), "bench screen")
    time.sleep(0.5)
    t.keys("llama3.2:3b")
    time.sleep(0.2)
    t.keys("\x12")
    wait(lambda: t.has("Unload them and run solo"), "solo confirmation")
    t.keys("y")
    wait(lambda: streaming(server), "streaming")
    time.sleep(0.5)
    if path == "Esc (TUI), then q":
        t.keys("\x1b")
        wait(lambda: spool_status(d) != "-", "the stopped run recorded")
        server.state.runaway = None
        mark = len(t.seen)
        wait(lambda: b"bench stopped" in t.seen[mark - 20000:], "the Bench screen says it stopped")
        after_esc = ps(server)  # what Esc left, before quitting the TUI
        t.keys("q")
        time.sleep(2.0)
        if t.has("Quit anyway"):
            t.keys("y")
        code = t.exit_code()
        return f"{code} (ps after Esc, TUI still open: {after_esc})", spool_status(d)
    elif path == "quit (TUI: q, Stop and quit)":
        t.keys("q")
        wait(lambda: t.has("Stop and quit"), "quit dialog")
        t.keys("y")
    elif path == "SIGHUP (TUI: ssh drop)":
        os.close(t.master)
    elif path == "SIGTERM (TUI)":
        os.kill(t.pid, signal.SIGTERM)
    code = t.exit_code()
    server.state.runaway = None
    try:
        os.close(t.master)
    except OSError:
        pass
    return str(code), spool_status(d)


PATHS = [("finished", run_cli), ("refused", run_cli), ("failed", run_cli), ("Esc (TUI), then q", run_tui),
         ("quit (TUI: q, Stop and quit)", run_tui), ("SIGINT (CLI)", run_cli), ("SIGHUP (TUI: ssh drop)", run_tui),
         ("SIGTERM (TUI)", run_tui), ("kill -9 (CLI), then `sparkctl status`", run_cli)]


def main() -> None:
    print("before every path: production qwen3:8b ctx 32768 forever; fast qwen3:4b ctx 8192 30 min session\n")
    print("| exit path | exit code | run recorded | /api/ps after |\n|---|---|---|---|")
    only = sys.argv[1:]  # e.g. `Esc SIGHUP`: just the paths whose names contain these words
    for path, how in PATHS:
        if only and not any(word in path for word in only):
            continue
        server = fake()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                code, status = how(path, Path(tmp), server)
                print(f"| {path} | {code} | {status} | {ps(server)} |", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
