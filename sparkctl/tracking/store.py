"""Writing run records to MLflow, and reading runs back.

``import mlflow`` costs ~2 s and ~180 MB, and a fresh SQLite store ~6-9 s of schema
migrations, so this module never imports MLflow at module level: the first method call
does, and that call belongs on a worker thread. Only ``MlflowClient`` with explicit run
ids is used; the fluent API keeps its active run per thread and would silently start
stray runs from a worker.

A tracking server is also held to a total deadline per write or read (``deadline_s``,
``[tracking] timeout_s``): MLflow's per-request timeout bounds each socket read, never a
whole call, and a server that drips its answers would hold a bench's wrap-up, ``sync`` or
``runs`` forever (``tracking/deadline.py``). A signal shortens that deadline to seconds.

Every failure surfaces as ``TrackingError`` with a one-line message fit for a status bar.
No credential ever appears in one: the tracking URI may carry ``user:token@`` (a team
server), and MLflow's and requests' exceptions quote the full request URL, so every
message, ``repr`` and log line goes through ``sparkctl.core.redact``. Credentials are
best passed the MLflow way, in ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``
or ``MLFLOW_TRACKING_TOKEN``, which MLflow reads from the environment itself.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sparkctl.core.oserrors import disk_problem
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.tracking.deadline import DeadlinePassed, call_within
from sparkctl.tracking.record import FILE_ARTIFACT_KEY, RunRecord
from sparkctl.tracking.rest_reader import RestError, RestRunReader
from sparkctl.tracking.search_filter import Unsupported
from sparkctl.tracking.sqlite_reader import NoStore, NoSuchRun, SqliteRunReader, StoreRefused

RECORD_ID_TAG = "sparkctl.record_id"
# Parent and child runs (MLflow's UI nests a run under the run its `mlflow.parentRunId` names):
# a sweep cell names its sweep's record (sparkctl.parent_record_id), resolved here to that
# record's run; `--mlflow-parent-run-id` names an existing run (sparkctl.parent_run_id), as
# AIPerf's flag of that name does.
PARENT_RECORD_TAG = "sparkctl.parent_record_id"
PARENT_RUN_TAG = "sparkctl.parent_run_id"
MLFLOW_PARENT_TAG = "mlflow.parentRunId"
# A parent created before its own record arrived (a cell replayed first, or a sweep that died
# before writing its summary): the record, when it comes, is written into it.
STUB_TAG = "sparkctl.stub"
PARENT_MISSING_TAG = "sparkctl.parent_missing"
# Each run's own copy of the file naming it, in AIPerf's layout (exports/mlflow_export.json).
EXPORT_ARTIFACT = "exports/mlflow_export.json"
# Set after everything else is logged: a run without it is a partial write, which a
# replay of the same record replaces (the partial one is soft-deleted).
COMPLETE_TAG = "sparkctl.record_complete"

DB_FILE_NAME = "mlflow.db"
ARTIFACTS_DIR_NAME = "artifacts"
# MLflow's own log lines (store creation, schema migrations) go here, in the data dir,
# never to the user's terminal.
LOG_FILE_NAME = "mlflow.log"
LOG_FILE_MAX_BYTES = 1 << 20
# Beside the database: held while a process opens (and, when fresh, migrates) the store.
DB_LOCK_SUFFIX = ".lock"
# How long to wait for another process that is creating the database (~6-9 s normally).
DB_CREATE_WAIT_S = 180.0
# The most one write or read of a tracking server may take, all its requests together
# ([tracking] timeout_s).
DEFAULT_DEADLINE_S = 60.0

# MLflow's per-request limits for log_batch (mlflow/utils/validation.py).
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE_LEN = 6000
MAX_TAG_VALUE_LEN = 8000

_MESSAGE_MAX = 300


class TrackingError(Exception):
    """MLflow could not be reached or refused the write. ``str()`` is one line.

    ``unreachable`` is True when the tracking server could not be contacted at all, so a
    caller replaying many records can stop instead of waiting out each timeout.

    The message is redacted (``redact_text``): whoever raises one cannot leak a credential
    through it."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(redact_text(message))
        self.unreachable = unreachable


def default_tracking_uri(data_dir: Path) -> str:
    """``sqlite:////abs/path/mlflow.db`` inside ``data_dir`` (absolute: MLflow's own
    default is relative to the current directory)."""
    return "sqlite:///" + str(Path(data_dir).expanduser().resolve() / DB_FILE_NAME)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None (other schemes, in-memory)."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    rest = unquote(uri[len(prefix) :].split("?", 1)[0])
    if not rest or rest == ":memory:":
        return None
    return Path(rest).resolve()  # a relative path resolves against the cwd, as SQLAlchemy does


