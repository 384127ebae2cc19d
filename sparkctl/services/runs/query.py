"""Reading past runs back from MLflow, a page at a time.

Filters go into MLflow's filter string so that the store does the work (SQL for SQLite,
the server for a team store) and only one page of runs crosses the wire: with 10,000 runs
in SQLite the newest 100 take ~0.07 s, the newest 1,000 ~1.3 s. No metric histories are
read: a search returns each run's latest metric values, and the bench logs its summaries
(medians, CV) under their own keys for that reason.

Two filters cannot be said exactly in MLflow's language, which has AND but no OR and
compares tags as plain strings:

- **model**: sparkctl keys model names by Ollama's rules (``core.names.model_key``:
  'qwen3' == 'qwen3:latest' == 'library/Qwen3'), and the tag ``model.name`` holds the
  name as the user typed it. So the store is searched with a case-insensitive suffix,
  ``tags.`model.name` ILIKE '%qwen3:8b'``; a name without a tag (or ':latest') takes two
  searches, ``'%qwen3'`` and ``'%qwen3:latest'``, merged here in MLflow's own order. Rows
  are kept when their ``model_key`` equals the wanted one: the suffix also matches
  'myqwen3' or another namespace's 'qwen3', and ILIKE's '_' is a wildcard. One broad
  ``'%qwen3%'`` search would also answer, but it drags every qwen3:* run through
  (0.7 s instead of ~0.1 s with 10,000 runs).
- **kind bench** (or sweep-cell): runs recorded before the workload identity have no
  ``sparkctl.kind`` tag (a sweep cell only its ``sweep.*`` tags), so the kind is decided
  here from each row (core.workload's rules). ``kind="eval"`` goes to the store.

When a check drops rows, further pages are read (page tokens, never everything at once)
until ``limit`` rows are found or the runs run out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from functools import cmp_to_key
from typing import Any

from sparkctl.core.names import DEFAULT_TAG, InvalidModelName, model_key, parse_model_name
from sparkctl.services.runs.rows import (
    KIND_BENCH,
    KIND_IMPORT,
    KIND_SWEEP_CELL,
    RUN_KINDS,
    TAG_ENGINE_VERSION,
    TAG_HOST,
    TAG_KIND,
    TAG_MODEL,
    RunRow,
    row_from_run,
)

DEFAULT_LIMIT = 100
DEFAULT_ORDER = "start_time DESC"
# The most runs asked of MLflow in one request.
MAX_PAGE = 1000
# The least asked for in a further page, once a check on this side has dropped rows.
_POST_FILTER_PAGE = 200

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def quote(value: str) -> str | None:
    """``value`` as a string literal of MLflow's filter language, or None when it cannot be.

    MLflow has no escape inside a literal (``'it''s'`` and ``'it\\'s'`` search for those
    characters verbatim), but accepts either quote: a value with a single quote is put in
    double quotes. A value holding both kinds cannot be written; the caller then filters
    on its own side."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    return None


def _tag(name: str) -> str:
    return f"tags.`{name}`"


def model_patterns(model: str) -> list[str]:
    """ILIKE patterns whose union every stored spelling of ``model`` matches (see module doc)."""
    try:
        parsed = parse_model_name(model)
    except InvalidModelName:
        return [model.strip()]  # a served name Ollama's rules reject (llama-server, vLLM): as is
    tag = parsed.tag or DEFAULT_TAG
    if tag.lower() == DEFAULT_TAG:
        # 'qwen3', 'qwen3:latest', 'library/qwen3', 'Qwen3:Latest'; not 'qwen3:8b'
        return [f"%{parsed.model}", f"%{parsed.model}:{DEFAULT_TAG}"]
    return [f"%{parsed.model}:{tag}"]


