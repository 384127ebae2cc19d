"""Summaries of repeated measurements, and the run order for comparing models fairly."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

DEFAULT_CV_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Summary:
    """Robust and classic statistics of one metric over a run's repetitions.

    The median is the headline figure (one slow repetition should not move it); the
    coefficient of variation says whether the repetitions agree well enough to compare.
    stdev is the sample standard deviation (n - 1); it and cv_pct are None below two
    values, and cv_pct is None when the mean is 0. Everything is None when n == 0.
    """

    n: int
    median: float | None
    min: float | None
    max: float | None
    mean: float | None
    stdev: float | None
    cv_pct: float | None


def _clean(values: Iterable[float | None]) -> list[float]:
    # None marks a repetition with no value (DNF, metric missing); NaN is treated alike,
    # since one NaN would poison every statistic.
    out: list[float] = []
    for v in values:
        if v is None:
            continue
        f = float(v)
        if math.isnan(f):
            continue
        out.append(f)
    return out


def summarize(values: Iterable[float | None]) -> Summary:
    xs = _clean(values)
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None, None, None, None)
    mean = statistics.fmean(xs)
    stdev = statistics.stdev(xs) if n >= 2 else None
    cv = None
    if stdev is not None and mean != 0:
        cv = abs(stdev / mean) * 100.0
    return Summary(
        n=n,
        median=statistics.median(xs),
        min=min(xs),
        max=max(xs),
        mean=mean,
        stdev=stdev,
        cv_pct=cv,
    )


def is_stable(cv_pct: float | None, threshold: float = DEFAULT_CV_THRESHOLD_PCT) -> bool:
    """Whether the spread is small enough to trust a comparison; unknown spread is not."""
    return cv_pct is not None and cv_pct <= threshold


def interleave(models: Sequence[str], reps: int) -> Iterator[tuple[str, int]]:
    """Run order A B A B ...: each round runs every model once, so drift (heat, clocks,
    page cache) lands on all models alike instead of on whichever ran last. Lazy: the
    schedule is never held whole (an --until-resolved bench usually stops early)."""
    if reps < 0:
        raise ValueError(f"reps must be >= 0, got {reps}")
    seen: set[str] = set()
    for model in models:
        if model in seen:
            raise ValueError(f"model {model!r} is listed twice")
        seen.add(model)
    models = list(models)
    return ((model, rep) for rep in range(reps) for model in models)
