"""Record what one MLflow release writes and answers, for the history readers' tests.

sparkctl reads MLflow's SQLite file itself (sparkctl/tracking/sqlite_reader.py) only at
schema revisions it was checked against. pyproject admits a range of MLflow releases; each
writes its own head revision. This script is run once per release, with the interpreter of
a throwaway virtualenv that has that release installed (see docs/development.md,
"MLflow releases the readers know"):

    /tmp/mlf/v3.9.0/bin/python scripts/mlflow_store_fixtures.py tests/data/mlflow_stores

It writes sparkctl's test runs (tests/integration/history_cases.py) through sparkctl's own
writer and that release's client into a fresh store, asks that client every search of the
test cases, and records into OUT_DIR:

- ``<revision>.sql.gz``: the store as SQL (sqlite3's iterdump), schema and rows as that
  release made them: generated test data, 70-90 KiB of SQL (8-11 KiB compressed);
- ``<revision>.json.gz``: the release, the revision, the columns of the tables the reader
  reads, the client's answers (each run once, then the run ids of every page of each
  search at two page sizes; metric histories), and what the client does when an
  experiment lies outside MLflow's default workspace.

tests/integration/test_mlflow_revisions.py rebuilds each store and checks that the reader
answers exactly what that release's client answered. The same run also checks the REST
reader against that release's `mlflow server` (live, here; it needs no fixture: the REST
reader passes searches to the server).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MlflowStore sets MLflow's HTTP timeout once per process from the first store (the SQLite
# one, 5 s); a freshly started server on a busy box answers its first search slower
os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "120"

from sparkctl.tracking.record import RunRecord  # noqa: E402
from sparkctl.tracking.store import MlflowStore  # noqa: E402
from tests.integration.history_cases import SEARCHES, TEST_EXPERIMENT, plain, records  # noqa: E402

READ_TABLES = ("experiments", "runs", "tags", "params", "latest_metrics", "metrics", "alembic_version")
PAGE_SIZES = (5, 100)
HISTORY_KEYS = ("engine_decode_tps", "spec_acceptance_pct", "no-such-metric")
FOREIGN_WORKSPACE = "team-b"


def pages(store: MlflowStore, filter_string: str, order_by, size: int) -> list:
    out, token = [], None
    while True:
        page, token = store.search_runs_page(filter_string, order_by, size, token)
        out.append(plain(page))
        if not token:
            return out


def columns(con: sqlite3.Connection) -> dict[str, list[str]]:
    return {t: [row[1] for row in con.execute(f"PRAGMA table_info({t})")] for t in READ_TABLES}


def answers(store: MlflowStore, ids: list[str]) -> dict:
    searches = []
    for filter_string, order_by in SEARCHES:
        f = filter_string.format(run_id=ids[2])
        searches.append({"filter": f, "order_by": order_by,
                         "pages": {str(n): pages(store, f, order_by, n) for n in PAGE_SIZES}})
    histories = {run_id: {key: [(s, t, "NaN" if v != v else v) for s, t, v in store._metric_points(run_id, key)]
                          for key in HISTORY_KEYS}
                 for run_id in ids[:8]}
    return {"searches": searches, "histories": histories,
            "other_experiment": plain(store.search_runs(experiment="other")),
            "missing_experiment": store.search_runs(experiment="no-such")}


def compact(record: dict) -> dict:
    """Each run's data once (``runs``); pages as lists of run ids. A run that reads
    differently in two answers would be a finding, not something to fold away."""
    if "runs" in record:
        return record
    runs: dict[str, dict] = {}

    def ids(page: list[dict]) -> list[str]:
        for run in page:
            if runs.setdefault(run["run_id"], run) != run:
                raise SystemExit(f"run {run['run_id']} reads differently in two answers")
        return [run["run_id"] for run in page]

    searches = [{**case, "pages": {size: [ids(p) for p in pages] for size, pages in case["pages"].items()}}
                for case in record["searches"]]
    return {**record, "searches": searches, "other_experiment": ids(record["other_experiment"]), "runs": runs}


def write_record(out_dir: Path, record: dict) -> Path:
    path = out_dir / f"{record['revision']}.json.gz"
    text = json.dumps(compact(record), indent=0, sort_keys=True) + "\n"
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as fh:  # mtime 0: same input, same bytes
        fh.write(text.encode("utf-8"))
    return path


def workspace_probe(db: Path, folder: Path) -> dict:
    """The same name in another workspace: what this release's client does (a fresh
    process: MLflow checks the workspaces when it opens a store)."""
    with sqlite3.connect(db) as con:
        if "workspace" not in columns(con)["experiments"]:
            return {"has_column": False}
    probe = folder / "workspace.db"
    shutil.copy2(db, probe)
    with sqlite3.connect(probe) as con:
        (exp_id,) = con.execute("SELECT max(experiment_id) + 1 FROM experiments").fetchone()
        con.execute("INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, "
                    "creation_time, last_update_time, workspace) VALUES (?, ?, ?, 'active', 1, 1, ?)",
                    (exp_id, TEST_EXPERIMENT, "file:///nowhere", FOREIGN_WORKSPACE))
    code = ("import json, sys\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "from sparkctl.tracking.store import MlflowStore, TrackingError\n"
            f"s = MlflowStore('sqlite:///{probe}', None, {TEST_EXPERIMENT!r}, fast_reads=False)\n"
            "try:\n    print(json.dumps({'runs': len(s.search_runs())}))\n"
            "except TrackingError as exc:\n    print(json.dumps({'error': str(exc)}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"workspace probe failed: {done.stderr[-2000:]}")
    return {"has_column": True, "foreign_workspace": FOREIGN_WORKSPACE,
            "client": json.loads(done.stdout.strip().splitlines()[-1])}


def check_rest(db: Path, folder: Path, expected: dict) -> None:
    """The REST reader against this release's own server: the same pages as its client."""
    served = folder / "served.db"
    shutil.copy2(db, served)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mlflow = Path(sys.executable).with_name("mlflow")
    server = subprocess.Popen([str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port),
                               "--backend-store-uri", f"sqlite:///{served}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder,
                              env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}, start_new_session=True)
    try:
        import httpx

        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("mlflow server did not start")
            time.sleep(0.5)
        fast = MlflowStore(url, None, TEST_EXPERIMENT, timeout_s=60, log_dir=folder)
        slow = MlflowStore(url, None, TEST_EXPERIMENT, timeout_s=60, fast_reads=False, log_dir=folder)
        for case in expected["searches"]:
            got = pages(fast, case["filter"], case["order_by"], 5)
            if got != pages(slow, case["filter"], case["order_by"], 5):
                raise SystemExit(f"REST reader differs from the client on {case['filter']!r} {case['order_by']}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its uvicorn/gunicorn workers
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print(f"usage: {argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    import mlflow

    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkctl-mlflow-fixture-") as tmp:
        folder = Path(tmp)
        db = folder / "mlflow.db"
        writer = MlflowStore(f"sqlite:///{db}", folder / "artifacts", TEST_EXPERIMENT, fast_reads=False)
        ids = [writer.write(r) for r in records()]
        writer.write(RunRecord(experiment="other", run_name="elsewhere", start_ms=1, end_ms=2,
                               tags={"model.name": "qwen3:8b"}))
        mlflow.MlflowClient(writer.uri).delete_run(ids[4])
        expected = answers(writer, ids)
        with sqlite3.connect(db) as con:
            (revision,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
            shape = columns(con)
            dump = "\n".join(con.iterdump()) + "\n"
        record = {"mlflow": mlflow.__version__, "revision": revision, "columns": shape, "run_ids": ids,
                  "workspace": workspace_probe(db, folder), **expected}
        check_rest(db, folder, expected)
    # mtime 0: the same store gives the same bytes, so a re-run shows no change in git
    with gzip.GzipFile(out_dir / f"{revision}.sql.gz", "wb", compresslevel=9, mtime=0) as fh:
        fh.write(dump.encode("utf-8"))
    write_record(out_dir, record)
    print(f"mlflow {mlflow.__version__}: revision {revision} -> {out_dir}/{revision}.json.gz, .sql.gz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
