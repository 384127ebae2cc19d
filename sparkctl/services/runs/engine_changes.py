"""What an engine change did besides the speed: speculative decoding's acceptance before and
after (the same regression rule as decode tok/s, per repetition), and which parts of the
engine's identity changed (runner, its llama.cpp build, flash attention, KV cache type), so
a regression says where to look. Blocking (MLflow): call from a worker thread."""

from __future__ import annotations

from typing import Any

from sparkctl.core import compare
from sparkctl.core import engine_identity as ei


def identity_of(row: Any) -> dict[str, str]:
    out = ei.parse_compact(row.engine_identity)
    out[ei.KIND], out[ei.VERSION] = row.engine_kind, row.engine_version
    return out


def annotate(regression_row: Any, store: Any) -> None:
    """Fill a RegressionRow's acceptance comparison and identity changes."""
    before, after = regression_row.before, regression_row.after
    regression_row.identity_changes = ei.changes(identity_of(before), identity_of(after))
    if before.spec_acceptance_pct is None or after.spec_acceptance_pct is None:
        return
    a = store.metric_history(before.run_id, "spec_acceptance_pct")
    b = store.metric_history(after.run_id, "spec_acceptance_pct")
    if a and b:
        regression_row.acceptance = compare.regression(a, b)