def build_filters(
    *,
    model: str | None = None,
    engine_version: str | None = None,
    kind: str | None = None,
    since_ms: int | None = None,
    host: str | None = None,
) -> tuple[list[str], Callable[[RunRow], bool] | None]:
    """(MLflow filter strings, a check for what they cannot select exactly, or None).

    The answer is the union of the filter strings' runs that pass the check: one filter
    string, or two for a model named without a tag (MLflow has no OR)."""
    clauses: list[str] = []
    checks: list[Callable[[RunRow], bool]] = []
    if engine_version is not None and engine_version.strip():
        version = engine_version.strip()
        literal = quote(version)
        if literal is not None:
            clauses.append(f"{_tag(TAG_ENGINE_VERSION)} = {literal}")
        else:
            checks.append(lambda row: row.engine_version == version)
    if kind is not None:
        kind = kind.strip().lower()
        if kind not in RUN_KINDS:
            raise ValueError(f"kind must be one of {', '.join(RUN_KINDS)}, not {kind!r}")
        if kind in (KIND_BENCH, KIND_SWEEP_CELL, KIND_IMPORT):
            # older runs have no kind tag (a cell: only its sweep.* tags), nor has an AIPerf
            # run in the same experiment: decided by rows.py
            checks.append(lambda row, kind=kind: row.kind == kind)
        else:
            clauses.append(f"{_tag(TAG_KIND)} = {quote(kind)}")
    if since_ms is not None:
        clauses.append(f"attributes.start_time >= {int(since_ms)}")
    if host is not None and host.strip():
        name = host.strip()  # the host.name tag: the hostname of the machine that ran it, exactly
        literal = quote(name)
        if literal is not None:
            clauses.append(f"{_tag(TAG_HOST)} = {literal}")
        else:
            checks.append(lambda row: row.host == name)
    filters = [" AND ".join(clauses)]
    if model is not None and model.strip():
        want = model_key(model)
        checks.append(lambda row: row.model_key == want)
        literals = [quote(p) for p in model_patterns(model)]
        if all(lit is not None for lit in literals):
            filters = [" AND ".join([f"{_tag(TAG_MODEL)} ILIKE {lit}", *clauses]) for lit in literals]
    check = None
    if checks:
        check = checks[0] if len(checks) == 1 else (lambda row: all(c(row) for c in checks))
    return filters, check


def list_runs(
    store: Any,
    *,
    model: str | None = None,
    engine_version: str | None = None,
    kind: str | None = None,
    since_ms: int | None = None,
    limit: int = DEFAULT_LIMIT,
    order: str = DEFAULT_ORDER,
    experiment: str | None = None,
    host: str | None = None,
) -> list[RunRow]:
    """The first ``limit`` runs of the store's experiment (or ``experiment``) that match,
    in ``order`` (MLflow's order_by syntax, comma-separated: ``"start_time DESC"``,
    ``"metrics.decode_tps_median DESC"``). Deleted runs are not listed.

    Order by an attribute (start time) where speed matters: on SQLite with 10,000 runs
    MLflow takes seconds to order by a metric; sort a loaded page in memory instead.

    ``store`` is an ``MlflowStore`` (anything with its ``search_runs_page``). Raises
    ``TrackingError`` (``.unreachable`` for a server that cannot be contacted) and
    ValueError for a bad ``kind``, ``limit`` or ``order``. Blocking: call from a worker thread."""
    if int(limit) < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    limit = int(limit)
    keys = parse_order(order)
    order_by = [part.strip() for part in order.split(",") if part.strip()] or None
    filters, check = build_filters(model=model, engine_version=engine_version, kind=kind, since_ms=since_ms,
                                   host=host)
    found = [_collect(store, f, check, limit, order_by, experiment) for f in filters]
    if len(found) == 1:
        return [row for _, row in found[0]]
    # several searches (no OR in MLflow): merged in the order MLflow itself uses
    pairs = sorted((p for part in found for p in part), key=cmp_to_key(lambda a, b: _compare(a[0], b[0], keys)))
    seen: set[str] = set()
    merged: list[RunRow] = []
    for _, row in pairs:
        if row.run_id not in seen:
            seen.add(row.run_id)
            merged.append(row)
    return merged[:limit]


