"""The CLI's answers and the Runs screen's first page, against a 10,000-run SQLite store.

Goals: `sparkctl runs` (newest 100) <= 1.0 s cold, `sparkctl compare` <= 1.5 s,
`sparkctl status --json` <= 0.3 s, the Runs screen's first page <= 1 s. "Cold" is a fresh
process each time, as a user types the command (the files are in the page cache after a
warm-up run that is not counted). Each figure is the median of several runs, with the min.

For reference, in the same run: an empty Python start, `import mlflow`, and the same
newest-100 query through MLflow's own client (what `runs` did before it read the store
itself). The store is benchmarks/bench_store.py's, generated once per MLflow version.
Run: .venv/bin/python benchmarks/history_cli.py [RUNS]
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_store import COMPARE_MODELS, EXPERIMENT, ensure_store
from tui_harness import ROOT, fake_engine

from sparkctl.tracking.store import default_tracking_uri

EXE = ROOT / ".venv" / "bin" / "sparkctl"
GOALS = {"runs": 1.0, "compare": 1.5, "status": 0.3, "runs screen": 1.0}

CLIENT_QUERY = """
import sys
from sparkctl.services.runs import list_runs
from sparkctl.tracking.store import MlflowStore
rows = list_runs(MlflowStore(sys.argv[1], None, sys.argv[2], fast_reads=False), limit=100)
assert len(rows) == 100
"""

RUNS_SCREEN = """
import asyncio, json, sys, time
from sparkctl.config import load_config
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot

async def main():
    app = make_app(load_config(None), probes=FakeProbes(spark_snapshot()))
    async with app.run_test(size=(140, 45)) as pilot:
        t0 = time.perf_counter()
        await app.switch_mode("runs")
        while not getattr(app.screen, "rows", None):
            assert getattr(app.screen, "error", None) is None, app.screen.error
            assert time.perf_counter() - t0 < 60, "no rows in 60 s"
            await pilot.pause(0.005)
        table = app.screen.query_one("#runs")
        print(json.dumps({"s": time.perf_counter() - t0, "rows": table.row_count}))

asyncio.run(main())
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str], env: dict, runs: int, cwd: str) -> tuple[float, float, float]:
    """(min, median) wall seconds and median CPU seconds of fresh processes, after a warm-up."""
    subprocess.run(cmd, env=env, cwd=cwd, capture_output=True)
    walls, cpus = [], []
    for _ in range(runs):
        before = os.times()
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = os.times()
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
        if done.returncode not in (0, 3):  # 3: status with the engine down
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return min(walls), statistics.median(walls), statistics.median(cpus)


def line(label: str, figures: tuple[float, float, float], goal: float | None = None) -> None:
    lo, med, cpu = figures
    tail = "" if goal is None else f" - goal <= {goal:g} s: {'MET' if med <= goal else 'MISSED'}"
    print(f"{label:<58} median {med:6.3f} s (min {lo:.3f}, CPU {cpu:.3f} s){tail}")


def main(runs: int = 7) -> int:
    store = ensure_store()
    uri = default_tracking_uri(store)
    sparkctl = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "sparkctl.cli"]
    with tempfile.TemporaryDirectory(prefix="sparkctl-bench-") as tmp:
        config = Path(tmp) / "sparkctl.toml"
        config.write_text(f'[tracking]\nuri = "{uri}"\nexperiment = "{EXPERIMENT}"\n')
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed
        env.update({"SPARKCTL_CONFIG": str(config), "SPARKCTL_DATA_DIR": str(Path(tmp) / "data"),
                    "XDG_CONFIG_HOME": str(Path(tmp) / "config"), "MLFLOW_DISABLE_TELEMETRY": "true",
                    "PYTHONPATH": str(ROOT)})
        print(f"store: {store} (10,000 runs, MLflow SQLite); {runs} fresh processes each, after a warm-up")
        line("python -c pass (the floor)", timed([sys.executable, "-c", "pass"], env, runs, tmp))
        line("python -c 'import mlflow' (reference)", timed([sys.executable, "-c", "import mlflow"], env, runs, tmp))
        line("newest 100 through MLflow's client (before)",
             timed([sys.executable, "-c", CLIENT_QUERY, uri, EXPERIMENT], env, runs, tmp))
        line("sparkctl runs -n 100", timed([*sparkctl, "runs", "-n", "100"], env, runs, tmp), GOALS["runs"])
        line(f"sparkctl compare {' '.join(COMPARE_MODELS)}",
             timed([*sparkctl, "compare", *COMPARE_MODELS], env, runs, tmp), GOALS["compare"])
        down = {**env, "OLLAMA_HOST": f"http://127.0.0.1:{_closed_port()}"}
        line("sparkctl status --json (engine down)", timed([*sparkctl, "status", "--json"], down, runs, tmp),
             GOALS["status"])
        server = fake_engine()
        try:
            up = {**env, "OLLAMA_HOST": server.url}
            line("sparkctl status --json (engine up, 2 models)",
                 timed([*sparkctl, "status", "--json"], up, runs, tmp), GOALS["status"])
            firsts = []
            for _ in range(max(3, runs // 2)):
                done = subprocess.run([sys.executable, "-c", RUNS_SCREEN], env=up, cwd=tmp, capture_output=True,
                                      text=True)
                if done.returncode != 0:
                    raise SystemExit(f"Runs screen run failed: {done.stderr.strip()[-400:]}")
                got = json.loads(done.stdout.strip().splitlines()[-1])
                firsts.append(got["s"])
        finally:
            server.stop()
        med = statistics.median(firsts)
        print(f"{'Runs screen: first page of ' + str(got['rows']) + ' runs (fresh app)':<58} median {med:6.3f} s "
              f"(min {min(firsts):.3f}) - goal <= {GOALS['runs screen']:g} s: "
              f"{'MET' if med <= GOALS['runs screen'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
