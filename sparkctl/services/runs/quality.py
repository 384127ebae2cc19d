"""Quality in a decision: each model's eval runs per suite, paired by workload identity, and
accuracy differences with a non-inferiority margin.

Two eval runs are compared only when their workload identities match (core.workload: the
suite file, the prompt template, the scoring rules, the context, the answer ceiling,
thinking). When both answered the same sample of the same suite file (equal
``sample_sha256`` and ``suite_sha256`` params), the items are paired from each run's
``items.jsonl`` and the difference gets Newcombe's paired interval with an exact McNemar
p-value; otherwise the two accuracies are independent samples (Newcombe's hybrid score
interval from the counts in the summary metrics). DNF items count as not passed on both
paths, as in the run's headline metric. The gate (core.noninferiority) then asks whether the
interval's lower bound clears -margin. Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkctl.core import compare
from sparkctl.core.noninferiority import DEFAULT_MARGINS_PP, GateResult, judge
from sparkctl.core.suites.tally import primary_metric
from sparkctl.services.runs.pairing import Mismatch, left_out, match, matching_command, why_not_compared
from sparkctl.services.runs.query import list_runs, run_params
from sparkctl.services.runs.rows import RunRow

SUITES = ("gsm8k", "ifeval")
SUITE_ITEMS = {"gsm8k": 1319, "ifeval": 541}  # the published files' sizes (services/evals/suites.py)
HISTORY = 200


def usable_eval(row: RunRow, suite: str) -> bool:
    return (row.kind == "eval" and row.suite == suite and row.status == "FINISHED"
            and row.valid is not False and row.score is not None)


def eval_rows(store, model: str, experiment: str | None = None) -> list[RunRow]:
    """The model's eval runs, newest first, every suite and engine."""
    return list_runs(store, model=model, kind="eval", limit=HISTORY, experiment=experiment)


def latest_evals(store, model: str, engine: tuple[str, str] | None, experiment: str | None = None
                 ) -> dict[str, RunRow]:
    """suite -> the newest usable eval run of `model` (on `engine` = (kind, version) if given)."""
    rows = eval_rows(store, model, experiment)
    out: dict[str, RunRow] = {}
    for suite in SUITES:
        for r in rows:
            if usable_eval(r, suite) and (engine is None or (r.engine_kind, r.engine_version) == engine):
                out[suite] = r
                break
    return out


@dataclass(frozen=True)
class QualityDiff:
    suite: str
    metric: str
    a: str
    b: str
    run_a: str
    run_b: str
    ci: compare.ProportionDiff | compare.PairedDiff
    verdict: str
    gate: GateResult | None = None

    @property
    def paired(self) -> bool:
        return isinstance(self.ci, compare.PairedDiff)

    def to_dict(self) -> dict[str, Any]:
        c = self.ci
        out = {"metric": self.metric, "suite": self.suite, "a": self.a, "b": self.b,
               "diff_pp": c.diff_pp, "ci_low_pp": c.ci_low_pp, "ci_high_pp": c.ci_high_pp,
               "method": c.method, "verdict": self.verdict, "run_a": self.run_a, "run_b": self.run_b}
        if isinstance(c, compare.PairedDiff):
            out.update(n=c.n, only_a=c.only_a, only_b=c.only_b, p_value=c.p_value)
        else:
            out.update(n_a=c.n_a, n_b=c.n_b)
        if self.gate is not None:
            out.update(margin_pp=self.gate.margin_pp, non_inferior=self.gate.shown, worse_beyond_margin=self.gate.worse,
                       items_needed=self.gate.needed)
        return out


def _passes(store, run_id: str) -> dict[str, bool]:
    """item id -> passed (the primary metric), from the run's items.jsonl."""
    out = {}
    for line in store.read_artifact(run_id, "items.jsonl").splitlines():
        if line.strip():
            row = json.loads(line)
            out[str(row["item_id"])] = bool(row.get("passed")) and not row.get("dnf")
    return out


def _counts(row: RunRow) -> tuple[int, int]:
    if row.eval_passed is None or not row.eval_items:
        raise ValueError(f"run {row.run_id[:8]} has no item counts (passed/items metrics)")
    return row.eval_passed, row.eval_items


