"""A 10,000-run MLflow SQLite store for the history benchmarks, generated once and cached.

The runs are shaped like the bench's and the eval's records (services/bench/runner.py and
services/evals/runner.py to_record): the same tags, params, summary metrics, and one step
per repetition for the per-repetition metrics `compare` reads. 24 models, 8 engine versions
(in order, as upgrades happen), 3 hosts, a year of start times; 2% are GSM8K eval runs with
their items.jsonl. Written with MlflowClient.log_batch directly: the benchmarks measure
reading, and the bench's own write path (spool, record-id search) would take far longer.

Cached outside the repository, keyed by the MLflow version (its schema decides the file)
and this generator's format: ~/.cache/sparkctl-bench/mlflow-<version>/runs-<n>-v<format>/.
A store is seeded into a temporary folder and renamed into place when complete, so a
stopped seeding never leaves a half store behind. Seeding 10,000 runs takes minutes.

    .venv/bin/python benchmarks/bench_store.py [--runs N]    # prints the folder
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri  # noqa: E402

FORMAT = 1  # bump when the generated runs change shape
EXPERIMENT = "sparkctl-bench"
MODELS = [f"{family}:{size}" for family in ("qwen3", "llama3.2", "gemma3", "mistral", "phi4", "gpt-oss")
          for size in ("latest", "8b", "14b", "30b")]
ENGINE_VERSIONS = ["0.11.4", "0.11.8", "0.12.0", "0.12.3", "0.12.6", "0.13.0", "0.13.1", "0.13.2"]
HOSTS = ["spark-01", "spark-02", "gpu-box"]
REPS = 5
# the two models `compare` is timed on (one named with a tag, one without: two searches)
COMPARE_MODELS = ("qwen3:8b", "llama3.2")
LANES = {"production": "qwen3:8b", "fast": "llama3.2:latest"}
EVAL_SHARE = 0.02
EVAL_ITEMS = 250


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sparkctl-bench"


def store_dir(runs: int) -> Path:
    return cache_root() / f"mlflow-{version('mlflow')}" / f"runs-{runs}-v{FORMAT}"


def ensure_store(runs: int = 10_000, *, quiet: bool = False) -> Path:
    """The folder of a seeded store (``mlflow.db`` and ``artifacts/``), seeding it first if
    the cache has none for this MLflow version."""
    folder = store_dir(runs)
    if (folder / DB_FILE_NAME).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    if not quiet:
        print(f"seeding {runs:,} runs into {folder} (once per MLflow version; minutes) ...",
              file=sys.stderr, flush=True)
    try:
        took = _seed(tmp, runs, quiet)
        # the artifact locations recorded in the database name the final folder
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not quiet:
        print(f"seeded {runs:,} runs in {took:.0f} s", file=sys.stderr, flush=True)
    return folder


def _seed(tmp: Path, n: int, quiet: bool) -> float:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    final = store_dir(n)
    uri = default_tracking_uri(tmp)
    store = MlflowStore(uri, final / "artifacts", EXPERIMENT)
    assert store.search_runs(max_results=1) == []  # creates and migrates the database
    client = MlflowClient(uri)
    exp_id = client.create_experiment(EXPERIMENT, artifact_location=(final / "artifacts").as_uri())
    rng = random.Random(7)
    now = int(time.time() * 1000)
    year_ms = 365 * 86_400_000
    prompt_sha = uuid.UUID(int=rng.getrandbits(128)).hex * 2
    sample_ids = [f"gsm8k-{i}" for i in range(EVAL_ITEMS)]
    sample_sha = uuid.UUID(int=rng.getrandbits(128)).hex * 2
    t0 = time.perf_counter()
    for i in range(n):
        model = COMPARE_MODELS[i % 2] if i >= n - 40 else rng.choice(MODELS)  # both have recent runs
        engine = ENGINE_VERSIONS[min(len(ENGINE_VERSIONS) - 1, i * len(ENGINE_VERSIONS) // n)]
        start = now - year_ms + i * year_ms // n  # in order, as runs accrue
        host = rng.choice(HOSTS)
        valid = rng.random() > 0.05
        is_eval = rng.random() < EVAL_SHARE or i in (n - 3, n - 4)  # the compared models have evals
        tags = {
            "sparkctl.version": "0.1.0", "engine.kind": "ollama", "engine.version": engine,
            "engine.host": "http://127.0.0.1:11434", "model.name": model, "model.key": model,
            "model.digest": uuid.UUID(int=rng.getrandbits(128)).hex * 2, "model.quantization": "Q4_K_M",
            "model.parameter_size": "8.2B", "model.family": model.split(":")[0],
            "guard.placement_before": "100% GPU",
            "guard.placement_after": "100% GPU" if valid else "70% GPU/30% CPU",
            "guard.valid": str(valid).lower(),
            "guard.invalid_reasons": "" if valid else f"{model} placement after the run: 70% GPU/30% CPU",
            "guard.flags": "", "host.name": host, "gpu.name": "NVIDIA GB10", "gpu.driver": "580.95.05",
            "gpu.unified_memory": "true", "host.mem_total_gib": "119.7", "host.mem_available_gib": "88.2",
            "gpu.throttle_reasons": "none", "gpu.samples": "42",
        }
        params: dict[str, str]
        steps: dict[str, list[float]] = {}
        if is_eval:
            passed = rng.randint(150, 230)
            tags.update({"sparkctl.kind": "eval", "eval.suite": "gsm8k", "model.thinking": "off",
                         "eval.suite_file": "gsm8k_test.jsonl", "eval.suite_modified": "false"})
            params = {"model": model, "suite": "gsm8k", "n": str(EVAL_ITEMS), "seed": "1234",
                      "sample_size": str(EVAL_ITEMS), "sample_sha256": sample_sha, "suite_sha256": prompt_sha,
                      "timeout_s": "900.0", "concurrency": "1", "num_predict": "1024", "temperature": "0.0",
                      "num_ctx": "8192", "keep_alive": "5m", "think": "False", "ceiling_from": "request sent"}
            summary = {"gsm8k_strict": passed / EVAL_ITEMS, "gsm8k_flexible": (passed + 5) / EVAL_ITEMS,
                       "passed": float(passed), "items": float(EVAL_ITEMS), "dnf_count": 0.0,
                       "tokens_total": 61_000.0, "seconds_total": 900.0}
        else:
            decode = rng.uniform(20, 120)
            tags.update({"guard.mode": "beside", "guard.cache_policy": "cold", "guard.reload_detected": "false",
                         "guard.prefill_cached": "false", "guard.foreign_load": "false", "guard.stable": "true",
                         "guard.flags_not_invalidating": "", "guard.client_decode_basis": "engine counts"})
            params = {"model": model, "prompt_sha256": prompt_sha, "prompt_chars": "1312", "num_predict": "512",
                      "temperature": "0.0", "seed": "42", "num_ctx": "8192", "warmup": "1", "reps": str(REPS),
                      "timeout_s": "900.0", "mode": "beside", "keep_alive": "5m", "think": "False",
                      "bandwidth_gbps": "273.0", "cache_policy": "cold", "until_resolved_max_reps": "0",
                      "cache_method": "preamble"}
            steps = {
                "engine_decode_tps": [decode * rng.uniform(0.98, 1.02) for _ in range(REPS)],
                "client_decode_tps": [decode * rng.uniform(0.97, 1.01) for _ in range(REPS)],
                "ttft_s": [rng.uniform(0.05, 2) for _ in range(REPS)],
                "prefill_tps": [rng.uniform(500, 5000) for _ in range(REPS)],
                "eval_count": [512.0] * REPS, "prompt_eval_count": [300.0] * REPS,
                "dnf": [0.0] * REPS, "reload": [0.0] * REPS,
            }
            summary = {"decode_tps_median": decode, "decode_tps_min": decode * 0.98, "decode_tps_max": decode * 1.02,
                       "decode_tps_cv_pct": rng.uniform(0.2, 3), "ttft_s_median": rng.uniform(0.05, 2),
                       "prefill_tps_median": rng.uniform(500, 5000), "load_s_median": rng.uniform(0, 0.1),
                       "dnf_count": 0.0, "joules_per_token": rng.uniform(0.2, 1.5),
                       "roofline_pct": rng.uniform(40, 90), "client_decode_tps_median": decode * 0.99,
                       "resident_gib": 6.1}
        name = f"{model} gsm8k @ ollama {engine}" if is_eval else f"{model} @ ollama {engine}"
        run = client.create_run(exp_id, start_time=start, run_name=name,
                                tags={"sparkctl.record_id": uuid.UUID(int=rng.getrandbits(128)).hex})
        end = start + 60_000
        metrics = [Metric(k, v, end, 0) for k, v in summary.items()]
        metrics += [Metric(k, v, end, step) for k, values in steps.items() for step, v in enumerate(values)]
        client.log_batch(run.info.run_id, synchronous=True, metrics=metrics,
                         params=[Param(k, v) for k, v in params.items()],
                         tags=[RunTag(k, v) for k, v in tags.items()] + [RunTag("sparkctl.record_complete", "true")])
        if is_eval:
            items = "".join(json.dumps({"item_id": item, "passed": rng.random() < passed / EVAL_ITEMS,
                                        "dnf": False}) + "\n" for item in sample_ids)
            # where the run's artifact_uri points once the folder is renamed into place
            art = tmp / "artifacts" / run.info.run_id / "artifacts"
            art.mkdir(parents=True, exist_ok=True)
            (art / "items.jsonl").write_text(items, encoding="utf-8")
            (art / "sample_ids.json").write_text(json.dumps(sample_ids), encoding="utf-8")
        client.set_terminated(run.info.run_id, "FINISHED", end_time=end)
        if not quiet and (i + 1) % 1000 == 0:
            rate = (i + 1) / (time.perf_counter() - t0)
            print(f"  seeded {i + 1:,} runs ({rate:.0f}/s)", file=sys.stderr, flush=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    print(ensure_store(ap.parse_args().runs))
