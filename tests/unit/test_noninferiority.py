"""The quality gate's margins and power estimates (sparkctl/core/noninferiority.py).

Expected values are worked out in the comments from the textbook sample-size formula for
a non-inferiority test (n = (z_(1-alpha/2) + z_(1-beta))^2 * V / (delta + margin)^2, with
z values from a normal table: 1.95996 and 0.84162), and the 80% power is checked by
simulation with the paired interval sparkctl reports, not by the formula itself."""

import random
import re

import pytest

from sparkctl.core import noninferiority
from sparkctl.core.compare import paired_diff, proportion_diff
from sparkctl.core.noninferiority import (
    DEFAULT_MARGINS_PP,
    NOT_RESOLVED,
    NOT_WORSE,
    WORSE,
    detectable_margin_pp,
    items_needed,
    judge,
    variance_per_item,
)


def table(both: int, only_a: int, only_b: int, neither: int):
    """A paired sample: items both models got right, only the incumbent (A), only the
    contender (B), neither."""
    return paired_diff([(True, True)] * both + [(True, False)] * only_a + [(False, True)] * only_b
                       + [(False, False)] * neither)

Z2 = (1.95996 + 0.84162) ** 2  # 7.8489


def test_the_default_margins_are_what_the_full_suites_show_with_related_models():
    assert DEFAULT_MARGINS_PP == {"gsm8k": 2.0, "ifeval": 3.0}
    # GSM8K, 1,319 items paired, the models disagreeing on 6.7% of them (V = 0.067):
    # 100 * 2.80158 * sqrt(0.067 / 1319) = 1.997 pp
    assert detectable_margin_pp(1319, 0.067) == pytest.approx(1.997, abs=0.005)
    # IFEval, 541 prompts paired, 6.2% disagreement: 100 * 2.80158 * sqrt(0.062 / 541) = 2.999
    assert detectable_margin_pp(541, 0.062) == pytest.approx(2.999, abs=0.005)
    # independent samples cannot: GSM8K at 85% has V = 2 * 0.85 * 0.15 = 0.255, and a 95%
    # half-width of 1.96 * sqrt(0.255 / 1319) = 2.725 pp at the full suite
    assert variance_per_item(0.85, 0.85) == pytest.approx(0.255)
    assert detectable_margin_pp(1319, 0.255) > 3.5


def test_items_needed_by_the_textbook_formula():
    # paired, true difference 0, disagreement 10%: 7.8489 * 0.10 / 0.02^2 = 1962.2 -> 1963
    assert items_needed(0.0, 2.0, 0.10) == 1963
    # a contender 1 pp better shows a 2 pp margin sooner: 7.8489 * 0.10 / 0.03^2 = 872.1 -> 873
    assert items_needed(1.0, 2.0, 0.10) == 873
    # beyond the margin the same formula says when the interval would lie wholly below it
    # ("worse"): 5 pp of room either way, 7.8489 * 0.10 / 0.05^2 = 313.96 -> 314
    assert items_needed(-7.0, 2.0, 0.10) == 314 == items_needed(3.0, 2.0, 0.10)
    # exactly on the margin: no number of items separates a difference from itself
    assert items_needed(-2.0, 2.0, 0.10) is None
    # on the margin as shown (0.1 pp): floating point's residue names no count (review of issue 30)
    assert items_needed((0.88 - 0.90) * 100, 2.0, 0.10) is None
    assert items_needed(-2.04, 2.0, 0.10) is None and items_needed(-2.06, 2.0, 0.10) is not None


def test_the_module_s_own_example_is_the_interval_its_table_gives():
    """Issue 30 point 7: the docstring quoted an interval (-15.4 to +1.3) for 85% -> 78% while
    the test beside it built another table (-13.0 to -1.5, which excludes zero) and loosened
    its assertion (`ci_high_pp + 5`) to pass. The example is stated with its table, and the
    interval it quotes is the one that table gives."""
    doc = " ".join(noninferiority.__doc__.split())
    m = re.search(r"incumbent alone is right on (\d+) and the contender alone on (\d+) \((\d+) both, (\d+) "
                  r"neither: 85% -> 78%\) give (-?\d+\.\d) pp \[(-?\d+\.\d), \+?(-?\d+\.\d)\]", doc)
    assert m, doc
    only_a, only_b, both, neither = (int(x) for x in m.groups()[:4])
    d = table(both, only_a, only_b, neither)
    assert (d.p_a, d.p_b) == (0.85, 0.78)
    quoted = tuple(float(x) for x in m.groups()[4:])
    assert (round(d.diff_pp, 1), round(d.ci_low_pp, 1), round(d.ci_high_pp, 1)) == quoted == (-7.0, -15.4, 1.3)
    assert d.ci_low_pp < 0 < d.ci_high_pp  # the old gate ("the interval includes zero") passed it
    g = judge("gsm8k", d, 2.0, 1319)
    assert not g.shown and g.outcome == NOT_RESOLVED  # the margin gate does not


