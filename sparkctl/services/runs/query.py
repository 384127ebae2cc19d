"""Reading past runs back from MLflow, a page at a time.

Filters go into MLflow's filter string so that the store does the work (SQL for SQLite,
the server for a team store) and only one page of runs crosses the wire: with 10,000 runs
the newest 100 take ~0.2 s, all of them ~10 s. No metric histories are read: a search
returns each run's latest metric values, and the bench logs its summaries (medians, CV)
under their own keys for that reason.

Two filters cannot be said exactly in MLflow's language, which has AND but no OR and
compares tags as plain strings:

- **model**: sparkctl keys model names by Ollama's rules (``core.names.model_key``:
  'qwen3' == 'qwen3:latest' == 'library/Qwen3'), and the tag holds the name as the user
  typed it. The store is asked for a superset, ``tags.`model.name` ILIKE '%qwen3%'``
  (``'%qwen3:8b'`` when a tag other than latest is named), and rows are kept when their
  ``model_key`` equals the wanted one. The ILIKE is a pre-filter only: its '_' wildcard
  and the '%' around the name let through 'qwen3-coder' or 'myqwen3', which the key drops.
- **kind bench**: a bench run has no ``sparkctl.kind`` tag (today's runs) or the tag
  'bench'; "missing OR bench" is checked here. ``kind="eval"`` goes to the store.

When such a check drops rows, further pages are read (page tokens, never everything at
once) until ``limit`` rows are found or the runs run out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sparkctl.core.names import DEFAULT_TAG, InvalidModelName, model_key, parse_model_name
from sparkctl.services.runs.rows import (
    KIND_BENCH,
    RUN_KINDS,
    TAG_ENGINE_VERSION,
    TAG_KIND,
    TAG_MODEL,
    RunRow,
    row_from_run,
)

DEFAULT_LIMIT = 100
DEFAULT_ORDER = "start_time DESC"
# MLflow serves at most this many runs per search request by default.
MAX_PAGE = 1000
# A page size for searches that drop rows on this side: a few pages at most, usually one.
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


def model_pattern(model: str) -> str:
    """The ILIKE pattern that every stored spelling of ``model`` matches (see module doc)."""
    try:
        parsed = parse_model_name(model)
    except InvalidModelName:
        return model.strip()  # a served name Ollama's rules reject (llama-server, vLLM): as is
    tag = parsed.tag or DEFAULT_TAG
    if tag.lower() == DEFAULT_TAG:
        return f"%{parsed.model}%"  # 'qwen3', 'qwen3:latest', 'library/qwen3'...
    return f"%{parsed.model}:{tag}"


def build_query(
    *,
    model: str | None = None,
    engine_version: str | None = None,
    kind: str | None = None,
    since_ms: int | None = None,
) -> tuple[str, Callable[[RunRow], bool] | None]:
    """(MLflow filter string, a check for the rows that string cannot select exactly, or None)."""
    clauses: list[str] = []
    checks: list[Callable[[RunRow], bool]] = []
    if model is not None and model.strip():
        want = model_key(model)
        literal = quote(model_pattern(model))
        if literal is not None:
            clauses.append(f"{_tag(TAG_MODEL)} ILIKE {literal}")
        checks.append(lambda row: row.model_key == want)
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
        if kind == KIND_BENCH:
            checks.append(lambda row: row.kind == KIND_BENCH)  # tag missing, or 'bench'
        else:
            clauses.append(f"{_tag(TAG_KIND)} = {quote(kind)}")
    if since_ms is not None:
        clauses.append(f"attributes.start_time >= {int(since_ms)}")
    check = None
    if checks:
        check = checks[0] if len(checks) == 1 else (lambda row: all(c(row) for c in checks))
    return " AND ".join(clauses), check


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
) -> list[RunRow]:
    """The first ``limit`` runs of the store's experiment (or ``experiment``) that match,
    in ``order`` (MLflow's order_by syntax, comma-separated: ``"start_time DESC"``,
    ``"metrics.decode_tps_median DESC"``). Deleted runs are not listed.

    ``store`` is an ``MlflowStore`` (anything with its ``search_runs_page``). Raises
    ``TrackingError`` (``.unreachable`` for a server that cannot be contacted) and
    ValueError for a bad ``kind`` or ``limit``. Blocking: call from a worker thread."""
    if int(limit) < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    limit = int(limit)
    filter_string, check = build_query(model=model, engine_version=engine_version, kind=kind, since_ms=since_ms)
    order_by = [part.strip() for part in order.split(",") if part.strip()] or None
    rows: list[RunRow] = []
    token: str | None = None
    while True:
        # Exact filters: ask for just the rows still wanted. Filters checked here: larger
        # pages, since some rows will be dropped.
        size = limit - len(rows) if check is None else max(limit, _POST_FILTER_PAGE)
        page, token = store.search_runs_page(
            filter_string, order_by=order_by, max_results=min(size, MAX_PAGE),
            page_token=token, experiment=experiment,
        )
        for run in page:
            row = row_from_run(run)
            if check is None or check(row):
                rows.append(row)
                if len(rows) >= limit:
                    return rows
        if not token or not page:
            return rows


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
