"""A quality gate with a margin: is the contender better, not worse, or worse than the
incumbent by more than `margin` percentage points, and when the sample cannot tell, how many
items would?

"Not worse" is a non-inferiority claim. It is shown when the lower bound of the interval on
(contender - incumbent) lies above -margin; "worse" is said when the upper bound lies below
-margin; anything else is "not resolved": the interval reaches both sides of -margin, so the
sample is too small to say either, whatever its point estimate. The gate never reads "the
interval includes zero": 100 paired items on which the incumbent alone is right on 12 and
the contender alone on 5 (73 both, 10 neither: 85% -> 78%) give -7.0 pp [-15.4, +1.3],
which includes zero, yet allow a 15-point loss. Such a sample fails the gate by being unable
to show anything, and the refusal says how many items would resolve it (``items_needed``).

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
ON_MARGIN_PP = 0.05  # half the 0.1 pp differences are shown with: closer than that is on the margin


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
    """Items (paired, or per model) for the interval to lie wholly on one side of -margin with
    `power`, if the true difference were `diff_pp`: n = (z_(1-alpha/2) + z_power)^2 * V /
    (diff + margin)^2. Above the margin that side is "not worse", below it "worse": the
    formula is the same, only the sign of the room differs. None when the difference sits
    on -margin: no number of items separates a difference from itself. "On" means closer than
    half the 0.1 pp a difference is shown with (ON_MARGIN_PP): a difference and a margin that
    print alike are the same to the user, and floating point leaves a residue (-2.0 + 2.0 can
    be 1e-15 here) that would otherwise name an absurd count."""
    room_pp = abs(diff_pp + margin_pp)
    if room_pp < ON_MARGIN_PP:
        return None
    room = room_pp / 100.0
    z = _z(0.5 + confidence / 2.0) + _z(power)
    return max(1, math.ceil(z * z * max(variance, 1e-12) / (room * room)))


def detectable_margin_pp(n: int, variance: float, *, power: float = POWER, confidence: float = CONFIDENCE) -> float:
    """The smallest margin n items show with `power` when the models are truly equal."""
    z = _z(0.5 + confidence / 2.0) + _z(power)
    return 100.0 * z * math.sqrt(variance / n)


# What a gate concludes: its three ways, and the one word "better" inside "not worse".
BETTER = "better"
NOT_WORSE = "not worse"
WORSE = "worse"
NOT_RESOLVED = "not resolved"


@dataclass(frozen=True)
class GateResult:
    """One suite's check of contender minus incumbent (percentage points) against -margin."""

    suite: str
    margin_pp: float
    diff_pp: float
    low_pp: float
    high_pp: float
    n: int  # items compared (paired) or the smaller arm
    paired: bool
    shown: bool  # not worse: the lower bound is above -margin
    needed: int | None  # not resolved: items that would resolve it at the observed spread (None otherwise)
    suite_items: int | None = None  # the whole suite's size, when known
    worse: bool = False  # worse: the upper bound is below -margin

    @property
    def outcome(self) -> str:
        """BETTER (the interval above zero), NOT_WORSE, WORSE or NOT_RESOLVED."""
        if self.shown:
            return BETTER if self.low_pp > 0 else NOT_WORSE
        return WORSE if self.worse else NOT_RESOLVED

    @property
    def resolved(self) -> bool:
        return self.shown or self.worse

    @property
    def per(self) -> str:
        return "paired items" if self.paired else "items per model"

    @property
    def beyond_suite(self) -> bool:
        """The items that would resolve it are more than the suite holds."""
        return self.needed is not None and self.suite_items is not None and self.needed > self.suite_items

    @property
    def more(self) -> int | None:
        """Items to add to the sample at hand (None: no count can be named)."""
        return None if self.needed is None else max(1, self.needed - self.n)

    def interval(self) -> str:
        return f"{self.diff_pp:+.1f} pp [{self.low_pp:+.1f}, {self.high_pp:+.1f}]"

    def verdict(self) -> str:
        """The decision table's verdict cell."""
        m = f"{self.margin_pp:g} pp"
        if self.outcome == BETTER:
            return "better"
        if self.outcome == NOT_WORSE:
            return f"not worse (margin {m})"
        if self.outcome == WORSE:
            return f"worse, beyond the {m} margin"
        if self.needed is None:
            return f"not resolved (the difference sits on the {m} margin)"
        if self.beyond_suite:  # past the suite's size the count means nothing more than that
            return f"not resolved: too few items (more than the suite's {self.suite_items:,} would be needed)"
        return f"not resolved: too few items (about {self.needed:,} would resolve it)"

    def resolution(self, power_note: bool = True) -> str:
        """What would resolve an unresolved gate, in a clause ("" when resolved)."""
        if self.resolved:
            return ""
        if self.needed is None:
            return ("the observed difference sits on the margin, so no number of items can be named that "
                    "would resolve it")
        if self.beyond_suite:
            text = (f"more {self.per} than the suite's {self.suite_items:,} would be needed to resolve it at the "
                    "observed spread")
        else:
            text = f"about {self.needed:,} {self.per} would resolve it at the observed spread"
        if power_note:
            text += " (80% power if the true difference is the one seen)"
        return text

    def explain(self) -> str:
        how = "paired" if self.paired else "independent samples"
        head = f"{self.interval()} on {self.n} items ({how})"
        m = f"{self.margin_pp:g}"
        if self.shown:
            return f"{head}: not worse by more than {m} pp (lower bound above -{m})"
        if self.worse:
            return (f"{head}: worse by more than the {m} pp margin ([promote] quality_margin_pp): the upper "
                    f"bound {self.high_pp:+.1f} pp is below -{m}")
        return (f"{head}: not resolved at the {m} pp margin ([promote] quality_margin_pp): the interval reaches "
                f"both sides of -{m}, so the sample shows neither \"not worse\" nor \"worse\"; "
                + self.resolution())


def judge(suite: str, diff: ProportionDiff | PairedDiff, margin_pp: float, suite_items: int | None = None) -> GateResult:
    if margin_pp < 0:
        raise ValueError(f"margin must be >= 0 percentage points, got {margin_pp}")
    shown = diff.ci_low_pp > -margin_pp
    worse = diff.ci_high_pp < -margin_pp
    if isinstance(diff, PairedDiff):
        var = variance_per_item(diff.p_a, diff.p_b, discordant=(diff.only_a / diff.n, diff.only_b / diff.n))
        n, paired = diff.n, True
    else:
        var = variance_per_item(diff.p_a, diff.p_b)
        n, paired = min(diff.n_a, diff.n_b), False
    # The score intervals reported are wider than the normal approximation where items
    # disagree rarely (or never): the estimate uses the variance that the half of the
    # reported interval facing the margin implies when that is larger, so it never names
    # the sample at hand.
    z = _z(0.5 + CONFIDENCE / 2.0)
    half = (diff.diff_pp - diff.ci_low_pp) if diff.diff_pp > -margin_pp else (diff.ci_high_pp - diff.diff_pp)
    var = max(var, n * (half / 100.0 / z) ** 2)
    needed = None if shown or worse else items_needed(diff.diff_pp, margin_pp, var)
    return GateResult(suite, margin_pp, diff.diff_pp, diff.ci_low_pp, diff.ci_high_pp, n, paired, shown, needed,
                      suite_items, worse)
