"""Statistics for comparing two runs: is B better than A beyond the noise?

Pure functions over numbers (stdlib only, no I/O, no clock): the relative difference of two
metrics with a confidence interval and a verdict, differences of accuracies (independent or
on the same items), the engine-change regression rule, and the stopping rule for
`bench A B --until-resolved`.

Conventions, everywhere in this module:
- "A" is the baseline (the incumbent, the run before the engine change), "B" the contender;
  a difference is always B - A, so a positive difference means B's number is higher.
- A relative difference is in percent of A; an accuracy difference is in percentage points.
- None and NaN values are dropped first, as `stats.summarize` does (a DNF repetition has
  no speed); `n_a` / `n_b` count what is left.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .stats import _clean, summarize

BETTER = "better"
WORSE = "worse"
WITHIN_NOISE = "within noise"
NOT_ENOUGH = "not enough repetitions"

# A verdict needs this many values a side, and some spread between them: with two
# repetitions (or identical values) an interval is too wide to mean anything, or so narrow
# (zero width) that it claims a certainty the sample cannot have.
MIN_REPS = 3

RESOLVED_EXCLUDES_ZERO = "resolved: interval excludes zero"
STOPPED_AT_MAX = "stopped at max reps"

WELCH = "welch"
BOOTSTRAP = "bootstrap"


# ---------------------------------------------------------------------------------------
# Student's t quantile (no scipy in core): invert the CDF, which is a regularized incomplete
# beta function, I_x(df/2, 1/2) with x = df / (df + t^2).


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta function, modified Lentz's method
    # (Numerical Recipes 6.4). Converges fast for x < (a + 1) / (a + b + 2).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df > 0 degrees of freedom (df need not be whole)."""
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if t == 0.0:
        return 0.5
    t2 = t * t
    if t2 < min(df, 1.0):  # near the centre: integrate from 0, not 1 - (nearly 1/2)
        half_mass = 0.5 * _betainc(0.5, df / 2.0, t2 / (df + t2))
        return 0.5 + half_mass if t > 0 else 0.5 - half_mass
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t2))
    return 1.0 - tail if t > 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p: closed forms for df 1 and 2, otherwise bisection on the CDF
    (to ~1e-12, far inside the 1e-4 a confidence interval needs). Welch's df is fractional."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    lo, hi = 0.0, max(1.0, NormalDist().inv_cdf(p))
    while student_t_cdf(hi, df) < p:  # the t quantile is above the normal one; widen
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


# ---------------------------------------------------------------------------------------
# Relative difference of a metric between two runs.


@dataclass(frozen=True)
class DiffCI:
    """B relative to A, in percent of A, with a confidence interval.

    statistic: "mean" (welch) or "median" (bootstrap): what diff_pct compares.
    diff_pct: (stat(B) - stat(A)) / |stat(A)| * 100; None when a side has no value, and
    when A is zero or indistinguishable from zero (``relative`` False): a percentage of
    nothing means nothing, so the absolute difference stands alone.
    ci_low_pct / ci_high_pct: the interval in the same unit; None with fewer than 2 values
    on a side (then the verdict is "not enough repetitions").
    diff_abs / ci_low_abs / ci_high_abs: the same in the metric's own unit (B - A), always
    filled when the percentages are.
    df: Welch-Satterthwaite degrees of freedom (welch only; None when both sides are
    constant, where the interval collapses to the point).
    """

    method: str
    statistic: str
    diff_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    n_a: int
    n_b: int
    confidence: float
    df: float | None = None
    diff_abs: float | None = None
    ci_low_abs: float | None = None
    ci_high_abs: float | None = None
    relative: bool = True

    @property
    def has_interval(self) -> bool:
        if self.relative:
            return self.ci_low_pct is not None and self.ci_high_pct is not None
        return self.ci_low_abs is not None and self.ci_high_abs is not None

    @property
    def point(self) -> float | None:
        """The difference in the unit the verdict reads (percent, or absolute)."""
        return self.diff_pct if self.relative else self.diff_abs

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return (self.ci_low_pct, self.ci_high_pct) if self.relative else (self.ci_low_abs, self.ci_high_abs)


def _relative(diff: float, base: float) -> float:
    # |base|: the sign of a relative difference then always says whether B is higher.
    if base == 0:
        raise ValueError("relative difference undefined: the baseline (A) is 0")
    return diff / abs(base) * 100.0


