"""[lanes.keep_alive]: the session length a user's router gives each lane (what a lane model a
bench had to unload comes back with), and [bench] keep_loaded."""

from __future__ import annotations

import pytest

from sparkctl.config import ConfigError, parse_config

LANES = '[lanes]\nproduction = "qwen3:32b"\nfast = "qwen3:4b"\n'


def test_lane_keep_alive_is_read_and_not_a_lane():
    cfg = parse_config(LANES + '[lanes.keep_alive]\nfast = "30m"\nproduction = -1\n', "s.toml")
    assert cfg.lanes == {"production": "qwen3:32b", "fast": "qwen3:4b"}
    assert cfg.lane_keep_alive == {"fast": "30m", "production": -1}


@pytest.mark.parametrize(("text", "message"), [
    ('[lanes.keep_alive]\nfast = "-1"\nslow = "3m"\n', "s.toml:6: [lanes.keep_alive] slow: no lane 'slow' in [lanes]"),
    ('[lanes.keep_alive]\nfast = "30"\n', None),  # a numeric string is seconds, as everywhere
    ('[lanes.keep_alive]\nfast = "half an hour"\n', "s.toml:5: [lanes.keep_alive] fast: expected seconds or a duration"),
])
def test_bad_lane_keep_alive_is_one_line_naming_where(text, message):
    if message is None:
        assert parse_config(LANES + text, "s.toml").lane_keep_alive == {"fast": "30"}
        return
    with pytest.raises(ConfigError) as exc:
        parse_config(LANES + text, "s.toml")
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_keep_loaded_defaults_off():
    assert parse_config("", "s.toml").bench.keep_loaded is False
    assert parse_config("[bench]\nkeep_loaded = true\n", "s.toml").bench.keep_loaded is True
