"""Run history: past bench (and, later, eval) runs read back from MLflow as rows.

A library, as simon willison's llm keeps its logs: ``list_runs`` queries, ``RunRow`` is
the data; the CLI (``sparkctl runs``) and the TUI only filter and show."""

from sparkctl.services.runs.query import (
    DEFAULT_LIMIT,
    DEFAULT_ORDER,
    build_filters,
    list_runs,
    model_patterns,
    parse_order,
    parse_since,
    quote,
)
from sparkctl.services.runs.rows import (
    KIND_BENCH,
    KIND_EVAL,
    ROW_KEYS,
    RUN_KINDS,
    RunRow,
    flags_of,
    row_from_run,
)

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_ORDER",
    "KIND_BENCH",
    "KIND_EVAL",
    "ROW_KEYS",
    "RUN_KINDS",
    "RunRow",
    "build_filters",
    "flags_of",
    "list_runs",
    "model_patterns",
    "parse_order",
    "parse_since",
    "quote",
    "row_from_run",
]
