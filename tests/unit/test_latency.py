"""Pure latency math for workload sweeps: percentiles, goodput, SLO parsing, queue signs."""

from __future__ import annotations

import pytest

from sparkctl.core.latency import (RequestLatency, Slo, goodput_pct, highest_meeting, parallel_seen, parse_slo,
                                   percentile, queued, tpot)


def test_percentile_interpolates_between_ranks_like_numpy_linear():
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(xs, 50) == 3.0
    assert percentile(xs, 90) == pytest.approx(7.6)  # 4 + 0.6 * (10 - 4)
    assert percentile(xs, 99) == pytest.approx(9.76)
    assert percentile([5.0], 99) == 5.0
    assert percentile([None, float("nan")], 50) is None
    with pytest.raises(ValueError):
        percentile(xs, 101)


def test_tpot_is_time_per_token_after_the_first():
    assert tpot(1.0, 2.0, 11) == pytest.approx(0.1)
    assert tpot(1.0, 2.0, 1) is None and tpot(None, 2.0, 5) is None


def test_parse_slo_units_aliases_and_errors():
    s = parse_slo("ttft=2s,itl=100ms")
    assert s == Slo(ttft_s=2.0, tpot_s=0.1)
    assert parse_slo("tpot=50ms,e2e=30,pct=95") == Slo(tpot_s=0.05, e2e_s=30.0, share_pct=95.0)
    assert parse_slo("ttft=2s,itl=100ms").text() == "ttft=2s,itl=100ms"
    for bad, words in (("ttft", "KEY=VALUE"), ("foo=1s", "unknown SLO key"), ("ttft=fast", "duration"),
                       ("ttft=0s", "> 0"), ("pct=90", "no latency target"), ("ttft=1s,ttft=2s", "twice"),
                       ("", "empty")):
        with pytest.raises(ValueError, match=words):
            parse_slo(bad)


def test_goodput_counts_a_dnf_as_missing_every_target():
    slo = Slo(ttft_s=2.0, tpot_s=0.1)
    reqs = [RequestLatency(1.0, 0.05, 5.0, True),   # meets both
            RequestLatency(2.5, 0.05, 5.0, True),   # TTFT too slow
            RequestLatency(1.0, 0.20, 5.0, True),   # decode too slow
            RequestLatency(0.5, 0.01, None, False)]  # DNF
    assert goodput_pct(reqs, slo) == 25.0
    assert goodput_pct([], slo) is None


def test_highest_concurrency_meeting_stops_at_the_first_miss():
    assert highest_meeting({1: 100.0, 2: 100.0, 4: 95.0, 8: 40.0}, 90.0) == 4
    assert highest_meeting({1: 100.0, 2: 50.0, 4: 95.0}, 90.0) == 1  # 4 after a miss is noise
    assert highest_meeting({1: 80.0}, 90.0) is None


def test_queue_signs():
    assert queued(1.0, 3.0) and not queued(0.01, 3.0) and not queued(None, 3.0)
    # two requests served one after the other: never more than one decoding at once
    assert parallel_seen([0, 0], [0.1, 1.1], [1.0, 2.0]) == 1
    assert parallel_seen([0, 0, 0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0]) == 3


def test_percentiles_are_withheld_below_their_n_and_say_it():
    """Issue 18 point 5: a "p99" reported from one to eight requests."""
    from sparkctl.core.latency import min_n, percentile_n
    from sparkctl.core.sweep import RequestSample, cell_stats

    assert (min_n(50), min_n(90), min_n(99)) == (1, 10, 100)
    assert percentile_n([0.1, 0.2, 0.3], 99) == (None, 3)
    assert percentile_n([float(i) for i in range(10)], 90) == (pytest.approx(8.1), 10)
    one = cell_stats([RequestSample(0, 0.0, 1.0, 0.25, 0.01, 50.0, None, 20, (0.02,) * 19)])
    assert one.ttft_s_p50 == 0.25 and one.ttft_s_p90 is None and one.ttft_s_p99 is None and one.ttft_n == 1
    assert one.itl_ms_p90 == pytest.approx(20.0) and one.itl_ms_p99 is None and one.itl_n == 19


def test_goodput_leaves_out_requests_whose_ttft_was_not_measured():
    """Issue 18 point 4: a prompt-cache hit (no cold TTFT) counted as an SLO miss."""
    from sparkctl.core.latency import judged

    slo = parse_slo("ttft=1s")
    hit = RequestLatency(0.5, 0.01, 2.0, True)
    cached = RequestLatency(None, 0.01, 2.0, True)  # finished, TTFT left out (cache hit)
    dnf = RequestLatency(None, None, None, False)
    assert not judged(cached, slo) and judged(dnf, slo) and judged(hit, slo)
    assert goodput_pct([hit, cached, cached], slo) == 100.0  # one judged, it met the target
    assert goodput_pct([hit, cached, dnf], slo) == 50.0  # a DNF still misses
    assert goodput_pct([cached], slo) is None
