"""Whether a contender may take a lane: the preconditions of a promotion, each with its
evidence, as plain data. Pure: the caller reads MLflow, the engine and the budget.

Three preconditions, in the order they are shown, and a fourth when limits are set:

- **bench**: a valid bench of the contender on the engine kind and version serving now:
  finished, not marked invalid, 100% on the GPU, not throttled, cold prefill.
- **quality**: for each suite the lane's incumbent was ever evaluated on, both models have
  an eval of one workload identity on the engine version serving now (older versions only
  when the user says so), and the contender is shown to be not worse by more than the
  suite's margin: the lower bound of the interval on contender minus incumbent lies above
  -margin (core.noninferiority). A sample too small to show it is unmet, with the number of
  items that would. Only an incumbent never evaluated at all leaves it "n/a".
- **fit**: the contender fits beside the incumbent, or, when the user asked to swap,
  fits once the incumbent alone is unloaded.
- **limits** (only with `[promote] max_ttft_increase_pct` or `max_memory_increase_pct`):
  the contender's like-for-like bench against the incumbent's, judged as `compare`'s
  recommendation judges them (services.runs.decision): unmet when an interval lies beyond a
  limit, or reaches it, or the figure is missing.

Every piece of evidence names the newer runs of either model it left out, and why.

An unmet precondition refuses the promotion unless forced; the override is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

MET = "met"
UNMET = "unmet"
NOT_APPLICABLE = "n/a"

# Run flags (services/runs/rows.py flags_of) that disqualify a bench as promotion evidence.
DISQUALIFYING_FLAGS = ("invalid", "placement", "throttled", "prefill-cached")


@dataclass(frozen=True)
class Precondition:
    name: str  # "bench" | "quality" | "fit" | "limits"
    state: str  # MET | UNMET | NOT_APPLICABLE
    summary: str  # one line: the evidence, or why it is unmet
    details: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()  # MLflow run ids it rests on

    @property
    def unmet(self) -> bool:
        return self.state == UNMET

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state, "summary": self.summary,
                "details": list(self.details), "runs": list(self.runs)}


@dataclass(frozen=True)
class BenchEvidence:
    """What a bench run says, as far as a promotion cares (from a runs RunRow)."""

    run_id: str
    engine_kind: str
    engine_version: str
    status: str
    valid: bool | None
    flags: tuple[str, ...]
    decode_tps_median: float | None
    start_ms: int | None = None
    cache_policy: str = ""


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def bench_problems(run: BenchEvidence) -> list[str]:
    """Why this bench cannot justify a promotion ([] when it can)."""
    out = []
    if run.status != "FINISHED":
        out.append(f"status {run.status}")
    if run.valid is False:
        out.append("marked invalid by its guards")
    for flag in run.flags:
        if flag in DISQUALIFYING_FLAGS and not (flag == "invalid" and run.valid is False):
            out.append({"placement": "not 100% on the GPU", "throttled": "GPU throttled",
                        "prefill-cached": "prefill came from the cache", "invalid": "invalid"}[flag])
        elif flag.startswith("cache=") or (run.cache_policy and run.cache_policy != "cold"):
            out.append(f"cache policy {flag.partition('=')[2] or run.cache_policy} (not cold prefill)")
    if run.decode_tps_median is None:
        out.append("no decode measurement")
    return list(dict.fromkeys(out))


def judge_bench(model: str, runs: Sequence[BenchEvidence], engine_kind: str, engine_version: str) -> Precondition:
    """`runs`: the model's bench runs, newest first (any engine)."""
    here = [r for r in runs if r.engine_kind == engine_kind and r.engine_version == engine_version]
    engine = f"{engine_kind} {engine_version}"
    for r in here:
        if not bench_problems(r):
            extra = [f for f in r.flags if f not in DISQUALIFYING_FLAGS]
            note = f" (flags: {', '.join(extra)})" if extra else ""
            return Precondition(
                "bench", MET,
                f"run {r.run_id[:8]} of {_when(r.start_ms)}: decode {r.decode_tps_median:.1f} tok/s on {engine}, "
                f"100% GPU, cold prefill, not throttled{note}",
                tuple(_newer_left_out(model, runs, r, engine_kind, engine_version)), runs=(r.run_id,))
    details = tuple(f"run {r.run_id[:8]} of {_when(r.start_ms)} on {engine}: {'; '.join(bench_problems(r))}"
                    for r in here[:5])
    if here:
        return Precondition("bench", UNMET, f"no valid bench of {model} on {engine} "
                            f"({len(here)} run(s) on it, none usable)", details,
                            runs=tuple(r.run_id for r in here[:5]))
    other = next((r for r in runs), None)
    hint = (f"; newest is run {other.run_id[:8]} on {other.engine_kind} {other.engine_version}"
            if other else "")
    return Precondition("bench", UNMET, f"no bench of {model} on {engine}{hint}: "
                        f"run `sparkctl bench {model}` first")


