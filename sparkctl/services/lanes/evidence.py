"""A promotion's evidence from MLflow: the contender's plain benches, and the quality of the
contender against the incumbent per suite, with the non-inferiority margins.

Benches: runs of kind bench only (a sweep's queued concurrency-8 cell is not evidence of how
the model serves a lane). Quality: eval runs on the engine version serving now (and on the
version the user names with --quality-from-version), paired by workload identity
(services.runs.quality), judged at [promote] quality_margin_pp (core.noninferiority).
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from sparkctl.core import promotion as rules
from sparkctl.services.runs.quality import SUITES, eval_rows, margin_for, suite_evidence

BENCH_HISTORY = 50


def bench_evidence(store, model: str) -> list[rules.BenchEvidence]:
    from sparkctl.services.runs import list_runs

    rows = list_runs(store, model=model, kind="bench", limit=BENCH_HISTORY)
    return [rules.BenchEvidence(r.run_id, r.engine_kind, r.engine_version, r.status, r.valid, r.flags,
                                r.decode_tps_median, r.start_ms, r.cache_policy) for r in rows]


def _pct(row) -> str:
    return "-" if row is None or row.score is None else f"{row.score * 100:.1f}%"


def quality_comparisons(store, incumbent: str, model: str, kind: str, version: str,
                        margins: dict[str, float] | None = None, from_version: str = "") -> list[rules.SuiteComparison]:
    """One SuiteComparison per suite the incumbent was ever evaluated on."""
    if not incumbent:
        return []
    versions = [version] + ([from_version] if from_version and from_version != version else [])
    inc_rows, con_rows = eval_rows(store, incumbent), eval_rows(store, model)
    out = []
    for suite in SUITES:
        ev = suite_evidence(store, suite, incumbent, model, inc_rows, con_rows, kind, versions,
                            margin_for(suite, margins))
        if ev is None:
            continue
        inc_id = ev.incumbent_run.run_id if ev.incumbent_run else ""
        con_id = ev.contender_run.run_id if ev.contender_run else None
        if ev.diff is None:
            out.append(rules.SuiteComparison(suite, inc_id, con_id, problem=ev.problem, notes=ev.notes))
            continue
        gate = ev.diff.gate
        text = f"{_pct(ev.incumbent_run)} -> {_pct(ev.contender_run)}, {gate.explain() if gate else ''}"
        out.append(rules.SuiteComparison(suite, inc_id, con_id, bool(gate and gate.shown), text, notes=ev.notes))
    return out


def limits_check(store, plan_model: str, incumbent: str, margins: dict[str, float] | None,
                 limits: dict[str, float]) -> rules.Precondition | None:
    """The [promote] limits (max_ttft_increase_pct, max_memory_increase_pct) on the
    contender's like-for-like benches against the incumbent's, judged as compare's
    recommendation judges them: unmet when an interval lies beyond a limit or cannot tell.
    None when no limit is set; n/a when the lane has no model yet."""
    if not limits:
        return None
    if not incumbent:
        return rules.Precondition("limits", rules.NOT_APPLICABLE, "the lane has no model to compare with")
    from sparkctl.services.runs.comparison import NothingToCompare, compare_models
    from sparkctl.services.runs.decision import decision_table

    try:
        cmp = compare_models(store, [incumbent, plan_model], lanes={"lane": incumbent}, margins=margins,
                             limits=limits)
    except NothingToCompare as exc:
        return rules.Precondition("limits", rules.UNMET, f"cannot check the [promote] limits: {exc}")
    (decision,) = decision_table(cmp).decisions
    runs = tuple(s.run.run_id for s in cmp.sides if s.run is not None)
    found = decision.limit_checks
    notes = tuple(n for n in cmp.notes if "newer bench" in n)  # benches of either model left out, and why
    if all(ok is True for ok, _ in found):
        return rules.Precondition("limits", rules.MET, "; ".join(text for _, text in found), notes, runs)
    return rules.Precondition("limits", rules.UNMET, "; ".join(text for ok, text in found if ok is not True),
                              tuple(text for ok, text in found if ok is True) + notes, runs)


def evidence_checks(store, plan_model: str, incumbent: str, kind: str, version: str,
                    margins: dict[str, float] | None = None, from_version: str = "",
                    limits: dict[str, float] | None = None) -> list[rules.Precondition]:
    """Bench and quality preconditions from MLflow (blocking). A store that cannot be read
    leaves them unmet: no evidence is no evidence."""
    from sparkctl.tracking.store import TrackingError

    engine = f"{kind} {version}"
    try:
        bench = rules.judge_bench(plan_model, bench_evidence(store, plan_model), kind, version)
    except TrackingError as exc:
        bench = rules.Precondition("bench", rules.UNMET, f"cannot read the runs: {exc}")
    try:
        quality = rules.judge_quality(incumbent, plan_model, engine,
                                      quality_comparisons(store, incumbent, plan_model, kind, version, margins,
                                                          from_version), from_version)
    except (TrackingError, ValueError) as exc:
        quality = rules.Precondition("quality", rules.UNMET, f"cannot compare quality: {exc}")
    try:
        limit = limits_check(store, plan_model, incumbent, margins, dict(limits or {}))
    except TrackingError as exc:
        limit = rules.Precondition("limits", rules.UNMET, f"cannot read the runs: {exc}")
    return [bench, quality] + ([limit] if limit is not None else [])