def _near_zero(xs: Sequence[float]) -> bool:
    """Whether A's mean cannot be told from zero: exactly 0, or within one standard error
    of it. A percentage of such a baseline is noise divided by noise, so the difference
    stays absolute."""
    m = statistics.fmean(xs)
    if m == 0:
        return True
    if len(xs) < 2:
        return False
    return abs(m) <= statistics.stdev(xs, m) / math.sqrt(len(xs))


def diff_ci(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    method: str = WELCH,
    confidence: float = 0.95,
    seed: int | random.Random = 0,
    n_boot: int = 2000,
) -> DiffCI:
    """Relative difference of B vs A with a confidence interval.

    welch (default): difference of means, t interval with Welch-Satterthwaite df (no
    equal-variance assumption), then divided by |mean(A)|. Dividing by the observed
    mean(A) treats the denominator as known: A's sampling noise is in the interval through
    the numerator, but the ratio's extra uncertainty from the denominator is ignored.
    Chosen over Fieller / the delta method because (1) the interval then excludes zero
    exactly when Welch's test rejects "equal means", so the verdict is a textbook test; (2)
    it equals the delta-method interval at "no difference" and differs from it only by
    weighting A's variance term by 1 instead of (mean(B)/mean(A))^2, which matters only
    when the difference itself is large (at -14%: 1 vs 0.74), where the verdict is not in
    doubt; it is then slightly wider than the delta method when B < A (conservative for
    regressions) and slightly narrower when B > A.

    bootstrap: relative difference of medians, percentile interval over n_boot resamples,
    each side resampled independently with `random.Random(seed)` (a Random may be passed
    instead). With few repetitions (< ~10) the percentile bootstrap of a median is too
    narrow and lumpy; welch is the default for that reason.
    """
    _check_confidence(confidence)
    if method not in (WELCH, BOOTSTRAP):
        raise ValueError(f"method must be {WELCH!r} or {BOOTSTRAP!r}, got {method!r}")
    xa, xb = _clean(a), _clean(b)
    na, nb = len(xa), len(xb)
    statistic = "mean" if method == WELCH else "median"
    if na == 0 or nb == 0:
        return DiffCI(method, statistic, None, None, None, na, nb, confidence)
    center = statistics.fmean if method == WELCH else statistics.median
    base = center(xa)
    d_abs = center(xb) - base
    # (the bootstrap's own test for this is a resampled median of 0, below)
    relative = base != 0 and not (method == WELCH and _near_zero(xa))

    def result(low: float | None, high: float | None, df: float | None = None, rel: bool = relative) -> DiffCI:
        if not rel:
            return DiffCI(method, statistic, None, None, None, na, nb, confidence, df, d_abs, low, high, False)
        pct = (lambda x: None if x is None else _relative(x, base))
        return DiffCI(method, statistic, pct(d_abs), pct(low), pct(high), na, nb, confidence, df,
                      d_abs, low, high, True)

    if na < 2 or nb < 2:
        return result(None, None)

    if method == WELCH:
        ma, mb = statistics.fmean(xa), statistics.fmean(xb)
        wa = statistics.variance(xa, ma) / na  # squared standard error of each mean
        wb = statistics.variance(xb, mb) / nb
        se2 = wa + wb
        if se2 == 0:  # both sides constant: the interval is the point (verdict: no spread)
            return result(d_abs, d_abs)
        df = se2 * se2 / (wa * wa / (na - 1) + wb * wb / (nb - 1))
        half = student_t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(se2)
        return result(d_abs - half, d_abs + half, df)

    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    diffs, ratios = [], []
    for _ in range(n_boot):
        ra = statistics.median(rng.choices(xa, k=na))
        rb = statistics.median(rng.choices(xb, k=nb))
        diffs.append(rb - ra)
        # a resample whose median of A is 0 has no relative difference: the whole interval
        # is then given in absolute terms rather than raising or dropping resamples
        ratios.append(None if ra == 0 else (rb - ra) / abs(ra) * 100.0)
    diffs.sort()
    alpha = 1.0 - confidence
    low, high = _percentile(diffs, alpha / 2.0), _percentile(diffs, 1.0 - alpha / 2.0)
    if not relative or any(r is None for r in ratios):
        return result(low, high, rel=False)
    ratios.sort()
    out = result(low, high)
    return DiffCI(method, statistic, out.diff_pct, _percentile(ratios, alpha / 2.0),
                  _percentile(ratios, 1.0 - alpha / 2.0), na, nb, confidence, None, d_abs, low, high, True)


