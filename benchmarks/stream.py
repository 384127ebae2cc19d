"""Feed the Bench screen's live view 100k tokens at 2,000 tok/s and report event-loop lag
p99 (budget <= 50 ms) and RSS growth (budget <= 50 MB).

The tokens come from the fake Ollama server over real HTTP (a runaway model paced at
2,000 tok/s) through the real adapter and BenchRunner into the real screen, headless.
Run: .venv/bin/python benchmarks/stream.py [TOKENS] [RATE]
"""

from __future__ import annotations

import asyncio
import os
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sparkctl.config import Config  # noqa: E402
from sparkctl.engines.ollama import OllamaEngine  # noqa: E402
from sparkctl.tui.app import make_app  # noqa: E402
from testkit.fakes.host import FakeProbes, spark_snapshot  # noqa: E402
from fake_process import OutOfProcessFake  # noqa: E402


async def measure(tokens: int, rate: float) -> None:
    server = OutOfProcessFake(rate)
    base = Config()
    cfg = dataclasses.replace(base, ui=dataclasses.replace(base.ui, refresh_s=float(os.environ.get("REFRESH", "1"))), bench=dataclasses.replace(
        base.bench, num_predict=tokens, reps=1, warmup=0, timeout_s=tokens / rate * 3 + 30))
    engine = OllamaEngine(server.url, timeout=10, connect_timeout=3, load_timeout=tokens / rate * 3 + 30)
    app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
    proc = psutil.Process()
    lags: list[float] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("b")
            await pilot.pause(0.3)
            app.screen.query_one("#models").value = "llama3.2:3b"
            app.screen.query_one("#reps").value = "1"
            await pilot.pause(0.1)
            rss0 = proc.memory_info().rss
            t0 = time.monotonic()
            app.screen.action_start()
            worker = None
            while worker is None:
                await asyncio.sleep(0.01)
                group = [w for w in app.screen.workers if w.group == "bench"]
                worker = group[0] if group else None
            while not worker.is_finished:
                before = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - before - 0.01)
            took = time.monotonic() - t0
            rss1 = proc.memory_info().rss
            tokens_seen = int(app.screen.query_one("#gauges").values["tokens"])
    finally:
        server.stop()
    lags.sort()
    p99 = lags[int(0.99 * (len(lags) - 1))] * 1000
    growth = (rss1 - rss0) / 2**20
    print(f"stream: {tokens_seen} tokens in {took:.1f} s ({tokens_seen / took:.0f} tok/s shown); "
          f"event-loop lag p50 {statistics.median(lags) * 1000:.1f} ms, p99 {p99:.1f} ms, max {lags[-1] * 1000:.1f} ms "
          f"({'within' if p99 <= 50 else 'OVER'} 50 ms); RSS growth {growth:.1f} MB "
          f"({'within' if growth <= 50 else 'OVER'} 50 MB)")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    r = float(sys.argv[2]) if len(sys.argv) > 2 else 2000.0
    asyncio.run(measure(n, r))
