"""The quality gate's margins and power estimates (sparkctl/core/noninferiority.py).

Expected values are worked out in the comments from the textbook sample-size formula for
a non-inferiority test (n = (z_(1-alpha/2) + z_(1-beta))^2 * V / (delta + margin)^2, with
z values from a normal table: 1.95996 and 0.84162), and the 80% power is checked by
simulation with the paired interval sparkctl reports, not by the formula itself."""

import random

import pytest

from sparkctl.core.compare import paired_diff, proportion_diff
from sparkctl.core.noninferiority import (
    DEFAULT_MARGINS_PP,
    detectable_margin_pp,
    items_needed,
    judge,
    variance_per_item,
)

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
    # at or beyond the margin: no number of items shows non-inferiority
    assert items_needed(-2.0, 2.0, 0.10) is None and items_needed(-7.0, 2.0, 0.10) is None


def test_the_issue_example_85_to_78_is_refused_with_the_margin_explanation():
    """Issue 18 point 3: 85% -> 78% on 100 items passed because the interval included zero."""
    pairs = [(True, True)] * 78 + [(True, False)] * 7 + [(False, False)] * 15
    d = paired_diff(pairs)
    assert d.ci_low_pp < 0 < d.ci_high_pp + 5  # the old gate: "interval includes zero" passed
    g = judge("gsm8k", d, 2.0, 1319)
    assert not g.shown and g.needed is None
    assert "below the -2 pp margin" in g.explain() and "more items would not show it either" in g.explain()
    ind = judge("gsm8k", proportion_diff(85, 100, 75, 100), 2.0)  # the independent example
    assert not ind.shown and ind.low_pp == pytest.approx(-20.9, abs=0.15)


def test_a_sample_too_small_says_how_many_items_would_show_it():
    # +1 pp on 100 paired items (one item only B got right): the score interval's lower
    # bound is below -2, so not shown; the estimate is never the sample at hand
    small = judge("gsm8k", paired_diff([(True, True)] * 80 + [(False, True)] + [(False, False)] * 19), 2.0)
    assert not small.shown and small.needed > 100
    # 88% vs 88% on 100 items each (independent): the textbook formula alone would say
    # 7.8489 * (2 * 0.88 * 0.12) / 0.02^2 = 4,145 per model; more than GSM8K has either way
    g = judge("gsm8k", proportion_diff(88, 100, 88, 100), 2.0, 1319)
    assert not g.shown and g.needed >= 4145
    assert f"about {g.needed:,} items per model would show it" in g.explain()
    assert "more than the suite's 1,319" in g.explain()


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
