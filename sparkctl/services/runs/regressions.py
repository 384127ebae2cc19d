"""Engine-change regressions: each model's newest run against its newest on the previous
engine version of the same kind, for the same workload (a plain bench, one sweep cell, one
eval workload); what else changed between them (the runner, its build, the sampling) is said
beside the figure. Runs are picked as for a comparison (services.runs.comparison.usable), the
values are the repetitions each run used (services.runs.reps) and the statistics are
core.compare's. Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core import compare, workload
from sparkctl.core import engine_identity as ei
from sparkctl.core.workload import BENCH
from sparkctl.services.runs import engine_changes
from sparkctl.services.runs.comparison import usable
from sparkctl.services.runs.pairing import matching_command
from sparkctl.services.runs.quality import QualityDiff, margin_for
from sparkctl.services.runs.query import list_runs
from sparkctl.services.runs.reps import read_reps
from sparkctl.services.runs.rows import RunRow


@dataclass
class RegressionRow:
    model: str
    metric: str
    before: RunRow
    after: RunRow
    result: compare.Regression
    # speculative decoding's acceptance over the same change (None when either run has none)
    acceptance: compare.Regression | None = None
    identity_changes: list[str] = field(default_factory=list)  # runner, its build, flash attention, KV cache

    @property
    def flagged(self) -> bool:
        return self.result.flagged or bool(self.acceptance and self.acceptance.flagged)

    def to_dict(self) -> dict[str, Any]:
        def side(r: RunRow, median: float | None) -> dict[str, Any]:
            return {"engine_version": r.engine_version, "value": median, "run_id": r.run_id}

        return {"model": self.model, "metric": self.metric, "workload": self.after.identity.describe(),
                "before": side(self.before, self.result.median_before),
                "after": side(self.after, self.result.median_after),
                "change_pct": self.result.change_pct, "threshold_pct": self.result.threshold_pct,
                "ci_low_pct": self.result.ci_low_pct, "ci_high_pct": self.result.ci_high_pct,
                "flagged": self.result.flagged, "reason": self.result.reason,
                "acceptance": None if self.acceptance is None else {
                    "before_pct": self.acceptance.median_before, "after_pct": self.acceptance.median_after,
                    "change_pct": self.acceptance.change_pct, "flagged": self.acceptance.flagged,
                    "reason": self.acceptance.reason},
                "engine_changes": self.identity_changes}


@dataclass
class QualityChange:
    """One model's accuracy on one suite, its newest eval against its newest on the previous
    engine version (the same eval workload), with what changed between them besides the
    version: the sampling that ran (core.sampling) and the engine's identity."""

    model: str
    diff: QualityDiff  # after minus before, in percentage points
    before: RunRow
    after: RunRow
    sampling_changes: list[str] = field(default_factory=list)
    identity_changes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.diff.verdict == compare.WORSE

    def to_dict(self) -> dict[str, Any]:
        d = self.diff
        return {"model": self.model, "metric": d.metric, "suite": d.suite, "workload": self.after.identity.describe(),
                "before": {"engine_version": self.before.engine_version, "value": self.before.score,
                           "run_id": self.before.run_id, "sampling": self.before.sampling or None,
                           "sampling_source": self.before.sampling_source or None},
                "after": {"engine_version": self.after.engine_version, "value": self.after.score,
                          "run_id": self.after.run_id, "sampling": self.after.sampling or None,
                          "sampling_source": self.after.sampling_source or None},
                "change_pp": d.ci.diff_pp, "ci_low_pp": d.ci.ci_low_pp, "ci_high_pp": d.ci.ci_high_pp,
                "method": d.ci.method, "verdict": d.verdict, "flagged": self.flagged,
                "sampling_changes": self.sampling_changes, "engine_changes": self.identity_changes}


@dataclass
class RegressionReport:
    rows: list[RegressionRow]
    notes: list[str]  # runs that could have been compared but were not, and why
    quality: list[QualityChange] = field(default_factory=list)  # evals across an engine change