def _percentile(sorted_xs: Sequence[float], q: float) -> float:
    # Linear interpolation between order statistics (numpy's default, R's type 7).
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


# ---------------------------------------------------------------------------------------
# Accuracy differences (quality suites): percentage points, B - A.


@dataclass(frozen=True)
class ProportionDiff:
    """Accuracy of B minus accuracy of A on independent samples, in percentage points,
    with Newcombe's hybrid score interval (1998, method 10: from the two Wilson intervals)."""

    p_a: float
    p_b: float
    diff_pp: float
    ci_low_pp: float
    ci_high_pp: float
    n_a: int
    n_b: int
    confidence: float
    method: str = "newcombe-wilson"


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion, as fractions in [0, 1]."""
    _check_counts(correct, n)
    z = _z(confidence)
    p = correct / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _check_counts(correct: int, n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= correct <= n:
        raise ValueError(f"correct must be in 0..{n}, got {correct}")


def proportion_diff(correct_a: int, n_a: int, correct_b: int, n_b: int, *,
                    confidence: float = 0.95) -> ProportionDiff:
    """B's accuracy minus A's, for two runs scored on independent samples of items.

    Newcombe's method 10 rather than the Wald interval: Wald collapses to zero width at
    0% or 100% and undercovers at eval sizes; Newcombe's stays inside [-100, 100] pp.
    """
    _check_confidence(confidence)
    _check_counts(correct_a, n_a)
    _check_counts(correct_b, n_b)
    pa, pb = correct_a / n_a, correct_b / n_b
    la, ua = wilson_interval(correct_a, n_a, confidence)
    lb, ub = wilson_interval(correct_b, n_b, confidence)
    d = pb - pa
    low = d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
    high = d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
    return ProportionDiff(pa, pb, d * 100, low * 100, high * 100, n_a, n_b, confidence)


@dataclass(frozen=True)
class PairedDiff:
    """Accuracy of B minus accuracy of A when both answered the same n items.

    both / only_a / only_b / neither count items right for both, only A, only B, neither.
    The interval is Newcombe's paired method 10; p_value is the exact two-sided McNemar
    test (binomial of the discordant pairs, p = 1/2).
    """

    n: int
    both: int
    only_a: int
    only_b: int
    neither: int
    p_a: float
    p_b: float
    diff_pp: float
    ci_low_pp: float
    ci_high_pp: float
    p_value: float
    confidence: float
    method: str = "newcombe-paired-wilson"


def paired_diff(pairs: Sequence[tuple[bool, bool]], *, confidence: float = 0.95) -> PairedDiff:
    """B's accuracy minus A's on the same items; each pair is (A correct, B correct).

    Newcombe (1998, Stat Med 17:2635, method 10): combine the two Wilson intervals as for
    independent samples, corrected by the correlation phi of the paired table (with its
    continuity correction: phi is 0 for 0 <= ad - bc <= n/2). Chosen over the Wald interval
    with continuity correction because that one can leave [-1, 1] and undercovers when
    discordant pairs are few (Newcombe's evaluation; Fagerland et al. recommend it too).
    Only the discordant items carry information about the difference, hence McNemar.
    """
    _check_confidence(confidence)
    both = only_a = only_b = neither = 0
    for a_ok, b_ok in pairs:
        if a_ok and b_ok:
            both += 1
        elif a_ok:
            only_a += 1
        elif b_ok:
            only_b += 1
        else:
            neither += 1
    n = both + only_a + only_b + neither
    if n == 0:
        raise ValueError("no pairs")
    # "first" proportion is B's, "second" is A's, so the difference is B - A.
    p1, p2 = (both + only_b) / n, (both + only_a) / n
    l1, u1 = wilson_interval(both + only_b, n, confidence)
    l2, u2 = wilson_interval(both + only_a, n, confidence)
    margins = ((both + only_b) * (only_a + neither)
               * (both + only_a) * (only_b + neither))
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_a * only_b
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    d = p1 - p2
    dl1, du1, dl2, du2 = p1 - l1, u1 - p1, p2 - l2, u2 - p2
    low = d - math.sqrt(max(0.0, dl1 ** 2 - 2 * phi * dl1 * du2 + du2 ** 2))
    high = d + math.sqrt(max(0.0, dl2 ** 2 - 2 * phi * dl2 * du1 + du1 ** 2))
    return PairedDiff(n, both, only_a, only_b, neither, p2, p1, d * 100, low * 100,
                      high * 100, mcnemar_exact_p(only_a, only_b), confidence)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: 2 x P(X <= min) for X ~ Binomial(b + c, 1/2), capped
    at 1. Integer arithmetic, so it is exact for any count."""
    if only_a < 0 or only_b < 0:
        raise ValueError("counts must be >= 0")
    m = only_a + only_b
    if m == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(m, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2 ** m)


# ---------------------------------------------------------------------------------------
# Verdicts.


def verdict(ci: DiffCI | ProportionDiff | PairedDiff, higher_is_better: bool,
            min_effect_pct: float = 0.0) -> str:
    """Say "better" or "worse" (B relative to A) when the interval excludes zero and the point
    estimate lies beyond min_effect_pct on the same side (percent for DiffCI, percentage
    points for accuracies); otherwise "within noise". A DiffCI gets "not enough
    repetitions" with fewer than MIN_REPS values a side or no spread at all (a zero-width
    interval), whatever its point says. A DiffCI read in absolute terms (a zero baseline)
    ignores min_effect_pct: a percentage has no meaning there."""
    if min_effect_pct < 0:
        raise ValueError(f"min_effect_pct must be >= 0, got {min_effect_pct}")
    if isinstance(ci, DiffCI):
        if not ci.has_interval or ci.point is None or min(ci.n_a, ci.n_b) < MIN_REPS:
            return NOT_ENOUGH
        d = ci.point
        low, high = ci.interval
        assert low is not None and high is not None
        if high - low <= 0:
            return NOT_ENOUGH
        if not ci.relative:
            min_effect_pct = 0.0
    else:
        d, low, high = ci.diff_pp, ci.ci_low_pp, ci.ci_high_pp
    assert low is not None and high is not None
    if low > 0 and d > min_effect_pct:
        higher = True
    elif high < 0 and d < -min_effect_pct:
        higher = False
    else:
        return WITHIN_NOISE
    return BETTER if higher == higher_is_better else WORSE


# ---------------------------------------------------------------------------------------
# Engine-change regressions.


@dataclass(frozen=True)
class Regression:
    """A metric before vs after an engine change (same model, same settings).

    change_pct: median(after) vs median(before), in percent. threshold_pct: max(floor_pct,
    cv_mult x the larger CV in percent). ci_*: Welch interval of the relative difference
    of means (None below 2 values a side). flagged: the worsening exceeds the threshold AND
    the interval excludes zero. reason: one line saying why or why not.
    """

    change_pct: float | None
    threshold_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    flagged: bool
    reason: str
    n_before: int
    n_after: int
    median_before: float | None
    median_after: float | None
    cv_before_pct: float | None
    cv_after_pct: float | None


def regression(
    before: Sequence[float | None],
    after: Sequence[float | None],
    *,
    floor_pct: float = 5.0,
    cv_mult: float = 3.0,
    higher_is_better: bool = True,
    confidence: float = 0.95,
) -> Regression:
    """Did the engine change cost this model? Two guards must both agree: the change is
    larger than the run-to-run noise could plausibly produce (threshold from the CVs, with a
    floor so a very steady model is not flagged for 1%), and the means differ beyond their
    confidence interval. A same-version repeat inside the noise is therefore never flagged.
    For decode tok/s (higher_is_better) a drop is the regression; for TTFT pass False."""
    sb, sa = summarize(before), summarize(after)
    cvs = [c for c in (sb.cv_pct, sa.cv_pct) if c is not None]
    threshold = max(floor_pct, cv_mult * max(cvs)) if cvs else floor_pct

    def result(change: float | None, ci: DiffCI | None, flagged: bool, reason: str) -> Regression:
        return Regression(change, threshold, ci.ci_low_pct if ci else None,
                          ci.ci_high_pct if ci else None, flagged, reason, sb.n, sa.n,
                          sb.median, sa.median, sb.cv_pct, sa.cv_pct)

    change = None
    if sb.median is not None and sa.median is not None and sb.median != 0:
        change = _relative(sa.median - sb.median, sb.median)
    if sb.n < MIN_REPS or sa.n < MIN_REPS:
        return result(change, None, False,
                      f"{NOT_ENOUGH} (before {sb.n}, after {sa.n}; need {MIN_REPS} each)")
    if change is None:
        return result(None, None, False, "the run before has a median of 0: no relative change")
    ci = diff_ci(before, after, method=WELCH, confidence=confidence)
    if not ci.relative or ci.ci_low_pct is None or ci.ci_high_pct is None:
        return result(change, None, False, "the run before cannot be told from 0: no relative change")
    if ci.ci_low_pct == ci.ci_high_pct:
        return result(change, ci, False, f"{NOT_ENOUGH} (no spread: every repetition gave the same value)")
    worse_by = -change if higher_is_better else change
    excludes = ci.ci_high_pct < 0 if higher_is_better else ci.ci_low_pct > 0
    interval = (f"{confidence:.0%} CI {ci.ci_low_pct:+.1f}% to {ci.ci_high_pct:+.1f}%")
    if worse_by <= 0:
        return result(change, ci, False,
                      f"{change:+.1f}%: no {'drop' if higher_is_better else 'rise'}")
    if worse_by <= threshold:
        return result(change, ci, False,
                      f"{change:+.1f}% is within the {threshold:.1f}% threshold")
    if not excludes:
        return result(change, ci, False,
                      f"{change:+.1f}% exceeds the {threshold:.1f}% threshold but the "
                      f"{interval} includes zero")
    return result(change, ci, True,
                  f"regression: {change:+.1f}% exceeds the {threshold:.1f}% threshold and "
                  f"the {interval} excludes zero")


# ---------------------------------------------------------------------------------------
# Stopping rule for interleaved repetitions.


def until_resolved(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    width_pct: float = 2.0,
    max_reps: int,
    min_reps: int = 3,
    confidence: float = 0.95,
) -> str | None:
    """After each round of interleaved repetitions: stop, and say why, or None to go on.

    Checked in this order, once both sides have min_reps values: the Welch interval of the
    relative difference excludes zero -> "resolved: interval excludes zero"; its total
    width is below width_pct -> "resolved: interval narrower than 2%"; else, once both
    sides have max_reps values -> "stopped at max reps".

    Looking after every round and stopping at the first interval that excludes zero
    ("optional stopping") would make a false "different" far likelier than 5% when the
    models are equal (simulated: ~15% with 95% intervals looked at from 3 to 10 reps, ~20%
    up to 20). So `confidence` is for the whole sequence: each look uses a Bonferroni
    interval at 1 - (1 - confidence) / looks, looks = max_reps - min_reps + 1. It is wider
    than the plain interval, so a resolved pair also differs at the plain 95%. The width
    rule uses the plain interval (the one `compare` reports): stopping because the
    interval got narrow claims no difference, so repeated looks do not inflate a false one.
    """
    _check_confidence(confidence)
    if max_reps < 1:
        raise ValueError(f"max_reps must be >= 1, got {max_reps}")
    if width_pct <= 0:
        raise ValueError(f"width_pct must be > 0, got {width_pct}")
    first_look = max(2, min_reps)
    looks = max(1, max_reps - first_look + 1)
    per_look = 1.0 - (1.0 - confidence) / looks
    strict = diff_ci(a, b, method=WELCH, confidence=per_look)
    done = min(strict.n_a, strict.n_b)
    if strict.has_interval and done >= first_look:
        low, high = strict.interval
        assert low is not None and high is not None
        if high > low and (low > 0 or high < 0):  # a zero-width interval resolves nothing
            return RESOLVED_EXCLUDES_ZERO
        plain = diff_ci(a, b, method=WELCH, confidence=confidence)
        if plain.relative and plain.ci_low_pct is not None and plain.ci_high_pct is not None \
                and 0 < plain.ci_high_pct - plain.ci_low_pct < width_pct:
            return f"resolved: interval narrower than {width_pct:g}%"
    if done >= max_reps:
        return STOPPED_AT_MAX
    return None