def _configure_mlflow_env(timeout_s: float, max_retries: int) -> None:
    # setdefault: a user's own setting wins. These are process-wide (MLflow reads them on
    # every request), so the first store created decides for the process.
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # Otherwise `import mlflow` puts a stderr handler on its loggers (INFO lines such as
    # "Creating initial MLflow database tables..." over the TUI); route_mlflow_logging
    # sends them to a file instead, and re-routes after the import if a user's
    # MLFLOW_CONFIGURE_LOGGING=true made MLflow install its handler anyway.
    os.environ.setdefault("MLFLOW_CONFIGURE_LOGGING", "false")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(max(0, int(max_retries))))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, math.ceil(timeout_s))))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    # compare reads each eval's items.jsonl: no "Downloading artifacts" bars on stderr
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def _direct_to_loopback(uri: str) -> None:
    """A tracking server on this machine is asked directly, as every loopback URL is
    (core/loopback.py). MLflow's client is `requests`, which sends even 127.0.0.1 to
    http(s)_proxy unless no_proxy names it: the server's host is added to no_proxy (both
    spellings, process-wide, only while a proxy variable is set). A remote server keeps
    the user's proxy settings untouched."""
    from urllib.parse import urlsplit

    from sparkctl.core.loopback import is_loopback_url

    if not uri.startswith(("http://", "https://")) or not is_loopback_url(uri):
        return
    if not any(os.environ.get(v) for v in ("http_proxy", "https_proxy", "all_proxy",
                                           "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")):
        return
    host = urlsplit(uri).hostname or ""
    for var in ("no_proxy", "NO_PROXY"):
        entries = [e.strip() for e in os.environ.get(var, "").split(",") if e.strip()]
        if host not in entries:
            os.environ[var] = ",".join([*entries, host])


# Loggers MLflow writes through while opening a store: its own, the schema migrations
# (alembic), and what MLflow itself configures (SQLAlchemy, its huey job queue).
_MLFLOW_LOGGERS = ("mlflow", "alembic", "sqlalchemy", "huey")
_routing_lock = threading.Lock()
_routed_to: Path | None = None
_handler: logging.Handler | None = None


def route_mlflow_logging(log_file: Path) -> None:
    """Send MLflow's (and alembic's) log lines to ``log_file``, never to the terminal.

    Process-wide (loggers are): the last store opened decides the file. Call before and
    after ``import mlflow``: MLflow may replace the handlers of its loggers on import.
    If the file cannot be opened the lines are dropped, never printed."""
    global _routed_to, _handler
    log_file = Path(log_file)
    with _routing_lock:
        if _handler is None or _routed_to != log_file:
            handler: logging.Handler
            try:
                log_file.parent.mkdir(parents=True, exist_ok=True)
                _rotate_if_large(log_file)
                handler = _LogFileHandler(log_file, encoding="utf-8", delay=True)
                handler.setFormatter(
                    _RedactingFormatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
                )
            except OSError:
                handler = logging.NullHandler()
            if _handler is not None:
                _handler.close()
            _handler, _routed_to = handler, log_file
        level = (os.environ.get("MLFLOW_LOGGING_LEVEL") or "INFO").upper()
        if level not in logging.getLevelNamesMapping():
            level = "INFO"
        for name in _MLFLOW_LOGGERS:
            logger = logging.getLogger(name)
            logger.handlers = [_handler]
            logger.propagate = False  # not to the root logger (and Python's stderr last resort)
            logger.setLevel("WARNING" if name == "sqlalchemy" else level)
        # Ten lines on every import of alembic, saying nothing about the database.
        logging.getLogger("alembic.runtime.plugins").setLevel("WARNING")


