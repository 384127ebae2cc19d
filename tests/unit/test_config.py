"""Config look-up, validation and atomic saves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkctl.config import ConfigError, find_config_file, load_config, parse_config, save_config

REPO = Path(__file__).resolve().parents[2]


def test_shipped_default_config_is_valid_and_documents_every_section():
    cfg = load_config(str(REPO / "sparkctl.toml"), env={})
    assert cfg.engine.host == "http://127.0.0.1:11434"
    assert cfg.budget.reserve_gib == 8.0
    assert cfg.lanes["production"]
    assert cfg.ui.refresh_s == 1.0


def test_shipped_config_says_each_comment_once():
    """A comment block pasted twice reads as two settings to a user editing the file.
    (sparkctl.toml at the root is a symlink to the packaged default: one file.)"""
    assert (REPO / "sparkctl.toml").resolve() == (REPO / "sparkctl" / "defaults" / "sparkctl.toml").resolve()
    lines = (REPO / "sparkctl" / "defaults" / "sparkctl.toml").read_text().splitlines()
    runs, seen = [], set()
    for i in range(len(lines) - 3):
        window = tuple(lines[i:i + 4])
        if all(w.lstrip().startswith("#") and len(w.strip()) > 20 for w in window):
            assert window not in seen, f"comment repeated at line {i + 1}: {window[0]!r}"
            seen.add(window)
            runs.append(window)
    assert runs  # the file does have commented blocks: the check looked at something


def test_ollama_host_env_wins():
    cfg = parse_config('[engine]\nhost = "http://10.0.0.5:11434"\n', "x.toml", env={"OLLAMA_HOST": "spark:11434"})
    assert cfg.engine.host == "spark:11434"


def test_lane_matching_ignores_implicit_latest():
    cfg = parse_config('[lanes]\nproduction = "gpt-oss"\nfast = "qwen3:4b"\n', "x.toml", env={})
    assert cfg.lane_of("gpt-oss:latest") == "production"
    assert cfg.lane_of("qwen3:4b") == "fast"
    assert cfg.lane_of("qwen3:8b") is None


BAD = [
    ("[engine\nhost = 1\n", r"bad.toml:1:\d+: invalid TOML"),
    ('[engine]\nhost = "a"\nhost = "b"\n', r"bad.toml:3:\d+: invalid TOML"),
    ("[budget]\nreserve_gib = -2\n", r"bad.toml:2: \[budget\] reserve_gib: expected a number >= 0, got -2"),
    ('[budget]\nreserve_gib = "eight"\n', r"bad.toml:2: \[budget\] reserve_gib: expected a number, got 'eight'"),
    ("[ui]\nrefresh = 1\n", r"bad.toml:2: \[ui\] refresh: unknown key; expected one of history_s, refresh_s, theme"),
    ("[ui]\nrefresh_s = true\n", r"\[ui\] refresh_s: expected a number, got true"),
    ("[ui]\nrefresh_s = 0.01\n", r"\[ui\] refresh_s: expected a number >= 0.1"),
    ("[gpu]\nx = 1\n", r"bad.toml:1: unknown section \[gpu\]"),
    ('[engine]\nkind = "vllm"\n', r"\[engine\] kind: expected one of 'ollama', got 'vllm'"),
    ("[lanes]\nproduction = 3\n", r"bad.toml:2: \[lanes\] production: expected a model name, got 3"),
    ("[lanes]\nproduction = \"Qwen 3\"\n", r"bad.toml:2: \[lanes\] production: invalid model name"),
    ('[lanes]\n"prod lane" = "x"\n', r"\[lanes\] prod lane: expected a lane name"),
    ("[budget]\nreserve_gib = 20\nwarn_gib = 10\n", r"bad.toml:3: \[budget\] warn_gib: expected a number >= reserve_gib"),
    ('engine = "ollama"\n', r"\[\] engine: expected a \[engine\] table"),
    ('[bench]\nmode = "both"\n', r"\[bench\] mode: expected one of 'beside', 'solo'"),
    ("[bench]\nreps = 0\n", r"\[bench\] reps: expected an integer >= 1, got 0"),
    ('[engines.llama]\nkind = "openai"\n', r"\[engines.llama\]: missing key url"),
]


@pytest.mark.parametrize("text, pattern", BAD)
def test_bad_config_gives_one_line_naming_file_key_and_expectation(tmp_path, text, pattern):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(str(path), env={})
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    import re

    assert re.search(pattern, message), message


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(str(tmp_path / "nope.toml"), env={})


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    assert find_config_file(None, env={}, cwd=cwd) is None
    user = tmp_path / "xdg" / "sparkctl" / "sparkctl.toml"
    user.parent.mkdir(parents=True)
    user.write_text("")
    assert find_config_file(None, env={}, cwd=cwd) == user
    (cwd / "sparkctl.toml").write_text("")
    assert find_config_file(None, env={}, cwd=cwd) == cwd / "sparkctl.toml"
    assert find_config_file(None, env={"SPARKCTL_CONFIG": "/e.toml"}, cwd=cwd) == Path("/e.toml")
    assert find_config_file("/x.toml", env={"SPARKCTL_CONFIG": "/e.toml"}, cwd=cwd) == Path("/x.toml")


def test_save_is_atomic_and_round_trips(tmp_path, monkeypatch):
    cfg = parse_config('[lanes]\nproduction = "qwen3:32b"\n[budget]\nreserve_gib = 12\n', "x", env={})
    path = tmp_path / "out.toml"
    path.write_text("old contents")

    # a crash mid-write (here: replace fails) must leave the old file whole
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_config(cfg, path)
    assert path.read_text() == "old contents"
    assert [p.name for p in tmp_path.iterdir()] == ["out.toml"]  # no temp file left behind
    monkeypatch.undo()

    save_config(cfg, path)
    again = load_config(str(path), env={})
    assert again.lanes == {"production": "qwen3:32b"}
    assert again.budget.reserve_gib == 12.0
