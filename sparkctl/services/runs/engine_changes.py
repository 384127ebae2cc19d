"""What an engine change did besides the speed: speculative decoding's acceptance before and
after (the same regression rule as decode tok/s, on the repetitions each run used), and
which parts of the engine's identity changed (runner, its llama.cpp build, flash attention,
KV cache type), so a regression says where to look. Pure: the caller reads the runs."""

from __future__ import annotations

from typing import Any

from sparkctl.core import compare
from sparkctl.core import engine_identity as ei


def identity_of(row: Any) -> dict[str, str]:
    out = ei.parse_compact(row.engine_identity)
    out[ei.KIND], out[ei.VERSION] = row.engine_kind, row.engine_version
    return out


def annotate(regression_row: Any, acceptance_before: list[float], acceptance_after: list[float]) -> Any:
    """A RegressionRow with its identity changes and, when both runs have per-repetition
    acceptance (the repetitions each run used), the acceptance comparison. Returns the row."""
    before, after = regression_row.before, regression_row.after
    regression_row.identity_changes = ei.changes(identity_of(before), identity_of(after))
    if acceptance_before and acceptance_after:
        regression_row.acceptance = compare.regression(acceptance_before, acceptance_after)
    return regression_row