class _LogFileHandler(logging.FileHandler):
    """MLflow's log file. When a line cannot be written (a full disk, a read-only data
    dir), logging's own handler prints a traceback for every line, dozens of lines each;
    this one says so in one line, once, and drops the lines after it."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        import sys

        if self.failed:
            return
        self.failed = True
        exc = sys.exc_info()[1]
        try:
            sys.stderr.write(f"sparkctl: cannot write MLflow's log {self.baseFilename}: {disk_problem(exc)}; "
                             "its lines are dropped\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # the terminal is gone as well
        try:
            self.close()
        except (OSError, ValueError):
            pass


class _RedactingFormatter(logging.Formatter):
    """MLflow's log lines may quote the tracking URI (credentials included) or a request
    URL; the file gets them redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def _rotate_if_large(log_file: Path) -> None:
    """Keep one previous log (``mlflow.log.1``) once the log passes ``LOG_FILE_MAX_BYTES``."""
    try:
        if log_file.stat().st_size > LOG_FILE_MAX_BYTES:
            os.replace(log_file, log_file.with_name(log_file.name + ".1"))
    except OSError:
        pass


def _one_line(text: str) -> str:
    # Redact before clipping: a URL cut in its password would no longer look like one.
    line = " ".join(redact_text(str(text)).split())
    return line if len(line) <= _MESSAGE_MAX else line[: _MESSAGE_MAX - 3] + "..."


