"""A FAKE Ollama server in a process of its own (testkit/fakes/ollama_server.py's fake, real
HTTP), for the tests of sparkctl's reader of a server's settings: a real process, named
`ollama` as the real server's executable is, listening on a loopback port, with an
environment of its own that the test's process does not share.

Like Ollama, it takes OLLAMA_NUM_PARALLEL from its own environment (its slots: requests
past them wait). `--undumpable` makes the process non-dumpable (prctl PR_SET_DUMPABLE 0),
so that /proc/PID/environ and its open sockets are closed to every process without
CAP_SYS_PTRACE, even of the same user: what a Spark's `ollama` service is to its users.

Run by `spawn()` below; prints `PORT <n>` when it listens and serves until terminated.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass
class OllamaProcess:
    proc: subprocess.Popen
    port: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def spawn(tmp_path: Path, env: dict[str, str], *, undumpable: bool = False,
          scenario: str = "default") -> Iterator[OllamaProcess]:
    """Start the fake as a process whose argv[0] is `.../ollama` (a link to this Python),
    with exactly `env` on top of a clean environment (no OLLAMA_* of the test's own).
    `scenario`: the fake's state, one of SCENARIOS ("pull": a registry to pull from)."""
    bindir = tmp_path / f"ollama-bin-{len(list(tmp_path.glob('ollama-bin-*')))}"
    bindir.mkdir()
    exe = bindir / "ollama"
    exe.symlink_to(os.path.realpath(sys.executable))
    base = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    # started through the link, Python does not see this virtualenv: its packages go on the path
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), sysconfig.get_path("purelib")])
    argv = [str(exe), str(Path(__file__).resolve()), "--scenario", scenario] + (["--undumpable"] if undumpable else [])
    proc = subprocess.Popen(argv, env={**base, **env}, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"the fake Ollama process did not start: {line!r}")
        yield OllamaProcess(proc, int(line.split()[1]))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main() -> None:
    from testkit.fakes.ollama_server import FakeOllama, default_state, pull_scenario

    scenarios = {"default": default_state, "pull": pull_scenario}

    if "--undumpable" in sys.argv:
        import ctypes

        PR_SET_DUMPABLE = 4
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise SystemExit("prctl(PR_SET_DUMPABLE) failed")
    state = scenarios[sys.argv[sys.argv.index("--scenario") + 1]]()
    raw = os.environ.get("OLLAMA_NUM_PARALLEL", "").strip().strip("\"'")
    state.num_parallel = int(raw) if raw.isdigit() and int(raw) > 0 else 1  # Ollama's rule: default 1
    server = FakeOllama(state).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(f"PORT {server.port}", flush=True)
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
