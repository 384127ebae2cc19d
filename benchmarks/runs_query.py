"""Run history on a long record (budgets: first page <= 1 s, sort/filter <= 100 ms).

Seeds a fresh MLflow SQLite store in a temp dir with 10,000 runs shaped like the bench's
(10 summary metrics, 10 params, 17 tags; 24 models, 8 engine versions, 3 hosts, a year of
start times), written with MlflowClient.log_batch directly: this measures reading, and the
bench's own write path (spool, record id, per-repetition steps) would take far longer to
seed. Then times, each the median of several tries unless marked cold:

- `import mlflow` in a fresh interpreter (cold);
- a fresh process opening the store and reading the first page (what `sparkctl runs` and
  the Runs screen pay before the first row shows; cold, includes the import);
- list_runs: the newest 100 runs; filtered by model + engine version; by model alone
  (ILIKE pre-filter + sparkctl's name key); since a date; sorted by decode tok/s in MLflow;
- in memory, as the TUI table sorts and filters a loaded page: 100 and 1,000 RunRows.

Run: .venv/bin/python benchmarks/runs_query.py [--runs N] [--store DIR (reuse/keep a seeded store)]
Seeding 10,000 runs takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sparkctl.services.runs import list_runs  # noqa: E402
from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri  # noqa: E402

EXPERIMENT = "sparkctl-bench"
FIRST_PAGE_BUDGET_S = 1.0
SORT_FILTER_BUDGET_S = 0.100

MODELS = [f"{family}:{size}" for family in ("qwen3", "llama3.2", "gemma3", "mistral", "phi4", "gpt-oss")
          for size in ("latest", "8b", "14b", "30b")]
ENGINE_VERSIONS = ["0.11.4", "0.11.8", "0.12.0", "0.12.3", "0.12.6", "0.13.0", "0.13.1", "0.13.2"]
HOSTS = ["spark-01", "spark-02", "gpu-box"]


def seed(uri: str, n: int) -> float:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    store = MlflowStore(uri, None, EXPERIMENT)
    assert store.search_runs(max_results=1) == []  # creates and migrates the database
    client = MlflowClient(uri)
    exp_id = client.get_experiment_by_name(EXPERIMENT)
    exp_id = exp_id.experiment_id if exp_id else client.create_experiment(EXPERIMENT)
    rng = random.Random(7)
    now = int(time.time() * 1000)
    year_ms = 365 * 86_400_000
    prompt_sha = uuid.UUID(int=rng.getrandbits(128)).hex * 2
    t0 = time.perf_counter()
    for i in range(n):
        model = rng.choice(MODELS)
        version = ENGINE_VERSIONS[min(len(ENGINE_VERSIONS) - 1, i * len(ENGINE_VERSIONS) // n)]
        start = now - year_ms + i * year_ms // n  # in order, as runs accrue
        decode = rng.uniform(20, 120)
        valid = rng.random() > 0.05
        tags = {
            "sparkctl.version": "0.1.0", "engine.kind": "ollama", "engine.version": version,
            "engine.host": "http://127.0.0.1:11434", "model.name": model,
            "model.digest": uuid.uuid4().hex * 2, "model.quantization": "Q4_K_M",
            "model.parameter_size": "8.2B", "model.family": model.split(":")[0], "guard.mode": "beside",
            "guard.cache_policy": "cold", "guard.placement_before": "100% GPU",
            "guard.placement_after": "100% GPU" if valid else "70% GPU/30% CPU", "guard.valid": str(valid).lower(),
            "guard.invalid_reasons": "" if valid else f"{model} placement after the run: 70% GPU/30% CPU",
            "guard.reload_detected": "false", "host.name": rng.choice(HOSTS),
        }
        params = {"model": model, "prompt_sha256": prompt_sha, "prompt_chars": "1312", "num_predict": "512",
                  "temperature": "0.0", "seed": "42", "num_ctx": "8192", "warmup": "1", "reps": "5",
                  "cache_policy": "cold"}
        metrics = {"decode_tps_median": decode, "decode_tps_min": decode * 0.98, "decode_tps_max": decode * 1.02,
                   "decode_tps_cv_pct": rng.uniform(0.2, 3), "ttft_s_median": rng.uniform(0.05, 2),
                   "prefill_tps_median": rng.uniform(500, 5000), "load_s_median": rng.uniform(0, 0.1),
                   "dnf_count": 0.0, "joules_per_token": rng.uniform(0.2, 1.5), "roofline_pct": rng.uniform(40, 90)}
        run = client.create_run(exp_id, start_time=start, run_name=f"{model} @ ollama {version}")
        client.log_batch(run.info.run_id, synchronous=True,
                         metrics=[Metric(k, v, start, 0) for k, v in metrics.items()],
                         params=[Param(k, v) for k, v in params.items()],
                         tags=[RunTag(k, v) for k, v in tags.items()])
        client.set_terminated(run.info.run_id, "FINISHED", end_time=start + 60_000)
        if (i + 1) % 1000 == 0:
            rate = (i + 1) / (time.perf_counter() - t0)
            print(f"  seeded {i + 1:,} runs ({rate:.0f}/s)", file=sys.stderr, flush=True)
    return time.perf_counter() - t0


def timed(fn, tries: int = 7):
    times, out = [], None
    for _ in range(tries):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


_COLD_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import mlflow  # noqa
t_import = time.perf_counter() - t0
sys.path.insert(0, {root!r})
from sparkctl.services.runs import list_runs
from sparkctl.tracking.store import MlflowStore
store = MlflowStore({uri!r}, None, {exp!r})
t1 = time.perf_counter()
store.search_runs_page(max_results=1)
t_open = time.perf_counter() - t1
t2 = time.perf_counter()
rows = list_runs(store, limit=100)
t_page = time.perf_counter() - t2
print(json.dumps({{"import": t_import, "open": t_open, "page": t_page, "total": time.perf_counter() - t0,
                  "rows": len(rows)}}))
"""