def _chunks(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


class MlflowStore:
    """An MLflow tracking backend (SQLite file or tracking server) for one experiment.

    ``artifact_root``: where runs' artifacts go for experiments this store creates. For a
    SQLite URI it defaults to ``<db dir>/artifacts`` (MLflow would otherwise use
    ``./mlruns`` relative to the current directory); for a server, None lets the server
    choose. An existing experiment keeps the location it was created with.

    Thread-safe: the client and experiment ids are created once under a lock; MLflow's
    client is safe to share when every call names its run id.

    Reads (searches, metric histories, local artifacts) of a SQLite store go through
    sparkctl's read-only reader when it can answer, MLflow's client when it cannot;
    ``without_mlflow()`` gives reads that never import MLflow at all (the dashboard's).
    """

    def __init__(
        self,
        uri: str,
        artifact_root: Path | None,
        experiment: str,
        timeout_s: float = 5,
        max_retries: int = 0,
        *,
        log_dir: Path | None = None,
        fast_reads: bool = True,
        deadline_s: float | None = DEFAULT_DEADLINE_S,
    ) -> None:
        self.uri = uri
        self.experiment = experiment
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.max_retries = max_retries
        db = sqlite_path(uri)
        if artifact_root is None and db is not None:
            artifact_root = db.parent / ARTIFACTS_DIR_NAME
        self.artifact_root = Path(artifact_root).expanduser().resolve() if artifact_root else None
        if log_dir is None:
            if db is not None:
                log_dir = db.parent
            else:
                from sparkctl import paths

                log_dir = paths.data_dir()
        self.log_file = Path(log_dir).expanduser().resolve() / LOG_FILE_NAME
        self._lock = threading.Lock()
        self._client: Any = None
        self._experiment_ids: dict[str, str] = {}
        # Reads that need no `import mlflow` (tracking/sqlite_reader.py): None where only
        # MLflow's client can read this store (or `fast_reads=False`, which tests use to
        # get the client's own answers).
        self._reader: Any = None
        # why MLflow's client answered a read the fast reader could not (the first time), and
        # who to tell: the CLI prints it once on stderr; None tells nobody
        self.fallback_reason: str | None = None
        self.on_fallback: Callable[[str], None] | None = None
        if fast_reads and db is not None:
            self._reader = SqliteRunReader(db)
        elif fast_reads and self.is_remote:
            self._reader = RestRunReader(uri, timeout_s)

    def __repr__(self) -> str:
        return f"MlflowStore({self.display_uri!r}, experiment={self.experiment!r})"

    @property
    def display_uri(self) -> str:
        """``uri`` fit to show or log: credentials and secret query values as ``***``."""
        return redact_uri(self.uri)

    @property
    def is_remote(self) -> bool:
        return self.uri.startswith(("http://", "https://"))

    def _bounded(self, action: str, fn):
        """``fn()`` within the store's total deadline when the store is a server (a local
        SQLite file is not: its creation alone can take most of a minute on a busy box)."""
        if not self.is_remote:
            return fn()
        try:
            return call_within(fn, self.deadline_s, name=f"sparkctl-tracking-{action}")
        except DeadlinePassed as exc:
            why = ("(stopped by a signal)" if exc.hurried
                   else f"within {self.deadline_s:g} s ([tracking] timeout_s)")
            raise TrackingError(f"MLflow server {self.display_uri} did not finish the {action} {why}",
                                unreachable=True) from None

    # -- client and experiment -----------------------------------------------------

    def _get_client(self):
        with self._lock:
            if self._client is None:
                _configure_mlflow_env(self.timeout_s, self.max_retries)
                _direct_to_loopback(self.uri)
                route_mlflow_logging(self.log_file)
                from mlflow import MlflowClient

                route_mlflow_logging(self.log_file)
                db = sqlite_path(self.uri)
                if db is None:
                    self._client = MlflowClient(tracking_uri=self.uri)
                else:
                    db.parent.mkdir(parents=True, exist_ok=True)
                    # MLflow creates a fresh SQLite store in its constructor: it creates the
                    # tables, then runs ~70 migrations. A second process opening the file
                    # meanwhile sees tables at an old revision and refuses them as "out of
                    # date". One process at a time opens the store; the others wait.
                    with _file_lock(db.with_name(db.name + DB_LOCK_SUFFIX), DB_CREATE_WAIT_S, self.uri):
                        client = MlflowClient(tracking_uri=self.uri)
                        client.search_experiments(max_results=1)  # opens (creates, migrates) the store
                    self._client = client
            return self._client

    def _experiment_id(self, client, name: str, *, create: bool) -> str | None:
        with self._lock:
            cached = self._experiment_ids.get(name)
        if cached is not None:
            return cached
        exp = client.get_experiment_by_name(name)
        if exp is None:
            if not create:
                return None
            location = self.artifact_root.as_uri() if self.artifact_root else None
            try:
                exp_id = client.create_experiment(name, artifact_location=location)
            except Exception as exc:
                # Another process may have created it between our look-up and create.
                exp = client.get_experiment_by_name(name)
                if exp is None:
                    raise exc
                exp_id = exp.experiment_id
        else:
            if exp.lifecycle_stage == "deleted":
                raise _deleted_experiment(name, exp.experiment_id)
            exp_id = exp.experiment_id
        with self._lock:
            self._experiment_ids[name] = exp_id
        return exp_id

    def _error(self, exc: BaseException, action: str) -> TrackingError:
        if isinstance(exc, TrackingError):
            return exc
        text = str(exc)
        low = text.lower()
        if "out-of-date database schema" in low or "alembic" in low or (
            type(exc).__module__.startswith("alembic")
        ):
            if "can't locate revision" in low:
                return TrackingError(
                    f"the MLflow database {self.display_uri} was written by a newer MLflow; "
                    "upgrade the mlflow package"
                )
            return TrackingError(
                f"the MLflow database schema is out of date: run `mlflow db upgrade {self.display_uri}` "
                "(back up the database first)"
            )
        if "database or disk is full" in low or "no space left on device" in low:
            db = sqlite_path(self.uri)
            where = f" holding {db.parent}" if db is not None else ""
            return TrackingError(f"MLflow {action} failed: the disk{where} is full; free space there")
        if "cannot disable workspaces" in low:
            return self._refused("it holds experiments outside MLflow's default workspace: set "
                                 "MLFLOW_ENABLE_WORKSPACES=true (and MLFLOW_WORKSPACE) or move them back "
                                 "to the default workspace")
        unreachable_markers = (
            "connection refused",
            "max retries exceeded",
            "failed to establish a new connection",
            "name or service not known",
            "timed out",
            "connectionerror",
        )
        if self.is_remote and any(m in low for m in unreachable_markers):
            if "connection refused" in low:
                why = "connection refused"
            elif "timed out" in low or "timeout" in low:
                why = "timed out"
            elif "name or service not known" in low or "name resolution" in low:
                why = "unknown host"
            else:
                why = _one_line(text)
            return TrackingError(
                f"MLflow server {self.display_uri} is unreachable during {action} ({why})",
                unreachable=True,
            )
        return TrackingError(f"MLflow {action} failed: {type(exc).__name__}: {_one_line(text)}")

    def _refused(self, why: str) -> TrackingError:
        return TrackingError(f"the MLflow database {self.display_uri} cannot be used: {why}")

    # -- writing -------------------------------------------------------------------

    def write(self, record: RunRecord) -> str:
        """Write ``record`` as one MLflow run and return its run id (within the deadline)."""
        return self._bounded("write", lambda: self._write(record))

    def _write(self, record: RunRecord) -> str:
        """Write ``record`` as one MLflow run and return its run id.

        The run goes to the experiment named by ``record.experiment`` (the store's own
        experiment when that is empty), created on first use.

        Idempotent per ``record.record_id``: if a complete run with that id exists in the
        experiment, its id is returned and nothing is written. If logging fails after the
        run was created, the run is terminated as FAILED (never left RUNNING) and
        ``TrackingError`` is raised. Blocking: call from a worker thread."""
        run_id: str | None = None
        stub: str | None = None
        try:
            client = self._get_client()
            exp_id = self._experiment_id(client, record.experiment or self.experiment, create=True)
            existing, stub = self._find_complete_run(client, exp_id, record)
            if existing is not None:
                return existing
            parent_id = self._parent_of(client, exp_id, record)
            if stub is not None:
                # a cell arrived first and made this parent: the record fills it in
                run_id = stub
                client.update_run(run_id, name=record.run_name)
                client.delete_tag(run_id, STUB_TAG)
                if parent_id:
                    client.set_tag(run_id, MLFLOW_PARENT_TAG, parent_id)
            else:
                create_tags = {RECORD_ID_TAG: record.record_id}
                if parent_id:
                    create_tags[MLFLOW_PARENT_TAG] = parent_id
                run = client.create_run(exp_id, start_time=record.start_ms, tags=create_tags, run_name=record.run_name)
                run_id = run.info.run_id
            self._log_everything(client, run_id, record)
            self._log_export(client, run_id, record, parent_id)
            client.set_tag(run_id, COMPLETE_TAG, "true")
            client.set_terminated(run_id, status=record.status, end_time=record.end_ms)
            return run_id
        except BaseException as exc:
            if run_id is not None:
                try:
                    client.set_terminated(run_id, status="FAILED", end_time=record.end_ms)
                    if run_id == stub:  # still the placeholder its children point to: a replay fills it
                        client.set_tag(run_id, STUB_TAG, "true")
                except Exception:
                    pass  # the store is gone; nothing more we can do for this run
            if not isinstance(exc, Exception):
                raise
            raise self._error(exc, "write") from None  # the cause quotes the URL, credentials and all

    def _find_complete_run(self, client, exp_id: str, record: RunRecord) -> tuple[str | None, str | None]:
        """(the complete run of this record, or None; a stub parent made for it, or None)."""
        from mlflow.entities import ViewType

        runs = client.search_runs(
            [exp_id],
            filter_string=f"tags.`{RECORD_ID_TAG}` = '{record.record_id}'",
            run_view_type=ViewType.ALL,
            max_results=100,
        )
        found: str | None = None
        stub: str | None = None
        for run in runs:
            if run.data.tags.get(STUB_TAG) == "true" and run.info.lifecycle_stage != "deleted":
                stub = stub or run.info.run_id
            elif run.data.tags.get(COMPLETE_TAG) == "true":
                if found is None:
                    found = run.info.run_id
                    if run.info.status == "RUNNING":
                        # Crashed between the last log call and set_terminated.
                        client.set_terminated(
                            found, status=record.status, end_time=record.end_ms
                        )
            elif run.info.lifecycle_stage != "deleted":
                # A partial write from an earlier attempt: hide it; this replay supersedes it.
                if run.info.status == "RUNNING":
                    client.set_terminated(run.info.run_id, status="FAILED")
                client.delete_run(run.info.run_id)
        return found, (None if found is not None else stub)

    def _parent_of(self, client, exp_id: str, record: RunRecord) -> str | None:
        """The run id `record` is a child of: an existing run named by --mlflow-parent-run-id
        (a missing one is said in a tag, and the run is written as a root run, as AIPerf does),
        or its sweep's run, found by record id or made as a stub until the sweep's record comes."""
        from mlflow.entities import ViewType

        named = record.tags.get(PARENT_RUN_TAG, "").strip()
        if named:
            try:
                client.get_run(named)
                return named
            except Exception as exc:
                if "RESOURCE_DOES_NOT_EXIST" not in repr(exc) and "not found" not in str(exc).lower():
                    raise
                record.tags[PARENT_MISSING_TAG] = named
                return None
        parent_record = record.tags.get(PARENT_RECORD_TAG, "").strip()
        if not parent_record or not _record_id_ok(parent_record):
            return None
        runs = client.search_runs([exp_id], filter_string=f"tags.`{RECORD_ID_TAG}` = '{parent_record}'",
                                  run_view_type=ViewType.ACTIVE_ONLY, max_results=10)
        for run in runs:
            if run.data.tags.get(COMPLETE_TAG) == "true" or run.data.tags.get(STUB_TAG) == "true":
                return run.info.run_id
        stub = client.create_run(exp_id, start_time=record.start_ms, run_name=f"sweep {record.tags.get('sweep.id', '')}".strip(),
                                 tags={RECORD_ID_TAG: parent_record, STUB_TAG: "true", "sparkctl.kind": "sweep",
                                       "sweep.id": record.tags.get("sweep.id", "")})
        client.set_terminated(stub.info.run_id, status="KILLED", end_time=record.end_ms)
        return stub.info.run_id

    def _log_export(self, client, run_id: str, record: RunRecord, parent_id: str | None) -> None:
        """The run's copy of the file that names it (AIPerf's mlflow_export.json keys)."""
        client.log_dict(run_id, export_metadata(self, record, run_id, parent_id), EXPORT_ARTIFACT)

    def _log_everything(self, client, run_id: str, record: RunRecord) -> None:
        from mlflow.entities import Metric, Param, RunTag

        ts = record.end_ms
        metrics: list[Metric] = []
        for key, values in record.step_metrics.items():
            for step, value in enumerate(values):
                if value is None:
                    continue
                metrics.append(Metric(key, float(value), ts, step))
        for key, value in record.summary_metrics.items():
            if value is None:
                continue
            metrics.append(Metric(key, float(value), ts, 0))
        params = [Param(k, _clip(v, MAX_PARAM_VALUE_LEN)) for k, v in record.params.items()]
        tags = [
            RunTag(k, _clip(v, MAX_TAG_VALUE_LEN))
            for k, v in record.tags.items()
            if k not in (RECORD_ID_TAG, COMPLETE_TAG)
        ]
        for chunk in _chunks(params, MAX_PARAMS_PER_BATCH):
            client.log_batch(run_id, params=chunk, synchronous=True)
        for chunk in _chunks(tags, MAX_TAGS_PER_BATCH):
            client.log_batch(run_id, tags=chunk, synchronous=True)
        for chunk in _chunks(metrics, MAX_METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=chunk, synchronous=True)

        for name, content in record.artifacts.items():
            if isinstance(content, dict) and set(content) == {FILE_ARTIFACT_KEY}:
                content = _read_file_artifact(content[FILE_ARTIFACT_KEY])
            if isinstance(content, str):
                client.log_text(run_id, content, name)
            elif isinstance(content, (dict, list)):
                client.log_dict(run_id, content, name)
            else:
                raise TypeError(
                    f"artifact {name!r}: expected str, dict or list, not {type(content).__name__}"
                )

    # -- reading -------------------------------------------------------------------

    def search_runs(
        self,
        filter_string: str = "",
        order_by: list[str] | None = None,
        max_results: int = 100,
        experiment: str | None = None,
    ) -> list[dict[str, Any]]:
        """Runs of the experiment as plain dicts (newest first unless ``order_by``).

        Filter syntax is MLflow's: AND only; params and tags compare as strings
        (``params.num_ctx = '8192'``); metrics use their latest step. An experiment that
        does not exist yet has no runs. Blocking: call from a worker thread."""
        return _all_pages(self.search_runs_page, filter_string, order_by, max_results, experiment)

    def metric_history(self, run_id: str, key: str) -> list[float]:
        """One metric's values of one run in step order (a bench logs one per repetition).
        For the handful of runs a comparison reads; never for a whole list. Blocking."""
        return [value for _, _, value in sorted(self._metric_points(run_id, key), key=lambda p: p[0])]

    def metric_steps(self, run_id: str, key: str) -> dict[int, float]:
        """One metric's values of one run by step (a bench's step is its repetition): a
        repetition that logged no value for it is simply absent, so per-repetition metrics
        line up by step, never by position. Blocking."""
        return {int(step): float(value)
                for step, _, value in sorted(self._metric_points(run_id, key), key=lambda p: (p[0], p[1]))}

    def _metric_points(self, run_id: str, key: str) -> list[tuple[int, int, float]]:
        """(step, timestamp, value) of every value logged, in the order MLflow keeps them."""
        return self._bounded("read", lambda: self._metric_points_now(run_id, key))

    def _metric_points_now(self, run_id: str, key: str) -> list[tuple[int, int, float]]:
        answered, points = self._by_reader("read", lambda r: r.metric_points(run_id, key))
        if answered:
            return points
        try:
            client = self._get_client()
            return [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key)]
        except Exception as exc:
            raise self._error(exc, "read") from None

    def read_artifact(self, run_id: str, path: str) -> str:
        """One text artifact of a run (``items.jsonl``, ``outputs.json``). Blocking."""
        return self._bounded("read", lambda: self._read_artifact_now(run_id, path))

    def _read_artifact_now(self, run_id: str, path: str) -> str:
        import tempfile

        answered, text = self._by_reader("read", lambda r: r.read_artifact(run_id, path))
        if answered:
            return text
        try:
            client = self._get_client()
            with tempfile.TemporaryDirectory(prefix="sparkctl-artifact-") as tmp:
                local = client.download_artifacts(run_id, path, tmp)
                with open(local, encoding="utf-8") as fh:
                    return fh.read()
        except Exception as exc:
            raise self._error(exc, "read") from None

    def search_runs_page(
        self,
        filter_string: str = "",
        order_by: list[str] | None = None,
        max_results: int = 100,
        page_token: str | None = None,
        experiment: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of runs (as ``search_runs`` returns them) and the token of the next
        page, or None after the last. ``search_runs`` cannot resume a search; a caller that
        filters further on its side (names compared by sparkctl's own rules) pages on with
        this until it has enough rows. Blocking: call from a worker thread."""
        return self._bounded("search", lambda: self._search_runs_page_now(
            filter_string, order_by, max_results, page_token, experiment))

    def _search_runs_page_now(self, filter_string, order_by, max_results, page_token, experiment):
        max_results = max(1, min(max_results, 1000))
        answered, found = self._by_reader(
            "search", lambda r: self._reader_page(r, filter_string, order_by, max_results, page_token, experiment))
        if answered:
            return found
        try:
            client = self._get_client()
            exp_id = self._experiment_id(client, experiment or self.experiment, create=False)
            if exp_id is None:
                return [], None
            page = client.search_runs(
                [exp_id],
                filter_string=filter_string,
                max_results=max_results,
                order_by=order_by,
                page_token=page_token,
            )
            return [_run_to_dict(run) for run in page], (page.token or None)
        except Exception as exc:
            raise self._error(exc, "search") from None  # the cause quotes the URL, credentials and all

    # -- reads without MLflow ------------------------------------------------------

    def _by_reader(self, action: str, call, *, strict: bool = False) -> tuple[bool, Any]:
        """``(True, call(reader))``, or ``(False, None)`` where only MLflow's client can
        answer (raised as NeedsMlflow when ``strict``). Failures are TrackingErrors."""
        if self._reader is None:
            if strict:
                raise NeedsMlflow(f"{self.display_uri} is read through MLflow's client")
            return False, None
        try:
            return True, call(self._reader)
        except StoreRefused as exc:
            raise self._refused(str(exc)) from None
        except Unsupported as exc:
            if strict:
                raise NeedsMlflow(f"MLflow's client is needed to read {self.display_uri}: {exc}",
                                  reason=str(exc)) from None
            if not isinstance(exc, (NoStore, NoSuchRun)):  # those the client answers as expected
                self._fell_back(str(exc))
            return False, None
        except TrackingError:
            raise
        except RestError as exc:
            raise TrackingError(f"MLflow {action} failed: {exc}") from None
        except Exception as exc:  # httpx's: connection refused, timed out...
            raise self._error(exc, action) from None

    def _fell_back(self, reason: str) -> None:
        """Say once, through ``on_fallback``, that MLflow's client reads for sparkctl's
        reader (it costs seconds of `import mlflow` per command; the user should know why)."""
        with self._lock:
            if self.fallback_reason is not None:
                return
            self.fallback_reason = reason
        if self.on_fallback is not None:
            self.on_fallback(fallback_note(self.display_uri, reason))

    def _reader_page(self, reader, filter_string, order_by, max_results, page_token, experiment):
        name = experiment or self.experiment
        found = reader.experiment(name)
        if found is None:
            return [], None
        exp_id, stage = found
        if stage == "deleted":
            raise _deleted_experiment(name, exp_id)
        return reader.search_page(exp_id, filter_string, order_by, max_results, page_token)

    def without_mlflow(self) -> "ReadsWithoutMlflow":
        """This store's reads that never import MLflow (for the dashboard's process)."""
        return ReadsWithoutMlflow(self)


def _record_id_ok(value: str) -> bool:
    """Safe to quote in a filter string (record ids are letters, digits, '-' and '_')."""
    return re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value) is not None


def export_metadata(store: "MlflowStore", record: RunRecord, run_id: str, parent_id: str | None) -> dict[str, Any]:
    """What names one written run, in the keys of AIPerf's `mlflow_export.json` (tracking URI
    without credentials, experiment, run id and name, parent run id, the keys logged)."""
    metric_keys = sorted(set(record.summary_metrics) | set(record.step_metrics))
    return {
        "tracking_uri": store.display_uri,
        "experiment": record.experiment or store.experiment,
        "run_id": run_id,
        "run_name": record.run_name,
        "benchmark_id": record.record_id,
        "parent_run_id": parent_id,
        "live_streaming": False,
        "reused_live_run": False,
        "metric_keys": metric_keys,
        "param_keys": sorted(record.params),
        "tag_keys": sorted(record.tags),
        "uploaded_artifacts": sorted([*record.artifacts, EXPORT_ARTIFACT]),
        "exported_at_ns": time.time_ns(),
    }


class NeedsMlflow(TrackingError):
    """Only MLflow's client can answer this read (an unknown schema revision, a filter the
    reader does not parse, a tracking URI it does not speak). ``reason``: the reader's why."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def fallback_note(display_uri: str, reason: str) -> str:
    """The one line that says MLflow's (slow) client reads a store, and why."""
    return (f"note: {display_uri} is read through MLflow's client (seconds slower): {reason}; "
            "see docs/troubleshooting.md")


