"""The item sample is a pure function of the ids, n and seed."""

import pytest

from sparkctl.core.suites.sample import sample_ids

IDS = [str(k) for k in range(1319)]


def test_same_seed_same_sample_in_suite_order():
    a = sample_ids(IDS, 50, seed=1234)
    assert a == sample_ids(list(IDS), 50, seed=1234)
    assert len(a) == len(set(a)) == 50
    assert a == sorted(a, key=IDS.index)  # the suite's order


def test_fixed_expected_sample():
    # computed once from the SHA-256 ranking; a change of algorithm changes every past run's sample
    assert sample_ids([str(k) for k in range(20)], 5, seed=7) == ["3", "4", "7", "8", "12"]
    assert sample_ids(IDS, 8, seed=0) == ["46", "87", "282", "392", "404", "923", "942", "1023"]


def test_different_seed_different_sample():
    assert sample_ids(IDS, 50, seed=1) != sample_ids(IDS, 50, seed=2)


def test_the_sample_does_not_depend_on_the_order_the_ids_come_in():
    assert sorted(sample_ids(IDS[::-1], 30, seed=5)) == sorted(sample_ids(IDS, 30, seed=5))


def test_a_smaller_sample_is_part_of_a_larger_one():
    assert set(sample_ids(IDS, 50, seed=9)) <= set(sample_ids(IDS, 100, seed=9))


def test_none_means_every_item_in_order():
    assert sample_ids(IDS, None, seed=3) == IDS
    assert sample_ids(IDS, len(IDS), seed=3) == IDS


def test_too_many_is_a_clear_error():
    with pytest.raises(ValueError, match="asked for 1320 items but the suite has only 1319"):
        sample_ids(IDS, 1320, seed=1)
    with pytest.raises(ValueError, match="at least 1"):
        sample_ids(IDS, 0, seed=1)
    with pytest.raises(ValueError, match="unique"):
        sample_ids(["a", "b", "a"], 1, seed=1)
