import math

import pytest

from sparkctl.core.stats import Summary, interleave, is_stable, summarize


@pytest.mark.parametrize(
    "values, expected",
    [
        ([], Summary(0, None, None, None, None, None, None)),
        ([None, None], Summary(0, None, None, None, None, None, None)),
        ([78.2], Summary(1, 78.2, 78.2, 78.2, 78.2, None, None)),
        ([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
         Summary(8, 4.5, 2.0, 9.0, 5.0, math.sqrt(32 / 7), math.sqrt(32 / 7) / 5 * 100)),
        ([10.0, None, 20.0, float("nan"), 30.0], Summary(3, 20.0, 10.0, 30.0, 20.0, 10.0, 50.0)),
        ([0.0, 0.0], Summary(2, 0.0, 0.0, 0.0, 0.0, 0.0, None)),  # cv undefined at mean 0
    ],
)
def test_summarize(values, expected):
    got = summarize(values)
    assert got.n == expected.n
    for field in ("median", "min", "max", "mean", "stdev", "cv_pct"):
        want = getattr(expected, field)
        have = getattr(got, field)
        if want is None:
            assert have is None, field
        else:
            assert have == pytest.approx(want), field


def test_summary_of_a_steady_bench():
    s = summarize([78.1, 78.3, 78.2, 78.0, 78.4])
    assert s.median == pytest.approx(78.2)
    assert s.cv_pct == pytest.approx(0.2022, abs=1e-3)
    assert is_stable(s.cv_pct)


@pytest.mark.parametrize(
    "cv, threshold, stable",
    [(0.0, 5.0, True), (5.0, 5.0, True), (5.01, 5.0, False), (None, 5.0, False), (8.0, 10.0, True)],
)
def test_is_stable(cv, threshold, stable):
    assert is_stable(cv, threshold) is stable


@pytest.mark.parametrize(
    "models, reps, order",
    [
        (["A", "B"], 3, [("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2), ("B", 2)]),
        (["A"], 2, [("A", 0), ("A", 1)]),
        (["A", "B", "C"], 1, [("A", 0), ("B", 0), ("C", 0)]),
        (["A", "B"], 0, []),
        ([], 3, []),
    ],
)
def test_interleave(models, reps, order):
    assert list(interleave(models, reps)) == order


def test_interleave_rejects_bad_input():
    with pytest.raises(ValueError):
        interleave(["A"], -1)
    with pytest.raises(ValueError, match="'A' is listed twice"):
        interleave(["A", "B", "A"], 2)


def test_interleave_never_holds_the_whole_schedule():
    # `bench --reps 99999999999999999999` once took all 23 GB of the box building this list.
    # In a child process capped at 1 GiB of address space, the first rounds of a schedule
    # of 10**20 repetitions come at once, and a list would die of MemoryError instead.
    import subprocess
    import sys

    code = ("import resource, itertools\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from sparkctl.core.stats import interleave\n"
            "print(list(itertools.islice(interleave(['A', 'B'], 10 ** 20), 5)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "[('A', 0), ('B', 0), ('A', 1), ('B', 1), ('A', 2)]"
