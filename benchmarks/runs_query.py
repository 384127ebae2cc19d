"""Run history on a long record (budgets: first page <= 1 s, sort/filter <= 100 ms).

Reads the cached 10,000-run MLflow SQLite store of benchmarks/bench_store.py (generated
once per MLflow version: 24 models, 8 engine versions, 3 hosts, a year of start times,
shaped like the bench's records), the way `sparkctl runs` and the Runs screen read it:
through MlflowStore, whose searches of a SQLite file go to sparkctl's read-only reader.
Then times, each the median of several tries unless marked cold:

- a fresh process opening the store and reading the first page (what `sparkctl runs` and
  the Runs screen pay before the first row shows; cold); for reference `import mlflow`
  and the same first page through MLflow's own client (what they paid before);
- list_runs: the newest 100 runs; filtered by model + engine version; by model alone
  (ILIKE pre-filter + sparkctl's name key); since a date; sorted by decode tok/s in SQL;
- in memory, as the TUI table sorts and filters a loaded page: 100 and 1,000 RunRows.

Run: .venv/bin/python benchmarks/runs_query.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from bench_store import EXPERIMENT, ensure_store  # noqa: E402

from sparkctl.services.runs import list_runs  # noqa: E402
from sparkctl.tracking.store import MlflowStore, default_tracking_uri  # noqa: E402

FIRST_PAGE_BUDGET_S = 1.0
SORT_FILTER_BUDGET_S = 0.100


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
sys.path.insert(0, {root!r})
from sparkctl.services.runs import list_runs
from sparkctl.tracking.store import MlflowStore
store = MlflowStore({uri!r}, None, {exp!r}, fast_reads={fast!r})
rows = list_runs(store, limit=100)
print(json.dumps({{"total": time.perf_counter() - t0, "rows": len(rows), "mlflow": "mlflow" in sys.modules}}))
"""


def verdict(value: float, budget: float) -> str:
    return "within" if value <= budget else "OVER"


def main() -> None:
    folder = ensure_store()
    uri = default_tracking_uri(folder)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed

    def cold(fast: bool) -> dict:
        child = _COLD_CHILD.format(root=str(ROOT), uri=uri, exp=EXPERIMENT, fast=fast)
        runs = [json.loads(subprocess.run([sys.executable, "-c", child], env=env, check=True, capture_output=True,
                                          text=True).stdout.strip().splitlines()[-1]) for _ in range(4)][1:]
        return {"total": statistics.median(r["total"] for r in runs), "mlflow": any(r["mlflow"] for r in runs)}

    cold_reader, cold_client = cold(True), cold(False)
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

    print(f"runs in the store: 10,000 ({folder}); MLflow SQLite; python {sys.version.split()[0]}")
    line("import mlflow (fresh interpreter, reference)", statistics.median(imports))
    line("cold process: first page through MLflow's client", cold_client["total"], None, "  (before)")
    line("cold process: first page (sparkctl's reader)", cold_reader["total"], FIRST_PAGE_BUDGET_S,
         f"  (mlflow imported: {cold_reader['mlflow']})")
    line("first page: newest 100 (store open)", first, FIRST_PAGE_BUDGET_S)
    line(f"filter model + engine version ({len(frows)} rows)", filt, SORT_FILTER_BUDGET_S)
    line(f"filter model 'qwen3' (2 searches, {len(mrows)} rows)", by_model, SORT_FILTER_BUDGET_S)
    line(f"filter model 'qwen3:8b' ({len(trows)} rows)", by_tag, SORT_FILTER_BUDGET_S)
    line(f"filter since 30 days ({len(srows)} rows)", since, SORT_FILTER_BUDGET_S)
    line("sorted by decode tok/s in the query, top 100", fastest, None, "  (not how the table sorts: see below)")
    line("newest 1,000 runs", page1000)
    line("in memory: 2 sorts + 1 filter, 100 rows", mem100, SORT_FILTER_BUDGET_S)
    line("in memory: 2 sorts + 1 filter, 1,000 rows", mem1000, SORT_FILTER_BUDGET_S)


if __name__ == "__main__":
    main()
