"""An Ollama server's settings: parsed as Ollama's envconfig parses them, its defaults by
version (envconfig/config.go and server/routes.go history), what `[engine]` states for a
server that cannot be read, and the order of the places they come from."""

from __future__ import annotations

import pytest

from sparkctl.config import ConfigError, parse_config
from sparkctl.core.engine_settings import Layer, resolve, stated_layer
from sparkctl.core.fit import KV_CACHE_TYPE_BYTES
from sparkctl.services.engine_settings import read_engine_settings

PROC = "the server's environment (PID 7)"
UNIT = "ollama.service's Environment= (systemctl show)"


def test_values_are_parsed_as_ollama_parses_them():
    s = resolve([Layer(PROC, {"OLLAMA_NUM_PARALLEL": ' "4" ', "OLLAMA_CONTEXT_LENGTH": "0",
                              "OLLAMA_FLASH_ATTENTION": "yes", "OLLAMA_KV_CACHE_TYPE": "Q8_0",
                              "OLLAMA_KEEP_ALIVE": "soon", "OLLAMA_MAX_LOADED_MODELS": "0"}, complete=True)],
                "0.32.1", "read")
    assert s.num_parallel.value == 4 and s.num_parallel.read  # spaces, then quotes, dropped
    assert s.context_length.value is None  # 0: Ollama's default (by GPU memory on 0.32)
    assert s.flash_attention.value == "on"  # not a Go bool: Ollama counts it as set
    assert s.kv_cache_type.value == "q8_0"
    assert s.keep_alive.value == "5m" and any("OLLAMA_KEEP_ALIVE='soon' is not a duration" in n for n in s.notes)
    assert s.max_models(gpus=2) == 6  # 0: Ollama's own choice, 3 per GPU
    assert s.kv_cache(KV_CACHE_TYPE_BYTES) == ("q8_0", KV_CACHE_TYPE_BYTES["q8_0"])


def test_a_quantised_cache_needs_flash_attention():
    s = resolve([Layer(PROC, {"OLLAMA_KV_CACHE_TYPE": "q4_0", "OLLAMA_FLASH_ATTENTION": "false"}, True)],
                "0.32.1", "read")
    assert s.kv_cache(KV_CACHE_TYPE_BYTES) == ("f16", KV_CACHE_TYPE_BYTES["f16"])


@pytest.mark.parametrize(("version", "ctx", "parallel_note", "flash"), [
    ("0.5.13", 2048, "auto: 4 where memory allowed", "off"),
    ("0.9.6", 4096, "auto: 4 where memory allowed", "off"),
    ("0.12.6", 4096, None, "auto"),
    ("0.15.5", None, None, "auto"),  # 4096 / 32768 / 262144 by GPU memory from here on
    ("0.33.0-rc1", None, None, "auto"),
    ("unknown", None, None, "auto"),  # no version: today's defaults
])
def test_defaults_follow_the_servers_version(version, ctx, parallel_note, flash):
    s = resolve([Layer(PROC, {}, complete=True)], version, "read")
    assert s.context_length.value == ctx and s.context_length.read  # unset on the server: read as such
    assert s.num_parallel.value == 1 and (parallel_note in s.num_parallel.source if parallel_note else True)
    assert s.flash_attention.value == flash
    assert (s.kv_cache_type.value, s.keep_alive.value, s.max_loaded_models.value) == ("f16", "5m", None)


def test_the_first_place_that_knows_a_setting_wins_and_a_complete_one_ends_the_search():
    runner = Layer("the runner's command line (PID 9)", {"OLLAMA_NUM_PARALLEL": "2"}, complete=False)
    unit = Layer(UNIT, {"OLLAMA_CONTEXT_LENGTH": "8192"}, complete=True)
    stated = stated_layer({"num_parallel": 8, "kv_cache_type": "q4_0"}, "/etc/sparkctl.toml")
    s = resolve([runner, unit, stated], "0.32.1", "read")
    assert (s.num_parallel.value, s.num_parallel.source) == (2, "OLLAMA_NUM_PARALLEL=2 in the runner's command "
                                                                 "line (PID 9)")
    assert s.context_length.value == 8192
    # the unit is complete: unset there means unset on the server, whatever the config says
    assert s.kv_cache_type.value == "f16" and s.kv_cache_type.source.startswith(f"unset in {UNIT}")
    assert s.read and s.assumed_line() is None


def test_a_remote_servers_settings_are_stated_in_engine_or_assumed_and_said_so():
    cfg = parse_config('[engine]\nhost = "http://spark-07:11434"\nnum_parallel = 4\nkv_cache_type = "q8_0"\n'
                       'flash_attention = "on"\n', "/home/u/sparkctl.toml", env={})
    s = read_engine_settings(cfg, "http://spark-07:11434", "0.32.1")
    assert s.where == "not read: the engine at http://spark-07:11434 is on another machine"
    assert (s.num_parallel.value, s.num_parallel.read) == (4, False)
    assert s.kv_cache(KV_CACHE_TYPE_BYTES)[0] == "q8_0"
    assert s.assumed_line(("context_length", "num_parallel", "kv_cache_type")) == (
        "num_parallel 4 ([engine] in /home/u/sparkctl.toml); kv_cache_type q8_0 ([engine] in /home/u/sparkctl.toml); "
        "Ollama 0.32.1's defaults: context_length by GPU memory")
    # a named bench engine is another server: [engine]'s statements are not about it
    named = parse_config('[engine]\nnum_parallel = 4\n[engines.b]\nkind = "ollama"\nurl = "http://box-b:11434"\n',
                         "c.toml", env={})
    assert read_engine_settings(named, "http://box-b:11434", "0.32.1").num_parallel.value == 1


@pytest.mark.parametrize(("line", "expected"), [
    ("num_parallel = -1", "an integer >= 0"),
    ('kv_cache_type = "q5_1"', "one of"),
    ('flash_attention = true', "expected a string"),
    ('keep_alive = "soonish"', "duration"),
    ("keep_alive = 300", "a duration string"),
])
def test_engine_statements_are_checked(line, expected):
    with pytest.raises(ConfigError) as err:
        parse_config(f"[engine]\n{line}\n", "s.toml", env={})
    assert str(err.value).startswith("s.toml:2") and expected in str(err.value)
