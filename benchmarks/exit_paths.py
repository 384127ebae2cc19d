"""Every way a solo bench can end, against the fake Ollama, and what /api/ps shows after each.

The engine holds a production lane (qwen3:8b, kept forever, context 32768) and a fast lane
(qwen3:4b, 30-minute session, context 8192; `[lanes.keep_alive] fast = "30m"`). Each exit
path starts from that state, benches llama3.2:3b (solo where the path allows it), ends the
bench its way, and prints /api/ps. For the fast lane the session is read the way a user's
router would feel it: after one request with no keep_alive, how long until it expires.
`sparkctl` runs as real processes (the TUI in a real pseudo-terminal); only Ollama is a fake
(testkit/fakes/ollama_server.py). Run: .venv/bin/python benchmarks/exit_paths.py [WORD...]
(WORDs pick the paths whose names contain them). Its output is kept in benchmarks/results/exit_paths.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit.fakes.ollama_server import FakeOllama, make_model  # noqa: E402
from testkit.lanes import (  # noqa: E402
    FOREVER_AFTER_S, LANES_TOML, Tui, lanes_state, ps as read_ps, router_request, sparkctl_env, streaming, wait_for,
)


def fake() -> FakeOllama:
    state = lanes_state(runaway=None)
    state.add_model(make_model("cpuonly:7b", size_gib=4.1, parameter_size="7.6B", vram_fraction=0.0))
    return FakeOllama(state).start()


def config(d: Path, server: FakeOllama, reps: int = 3, num_predict: int = 100000) -> Path:
    cfg = d / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n{LANES_TOML}'
                   '[tracking]\nuri = "http://127.0.0.1:9"\n[ui]\nrefresh_s = 2.0\n'
                   f'[bench]\nwarmup = 0\nreps = {reps}\nnum_predict = {num_predict}\ntimeout_s = 60\n')
    return cfg


def cli(d: Path, cfg: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sparkctl_env(d))


def ps(server: FakeOllama) -> str:
    """/api/ps in one line; the fast lane's session measured after a router request."""
    if "qwen3:4b" in read_ps(server):
        router_request(server, "qwen3:4b", 8192)
    out = []
    for name, (ctx, left) in read_ps(server).items():
        until = "forever" if left > FOREVER_AFTER_S else f"{left / 60:.0f} min session" if name == "qwen3:4b" \
            else f"expires in {left / 60:.0f} min"
        out.append(f"{name} ctx {ctx} {until}")
    return "; ".join(sorted(out)) or "(nothing)"


def spool_status(d: Path) -> str:
    from sparkctl.tracking.spool import Spool

    recs = Spool(d / "data" / "spool.jsonl").pending()
    # as `sparkctl runs` words it: a run a guard refused is FAILED in MLflow, REFUSED there
    return ",".join("REFUSED (not valid)" if r.tags.get("guard.refused") else r.status for r in recs) or "-"


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
    wait_for(lambda: streaming(server), "streaming")
    time.sleep(0.5)
    if path == "SIGINT (CLI)":
        p.send_signal(signal.SIGINT)
    elif path == "kill -9 (CLI), then `sparkctl status`, `sparkctl lanes --restore`":
        p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    server.state.runaway = None
    code = str(p.returncode)
    if path.startswith("kill -9"):
        # status is a view: it shows the pending repair and changes nothing; the put-back
        # is lanes --restore (or the next command that is not a view)
        s = cli(d, cfg, "status", "--json")
        s.communicate(timeout=120)
        left = ps(server)
        s = cli(d, cfg, "lanes", "--restore")
        s.communicate(timeout=120)
        code += f" (after status: {left})"
    return code, spool_status(d)


def run_tui(path: str, d: Path, server: FakeOllama) -> tuple[str, str]:
    server.state.runaway = "response"
    cfg = config(d, server)
    cfg.write_text(cfg.read_text().replace("[bench]\n", '[bench]\nmode = "solo"\n'))  # the switch starts on
    t = Tui(cfg, d)
    t.start_solo_bench(server)
    if path == "Esc (TUI), then q":
        t.keys("\x1b")
        wait_for(lambda: spool_status(d) != "-", "the stopped run recorded")
        server.state.runaway = None
        mark = len(t.seen)
        wait_for(lambda: b"bench stopped" in t.seen[mark - 20000:], "the Bench screen says it stopped")
        after_esc = ps(server)  # what Esc left, before quitting the TUI
        t.keys("q")
        time.sleep(2.0)
        if t.has("Quit anyway"):
            t.keys("y")
        code = t.exit_code()
        t.close()
        return f"{code} (ps after Esc, TUI still open: {after_esc})", spool_status(d)
    elif path == "quit (TUI: q, Stop and quit)":
        t.keys("q")
        wait_for(lambda: t.has("Stop and quit"), "quit dialog")
        t.keys("y")
    elif path == "SIGHUP (TUI: ssh drop)":
        t.hang_up()
    elif path == "SIGTERM (TUI)":
        os.kill(t.pid, signal.SIGTERM)
    code = t.exit_code()
    server.state.runaway = None
    t.close()
    return str(code), spool_status(d)


PATHS = [("finished", run_cli), ("refused", run_cli), ("failed", run_cli), ("Esc (TUI), then q", run_tui),
         ("quit (TUI: q, Stop and quit)", run_tui), ("SIGINT (CLI)", run_cli), ("SIGHUP (TUI: ssh drop)", run_tui),
         ("SIGTERM (TUI)", run_tui), ("kill -9 (CLI), then `sparkctl status`, `sparkctl lanes --restore`", run_cli)]


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
