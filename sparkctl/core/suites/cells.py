"""One item of a suite run as a cell: its state and glyph, the same in the CLI's grid, the
Eval screen's grid and a run's detail (a glyph reads without colour; colours are the UI's)."""

from __future__ import annotations

from typing import Any

PENDING, FLIGHT, PASS, FAIL, DNF, ERROR = "pending", "flight", "pass", "fail", "dnf", "error"
STATES = (PASS, FAIL, DNF, ERROR, FLIGHT, PENDING)
GLYPH = {PASS: "✓", FAIL: "✗", DNF: "D", ERROR: "E", FLIGHT: "»", PENDING: "·"}
LEGEND = "✓ pass  ✗ wrong  D did not finish  E engine error  » running  · to do"


def state_of(result: Any) -> str:
    """The state of a finished item: an ItemResult, or its row as a dict (items.jsonl)."""
    get = result.get if isinstance(result, dict) else (lambda k: getattr(result, k, None))
    if get("dnf"):
        return DNF
    if get("error"):
        return ERROR
    return PASS if get("passed") else FAIL
