"""Head-to-head comparisons: the runs of two or more models picked and compared.

Reads what the bench recorded (summary metrics for picking runs, then the per-repetition
values of the few runs compared) and hands the numbers to core.compare. Runs are compared
on one engine kind and version, and only when their whole workload identity matches
(core.workload, paired by services.runs.pairing): a sweep cell is never taken for a plain
bench, a bench at num_ctx 4096 never for one at 8192. Where no pair matches, the refusal
names what differs and the command that makes a matching pair. The values compared are
exactly the repetitions each run used for its own summary (services.runs.reps).
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core import compare
from sparkctl.core.names import model_key
from sparkctl.core.workload import BENCH
from sparkctl.services.runs.pairing import Mismatch, left_out, match, matching_command, why_not_compared
from sparkctl.services.runs.quality import (
    SUITES,
    QualityDiff,
    SuiteEvidence,
    eval_rows,
    margin_for,
    suite_evidence,
)
from sparkctl.services.runs.query import list_runs
from sparkctl.services.runs.reps import RunReps, read_reps
from sparkctl.services.runs.rows import RunRow

# metric name in the comparison, higher is better
METRICS: tuple[tuple[str, bool], ...] = (
    ("decode_tps", True),
    ("ttft_s", False),
    ("prefill_tps", True),
    ("joules_per_token", False),
    # speculative decoding: accepted / drafted per repetition, where the engine reports it
    ("acceptance", True),
)
HISTORY = 200  # newest runs of a model looked at when picking the one to compare


def usable(row: RunRow, kind: str = BENCH) -> bool:
    """A run whose numbers mean something: finished, valid, a plain bench (or `kind`)."""
    return row.status == "FINISHED" and row.valid is not False and row.identity.kind == kind \
        and row.decode_tps_median is not None


@dataclass
class ModelSide:
    model: str
    run: RunRow | None
    values: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    quality: dict[str, RunRow] = field(default_factory=dict)  # suite -> the eval run compared
    reps: RunReps | None = None
    lane: str = ""

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        out: dict[str, Any] = {"model": self.model, "note": self.note, "lane": self.lane or None}
        if r is None:
            return out | {"runs": 0}
        out.update({
            "run_id": r.run_id, "runs": len(self.values.get("decode_tps", [])),
            "engine_kind": r.engine_kind, "engine_version": r.engine_version, "host": r.host,
            "decode_tps_median": r.decode_tps_median, "decode_tps_cv_pct": r.decode_tps_cv_pct,
            "ttft_s_median": r.ttft_s_median, "prefill_tps_median": r.prefill_tps_median,
            "joules_per_token": r.joules_per_token, "roofline_pct": r.roofline_pct,
            "resident_gib": r.resident_gib, "hardware": r.hardware.label,
            "spec_acceptance_pct": r.spec_acceptance_pct, "engine_identity": r.engine_identity,
            "flags": list(r.flags), "identity": r.identity.to_dict(),
        })
        if self.reps is not None:
            out["excluded"] = {"dnf": self.reps.dnf, "failed": self.reps.failed, "cached": self.reps.cached}
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
    excluded_a: str = ""  # "3 cached, excluded": repetitions the run's own summary left out
    excluded_b: str = ""

    def to_dict(self) -> dict[str, Any]:
        c = self.ci
        return {"metric": self.metric, "a": self.a, "b": self.b, "diff_pct": c.diff_pct,
                "ci_low_pct": c.ci_low_pct, "ci_high_pct": c.ci_high_pct, "relative": c.relative,
                "diff_abs": c.diff_abs, "ci_low_abs": c.ci_low_abs, "ci_high_abs": c.ci_high_abs,
                "n_a": c.n_a, "n_b": c.n_b, "method": c.method, "verdict": self.verdict,
                "excluded_a": self.excluded_a or None, "excluded_b": self.excluded_b or None}


@dataclass
class Comparison:
    engine: dict[str, str]
    sides: list[ModelSide]
    differences: list[Difference]
    notes: list[str]
    quality: list[QualityDiff] = field(default_factory=list)  # accuracies, in percentage points
    evidence: list[SuiteEvidence] = field(default_factory=list)  # per contender and suite, compared or not
    margins: dict[str, float] = field(default_factory=dict)
    limits: dict[str, float] = field(default_factory=dict)  # [promote] limits the recommendation applies

    def to_dict(self) -> dict[str, Any]:
        from sparkctl.services.runs.decision import decision_table

        return {"engine": self.engine, "models": [s.to_dict() for s in self.sides],
                "identity": self.sides[0].run.identity.to_dict() if self.sides and self.sides[0].run else None,
                "differences": [d.to_dict() for d in self.differences] + [q.to_dict() for q in self.quality],
                "decision": decision_table(self).to_dict(), "notes": self.notes}


class NothingToCompare(Exception):
    """A model has no usable run (on the engine asked for), or no run that matches the
    others' workload. `command` is what would produce a matching pair, when known;
    `models`/`num_ctx` let a screen offer it."""

    def __init__(self, message: str, command: str = "", models: list[str] | None = None,
                 num_ctx: int | None = None) -> None:
        super().__init__(message)
        self.command = command
        self.models = models or []
        self.num_ctx = num_ctx


def incumbent_first(models: list[str], lanes: dict[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The models with the incumbent (the model of the first lane, in the config's order,
    that one of them serves) moved first: it is always the baseline. Also model -> lane."""
    lane_of: dict[str, str] = {}
    for lane, name in (lanes or {}).items():
        for m in models:
            if model_key(m) == model_key(name) and m not in lane_of:
                lane_of[m] = lane
    ordered = list(models)
    for lane, name in (lanes or {}).items():
        hit = next((m for m in models if model_key(m) == model_key(name)), None)
        if hit is not None:
            ordered.remove(hit)
            ordered.insert(0, hit)
            break
    return ordered, lane_of


