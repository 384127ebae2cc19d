"""One place that turns a response into a suite's verdict dict, for live runs and rescoring.

The verdict dicts are what the per-item table and `sparkctl eval score --json` carry:
- GSM8K: ``{"gold", "strict", "flexible", "strict_ok", "flexible_ok"}``
- IFEval: ``{"instructions": [{"id", "strict", "loose"}, ...], "prompt_strict", "prompt_loose"}``
"""

from __future__ import annotations

from typing import Any

from sparkctl.core.suites.tally import item_counts, primary_metric
from sparkctl.services.evals.suites import SuiteItem


def score_item(suite: str, item: SuiteItem, response: str) -> dict[str, Any]:
    if suite == "gsm8k":
        from sparkctl.core.suites.gsm8k import score_response

        v = score_response(response, item.gold or "")
        return {"gold": item.gold, "strict": v.strict, "flexible": v.flexible,
                "strict_ok": bool(v.strict_ok), "flexible_ok": bool(v.flexible_ok)}
    from sparkctl.core.suites.ifeval import score_response

    v = score_response(list(item.instruction_ids), [dict(k or {}) for k in item.kwargs], item.text, response)
    return {"instructions": [{"id": i.id, "strict": bool(i.strict), "loose": bool(i.loose)} for i in v.instructions],
            "prompt_strict": bool(v.prompt_strict), "prompt_loose": bool(v.prompt_loose)}


def passed(suite: str, verdict: dict[str, Any]) -> bool:
    """Whether the item passes the suite's primary metric (the grid's green cell)."""
    p, n = item_counts(suite, verdict)[primary_metric(suite)]
    return p == n


def chances(suite: str, item: SuiteItem) -> int:
    """Instructions an unanswered item forfeits (IFEval), or 1 (GSM8K)."""
    return len(item.instruction_ids) if suite == "ifeval" else 1