def regression_report(store, *, limit: int = 2000, experiment: str | None = None,
                      margins: dict[str, float] | None = None) -> RegressionReport:
    """For each model and workload identity (a plain bench, or one sweep cell): its newest
    usable run against its newest usable run of the same identity on the previous engine
    version of the same kind; decode tok/s per repetition the runs used. A newer run that is
    not usable (invalid, failed) is named in the notes instead of being passed over silently."""
    everything = list_runs(store, limit=limit, experiment=experiment)
    groups: dict[tuple, list[RunRow]] = {}
    for r in everything:  # newest first
        if r.identity.kind in ("bench", "sweep-cell"):
            groups.setdefault((r.model_key, r.engine_kind, r.identity), []).append(r)
    rows: list[RegressionRow] = []
    notes: list[str] = []
    unmatched: list[RunRow] = []  # newest of a workload with no earlier version of the same workload
    for (_key, _kind, _identity), runs in groups.items():
        good = [r for r in runs if usable(r, r.identity.kind)]
        if not good:
            continue
        after = good[0]
        newer_bad = [r for r in runs if r.engine_version != after.engine_version and not usable(r, r.identity.kind)
                     and (r.start_ms or 0) > (after.start_ms or 0)]
        what = f" ({after.identity.cell})" if after.identity.cell else ""
        for bad in newer_bad[:1]:
            why = ", ".join(f for f in bad.flags if f != "invalid") or bad.status.lower()
            notes.append(f"{bad.model}{what} on {bad.engine_kind} {bad.engine_version}: run {bad.run_id[:8]} is not "
                         f"usable ({'invalid: ' if bad.valid is False else ''}{why}; status {bad.status}): not "
                         f"compared with {after.engine_version}; re-bench it")
        before = next((r for r in good[1:] if r.engine_version != after.engine_version), None)
        if before is None:
            unmatched.append(after)
            continue
        a, b = read_reps(store, before), read_reps(store, after)
        result = compare.regression(a.values["decode_tps"], b.values["decode_tps"])
        label = after.model + what
        rows.append(engine_changes.annotate(RegressionRow(label, "decode_tps", before, after, result),
                                            a.values.get("acceptance", []), b.values.get("acceptance", [])))
    notes.extend(_workload_changed(unmatched, groups))
    return RegressionReport(rows, notes, _quality_changes(store, everything, notes, margins))


def _quality_changes(store, everything: list[RunRow], notes: list[str],
                     margins: dict[str, float] | None) -> list[QualityChange]:
    """Per model and eval workload (suite file, template, rules, context, ceiling, thinking):
    its newest usable eval against the newest usable one on the previous engine version,
    judged against the suite's quality margin as the promotion gate judges (worse: the
    interval wholly below -margin)."""
    from sparkctl.core import sampling
    from sparkctl.services.runs.quality import quality_diff, usable_eval

    groups: dict[tuple, list[RunRow]] = {}
    for r in everything:  # newest first
        if r.identity.kind == workload.EVAL:
            groups.setdefault((r.model_key, r.engine_kind, r.identity), []).append(r)
    out = []
    for runs in groups.values():
        good = [r for r in runs if usable_eval(r, r.suite)]
        if not good:
            continue
        after = good[0]
        before = next((r for r in good[1:] if r.engine_version != after.engine_version), None)
        if before is None:
            continue
        try:
            diff = quality_diff(store, before, after, margin_for(after.suite, margins))
        except ValueError as exc:  # a run without item counts
            notes.append(f"{after.model} {after.suite}: not compared across {before.engine_version} -> "
                         f"{after.engine_version}: {exc}")
            continue
        changed = sampling.changes(sampling.parse(before.sampling), sampling.parse(after.sampling))
        if changed:
            how = sorted({_source_word(r.sampling_source) for r in (before, after)})
            changed = [f"{c} ({' / '.join(how)})" for c in changed]
        out.append(QualityChange(after.model, diff, before, after, changed,
                                 ei.changes(engine_changes.identity_of(before), engine_changes.identity_of(after))))
    return out


def _source_word(source: str) -> str:
    if source.startswith("Ollama's llama-server runner"):
        return "runner /slots"
    if source.startswith("inferred"):
        return "inferred from Ollama's defaults"
    return source or "sent"


def _workload_changed(unmatched: list[RunRow], groups: dict[tuple, list[RunRow]]) -> list[str]:
    """A model whose newest plain bench has no earlier engine version of its workload while
    an older version has a bench of another workload (the context changed, say): what
    differs, and the bench that would make the pair."""
    out = []
    compared = {(k, kind) for (k, kind, _i), runs in groups.items()
                if any(r.engine_version != runs[0].engine_version for r in runs if usable(r, r.identity.kind))}
    newest: dict[tuple, RunRow] = {}
    for r in unmatched:
        key = (r.model_key, r.engine_kind)
        if r.identity.kind == BENCH and key not in compared and (key not in newest or (r.start_ms or 0) >
                                                                   (newest[key].start_ms or 0)):
            newest[key] = r
    for (key, kind), latest in newest.items():
        older = [r for (k, kd, _i), runs in groups.items() if (k, kd) == (key, kind) for r in runs
                 if usable(r) and r.engine_version != latest.engine_version and r.identity != latest.identity]
        if not older:
            continue
        old = max(older, key=lambda r: r.start_ms or 0)
        said = "; ".join(d.text(old.engine_version, latest.engine_version) for d in old.identity.differences(
            latest.identity))
        out.append(f"{latest.model}: its newest bench on {latest.engine_kind} {latest.engine_version} "
                   f"(run {latest.run_id[:8]}) and the one on {old.engine_version} (run {old.run_id[:8]}) differ: "
                   f"{said}; `{matching_command([latest.model], old.identity)}` repeats the earlier workload")
    return out


def find_regressions(store, *, limit: int = 2000, experiment: str | None = None) -> list[RegressionRow]:
    return regression_report(store, limit=limit, experiment=experiment).rows
