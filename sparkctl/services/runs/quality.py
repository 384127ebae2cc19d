"""Quality in a decision: the newest usable eval run of a model per suite, and accuracy
differences between two models.

When both runs answered the same sample of the same suite file (equal ``sample_sha256``
and ``suite_sha256`` params), the items are paired from each run's ``items.jsonl`` and the
difference gets Newcombe's paired interval with an exact McNemar p-value; otherwise the
two accuracies are independent samples (Newcombe's hybrid score interval from the counts
in the summary metrics). DNF items count as not passed on both paths, as in the run's
headline metric. Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sparkctl.core import compare
from sparkctl.core.suites.tally import primary_metric
from sparkctl.services.runs.query import list_runs, run_params
from sparkctl.services.runs.rows import RunRow

SUITES = ("gsm8k", "ifeval")
HISTORY = 200


def usable_eval(row: RunRow, suite: str) -> bool:
    return (row.kind == "eval" and row.suite == suite and row.status == "FINISHED"
            and row.valid is not False and row.score is not None)


def latest_evals(store, model: str, engine: tuple[str, str] | None, experiment: str | None = None
                 ) -> dict[str, RunRow]:
    """suite -> the newest usable eval run of `model` (on `engine` = (kind, version) if given)."""
    rows = list_runs(store, model=model, kind="eval", limit=HISTORY, experiment=experiment)
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


def quality_diff(store, a: RunRow, b: RunRow) -> QualityDiff:
    """B's accuracy minus A's on the suite both ran (percentage points)."""
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
    return QualityDiff(a.suite, primary_metric(a.suite), a.model, b.model, a.run_id, b.run_id, ci,
                       compare.verdict(ci, higher_is_better=True))
