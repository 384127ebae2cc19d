"""Re-run at the matching context: the eval that turns a refused quality pair into one that
compares, as the head to head's `b` does for benches.

A quality pair is refused when the two eval runs differ in what they measured (core.workload):
most often the context (production evaluated at the 4096 it is resident at, a contender at
8192). Where what differs is something a run chooses (the context, the answer ceiling,
thinking, the prompt template), evaluating the contender again with the incumbent's
settings and its sample (n, seed) gives a pair that compares item by item. Where the suite
file or the scoring rules differ, no re-run of one side can match the other: none is offered
(the refusal names the command that evaluates both). Blocking (MLflow): call from a worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sparkctl.services.runs.quality import SUITES, eval_rows, margin_for, suite_evidence
from sparkctl.services.runs.query import run_params

# identity fields an eval run sets from its settings (the rest come from files and code)
CHOSEN = {"num_ctx", "num_predict", "think", "template_sha256"}


@dataclass(frozen=True)
class EvalRerun:
    """Evaluate `model` on `suite` with these settings so its run pairs with the incumbent's."""

    model: str
    incumbent: str
    suite: str
    num_ctx: int | None
    num_predict: int | None
    think: bool | None
    n: int | str | None  # "all", a number, or None (the config's)
    seed: int | None
    template: str | None
    differs: str  # what differs, in words ("num_ctx 4096 (llama3.2:3b) vs 8192 (qwen3:8b)")

    def overrides(self) -> dict[str, Any]:
        """EvalSettings.from_config overrides (the context given, so it is not chosen again)."""
        out: dict[str, Any] = {"num_ctx": self.num_ctx, "num_predict": self.num_predict, "think": self.think,
                               "n": self.n, "seed": self.seed, "template": self.template}
        return {k: v for k, v in out.items() if v is not None}

    def label(self) -> str:
        ctx = f" at num_ctx {self.num_ctx}" if self.num_ctx else ""
        return f"evaluate {self.model} on {self.suite}{ctx}, as {self.incumbent}'s run"


def _int(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def rerun_for(store, evidence) -> EvalRerun | None:
    """The re-run that would make a refused pair (services.runs.quality.SuiteEvidence with
    both runs and no diff) compare, or None when one side alone cannot be matched."""
    inc, con = evidence.incumbent_run, evidence.contender_run
    if evidence.diff is not None or inc is None or con is None:
        return None
    diffs = inc.identity.differences(con.identity)
    if not diffs or any(d.name not in CHOSEN for d in diffs) or not inc.identity.recorded:
        return None
    params = run_params(store, inc.run_id)
    n_raw = str(params.get("n", "")).strip()
    n: int | str | None = "all" if n_raw == "all" else _int(n_raw)
    think = str(params.get("think", "")).strip().lower()
    template = params.get("prompt_template") or None
    return EvalRerun(
        con.model, inc.model, evidence.suite, _int(params.get("num_ctx")) or _int(inc.identity.num_ctx),
        _int(params.get("num_predict")), {"true": True, "false": False}.get(think), n, _int(params.get("seed")),
        template if evidence.suite == "gsm8k" else None,
        "; ".join(d.text(inc.model, con.model) for d in diffs))


def reruns_of(store, evidence: Iterable) -> list[EvalRerun]:
    out = []
    for ev in evidence:
        got = rerun_for(store, ev)
        if got is not None:
            out.append(got)
    return out


def promotion_reruns(store, incumbent: str, model: str, kind: str, version: str,
                     margins: dict[str, float] | None = None) -> list[EvalRerun]:
    """The re-runs the promote dialog offers: per suite whose pair is refused for a setting
    the contender's eval can repeat (the same evidence the gate reads, services/lanes)."""
    if not incumbent:
        return []
    inc_rows, con_rows = eval_rows(store, incumbent), eval_rows(store, model)
    found = [suite_evidence(store, suite, incumbent, model, inc_rows, con_rows, kind, [version],
                            margin_for(suite, margins)) for suite in SUITES]
    return reruns_of(store, [ev for ev in found if ev is not None])
