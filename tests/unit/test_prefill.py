"""Cache policy and the cache-hit verdict from engine counts (core.prefill). The numbers are
what the two reporting styles produce for a 400-token prompt, worked out by hand."""

from __future__ import annotations

from sparkctl.core.prefill import PrefillSample, cold_prompt, judge, warm_prompt

BODY = "Explain memory bandwidth."


def test_cold_prompts_differ_from_the_previous_at_their_first_word_and_keep_the_body():
    a, b = cold_prompt(BODY, "abc123", 0), cold_prompt(BODY, "abc123", 1)
    assert a.endswith(BODY) and b.endswith(BODY)
    assert a.split()[0] != b.split()[0]


def test_warm_prompts_share_the_body_as_prefix_and_differ_after_it():
    a, b = warm_prompt(BODY, "n", 0), warm_prompt(BODY, "n", 1)
    assert a.startswith(BODY) and b.startswith(BODY) and a != b


def test_all_cold_requests_are_judged_cold():
    # 400 tokens in ~80 ms each, the first after a load 2x slower: still cold
    v = judge([PrefillSample(400, 160_000_000), PrefillSample(400, 80_000_000), PrefillSample(398, 79_000_000)])
    assert [x.cached for x in v] == [False, False, False]
    assert v[2].cached_tokens == 2


def test_whole_count_style_hit_is_seen_from_time_per_token():
    # 0.12-era Ollama / llama-server runner: the count stays 400, the time covers 1 token
    v = judge([PrefillSample(400, 80_000_000), PrefillSample(400, 300_000), PrefillSample(400, 250_000)])
    assert [x.cached for x in v] == [False, True, True]
    assert "us per prompt token" in v[1].reason


def test_uncached_count_style_hit_is_seen_from_the_count():
    # Ollama 0.30.x: only the uncached tokens are counted (and timed)
    v = judge([PrefillSample(400, 80_000_000), PrefillSample(1, 200_000), PrefillSample(12, 2_400_000)])
    assert [x.cached for x in v] == [False, True, True]
    assert v[1].cached_tokens == 399 and "1 of 400" in v[1].reason


def test_no_counts_no_verdict():
    assert [x.cached for x in judge([PrefillSample(None, None), PrefillSample(0, 0)])] == [None, None]


def test_an_engine_that_counts_its_cached_tokens_decides():
    # llama-server: whole prompt 636, cache_n 623 on a warm follow-up; 0 when cold
    v = judge([PrefillSample(636, 2_700_000_000, 610), PrefillSample(636, 90_000_000, 623),
               PrefillSample(636, 3_300_000_000, 0)])
    assert [x.cached for x in v] == [True, True, False]
    assert v[1].cached_tokens == 623 and "reused 623 of 636" in v[1].reason


def test_a_slow_first_request_after_a_load_does_not_make_the_cold_ones_look_cached():
    # 260 tokens: 600 ms on the first request (buffers, kernels), 120 ms on each later one
    v = judge([PrefillSample(260, 600_000_000)] + [PrefillSample(260, 120_000_000)] * 5)
    assert [x.cached for x in v] == [False] * 6


def test_one_hit_among_cold_requests_is_an_outlier():
    v = judge([PrefillSample(260, 130_000_000), PrefillSample(260, 120_000_000),
               PrefillSample(260, 400_000), PrefillSample(260, 118_000_000)])
    assert [x.cached for x in v] == [False, False, True, False]