def _newer_left_out(model: str, runs: Sequence[BenchEvidence], pick: BenchEvidence, engine_kind: str,
                    engine_version: str) -> list[str]:
    """The benches of `model` newer than the one the evidence rests on, each with why it was
    left out: the evidence never rests on an older run while a newer one goes unmentioned."""
    out = []
    for r in runs:
        if r is pick or (r.start_ms or 0) <= (pick.start_ms or 0):
            continue
        if (r.engine_kind, r.engine_version) != (engine_kind, engine_version):
            why = f"on {r.engine_kind} {r.engine_version}, not the engine serving now ({engine_kind} {engine_version})"
        else:
            why = "; ".join(bench_problems(r)) or "not usable"
        out.append(f"a newer bench of {model} (run {r.run_id[:8]}, {_when(r.start_ms)}) was left out: {why}")
    return out


@dataclass(frozen=True)
class SuiteComparison:
    """One suite: the eval runs compared (ids; "" / None where there is none), whether the
    contender was shown not worse by more than the margin, and in words why or why not."""

    suite: str
    incumbent_run: str
    contender_run: str | None
    shown: bool | None = None  # non-inferiority at the margin; None: not compared
    diff_text: str = ""  # "90.0% -> 87.0%, -3.0 pp [-12.1, +6.0] on 100 items (...): ..."
    problem: str = ""  # why not compared (no eval on this engine, not like for like)
    notes: tuple[str, ...] = ()  # newer evals of either model left out, and why


def judge_quality(incumbent: str, model: str, engine: str, suites: Iterable[SuiteComparison],
                  from_version: str = "") -> Precondition:
    suites = list(suites)
    if not suites:
        return Precondition("quality", NOT_APPLICABLE,
                            f"no eval runs of the incumbent {incumbent or '(none)'} on any engine version: "
                            "quality not compared")
    problems, lines, runs, notes = [], [], [], []
    older = f" (evals from {from_version} accepted: --quality-from-version)" if from_version else ""
    for s in suites:
        runs.extend(r for r in (s.incumbent_run, s.contender_run) if r)
        notes.extend(s.notes)
        if s.problem:
            problems.append(s.problem)
            continue
        lines.append(f"{s.suite}: {model} vs {incumbent}: {s.diff_text}")
        if not s.shown:
            problems.append(f"{s.suite}: {model} vs {incumbent}: {s.diff_text}")
    if problems:
        return Precondition("quality", UNMET, "; ".join(problems) + older, tuple(lines + notes), tuple(runs))
    return Precondition("quality", MET, "; ".join(lines) + older, tuple(notes), tuple(runs))


def judge_fit(model: str, incumbent: str, verdict_line: str, refusal: str | None,
              evicts_lanes: Sequence[str], fits: bool, swap: bool, same_model) -> tuple[Precondition, bool]:
    """(the precondition, whether the incumbent must be unloaded before the load).

    `refusal`: sparkctl's default load guard (None: it would load beside what is resident).
    With `swap`, a plan whose only lane casualty is the incumbent is accepted: the
    incumbent is unloaded first, and the lane is cold for the length of the switch."""
    if refusal is None:
        beside = f" beside {incumbent}" if incumbent else ""
        return Precondition("fit", MET, f"{verdict_line}{beside}"), False
    only_incumbent = bool(incumbent) and bool(evicts_lanes) and all(same_model(n, incumbent) for n in evicts_lanes)
    if swap and fits and only_incumbent:
        return Precondition("fit", MET, f"{verdict_line}; --swap: {incumbent} is unloaded first "
                            "(the lane is cold during the switch)"), True
    hint = " (--swap unloads it first)" if only_incumbent and fits else ""
    return Precondition("fit", UNMET, f"{refusal}{hint}"), False


def unmet(checks: Iterable[Precondition]) -> list[Precondition]:
    return [c for c in checks if c.unmet]
