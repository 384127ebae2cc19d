"""Which runs may be compared: the newest runs of several models that share one workload
identity (core.workload), and, where none do, what differs and how to make runs that match.

Every decision uses this: compare (benches and evals), promotion's evidence, regressions
(the same identity on two engine versions). Pure over rows already read (no I/O).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from sparkctl.core.workload import EVAL, Difference, WorkloadIdentity
from sparkctl.services.runs.rows import RunRow


@dataclass(frozen=True)
class Match:
    """One run per model, all of one identity; `skipped` says when it is not each model's newest."""

    runs: tuple[RunRow, ...]
    skipped: tuple[str, ...] = ()

    @property
    def identity(self) -> WorkloadIdentity:
        return self.runs[0].identity


@dataclass(frozen=True)
class Mismatch:
    """No identity shared by every model: the newest run of each, and what differs."""

    models: tuple[str, ...]
    newest: tuple[RunRow, ...]
    differences: tuple[tuple[str, tuple[Difference, ...]], ...]  # (other model, what differs from the first)

    def reasons(self) -> list[str]:
        base, first = self.models[0], self.newest[0]
        out = []
        for model, diffs in self.differences:
            other = self.newest[self.models.index(model)]
            said = "; ".join(d.text(base, model) for d in diffs)
            out.append(f"{model}'s newest (run {other.run_id[:8]}) and {base}'s (run {first.run_id[:8]}) differ: {said}")
        return out


def match(rows_by_model: Sequence[Sequence[RunRow]], models: Sequence[str]) -> Match | Mismatch:
    """The newest run of the first model whose identity every other model also has (each
    model's newest run of that identity), else a Mismatch between the newest runs.

    `rows_by_model`: each model's usable runs, newest first, none empty."""
    first, others = rows_by_model[0], rows_by_model[1:]
    for k, base in enumerate(first):
        picks = [base]
        for rows in others:
            same = next((r for r in rows if r.identity == base.identity), None)
            if same is None:
                break
            picks.append(same)
        else:
            skipped = []
            for model, rows, pick in zip(models, rows_by_model, picks):
                if rows[0] is not pick:
                    skipped.append(f"{model}: its newest run {rows[0].run_id[:8]} ({rows[0].identity.describe()}) "
                                   f"has no match; compared run {pick.run_id[:8]}, the newest that has one")
            return Match(tuple(picks), tuple(skipped))
    newest = tuple(rows[0] for rows in rows_by_model)
    diffs = tuple((m, tuple(newest[0].identity.differences(r.identity)))
                  for m, r in zip(models[1:], newest[1:]))
    return Mismatch(tuple(models), newest, diffs)


def matching_command(models: Sequence[str], identity: WorkloadIdentity, engine_flags: Sequence[str] = ()) -> str:
    """The command that would give every model a run of `identity` (the first model's)."""
    names = " ".join(shlex.quote(m) for m in models)
    extra = " ".join(shlex.quote(f) for f in engine_flags)
    if identity.kind == EVAL:
        flags = " ".join(shlex.quote(f) for f in identity.eval_flags())
        return " ".join(p for p in ("sparkctl eval", names, flags, extra) if p)
    flags = " ".join(shlex.quote(f) for f in identity.bench_flags())
    return " ".join(p for p in ("sparkctl bench", names, flags, extra) if p)
