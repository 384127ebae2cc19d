"""From runs to decisions: head-to-head comparisons and engine-change regressions.

Reads what the bench recorded (summary metrics for picking runs, then the per-repetition
values of the few runs compared) and hands the numbers to core.compare. Runs are compared
on one engine kind and version, with the same prompt, context, output length and cache
policy, unless the caller asks otherwise; what was left out is said, not hidden.
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core import compare
from sparkctl.core.names import model_key
from sparkctl.services.runs import engine_changes
from sparkctl.services.runs.quality import QualityDiff, latest_evals, quality_diff
from sparkctl.services.runs.query import list_runs
from sparkctl.services.runs.rows import RunRow

# metric name in the comparison, per-repetition metric the bench logs, higher is better
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("decode_tps", "engine_decode_tps", True),
    ("ttft_s", "ttft_s", False),
    ("prefill_tps", "prefill_tps", True),
    # speculative decoding: accepted / drafted per repetition, where the engine reports it
    ("acceptance", "spec_acceptance_pct", True),
)
HISTORY = 200  # newest runs of a model looked at when picking the one to compare


def usable(row: RunRow) -> bool:
    """A run whose numbers mean something: finished, valid, a bench."""
    return row.status == "FINISHED" and row.valid is not False and row.kind == "bench" \
        and row.decode_tps_median is not None


def settings_of(row: RunRow) -> tuple[str, str, str, str]:
    return (row.prompt_sha256, row.num_ctx, row.num_predict, row.cache_policy or "cold")


@dataclass
class ModelSide:
    model: str
    run: RunRow | None
    values: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    quality: dict[str, RunRow] = field(default_factory=dict)  # suite -> its newest usable eval run

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        out: dict[str, Any] = {"model": self.model, "note": self.note}
        if r is None:
            return out | {"runs": 0}
        out.update({
            "run_id": r.run_id, "runs": len(self.values.get("decode_tps", [])),
            "engine_kind": r.engine_kind, "engine_version": r.engine_version, "host": r.host,
            "hardware": r.hardware.label,
            "decode_tps_median": r.decode_tps_median, "decode_tps_cv_pct": r.decode_tps_cv_pct,
            "ttft_s_median": r.ttft_s_median, "prefill_tps_median": r.prefill_tps_median,
            "joules_per_token": r.joules_per_token, "roofline_pct": r.roofline_pct,
            "resident_gib": r.resident_gib,
            "spec_acceptance_pct": r.spec_acceptance_pct, "engine_identity": r.engine_identity,
            "flags": list(r.flags),
        })
        for suite, q in self.quality.items():
            out[f"{suite}_run_id"] = q.run_id
            out[f"{suite}_items"] = q.eval_items
            for key in (("gsm8k_strict", "gsm8k_flexible") if suite == "gsm8k"
                        else ("ifeval_prompt_strict", "ifeval_inst_loose")):
                out[key] = getattr(q, key)
        return out


@dataclass
class Difference:
    metric: str
    a: str
    b: str
    ci: compare.DiffCI
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "a": self.a, "b": self.b, "diff_pct": self.ci.diff_pct,
                "ci_low_pct": self.ci.ci_low_pct, "ci_high_pct": self.ci.ci_high_pct,
                "n_a": self.ci.n_a, "n_b": self.ci.n_b, "method": self.ci.method, "verdict": self.verdict}


@dataclass
class Comparison:
    engine: dict[str, str]
    sides: list[ModelSide]
    differences: list[Difference]
    notes: list[str]
    quality: list[QualityDiff] = field(default_factory=list)  # accuracies, in percentage points

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "models": [s.to_dict() for s in self.sides],
                "differences": [d.to_dict() for d in self.differences] + [q.to_dict() for q in self.quality],
                "notes": self.notes}


class NothingToCompare(Exception):
    """A model has no usable run (on the engine asked for)."""


def _values(store, run_id: str) -> dict[str, list[float]]:
    return {name: store.metric_history(run_id, key) for name, key, _ in METRICS}


def compare_models(store, models: list[str], *, any_engine: bool = False, lanes: dict[str, str] | None = None,
                   experiment: str | None = None, any_hardware: bool = False) -> Comparison:
    """The newest usable run of each model, on the engine and the hardware class (GPU,
    memory, driver) of the first model's newest usable run (unless `any_engine`,
    `any_hardware`), and each later model against the first."""
    candidates: dict[str, list[RunRow]] = {}
    notes: list[str] = []
    for m in models:
        rows = [r for r in list_runs(store, model=m, limit=HISTORY, experiment=experiment) if usable(r)]
        if not rows:
            raise NothingToCompare(f"no finished, valid bench run of {m} in the store")
        candidates[m] = rows
    if not any_hardware:
        _same_hardware(candidates, models, notes)
    first = candidates[models[0]][0]
    engine = {"kind": first.engine_kind, "version": first.engine_version}
    lane_of = {model_key(v): k for k, v in (lanes or {}).items()}
    sides = []
    for m in models:
        rows = candidates[m]
        if any_engine:
            pick = rows[0]
        else:
            same = [r for r in rows if (r.engine_kind, r.engine_version) == (first.engine_kind, first.engine_version)]
            if not same:
                newest = rows[0]
                raise NothingToCompare(
                    f"no run of {m} on {first.engine_kind} {first.engine_version} (its newest is on "
                    f"{newest.engine_kind} {newest.engine_version}); re-bench it, or use --any-engine")
            pick = same[0]
            others = {f"{r.engine_kind} {r.engine_version}" for r in rows if r not in same}
            if others:
                notes.append(f"{m}: runs on {', '.join(sorted(others))} left out (another engine)")
        side = ModelSide(m, pick, _values(store, pick.run_id))
        lane = lane_of.get(model_key(m))
        if lane:
            side.note = f"lane {lane}"
        sides.append(side)
    if any_engine and len({(s.run.engine_kind, s.run.engine_version) for s in sides}) > 1:
        notes.append("runs on different engines are compared (--any-engine): an engine change alone can "
                     "move these numbers")
    _say_hosts(sides, notes)
    base = sides[0]
    if any(settings_of(s.run) != settings_of(base.run) for s in sides[1:]):
        notes.append("the runs differ in prompt, num_ctx, num_predict or cache policy: not like for like")
    diffs = []
    for other in sides[1:]:
        for name, _key, higher in METRICS:
            a, b = base.values.get(name, []), other.values.get(name, [])
            if not a or not b:
                continue
            ci = compare.diff_ci(a, b, method="welch")
            diffs.append(Difference(name, base.model, other.model, ci, compare.verdict(ci, higher)))
    quality = _quality(store, sides, None if any_engine else (first.engine_kind, first.engine_version),
                       notes, experiment)
    return Comparison(engine if not any_engine else {"kind": "mixed" if len(
        {(s.run.engine_kind, s.run.engine_version) for s in sides}) > 1 else first.engine_kind,
        "version": first.engine_version}, sides, diffs, notes, quality)


def _same_hardware(candidates: dict[str, list[RunRow]], models: list[str], notes: list[str]) -> None:
    """Keep each model's runs on the first model's newest run's hardware class; say what
    was left out, refuse a model that has none there."""
    hw = candidates[models[0]][0].hardware
    for m in models:
        rows = candidates[m]
        same = [r for r in rows if r.hardware == hw]
        if not same:
            newest = rows[0]
            raise NothingToCompare(
                f"no run of {m} on {hw.label} (its newest ran on {newest.host or '?'}: {newest.hardware.label}); "
                "bench it on such a host, or use --any-hardware")
        if len(same) < len(rows):
            others = sorted({f"{r.host or '?'} ({r.hardware.label})" for r in rows if r.hardware != hw})
            notes.append(f"{m}: runs on other hardware left out: {', '.join(others)}")
        candidates[m] = same


def _say_hosts(sides: list[ModelSide], notes: list[str]) -> None:
    hosts = sorted({s.run.host or "?" for s in sides})
    classes = {s.run.hardware for s in sides}
    if len(classes) > 1:
        notes.append("runs on different hardware are compared (--any-hardware): "
                     + "; ".join(f"{s.model} on {s.run.host or '?'} ({s.run.hardware.label})" for s in sides))
    elif len(hosts) > 1:
        notes.append(f"runs from different hosts ({', '.join(hosts)}) of one hardware class "
                     f"({next(iter(classes)).label})")


def _quality(store, sides: list[ModelSide], engine: tuple[str, str] | None, notes: list[str],
             experiment: str | None) -> list[QualityDiff]:
    """Each side's newest usable GSM8K and IFEval runs (same engine unless any), and each
    later model's accuracy against the first's where both have the suite."""
    for side in sides:
        side.quality = latest_evals(store, side.model, engine, experiment)
    out = []
    base = sides[0]
    for other in sides[1:]:
        for suite, qa in base.quality.items():
            qb = other.quality.get(suite)
            if qb is None:
                continue
            try:
                out.append(quality_diff(store, qa, qb))
            except ValueError as exc:
                notes.append(f"{suite}: {other.model} vs {base.model} not compared ({exc})")
    return out


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

        return {"model": self.model, "metric": self.metric,
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


def find_regressions(store, *, limit: int = 2000, experiment: str | None = None) -> list[RegressionRow]:
    """For each model: its newest usable run against its newest usable run on the previous
    engine version (same engine kind and settings), decode tok/s per repetition."""
    rows = [r for r in list_runs(store, limit=limit, experiment=experiment) if usable(r)]
    by_model: dict[str, list[RunRow]] = {}
    for r in rows:  # newest first
        by_model.setdefault(r.model_key, []).append(r)
    out = []
    for runs in by_model.values():
        after = runs[0]
        before = next((r for r in runs[1:] if r.engine_kind == after.engine_kind
                       and r.engine_version != after.engine_version
                       and settings_of(r) == settings_of(after)), None)
        if before is None:
            continue
        a = store.metric_history(before.run_id, "engine_decode_tps")
        b = store.metric_history(after.run_id, "engine_decode_tps")
        row = RegressionRow(after.model, "decode_tps", before, after, compare.regression(a, b))
        engine_changes.annotate(row, store)
        out.append(row)
    return out