def verdict(value: float, budget: float) -> str:
    return "within" if value <= budget else "OVER"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--store", type=Path, help="a folder for the store: seeded if empty, reused if not, kept")
    args = ap.parse_args()
    tmp = None
    if args.store is None:
        tmp = tempfile.TemporaryDirectory(prefix="sparkctl-runs-bench-")
        folder = Path(tmp.name)
    else:
        folder = args.store.expanduser().resolve()
        folder.mkdir(parents=True, exist_ok=True)
    uri = default_tracking_uri(folder)
    seeded = not (folder / DB_FILE_NAME).exists()
    if seeded:
        print(f"seeding {args.runs:,} runs into {folder} ...", file=sys.stderr, flush=True)
        took = seed(uri, args.runs)
        print(f"seeded {args.runs:,} runs (10 metrics, 10 params, 17 tags) in {took:.0f} s")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    child = _COLD_CHILD.format(root=str(ROOT), uri=uri, exp=EXPERIMENT)

    colds = [json.loads(subprocess.run([sys.executable, "-c", child], env=env, check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1]) for _ in range(3)]
    cold = {k: statistics.median(c[k] for c in colds) for k in ("import", "open", "page", "total")}
    imports = [float(subprocess.run([sys.executable, "-c", "import time; t=time.perf_counter(); import mlflow; "
                                     "print(time.perf_counter()-t)"], env=env, check=True, capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1]) for _ in range(3)]

    store = MlflowStore(uri, None, EXPERIMENT)
    store.search_runs_page(max_results=1)  # open once: the times below are queries only
    first, rows = timed(lambda: list_runs(store, limit=100))
    assert len(rows) == 100
    some_model, some_version = rows[0].model, rows[0].engine_version
    filt, frows = timed(lambda: list_runs(store, model=some_model, engine_version=some_version, limit=100))
    # two searches, ILIKE '%qwen3' and '%qwen3:latest', merged; then sparkctl's name key
    by_model, mrows = timed(lambda: list_runs(store, model="qwen3", limit=100))
    by_tag, trows = timed(lambda: list_runs(store, model="qwen3:8b", limit=100))
    since_ms = rows[0].start_ms - 30 * 86_400_000
    since, srows = timed(lambda: list_runs(store, since_ms=since_ms, limit=100))
    fastest, _ = timed(lambda: list_runs(store, order="metrics.decode_tps_median DESC", limit=100), tries=3)
    page1000, rows1000 = timed(lambda: list_runs(store, limit=1000), tries=3)

    def sort_and_filter(page):
        by_speed = sorted(page, key=lambda r: (r.decode_tps_median is None, -(r.decode_tps_median or 0.0)))
        by_date = sorted(page, key=lambda r: r.start_ms or 0)
        valid = [r for r in by_speed if r.valid and "qwen3" in r.model]
        return by_speed, by_date, valid

    mem100, _ = timed(lambda: sort_and_filter(rows), tries=50)
    mem1000, _ = timed(lambda: sort_and_filter(rows1000), tries=50)

    def line(label: str, seconds: float, budget: float | None = None, note: str = "") -> None:
        tail = "" if budget is None else f"  {verdict(seconds, budget)} the {budget * 1000:.0f} ms budget"
        print(f"{label:<46} {seconds * 1000:8.2f} ms{tail}{note}")

    print(f"runs in the store: {args.runs:,} ({'seeded now' if seeded else 'reused'}); MLflow SQLite; "
          f"python {sys.version.split()[0]}")
    line("import mlflow (fresh interpreter)", statistics.median(imports))
    line("cold process: import + open + first page", cold["total"], None,
         f"  (import {cold['import'] * 1000:.0f}, open {cold['open'] * 1000:.0f}, page {cold['page'] * 1000:.0f} ms)")
    line("first page: newest 100 (store open)", first, FIRST_PAGE_BUDGET_S)
    line(f"filter model + engine version ({len(frows)} rows)", filt, SORT_FILTER_BUDGET_S)
    line(f"filter model 'qwen3' (2 searches, {len(mrows)} rows)", by_model, SORT_FILTER_BUDGET_S)
    line(f"filter model 'qwen3:8b' ({len(trows)} rows)", by_tag, SORT_FILTER_BUDGET_S)
    line(f"filter since 30 days ({len(srows)} rows)", since, SORT_FILTER_BUDGET_S)
    line("sort in MLflow by decode tok/s, top 100", fastest, None, "  (not how the table sorts: see below)")
    line("newest 1,000 runs", page1000)
    line("in memory: 2 sorts + 1 filter, 100 rows", mem100, SORT_FILTER_BUDGET_S)
    line("in memory: 2 sorts + 1 filter, 1,000 rows", mem1000, SORT_FILTER_BUDGET_S)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