def _collect(store: Any, filter_string: str, check, limit: int, order_by, experiment) -> list[tuple[dict, RunRow]]:
    """Up to ``limit`` (run dict, row) pairs that pass ``check``, paging on while it drops rows."""
    out: list[tuple[dict, RunRow]] = []
    token: str | None = None
    first = True
    while True:
        # First ask for just what is wanted: a check seldom drops a row. Once it has,
        # ask for more at a time, so a long run of drops costs few round trips.
        wanted = limit - len(out)
        size = wanted if first or check is None else max(wanted, _POST_FILTER_PAGE)
        first = False
        page, token = store.search_runs_page(
            filter_string, order_by=order_by, max_results=min(size, MAX_PAGE),
            page_token=token, experiment=experiment,
        )
        for run in page:
            row = row_from_run(run)
            if check is None or check(row):
                out.append((run, row))
                if len(out) >= limit:
                    return out
        if not token or not page:
            return out


# -- MLflow's order of runs, to merge the answers of several searches -----------------------

_ENTITIES = {"metric": "metrics", "metrics": "metrics", "param": "params", "params": "params",
             "parameter": "params", "parameters": "params", "tag": "tags", "tags": "tags",
             "attribute": "attr", "attributes": "attr", "attr": "attr", "run": "attr"}
_ATTRIBUTE_ALIASES = {"created": "start_time", "run name": "run_name"}
_ORDER_RE = re.compile(r"\s*(?P<ident>.+?)(?:\s+(?P<dir>ASC|DESC))?\s*", re.IGNORECASE)


def run_params(store: Any, run_id: str) -> dict[str, str]:
    """One run's params (the few runs a decision reads in full). Blocking."""
    found = store.search_runs(f"attributes.run_id = {quote(run_id)}", max_results=1)
    return (found[0].get("params") or {}) if found else {}


def parse_order(order: str) -> list[tuple[str, str, bool]]:
    """``"metrics.decode_tps_median DESC, start_time"`` -> [(entity, key, descending)],
    entity one of attr, metrics, params, tags (MLflow's order_by syntax, checked by MLflow)."""
    keys = []
    for part in order.split(","):
        if not part.strip():
            continue
        m = _ORDER_RE.fullmatch(part)
        if m is None:
            raise ValueError(f"bad order {part!r}")
        ident, desc = m["ident"].strip(), (m["dir"] or "ASC").upper() == "DESC"
        head, dot, rest = ident.partition(".")
        if dot and head.lower() in _ENTITIES:
            entity, key = _ENTITIES[head.lower()], rest.strip().strip('`"')
        else:
            entity, key = "attr", ident.strip('`"')
        if entity == "attr":
            key = _ATTRIBUTE_ALIASES.get(key.lower(), key)
        keys.append((entity, key, desc))
    return keys


def _order_value(run: dict, entity: str, key: str) -> tuple[int, Any]:
    """(rank, value): rank 0 for a value, 1 for NaN, 2 for none: last in either direction."""
    value = run.get(key) if entity == "attr" else (run.get(entity) or {}).get(key)
    if value is None:
        return 2, None
    if isinstance(value, float) and value != value:
        return 1, None
    return 0, value


def _compare(a: dict, b: dict, keys: list[tuple[str, str, bool]]) -> int:
    """MLflow's SQL order (sqlalchemy_store._get_orderby_clauses): each key with missing
    values last, then newest first unless start_time was a key, then run id."""
    for entity, key, desc in keys:
        (ra, va), (rb, vb) = _order_value(a, entity, key), _order_value(b, entity, key)
        if ra != rb:
            return ra - rb
        if ra == 0 and va != vb:
            c = -1 if va < vb else 1
            return -c if desc else c
    if not any(entity == "attr" and key == "start_time" for entity, key, _ in keys):
        sa, sb = a.get("start_time") or 0, b.get("start_time") or 0
        if sa != sb:
            return -1 if sa > sb else 1
    ia, ib = a.get("run_id") or "", b.get("run_id") or ""
    return (ia > ib) - (ia < ib)


def parse_since(text: str) -> int:
    """Epoch milliseconds for ``YYYY-MM-DD`` (local midnight) or an ISO 8601 date-time
    (``2025-06-01T14:30``, ``...Z``, ``...+02:00``; without an offset: local time).
    Raises ValueError with a one-line message."""
    value = text.strip()
    try:
        if _DATE_RE.fullmatch(value):
            dt = datetime.strptime(value, "%Y-%m-%d")
        else:
            dt = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"expected a date YYYY-MM-DD or an ISO 8601 date-time, got {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # the user's local time
    return int(dt.timestamp() * 1000)
