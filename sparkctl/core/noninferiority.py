"""A quality gate with a margin: is the contender shown to be not worse than the incumbent
by more than `margin` percentage points, and if the sample cannot show it, how many items
would?

"Not worse" is a non-inferiority claim. It is shown when the lower bound of the interval on
(contender - incumbent) lies above -margin. It is never "the interval includes zero": at
100 items, 85% -> 78% (paired, interval -15.4 to +1.3 pp) includes zero, yet the data
allow a 15-point loss. A small sample then fails the gate by being unable to show
anything, and the refusal says how many items would (see ``items_needed``).

Default margins (``DEFAULT_MARGINS_PP``), chosen for what the full suites can show. The
interval's half-width at n items is about z * sqrt(V / n), where V is the per-item
variance of the difference: on the same items (paired) V = d - (b - c)^2 with d the share
of items the two models disagree on; on independent samples V = pA(1-pA) + pB(1-pB).
Showing a margin with 80% power when the models are truly equal needs
n = (z_0.975 + z_0.80)^2 * V / margin^2 = 7.85 * V / margin^2. So:

- GSM8K, all 1,319 items, paired: a 2-point margin is shown with 80% power when the
  models disagree on up to 6.7% of the items (V = 0.067: n = 7.85 * 0.067 / 0.02^2 = 1,315),
  which two quantizations or minor versions of one model typically do; 1 point would need
  a disagreement under 1.7%, and 3 points allows 15%.
- IFEval, all 541 prompts (prompt-level strict), paired: a 3-point margin is shown with 80%
  power up to 6.2% disagreement (7.85 * 0.062 / 0.03^2 = 541); 2 points would need 2.8%.
- Independent samples cannot show these margins on these suites: GSM8K at 85% gives
  V = 0.255, a half-width of 2.7 points at 1,319 items. Pairing (the same seed and file,
  `sparkctl eval --for-promotion`) is what makes the margins reachable.

`[promote] quality_margin_pp` changes them. The figures above are recomputed by
tests/unit/test_noninferiority.py, and the 80% power is checked there by simulation.

Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from sparkctl.core.compare import PairedDiff, ProportionDiff
from sparkctl.core.margins import DEFAULT_MARGINS_PP  # noqa: F401  (the gate's defaults; config reads them there)
POWER = 0.80
CONFIDENCE = 0.95


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def variance_per_item(p_a: float, p_b: float, *, discordant: tuple[float, float] | None = None) -> float:
    """Variance of one item's contribution to the difference B - A (in proportions):
    paired, from the shares of items only A passed and only B passed; else independent."""
    if discordant is not None:
        only_a, only_b = discordant
        return (only_a + only_b) - (only_b - only_a) ** 2
    return p_a * (1 - p_a) + p_b * (1 - p_b)


def items_needed(diff_pp: float, margin_pp: float, variance: float, *, power: float = POWER,
                 confidence: float = CONFIDENCE) -> int | None:
    """Items (per model, paired or per arm) for the interval's lower bound to clear
    -margin with `power`, if the true difference were `diff_pp`: n = (z_(1-alpha/2) + z_power)^2
    * V / (diff + margin)^2. None when the difference is at or beyond the margin: no number
    of items shows non-inferiority then."""
    room = (diff_pp + margin_pp) / 100.0
    if room <= 0:
        return None
    z = _z(0.5 + confidence / 2.0) + _z(power)
    return max(1, math.ceil(z * z * max(variance, 1e-12) / (room * room)))


def detectable_margin_pp(n: int, variance: float, *, power: float = POWER, confidence: float = CONFIDENCE) -> float:
    """The smallest margin n items show with `power` when the models are truly equal."""
    z = _z(0.5 + confidence / 2.0) + _z(power)
    return 100.0 * z * math.sqrt(variance / n)


@dataclass(frozen=True)
class GateResult:
    """One suite's non-inferiority check (contender minus incumbent, percentage points)."""

    suite: str
    margin_pp: float
    diff_pp: float
    low_pp: float
    high_pp: float
    n: int  # items compared (paired) or the smaller arm
    paired: bool
    shown: bool  # the lower bound is above -margin
    needed: int | None  # items that would show it at the observed rates (None: none would)
    suite_items: int | None = None  # the whole suite's size, when known

    def explain(self) -> str:
        how = "paired" if self.paired else "independent samples"
        head = (f"{self.diff_pp:+.1f} pp [{self.low_pp:+.1f}, {self.high_pp:+.1f}] on {self.n} items ({how})")
        if self.shown:
            return f"{head}: not worse by more than {self.margin_pp:g} pp (lower bound above -{self.margin_pp:g})"
        why = (f"{head}: the lower bound {self.low_pp:+.1f} pp is below the -{self.margin_pp:g} pp margin "
               "([promote] quality_margin_pp), so the sample does not show the contender is not worse")
        if self.needed is None:
            return (f"{why}; the observed difference is at or beyond the margin, so more items would not "
                    "show it either")
        more = ""
        if self.suite_items is not None and self.needed > self.suite_items:
            more = (f", more than the suite's {self.suite_items:,}: this margin cannot be shown on it at "
                    "these rates")
        return (f"{why}; about {self.needed:,} items{' (paired)' if self.paired else ' per model'} would show it "
                f"at the observed rates (80% power){more}")


def judge(suite: str, diff: ProportionDiff | PairedDiff, margin_pp: float, suite_items: int | None = None) -> GateResult:
    if margin_pp < 0:
        raise ValueError(f"margin must be >= 0 percentage points, got {margin_pp}")
    shown = diff.ci_low_pp > -margin_pp
    if isinstance(diff, PairedDiff):
        var = variance_per_item(diff.p_a, diff.p_b, discordant=(diff.only_a / diff.n, diff.only_b / diff.n))
        n, paired = diff.n, True
    else:
        var = variance_per_item(diff.p_a, diff.p_b)
        n, paired = min(diff.n_a, diff.n_b), False
    # The score intervals reported are wider than the normal approximation where items
    # disagree rarely (or never): the estimate uses the variance the reported interval's
    # lower half implies when that is larger, so it never promises the sample at hand.
    z = _z(0.5 + CONFIDENCE / 2.0)
    var = max(var, n * ((diff.diff_pp - diff.ci_low_pp) / 100.0 / z) ** 2)
    needed = None if shown else items_needed(diff.diff_pp, margin_pp, var)
    return GateResult(suite, margin_pp, diff.diff_pp, diff.ci_low_pp, diff.ci_high_pp, n, paired, shown, needed,
                      suite_items)
