"""Start the dashboard in a real pseudo-terminal (120x40) beside a fake Ollama server that
holds two models, so the benchmarks measure the app a user would see."""

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.ollama_server import FakeOllama, two_models_resident  # noqa: E402


def run_dashboard(mode: str, seconds: float = 0.0, on_start=None) -> dict:
    server = FakeOllama(two_models_resident()).start()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {**os.environ, "TERM": "xterm-256color", "SPARKCTL_DATA_DIR": tmp,
               "XDG_CONFIG_HOME": tmp, "SPARKCTL_BENCH_T0": repr(time.time())}
        env["SPARKCTL_BENCH_T0"] = repr(time.time())
        proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_tui_child.py"), str(result),
                                 server.url, mode, str(seconds)],
                                stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp, close_fds=True)
        os.close(slave)
        if on_start:
            on_start(proc)
        deadline = time.time() + seconds + 60
        screen = bytearray()
        try:
            while proc.poll() is None and time.time() < deadline:
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    try:
                        screen += os.read(master, 65536)  # drain, so the app never blocks on output
                        del screen[:-20000]
                    except OSError:
                        break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(master)
            server.stop()
        if proc.returncode != 0 or not result.exists() or os.environ.get("SPARKCTL_BENCH_DEBUG"):
            sys.stderr.write(screen.decode(errors="replace")[-3000:])
        return json.loads(result.read_text()) if result.exists() else {}