def _values(reps: RunReps) -> dict[str, list[float]]:
    return {name: reps.values.get(name, []) for name, _ in METRICS}


def compare_models(store, models: list[str], *, any_engine: bool = False, lanes: dict[str, str] | None = None,
                   experiment: str | None = None, margins: dict[str, float] | None = None,
                   any_hardware: bool = False, limits: dict[str, float] | None = None) -> Comparison:
    """Each model's newest usable plain bench that shares the baseline's workload identity,
    on the engine and the hardware class (GPU, memory, driver) of the baseline's newest
    usable run (unless `any_engine`, `any_hardware`), and each later model against the
    baseline (the incumbent lane model when one is among `models`). `limits`: the [promote]
    limits the recommendation turns into blockers (PromoteConfig.limits())."""
    asked = list(models)
    models, lane_of = incumbent_first(asked, lanes)
    notes: list[str] = []
    if models[0] != asked[0]:
        notes.append(f"baseline: {models[0]} (lane {lane_of[models[0]]}, the incumbent), whatever the order given")
    candidates: dict[str, list[RunRow]] = {}
    benches: dict[str, list[RunRow]] = {}  # every plain bench, usable or not: to name the newer ones left out
    for m in models:
        benches[m] = [r for r in list_runs(store, model=m, limit=HISTORY, experiment=experiment)
                      if r.identity.kind == BENCH]
        rows = [r for r in benches[m] if usable(r)]
        if not rows:
            raise NothingToCompare(f"no finished, valid bench run of {m} in the store (sweep cells, evals and "
                                   f"lane changes are not benches): run `sparkctl bench {m}`")
        candidates[m] = rows
    if not any_hardware:
        _same_hardware(candidates, models, notes)
    first = candidates[models[0]][0]
    engine = {"kind": first.engine_kind, "version": first.engine_version}
    pools = []
    for m in models:
        rows = candidates[m]
        if not any_engine:
            same = [r for r in rows if (r.engine_kind, r.engine_version) == (first.engine_kind, first.engine_version)]
            if not same:
                newest = rows[0]
                raise NothingToCompare(
                    f"no run of {m} on {first.engine_kind} {first.engine_version} (its newest is on "
                    f"{newest.engine_kind} {newest.engine_version}); re-bench it, or use --any-engine")
            others = {f"{r.engine_kind} {r.engine_version}" for r in rows if r not in same}
            if others:
                notes.append(f"{m}: runs on {', '.join(sorted(others))} left out (another engine)")
            rows = same
        pools.append(rows)
    found = match(pools, models)
    if isinstance(found, Mismatch):
        base_identity = found.newest[0].identity
        cmd = matching_command(models, base_identity)
        prompt_note = ""
        if any(d.name == "prompt_sha256" for _, diffs in found.differences for d in diffs):
            prompt_note = f" with the prompt of run {found.newest[0].run_id[:8]} (--prompt)"
        ctx = int(base_identity.num_ctx) if base_identity.num_ctx.isdigit() else None
        raise NothingToCompare(
            "no like-for-like benches: " + "; ".join(found.reasons())
            + f". Run `{cmd}`{prompt_note} for runs that match", command=cmd, models=models, num_ctx=ctx)
    engines = None if any_engine else [(first.engine_kind, first.engine_version)]
    for m, pick in zip(models, found.runs):
        note = left_out("bench", m, benches[m], pick,
                        lambda r, pick=pick: why_not_compared(r, pick, usable=usable, engines=engines,
                                                              same_hardware=not any_hardware))
        if note:
            notes.append(note)
    identity = found.identity
    if not identity.recorded:
        notes.append(f"the runs compared predate the workload identity: it is inferred from what they "
                     f"recorded ({identity.describe()})")
    sides = []
    for m, pick in zip(models, found.runs):
        reps = read_reps(store, pick)
        side = ModelSide(m, pick, _values(reps), reps=reps, lane=lane_of.get(m, ""))
        if side.lane:
            side.note = f"lane {side.lane}"
        sides.append(side)
    if any_engine and len({(s.run.engine_kind, s.run.engine_version) for s in sides}) > 1:
        notes.append("runs on different engines are compared (--any-engine): an engine change alone can "
                     "move these numbers")
    _say_hosts(sides, notes)
    base = sides[0]
    diffs = []
    for other in sides[1:]:
        for name, higher in METRICS:
            a, b = base.values.get(name, []), other.values.get(name, [])
            if not a or not b:
                continue
            ci = compare.diff_ci(a, b, method="welch")
            diffs.append(Difference(name, base.model, other.model, ci, compare.verdict(ci, higher),
                                    base.reps.excluded_text(name) if base.reps else "",
                                    other.reps.excluded_text(name) if other.reps else ""))
    margins = {s: margin_for(s, margins) for s in SUITES}
    versions = None if any_engine else [first.engine_version]
    evidence, quality = _quality(store, sides, first.engine_kind, versions, margins, notes, experiment)
    kind = first.engine_kind
    if any_engine and len({(s.run.engine_kind, s.run.engine_version) for s in sides}) > 1:
        kind = "mixed"
    return Comparison({"kind": kind, "version": first.engine_version} if any_engine else engine,
                      sides, diffs, notes, quality, evidence, margins, dict(limits or {}))


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


def _quality(store, sides: list[ModelSide], engine_kind: str, versions: list[str] | None,
             margins: dict[str, float], notes: list[str], experiment: str | None
             ) -> tuple[list[SuiteEvidence], list[QualityDiff]]:
    """Each later model's accuracy against the baseline's, per suite the baseline has, on
    eval runs of one identity (same engine version unless any)."""
    rows = {s.model: eval_rows(store, s.model, experiment) for s in sides}
    base = sides[0]
    evidence, quality = [], []
    for other in sides[1:]:
        for suite in SUITES:
            ev = suite_evidence(store, suite, base.model, other.model, rows[base.model], rows[other.model],
                                engine_kind, versions, margins[suite])
            if ev is None:
                continue
            evidence.append(ev)
            notes.extend(ev.notes)
            if ev.diff is None:
                notes.append(ev.problem)
                continue
            quality.append(ev.diff)
            base.quality.setdefault(suite, ev.incumbent_run)
            other.quality[suite] = ev.contender_run
    return evidence, quality
