"""Text charts: every row fits the width (80-column ssh terminals included), bars and
markers sit where the values put them on the shared scale."""

import pytest

from sparkctl.core.charts import FULL, MEDIAN, RANGE, RangeItem, bar_rows, range_rows


@pytest.mark.parametrize("width", [30, 40, 80, 140])
def test_range_rows_fit_and_order_by_value(width):
    items = [RangeItem("0.12.6 2026-11-01", 76.0, 78.2, 79.0),
             RangeItem("0.13.0 2026-11-20 a very long label indeed", 66.0, 67.6, 69.5),
             RangeItem("0.13.1 no data", None, None, None)]
    rows = range_rows(items, width)
    for label, bar, value in rows:
        assert len(f"{label} {bar} {value}") <= width
    fast, slow, empty = (bar for _, bar, _ in rows)
    assert fast.index(MEDIAN) > slow.index(MEDIAN)  # 78.2 sits right of 67.6
    assert RANGE in fast and set(empty) == {" "}
    assert rows[0][2].strip() == ("78.2" if width < 40 else "78.2 (76.0-79.0)")  # narrow: median only


def test_range_of_one_value_is_a_marker_in_the_middle():
    ((_, bar, _),) = range_rows([RangeItem("x", 5.0, 5.0, 5.0)], 60)
    assert bar.count(MEDIAN) == 1 and abs(bar.index(MEDIAN) - len(bar) / 2) <= 2


@pytest.mark.parametrize("width", [30, 80])
def test_bars_are_proportional_and_fit(width):
    rows = bar_rows([("qwen3:32b (production)", 40.0), ("qwen3:8b", 80.0), ("none", None)], width, " tok/s")
    for label, bar, value in rows:
        assert len(f"{label} {bar} {value}") <= width
    half, full, empty = (bar.rstrip() for _, bar, _ in rows)
    assert full == FULL * len(full) and empty == ""
    assert abs(len(half) - len(full) / 2) <= 1