def quality_diff(store, a: RunRow, b: RunRow, margin_pp: float | None = None) -> QualityDiff:
    """B's accuracy minus A's on the suite both ran (percentage points), with the
    non-inferiority check at `margin_pp` when given."""
    if a.suite != b.suite:
        raise ValueError(f"different suites: {a.suite} and {b.suite}")
    pa, pb = run_params(store, a.run_id), run_params(store, b.run_id)
    same_sample = (pa.get("sample_sha256") and pa.get("sample_sha256") == pb.get("sample_sha256")
                   and pa.get("suite_sha256") == pb.get("suite_sha256"))
    ci: compare.ProportionDiff | compare.PairedDiff
    if same_sample:
        xa, xb = _passes(store, a.run_id), _passes(store, b.run_id)
        common = [i for i in xa if i in xb]
        ci = compare.paired_diff([(xa[i], xb[i]) for i in common])
    else:
        (ca, na), (cb, nb) = _counts(a), _counts(b)
        ci = compare.proportion_diff(ca, na, cb, nb)
    gate = None if margin_pp is None else judge(a.suite, ci, margin_pp, SUITE_ITEMS.get(a.suite))
    # with a margin the verdict is the gate's (better / not worse / worse / not resolved): an
    # interval that excludes zero but reaches inside the margin is not "worse"
    verdict = gate.outcome if gate is not None else compare.verdict(ci, higher_is_better=True)
    return QualityDiff(a.suite, primary_metric(a.suite), a.model, b.model, a.run_id, b.run_id, ci, verdict, gate)


def margin_for(suite: str, margins: dict[str, float] | None) -> float:
    return (margins or {}).get(suite, DEFAULT_MARGINS_PP.get(suite, 0.0))


@dataclass(frozen=True)
class SuiteEvidence:
    """One suite in a decision: the pair of eval runs it rests on, or why there is none."""

    suite: str
    incumbent: str
    contender: str
    incumbent_run: RunRow | None = None
    contender_run: RunRow | None = None
    diff: QualityDiff | None = None
    problem: str = ""  # why there is no comparison ("" when diff is set)
    command: str = ""  # what would produce matching runs
    notes: tuple[str, ...] = ()

    @property
    def runs(self) -> tuple[str, ...]:
        return tuple(r.run_id for r in (self.incumbent_run, self.contender_run) if r is not None)


def suite_evidence(store, suite: str, incumbent: str, contender: str, inc_rows: Sequence[RunRow],
                   con_rows: Sequence[RunRow], engine_kind: str, versions: Sequence[str] | None,
                   margin_pp: float, engine_flags: Sequence[str] = ()) -> SuiteEvidence | None:
    """The suite's evidence for `contender` against `incumbent`: each side's usable eval runs
    of the suite on `engine_kind` and one of `versions` (None: any version), paired by
    identity. None when the incumbent has never been evaluated on this suite."""
    def usable(rows: Sequence[RunRow]) -> list[RunRow]:
        return [r for r in rows if usable_eval(r, suite) and (not engine_kind or r.engine_kind == engine_kind)]

    inc_all, con_all = usable(inc_rows), usable(con_rows)
    if not inc_all:
        return None
    allowed = (lambda r: True) if versions is None else (lambda r: r.engine_version in versions)
    inc_ok, con_ok = [r for r in inc_all if allowed(r)], [r for r in con_all if allowed(r)]
    where = f"{engine_kind} {' or '.join(versions)}" if versions else engine_kind
    base = (inc_ok or inc_all)[0].identity
    cmd = matching_command([incumbent, contender], base, engine_flags) + " --for-promotion"
    if not inc_ok:
        old = inc_all[0]
        return SuiteEvidence(suite, incumbent, contender, problem=(
            f"no {suite} eval of {incumbent} on {where} (its newest, run {old.run_id[:8]}, is on "
            f"{old.engine_kind} {old.engine_version}): quality must be measured on the engine serving now; "
            f"run `{cmd}`, or --quality-from-version {old.engine_version} to accept the older one"), command=cmd)
    if not con_ok:
        return SuiteEvidence(suite, incumbent, contender, incumbent_run=inc_ok[0], problem=(
            f"no {suite} eval of {contender} on {where} (the incumbent has run {inc_ok[0].run_id[:8]}): "
            f"run `{cmd}`"), command=cmd)
    found = match([inc_ok, con_ok], [incumbent, contender])
    if isinstance(found, Mismatch):
        return SuiteEvidence(suite, incumbent, contender, incumbent_run=inc_ok[0], contender_run=con_ok[0],
                             problem=f"{suite}: not like for like: " + "; ".join(found.reasons())
                             + f"; run `{cmd}` for a matching pair", command=cmd)
    a, b = found.runs
    engines = None if not engine_kind else [(engine_kind, v) for v in (versions or [""])]
    notes = []
    for model, rows, pick in ((incumbent, inc_rows, a), (contender, con_rows, b)):
        mine = [r for r in rows if r.kind == "eval" and r.suite == suite]
        note = left_out(f"{suite} eval", model, mine, pick,
                        lambda r, pick=pick: why_not_compared(r, pick, usable=lambda x: usable_eval(x, suite),
                                                              engines=engines, same_hardware=False))
        if note:
            notes.append(note)
    return SuiteEvidence(suite, incumbent, contender, a, b, quality_diff(store, a, b, margin_pp),
                         notes=tuple(notes))