class ReadsWithoutMlflow:
    """The read methods of an ``MlflowStore`` that never import MLflow: its reader answers,
    or ``NeedsMlflow`` is raised. A SQLite store whose file does not exist yet has no runs."""

    def __init__(self, store: MlflowStore) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"ReadsWithoutMlflow({self.store!r})"

    def search_runs_page(self, filter_string: str = "", order_by: list[str] | None = None, max_results: int = 100,
                         page_token: str | None = None, experiment: str | None = None):
        store = self.store

        def page(reader):
            try:
                return store._reader_page(reader, filter_string, order_by, max(1, min(max_results, 1000)),
                                          page_token, experiment)
            except NoStore:
                return [], None

        return store._bounded("search", lambda: store._by_reader("search", page, strict=True)[1])

    def search_runs(self, filter_string: str = "", order_by: list[str] | None = None, max_results: int = 100,
                    experiment: str | None = None) -> list[dict[str, Any]]:
        return _all_pages(self.search_runs_page, filter_string, order_by, max_results, experiment)

    def metric_history(self, run_id: str, key: str) -> list[float]:
        store = self.store
        points = store._bounded("read", lambda: store._by_reader("read", lambda r: r.metric_points(run_id, key),
                                                                 strict=True)[1])
        return [value for _, _, value in sorted(points, key=lambda p: p[0])]


