import pytest

from sparkctl.core.guards import (
    DEFAULT_RELOAD_THRESHOLD_NS,
    Energy,
    energy,
    placement_ok,
    prompt_truncated,
    reload_detected,
)


@pytest.mark.parametrize(
    "load_ns, threshold, reloaded",
    [
        (None, DEFAULT_RELOAD_THRESHOLD_NS, False),  # omitted = 0
        (0, DEFAULT_RELOAD_THRESHOLD_NS, False),
        (35_000_000, DEFAULT_RELOAD_THRESHOLD_NS, False),  # warm: 35 ms
        (1_000_000_000, DEFAULT_RELOAD_THRESHOLD_NS, False),
        (8_400_000_000, DEFAULT_RELOAD_THRESHOLD_NS, True),  # weights re-read: 8.4 s
        (300_000_000, 200_000_000, True),
    ],
)
def test_reload_detected(load_ns, threshold, reloaded):
    assert reload_detected(load_ns, threshold) is reloaded


@pytest.mark.parametrize(
    "count, expected, tol, truncated",
    [
        (1843, 1843, 0, False),
        (1840, 1843, 5, False),  # template/tokenizer wiggle
        (1837, 1843, 5, True),
        (4096, 9000, 0, True),  # cut to num_ctx
        (1900, 1843, 0, False),  # template tokens on top
        (None, 1843, 0, None),  # omitted: unknown, not truncated
    ],
)
def test_prompt_truncated(count, expected, tol, truncated):
    assert prompt_truncated(count, expected, tol) is truncated


@pytest.mark.parametrize(
    "size, size_vram, ok",
    [
        (27 * 2**30, 27 * 2**30, True),
        (27 * 2**30, 20 * 2**30, False),  # CPU/GPU split
        (27 * 2**30, 0, False),  # 100% CPU
        (27 * 2**30, 28 * 2**30, False),  # "Unknown" in ollama ps
        (0, 0, False),
    ],
)
def test_placement_ok(size, size_vram, ok):
    assert placement_ok(size, size_vram) is ok


def test_energy_constant_power():
    samples = [(0.0, 100.0), (1.0, 100.0), (2.0, 100.0), (3.0, 100.0)]
    e = energy(samples, (0.0, 3.0), output_tokens=240)
    assert e == Energy(300.0, 1.25, 0.8)


def test_energy_trapezoid_with_window_edges_between_samples():
    # power ramps 0 -> 100 W over 10 s; the window 2..6 s sees 20 -> 60 W: mean 40 W x 4 s
    samples = [(10.0, 100.0), (0.0, 0.0)]  # any order
    e = energy(samples, (2.0, 6.0), output_tokens=80)
    assert e.joules == pytest.approx(160.0)
    assert e.j_per_token == pytest.approx(2.0)
    assert e.tokens_per_joule == pytest.approx(0.5)


def test_energy_piecewise():
    samples = [(0.0, 10.0), (1.0, 90.0), (2.0, 90.0), (3.0, 10.0)]
    e = energy(samples, (0.0, 3.0), output_tokens=100)
    assert e.joules == pytest.approx(50 + 90 + 50)


def test_energy_holds_power_beyond_the_samples():
    e = energy([(1.0, 50.0)], (0.0, 2.0), output_tokens=10)
    assert e.joules == pytest.approx(100.0)


@pytest.mark.parametrize(
    "samples, window, tokens, expected",
    [
        ([], (0.0, 1.0), 10, None),
        ([(0.0, 10.0)], (1.0, 1.0), 10, None),
        ([(0.0, 10.0)], (2.0, 1.0), 10, None),
    ],
)
def test_energy_nothing_to_measure(samples, window, tokens, expected):
    assert energy(samples, window, tokens) is expected


def test_energy_without_tokens_or_power():
    assert energy([(0.0, 10.0), (1.0, 10.0)], (0.0, 1.0), 0) == Energy(10.0, None, 0.0)
    assert energy([(0.0, 0.0), (1.0, 0.0)], (0.0, 1.0), 5) == Energy(0.0, 0.0, None)
