"""Which repetitions a decision reads (sparkctl/services/runs/reps.py): the ones the bench
used for its own summary, with what it left out counted (issue 18 point 4). The steps are
written as the bench logs them: one value per repetition and metric, none where a
repetition had no figure."""

from sparkctl.services.runs.reps import select


def steps(n: int, **override):
    base = {"dnf": {i: 0.0 for i in range(n)}, "error": {i: 0.0 for i in range(n)},
            "prefill_cached": {i: 0.0 for i in range(n)},
            "engine_decode_tps": {i: 50.0 + i for i in range(n)}, "ttft_s": {i: 0.3 for i in range(n)},
            "prefill_tps": {i: 900.0 for i in range(n)}}
    for key, values in override.items():
        base[key] = {**base[key], **values}
    return base


def test_cached_repetitions_are_left_out_of_ttft_and_prefill_only():
    s = steps(5, prefill_cached={3: 1.0, 4: 1.0}, ttft_s={3: 0.001, 4: 0.001}, prefill_tps={3: 9e5, 4: 9e5})
    got = select(s, "cold")
    assert got.values["decode_tps"] == [50.0, 51.0, 52.0, 53.0, 54.0]  # decode counts every finished rep
    assert got.values["ttft_s"] == [0.3, 0.3, 0.3] and got.values["prefill_tps"] == [900.0] * 3
    assert got.cached == 2 and got.excluded_text("ttft_s") == "2 cached, excluded"
    assert got.excluded_text("decode_tps") == ""


def test_dnf_and_failed_repetitions_are_left_out_of_everything():
    s = steps(4, dnf={1: 1.0}, error={2: 1.0})
    del s["engine_decode_tps"][1], s["engine_decode_tps"][2]
    got = select(s, "cold")
    assert got.values["decode_tps"] == [50.0, 53.0] and got.values["ttft_s"] == [0.3, 0.3]
    assert (got.reps, got.dnf, got.failed) == (4, 1, 1)
    assert got.excluded_text("ttft_s") == "1 DNF, 1 failed, excluded"


def test_under_the_warm_policy_ttft_counts_every_repetition_and_prefill_none():
    s = steps(3, prefill_cached={0: 1.0, 1: 1.0, 2: 1.0})
    got = select(s, "warm")
    assert got.values["ttft_s"] == [0.3] * 3 and got.values["prefill_tps"] == [] and got.cached == 0


def test_runs_older_than_the_error_metric_treat_a_missing_decode_as_failed():
    s = steps(3)
    del s["error"], s["engine_decode_tps"][0]
    got = select(s, "cold")
    assert got.failed == 1 and got.values["decode_tps"] == [51.0, 52.0]
