"""Which runs may be compared: the newest runs of several models that share one workload
identity (core.workload), and, where none do, what differs and how to make runs that match.

Every decision uses this: compare (benches and evals), promotion's evidence, regressions
(the same identity on two engine versions). Pure over rows already read (no I/O).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sparkctl.core.workload import EVAL, Difference, WorkloadIdentity
from sparkctl.services.runs.rows import RunRow


@dataclass(frozen=True)
class Match:
    """One run per model, all of one identity. `skipped`: the models whose newest run is not
    the one compared (their newer runs are named with why by ``left_out``)."""

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
            skipped = [model for model, rows, pick in zip(models, rows_by_model, picks) if rows[0] is not pick]
            return Match(tuple(picks), tuple(skipped))
    newest = tuple(rows[0] for rows in rows_by_model)
    diffs = tuple((m, tuple(newest[0].identity.differences(r.identity)))
                  for m, r in zip(models[1:], newest[1:]))
    return Mismatch(tuple(models), newest, diffs)


def when(ms: int | None) -> str:
    if ms is None:
        return "time unknown"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


SHOWN_LEFT_OUT = 3  # newer runs named one by one; the rest are counted


def left_out(what: str, model: str, rows: Sequence[RunRow], pick: RunRow, why: Callable[[RunRow], str]) -> str:
    """A note naming the runs of `model` newer than `pick` (the one a decision rests on) that
    were left out, each with why ("" when there are none): a decision never rests on an
    older run while a newer one sits unmentioned. `rows`: the model's runs of this kind,
    newest first, usable or not; `what`: "bench", "gsm8k eval"."""
    newer = [r for r in rows if r.run_id != pick.run_id and (r.start_ms or 0) > (pick.start_ms or 0)]
    if not newer:
        return ""
    said = [f"run {r.run_id[:8]} ({when(r.start_ms)}): {why(r)}" for r in newer[:SHOWN_LEFT_OUT]]
    rest = f"; and {len(newer) - SHOWN_LEFT_OUT} more" if len(newer) > SHOWN_LEFT_OUT else ""
    plural = what + ("es" if what.endswith("ch") else "s")
    head = (f"a newer {what} of {model} was left out" if len(newer) == 1
            else f"{len(newer)} newer {plural} of {model} were left out")
    return f"{head} (compared: run {pick.run_id[:8]} of {when(pick.start_ms)}): {'; '.join(said)}{rest}"


def why_not_compared(r: RunRow, pick: RunRow, *, usable: Callable[[RunRow], bool],
                     engines: Sequence[tuple[str, str]] | None = None, same_hardware: bool = True) -> str:
    """Why run `r` was not compared where `pick` was, in words: not finished, invalid, no
    figures, another engine or hardware, or what of its workload differs. `engines`: the
    (kind, version) pairs compared (None: any; a version "" stands for any of that kind)."""
    if r.status != "FINISHED":
        return f"status {r.status}"
    if r.valid is False:
        flags = [f for f in r.flags if f != "invalid"]
        return "marked invalid" + (f" ({', '.join(flags)})" if flags else "")
    if not usable(r):
        return "it recorded no figures to compare"
    if engines is not None and not any(r.engine_kind == k and v in ("", r.engine_version) for k, v in engines):
        allowed = " or ".join(f"{k} {v}".strip() for k, v in engines)
        return f"on {r.engine_kind} {r.engine_version}, not {allowed}"
    if same_hardware and r.hardware != pick.hardware:
        return f"on other hardware ({r.host or '?'}: {r.hardware.label})"
    diffs = r.identity.differences(pick.identity)
    if diffs:
        return "not like for like: " + "; ".join(d.text() for d in diffs) + " (this run vs the one compared)"
    return "the other model has no run that matches it"


def matching_command(models: Sequence[str], identity: WorkloadIdentity, engine_flags: Sequence[str] = ()) -> str:
    """The command that would give every model a run of `identity` (the first model's)."""
    names = " ".join(shlex.quote(m) for m in models)
    extra = " ".join(shlex.quote(f) for f in engine_flags)
    if identity.kind == EVAL:
        flags = " ".join(shlex.quote(f) for f in identity.eval_flags())
        return " ".join(p for p in ("sparkctl eval", names, flags, extra) if p)
    flags = " ".join(shlex.quote(f) for f in identity.bench_flags())
    return " ".join(p for p in ("sparkctl bench", names, flags, extra) if p)
