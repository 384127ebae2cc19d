"""Runs read straight from MLflow's SQLite file, read-only, without importing MLflow.

``import mlflow`` alone costs 2-3 s of CPU on a small box (measured in
benchmarks/history_cli.py), so `sparkctl runs`, `compare` and the dashboard's
engine-change note could not answer within their budgets through MLflow's client. For a
``sqlite:///`` store they read MLflow's run tables (experiments, runs, tags, params,
latest_metrics, metrics) with the standard library's sqlite3 instead:

- read-only: the file is opened ``mode=ro``; nothing is ever written, created or migrated;
- only at a schema revision this module was checked against (``KNOWN_REVISIONS``, the
  ``alembic_version`` MLflow keeps in the file): the head revision of every MLflow release
  pyproject admits. tests/integration/test_mlflow_revisions.py proves, for each, that the
  answers equal that release's client's (recorded by scripts/mlflow_store_fixtures.py
  under tests/data/mlflow_stores/), and tests/integration/test_history_readers.py does so
  live with the installed MLflow, and fails when it writes a revision not listed here;
- only in MLflow's default workspace, as MLflow's client reads a store when workspaces
  are off: since MLflow 3.10 an experiment's name is unique per workspace, and the client
  refuses a store that holds experiments in another one (so does this reader, with the
  same advice) unless ``MLFLOW_ENABLE_WORKSPACES`` is set (then only the client reads);
- only for the filters and orders ``search_filter`` parses.

Anything else (another revision, a missing file, a filter it does not parse, any sqlite3
error) raises ``Unsupported`` and the caller asks MLflow's client, which is always right.
The SQL mirrors MLflow's SqlAlchemyStore (``_search_runs``, ``_get_orderby_clauses``,
``_get_sqlalchemy_filter_clauses``, ``get_metric_history``) on SQLite.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from sparkctl.tracking.search_filter import (
    ATTRIBUTE,
    METRIC,
    PARAM,
    TAG,
    Clause,
    OrderKey,
    Unsupported,
    parse_filter,
    parse_order_by,
)



@dataclass(frozen=True)
class Revision:
    """What sparkctl's reader must do alike at one schema revision to answer as the client
    of those releases does (each found by its recorded store, tests/data/mlflow_stores)."""

    releases: str  # the MLflow releases whose head revision it is
    workspaces: bool  # experiments carry MLflow's `workspace` column (3.10+)
    looks_ahead: bool  # a page has a next-page token only when more runs follow (3.10+)
    # a NaN metric (stored as 0 with is_nan) matches only "!=" in a filter (3.17+); before,
    # filters compared the stored 0
    nan_filters: bool


# alembic revisions of MLflow's schema whose run tables this module reads correctly: the
# head of every release from 3.7 to 3.17 (pyproject admits >=3.7,<3.18). Add one only with
# its fixture (docs/development.md, "MLflow releases the readers know").
KNOWN_REVISIONS: dict[str, Revision] = {
    "bf29a5ff90ea": Revision("3.7.0", False, False, False),
    "1bd49d398cd23": Revision("3.8.0-3.8.1", False, False, False),
    "d3e4f5a6b7c8": Revision("3.9.0", False, False, False),
    "1b5f0d9ad7c1": Revision("3.10.0-3.10.1", True, True, False),
    "c3d6457b6d8a": Revision("3.11.1", True, True, False),
    "7d34483879f0": Revision("3.12.0", True, True, False),
    "da6fb0208061": Revision("3.13.0", True, True, False),
    "b7e4c1a90f23": Revision("3.14.0", True, True, False),
    "6f8d9c3b2a1e": Revision("3.15.0-3.15.2", True, True, False),
    "b7e2c1a4d9f3": Revision("3.16.0-3.16.1", True, True, False),
    "dc11669786a5": Revision("3.17.0-3.17.2", True, True, True),
}
DEFAULT_WORKSPACE = "default"  # MLflow's DEFAULT_WORKSPACE_NAME
# MLflow's workspaces (a multi-tenant mode): another workspace than the default is read
# through the client
_WORKSPACE_ENV = ("MLFLOW_ENABLE_WORKSPACES", "MLFLOW_WORKSPACE")
_BUSY_TIMEOUT_S = 20.0  # MLflow's own busy_timeout: a write in progress is waited for alike
_ENTITY_TABLE = {METRIC: "latest_metrics", PARAM: "params", TAG: "tags"}


class NoStore(Unsupported):
    """The database file does not exist yet: it holds no runs (MLflow's client would create it)."""


class NoSuchRun(Unsupported):
    """No run of that id: MLflow's client gives its own error for it."""


class StoreRefused(Exception):
    """MLflow's client refuses this store as it is (``str``: why, and what to do)."""


class SqliteRunReader:
    """Read-only searches of one MLflow SQLite file. A connection per call: callers are
    worker threads, and each call sees the file as it is then."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)

    def _connect(self) -> sqlite3.Connection:
        return self._open()[0]

    def _open(self) -> tuple[sqlite3.Connection, Revision]:
        """A read-only connection, and what the file's schema revision holds."""
        if any(os.environ.get(k, "").strip().lower() not in ("", "0", "false") for k in _WORKSPACE_ENV):
            raise Unsupported("MLflow workspaces are configured")
        if not self.db.is_file():
            raise NoStore(f"{self.db} does not exist (MLflow's client creates it)")
        try:
            con = sqlite3.connect(f"file:{quote(str(self.db))}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S,
                                  check_same_thread=False)
        except sqlite3.Error as exc:
            raise Unsupported(f"cannot open {self.db}: {exc}") from None
        try:
            # MLflow's session settings on SQLite (mlflow/store/db/utils.py): LIKE is case-sensitive
            con.execute("PRAGMA case_sensitive_like = true")
            rows = con.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error as exc:
            con.close()
            raise Unsupported(f"no schema revision in {self.db}: {exc}") from None
        if len(rows) != 1 or rows[0][0] not in KNOWN_REVISIONS:
            con.close()
            shown = rows[0][0] if len(rows) == 1 else rows
            raise Unsupported(f"its schema revision {shown} is not one sparkctl's reader knows")
        revision = KNOWN_REVISIONS[rows[0][0]]
        if revision.workspaces:
            try:
                foreign = con.execute("SELECT 1 FROM experiments WHERE workspace != ? LIMIT 1",
                                      (DEFAULT_WORKSPACE,)).fetchone()
            except sqlite3.Error as exc:
                con.close()
                raise Unsupported(f"sqlite: {exc}") from None
            if foreign is not None:
                con.close()
                # what MLflow's SqlAlchemyStore raises when it opens such a store with workspaces off
                raise StoreRefused("it holds experiments outside MLflow's default workspace: set "
                                   "MLFLOW_ENABLE_WORKSPACES=true (and MLFLOW_WORKSPACE) or move them back "
                                   "to the default workspace")
        return con, revision

    # -- experiments -----------------------------------------------------------------

    def experiment(self, name: str) -> tuple[str, str] | None:
        """(experiment id, lifecycle stage) of the experiment called ``name``, or None."""
        con, revision = self._open()
        with _closing(con):
            if revision.workspaces:  # a name is unique per workspace: the client's is the default one
                row = _run(con, "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ? "
                                "AND workspace = ?", (name, DEFAULT_WORKSPACE))
            else:
                row = _run(con, "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ?", (name,))
            row = row.fetchone()
        return None if row is None else (str(row[0]), row[1])

    # -- runs ------------------------------------------------------------------------

    def search_page(self, experiment_id: str, filter_string: str = "", order_by: list[str] | None = None,
                    max_results: int = 100, page_token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of active runs as ``MlflowStore`` returns them, and the next page's token
        (MLflow's own format, so either reader can continue a search)."""
        clauses = parse_filter(filter_string)
        order = parse_order_by(order_by)
        offset = _offset(page_token)
        con, revision = self._open()
        with _closing(con):
            sql, args = _search_sql(int(experiment_id), clauses, order, max_results + 1, offset, revision)
            heads = _run(con, sql, args).fetchall()
            # MLflow 3.10+ looks one run ahead; before, a full page always had a next page
            # (the last one then empty): the token says what that release's client says
            more = len(heads) > max_results if revision.looks_ahead else len(heads) >= max_results
            heads = heads[:max_results]
            runs = _with_data(con, heads)
        token = base64.b64encode(json.dumps({"offset": offset + max_results}).encode()).decode() if more else None
        return runs, token

    def metric_points(self, run_id: str, key: str) -> list[tuple[int, int, float]]:
        """(step, timestamp, value) of every value of one metric of one run, in MLflow's
        order (its get_metric_history: by timestamp, step, value)."""
        with _closing(self._connect()) as con:
            if _run(con, "SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)).fetchone() is None:
                raise NoSuchRun(f"no run {run_id}")  # the client's own error says it best
            rows = _run(con, "SELECT step, timestamp, value, is_nan FROM metrics WHERE run_uuid = ? AND key = ? "
                             "ORDER BY timestamp, step, value", (run_id, key)).fetchall()
        return [(step, ts, float("nan") if is_nan else float(value)) for step, ts, value, is_nan in rows]

    def read_artifact(self, run_id: str, path: str) -> str:
        """One text artifact of a run whose artifacts are local files (``file://``)."""
        with _closing(self._connect()) as con:
            row = _run(con, "SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        uri = urlparse(row[0] if row and row[0] else "")
        if uri.scheme != "file" or uri.netloc not in ("", "localhost"):
            raise Unsupported(f"artifacts of {run_id} are not local files")
        root = Path(unquote(uri.path)).resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            raise Unsupported(f"artifact {path!r} of {run_id}")
        return target.read_text(encoding="utf-8")


class _closing:
    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def __enter__(self) -> sqlite3.Connection:
        return self.con

    def __exit__(self, *exc: object) -> None:
        self.con.close()


def _run(con: sqlite3.Connection, sql: str, args: tuple | list = ()) -> sqlite3.Cursor:
    try:
        return con.execute(sql, args)
    except sqlite3.Error as exc:
        raise Unsupported(f"sqlite: {exc}") from None


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        offset = json.loads(base64.b64decode(token))["offset"]
    except (ValueError, TypeError, KeyError):
        raise Unsupported("page token") from None
    if not isinstance(offset, int) or offset < 0:
        raise Unsupported("page token")
    return offset


# SQLAlchemy's ILIKE on SQLite: lower() on both sides; LIKE is case-sensitive (the pragma
# MLflow sets, and so does _connect), exactly what MLflow gets there.
_SQL_CMP = {"=": "{} = ?", "!=": "{} != ?", "<": "{} < ?", "<=": "{} <= ?", ">": "{} > ?", ">=": "{} >= ?",
            "LIKE": "{} LIKE ?", "ILIKE": "lower({}) LIKE lower(?)"}


def _search_sql(experiment_id: int, clauses: list[Clause], order: list[OrderKey], limit: int,
                offset: int, revision: Revision) -> tuple[str, list]:
    joins: list[str] = []
    join_args: list = []
    where = ["r.experiment_id = ?", "r.lifecycle_stage = 'active'"]
    where_args: list = [experiment_id]
    for c in clauses:
        if c.entity == ATTRIBUTE:
            where.append(_SQL_CMP[c.comparator].format("r." + c.key))
            where_args.append(c.value)
            continue
        table = _ENTITY_TABLE[c.entity]
        test = _SQL_CMP[c.comparator].format("e.value")
        if c.entity == METRIC and revision.nan_filters:
            # NaN is stored as 0 with is_nan: it matches only "!=" (MLflow 3.17's rule)
            test = f"({test} OR e.is_nan = 1)" if c.comparator == "!=" else f"({test} AND e.is_nan = 0)"
        where.append(f"EXISTS (SELECT 1 FROM {table} e WHERE e.run_uuid = r.run_uuid AND e.key = ? AND {test})")
        where_args += [c.key, c.value]
    order_sql: list[str] = []
    for i, o in enumerate(order):
        if o.entity == ATTRIBUTE:
            value = "r." + o.key
            missing = f"CASE WHEN {value} IS NULL THEN 1 ELSE 0 END"
        else:
            alias = f"o{i}"
            cols = "run_uuid, value, is_nan" if o.entity == METRIC else "run_uuid, value"
            joins.append(f"LEFT OUTER JOIN (SELECT {cols} FROM {_ENTITY_TABLE[o.entity]} WHERE key = ?) {alias} "
                         f"ON {alias}.run_uuid = r.run_uuid")
            join_args.append(o.key)
            value = f"{alias}.value"
            missing = (f"CASE WHEN {alias}.is_nan = 1 THEN 1 WHEN {value} IS NULL THEN 2 ELSE 0 END"
                       if o.entity == METRIC else f"CASE WHEN {value} IS NULL THEN 1 ELSE 0 END")
        order_sql += [missing, value + ("" if o.ascending else " DESC")]
    if not any(o.entity == ATTRIBUTE and o.key == "start_time" for o in order):
        order_sql.append("r.start_time DESC")
    order_sql.append("r.run_uuid")
    sql = (f"SELECT r.run_uuid, r.name, r.experiment_id, r.status, r.start_time, r.end_time, r.artifact_uri "
           f"FROM runs r {' '.join(joins)} WHERE {' AND '.join(where)} ORDER BY {', '.join(order_sql)} "
           f"LIMIT ? OFFSET ?")
    return sql, join_args + where_args + [limit, offset]


def _with_data(con: sqlite3.Connection, heads: list[tuple]) -> list[dict[str, Any]]:
    """The page's runs with their params, tags and latest metrics, in three queries."""
    ids = [h[0] for h in heads]
    data: dict[str, dict[str, dict]] = {i: {"params": {}, "tags": {}, "metrics": {}} for i in ids}
    marks = ",".join("?" * len(ids))
    if ids:
        for run, key, value in _run(con, f"SELECT run_uuid, key, value FROM params WHERE run_uuid IN ({marks})", ids):
            data[run]["params"][key] = value
        for run, key, value in _run(con, f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({marks})", ids):
            data[run]["tags"][key] = value
        for run, key, value, is_nan in _run(
                con, f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN ({marks})", ids):
            data[run]["metrics"][key] = float("nan") if is_nan else float(value)
    return [
        {"run_id": run_id, "run_name": name, "experiment_id": str(exp), "status": status, "start_time": start,
         "end_time": end, "artifact_uri": artifact_uri, **data[run_id]}
        for run_id, name, exp, status, start, end, artifact_uri in heads
    ]
