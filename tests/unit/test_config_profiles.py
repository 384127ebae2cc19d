"""[bench.profiles.NAME] in sparkctl.toml: parsed into BenchConfig.profiles; a bad one is one
line naming file:line and the key."""

from __future__ import annotations

import pytest

from sparkctl.config import ConfigError, parse_config
from sparkctl.services.bench.profiles import resolve


def test_profiles_parse_and_join_the_built_in_ones():
    cfg = parse_config('[bench]\nnum_predict = 300\n\n[bench.profiles.sql]\nprompt = "Write SQL"\nnum_predict = 64\n'
                       '\n[bench.profiles.schema]\nprompt = "Give a user"\n[bench.profiles.schema.format]\n'
                       'type = "object"\n', "s.toml")
    names = [p.name for p in cfg.bench.profiles]
    assert names == ["sql", "schema"]
    got = {p.name: p for p in resolve("all", cfg.bench)}
    assert list(got)[:4] == ["prose", "json", "code", "tool-call"]
    assert got["sql"].num_predict == 64 and got["schema"].num_predict == 300
    assert got["schema"].format == {"type": "object"} and got["json"].format == "json"
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        resolve("prose,nope", cfg.bench)


@pytest.mark.parametrize("body, expected", [
    ('[bench.profiles.a]\nnum_predict = 3\n', "s.toml:1: [bench.profiles.a]: expected a non-empty prompt (missing key prompt)"),
    ('[bench.profiles.a]\nprompt = "x"\nnum_predict = 0\n', "s.toml:3: [bench.profiles.a] num_predict: expected an integer >= 1, got 0"),
    ('[bench.profiles.a]\nprompt = "x"\nformat = "xml"\n', "s.toml:3: [bench.profiles.a] format: expected \"json\" or a JSON schema"),
    ('[bench.profiles.a]\nprompt = "x"\ncolour = 1\n', "s.toml:3: [bench.profiles.a] colour: unknown key; expected one of prompt, num_predict, format"),
])
def test_bad_profile_is_one_line_with_file_line_and_key(body, expected):
    with pytest.raises(ConfigError) as exc:
        parse_config(body, "s.toml")
    assert str(exc.value).startswith(expected) and "\n" not in str(exc.value)
