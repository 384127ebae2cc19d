"""The fake Ollama server in its own process for the benchmarks."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class OutOfProcessFake:
    """The fake Ollama in its own process, as the real engine is: sharing this process's
    GIL and garbage collector would charge the engine's work to the UI's event loop."""

    def __init__(self, rate: float, runaway: str | None = "response", tokens: list[str] | None = None) -> None:
        import socket
        import subprocess

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        code = (
            "import sys, time; sys.path.insert(0, %r)\n"
            "from testkit.fakes.ollama_server import FakeOllama, bench_scenario\n"
            "FakeOllama(bench_scenario(tokens_per_s=%r, runaway=%r, response_tokens=%r), port=%d).start()\n"
            "time.sleep(3600)\n" % (str(ROOT), rate, runaway, tokens, self.port)
        )
        self.proc = subprocess.Popen([sys.executable, "-c", code])
        self.url = f"http://127.0.0.1:{self.port}"
        import httpx

        for _ in range(100):
            try:
                httpx.get(self.url + "/api/version", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
