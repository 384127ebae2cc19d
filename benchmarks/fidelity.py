"""Bench fidelity: the client's decode tok/s against the engine's eval_count/eval_duration
on a steady stream (budget: within 1%). The engine is the fake Ollama in its own process,
pacing tokens at a Spark-like rate; the bench is the real BenchRunner.
Run: .venv/bin/python benchmarks/fidelity.py [RATE] [TOKENS] [REPS]"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_process import OutOfProcessFake  # noqa: E402

from sparkctl.config import Config  # noqa: E402
from sparkctl.engines.ollama import OllamaEngine  # noqa: E402
from sparkctl.services.bench import BenchRunner, BenchSettings  # noqa: E402
from testkit.fakes.host import FakeProbes, spark_snapshot  # noqa: E402


async def main(rate: float, tokens: int, reps: int) -> None:
    server = OutOfProcessFake(rate, runaway=None, tokens=[" tok"] * (tokens + 50))
    try:
        cfg = Config()
        s = dataclasses.replace(BenchSettings.from_config(cfg.bench), num_predict=tokens, reps=reps, warmup=1)
        engine = OllamaEngine(server.url, timeout=10, connect_timeout=3)
        runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s)
        (run,) = await runner.run(["llama3.2:3b"])
        await engine.close()
    finally:
        server.stop()
    errors = [(r.client_decode_tps - r.engine_decode_tps) / r.engine_decode_tps * 100 for r in run.reps]
    worst = max(abs(e) for e in errors)
    print(f"fidelity at {rate:g} tok/s, {tokens} tokens x {reps} reps: engine median "
          f"{run.summary['decode_tps_median']:.2f} tok/s, client median {run.summary['client_decode_tps_median']:.2f} tok/s; "
          f"client-engine difference per rep {', '.join(f'{e:+.2f}%' for e in errors)} "
          f"(worst {worst:.2f}%: {'within' if worst <= 1 else 'OVER'} the 1% budget)")


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(float(args[0]) if args else 90.0, int(args[1]) if len(args) > 1 else 512,
                     int(args[2]) if len(args) > 2 else 5))