def test_the_issue_example_85_to_78_is_refused_and_not_called_worse():
    """Issue 18 point 3: 85% -> 78% on 100 items passed because the interval included zero.
    Seven items only the incumbent got right give -7.0 pp [-13.0, -1.5]: the interval
    excludes zero, yet reaches inside the 2 pp margin, so it is not resolved (issue 30:
    it was called worse, "more items would not show it either")."""
    d = table(78, 7, 0, 15)
    assert (round(d.ci_low_pp, 1), round(d.ci_high_pp, 1)) == (-13.0, -1.5)
    g = judge("gsm8k", d, 2.0, 1319)
    assert not g.shown and not g.worse and g.outcome == NOT_RESOLVED
    assert g.needed > 100 and "more items would" not in g.explain()
    assert "below the -2 pp margin" not in g.explain()
    assert f"about {g.needed:,} paired items would resolve it at the observed spread" in g.explain()
    ind = judge("gsm8k", proportion_diff(85, 100, 75, 100), 2.0)  # the independent example
    assert not ind.shown and ind.low_pp == pytest.approx(-20.9, abs=0.15)


def test_equal_accuracy_on_20_items_is_not_resolved_and_says_how_many_items_would_resolve_it():
    """Issue 30 point 2: -5.0 pp [-28.2, +18.5] on 20 paired items was "worse than the 2 pp
    margin allows" and "more items would not show it either"."""
    d = table(15, 3, 2, 0)
    assert f"{d.diff_pp:+.1f} [{d.ci_low_pp:+.1f}, {d.ci_high_pp:+.1f}]" == "-5.0 [-28.2, +18.5]"
    g = judge("gsm8k", d, 2.0, 1319)
    assert g.outcome == NOT_RESOLVED and not g.worse and not g.shown
    # 3 pp of room at the observed difference; V from the interval's upper half (the half
    # facing the margin): 20 * (23.5 / 100 / 1.96)^2 = 0.2875 -> 7.8489 * 0.2875 / 0.03^2 = 2,507,
    # or more (the rounding of the bounds above)
    assert 2400 <= g.needed <= 2700
    # more than the suite holds: said as that, without the count (review of issue 30)
    assert g.verdict() == "not resolved: too few items (more than the suite's 1,319 would be needed)"
    assert f"{g.needed:,}" not in g.explain()
    text = g.explain()
    assert "worse" not in text.replace('"not worse" nor "worse"', "")
    assert "would not show" not in text and "would show it" not in text


def test_sixty_points_below_on_20_items_is_worse_said_plainly():
    """Issue 30 point 2: -60.0 pp [-78.0, -28.2] was worded "the sample does not show the
    contender is not worse"."""
    d = table(5, 13, 1, 1)
    assert f"{d.diff_pp:+.1f} [{d.ci_low_pp:+.1f}, {d.ci_high_pp:+.1f}]" == "-60.0 [-78.0, -28.2]"
    g = judge("gsm8k", d, 2.0, 1319)
    assert g.outcome == WORSE and g.needed is None
    assert g.verdict() == "worse, beyond the 2 pp margin"
    assert "worse by more than the 2 pp margin" in g.explain() and "does not show" not in g.explain()


def test_a_lower_bound_above_the_margin_is_not_worse_and_above_zero_better():
    assert judge("gsm8k", table(880, 10, 12, 98), 2.0).outcome == NOT_WORSE
    assert judge("gsm8k", table(800, 5, 60, 135), 2.0).verdict() == "better"


def test_a_sample_too_small_says_how_many_items_would_resolve_it():
    # +1 pp on 100 paired items (one item only B got right): the score interval's lower
    # bound is below -2, so not shown; the estimate is never the sample at hand
    small = judge("gsm8k", paired_diff([(True, True)] * 80 + [(False, True)] + [(False, False)] * 19), 2.0)
    assert not small.shown and small.needed > 100
    # 88% vs 88% on 100 items each (independent): the textbook formula alone would say
    # 7.8489 * (2 * 0.88 * 0.12) / 0.02^2 = 4,145 per model; more than GSM8K has either way
    g = judge("gsm8k", proportion_diff(88, 100, 88, 100), 2.0, 1319)
    assert not g.shown and g.needed >= 4145
    assert "more items per model than the suite's 1,319 would be needed to resolve it" in g.explain()
    assert judge("gsm8k", proportion_diff(88, 100, 88, 100), 2.0).needed == g.needed  # suite size unknown:
    assert f"about {g.needed:,} items per model would resolve it" in judge(  # the count is said
        "gsm8k", proportion_diff(88, 100, 88, 100), 2.0).explain()


def test_the_power_estimate_holds_by_simulation():
    """At the n the estimate gives, equal models disagreeing on 10% of the items clear a
    2 pp margin about 80% of the time with the paired interval sparkctl reports."""
    n = items_needed(0.0, 2.0, 0.10)
    rng = random.Random(18)
    trials, shown = 300, 0
    for _ in range(trials):
        pairs = []
        for _ in range(n):
            u = rng.random()
            # 5% only A right, 5% only B right, the rest split evenly between both and neither
            pairs.append((True, False) if u < 0.05 else (False, True) if u < 0.10 else
                         (True, True) if u < 0.55 else (False, False))
        shown += judge("gsm8k", paired_diff(pairs), 2.0).shown
    assert 0.72 <= shown / trials <= 0.88, shown / trials