def _all_pages(search_page, filter_string, order_by, max_results, experiment) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while len(out) < max_results:
        page, token = search_page(filter_string, order_by, min(max_results - len(out), 1000), token, experiment)
        out.extend(page)
        if not token:
            break
    return out


def _deleted_experiment(name: str, exp_id: str) -> TrackingError:
    return TrackingError(
        f"MLflow experiment {name!r} is deleted: restore it "
        f"(mlflow experiments restore --experiment-id {exp_id}) "
        "or use another experiment name"
    )


def _read_file_artifact(path: str) -> str:
    """The text of a file artifact; what happened to it when it cannot be read (the run is
    still written: its metrics and tags matter more than one missing file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        return f"(not available: {path}: {exc.strerror or exc})\n"


class _file_lock:
    """An exclusive ``flock`` on ``path`` (created if needed), waited for up to
    ``wait_s``; released on exit or when the process dies."""

    def __init__(self, path: Path, wait_s: float, uri: str) -> None:
        self.path, self.wait_s, self.uri = path, wait_s, uri
        self.fd: int | None = None

    def __enter__(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.wait_s
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise TrackingError(
                        f"another process has held {self.path} for {self.wait_s:.0f} s while "
                        f"opening the MLflow database {redact_uri(self.uri)}; is a sparkctl hung?"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
            except BaseException:
                os.close(fd)
                raise
        self.fd = fd

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


def _run_to_dict(run) -> dict[str, Any]:
    info, data = run.info, run.data
    return {
        "run_id": info.run_id,
        "run_name": info.run_name,
        "experiment_id": info.experiment_id,
        "status": info.status,
        "start_time": info.start_time,
        "end_time": info.end_time,
        "artifact_uri": info.artifact_uri,
        "params": dict(data.params),
        "tags": dict(data.tags),
        "metrics": dict(data.metrics),
    }
