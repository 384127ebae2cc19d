"""keep_alive values: parsed once (core.keepalive) and always sent in a form Ollama accepts.

The expectations are Ollama's documented rules (a JSON number is seconds, a string is a Go
duration that needs a unit, negative means forever), written out by hand here."""

from __future__ import annotations

import pytest

from sparkctl.core.keepalive import format_seconds, go_duration_seconds, parse_keep_alive


@pytest.mark.parametrize(
    "given, wire, label",
    [
        ("-1", -1, "forever"),  # the shipped [models] default: Ollama itself would answer 400
        (-1, -1, "forever"),
        ("-5m", -1, "forever"),
        ("30m", 1800, "30m"),
        ("1h30m", 5400, "1h30m"),
        ("1.5h", 5400, "1h30m"),
        ("300", 300, "5m"),
        (300, 300, "5m"),
        ("0", 0, "0s"),
        (0, 0, "0s"),
        ("500ms", 0.5, "0.5s"),
        (" 45s ", 45, "45s"),
    ],
)
def test_accepted_values_become_seconds(given, wire, label):
    ka = parse_keep_alive(given)
    assert ka.wire == wire and type(ka.wire) is type(wire)
    assert ka.label == label


@pytest.mark.parametrize("bad", ["soon", "5 m", "1m30", "m", "", "--1", True, None, [1], float("inf"), "1d"])
def test_rejected_values_say_what_was_expected(bad):
    with pytest.raises(ValueError, match="invalid keep-alive") as info:
        parse_keep_alive(bad)
    assert "\n" not in str(info.value) and "forever" in str(info.value)


def test_go_duration_needs_a_unit_like_go():
    assert go_duration_seconds("2h45m30.5s") == pytest.approx(9930.5)
    assert go_duration_seconds("-0") == 0
    with pytest.raises(ValueError, match="missing unit"):
        go_duration_seconds("-1")


def test_format_seconds():
    assert format_seconds(3661) == "1h1m1s" and format_seconds(7200) == "2h" and format_seconds(0.25) == "0.25s"
