"""Wall time of `sparkctl --version` (budget: <= 0.3 s). Run: .venv/bin/python benchmarks/version_time.py"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = ROOT / ".venv" / "bin" / "sparkctl"


def main(runs: int = 20) -> None:
    cmd = [str(EXE) if EXE.exists() else sys.executable, *([] if EXE.exists() else ["-m", "sparkctl.cli"]), "--version"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: bytecode cached
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    verdict = "MET" if statistics.median(times) <= 0.3 else "MISSED"
    print(f"sparkctl --version: median {statistics.median(times) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"min {times[0] * 1000:.0f} ms over {runs} runs - goal <= 0.3 s: {verdict}")


if __name__ == "__main__":
    main()
