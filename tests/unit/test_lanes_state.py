"""sparkctl's owned state file (sparkctl/statefile.py): layering over the user's config,
concurrent writers in real processes, a kill -9 between the temp file and the rename, and
the user's hand-written sparkctl.toml left byte for byte as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkctl.config import ConfigError, load_config, save_ui_theme
from sparkctl.statefile import (
    PAUSE_ENV,
    HistoryEntry,
    OwnedState,
    parse_state,
    read_state,
    set_owned,
    update_state,
)

REPO = Path(__file__).resolve().parents[2]

USER = """\
# my Spark — hand-written, comments matter
[lanes]
production = "gpt-oss:120b"  # the router's default
fast = "llama3.2:3b"

[ui]
refresh_s = 2.0  # slower, please
"""


@pytest.fixture
def files(tmp_path):
    user = tmp_path / "sparkctl.toml"
    user.write_text(USER)
    return user, tmp_path / "state.toml"


def promote(state_path: Path, lane: str, model: str, user_value: str) -> OwnedState:
    def change(s: OwnedState) -> OwnedState:
        s = set_owned(s, f"lanes.{lane}", model, user_value)
        entry = HistoryEntry(seq=s.next_seq, action="promote", lane=lane, model=model, previous=user_value,
                             at="2025-06-01T12:00:00+00:00")
        return OwnedState(s.path, s.lanes, s.theme, s.base, (*s.history, entry))

    return update_state(change, state_path)


def test_owned_lane_and_theme_layer_over_the_user_file_with_sources(files):
    user, state = files
    promote(state, "production", "qwen3:30b-a3b", "gpt-oss:120b")
    cfg = load_config(str(user), env={}, state=state)
    save_ui_theme(cfg, "sparkctl-light")
    cfg = load_config(str(user), env={}, state=state)
    assert cfg.lanes == {"production": "qwen3:30b-a3b", "fast": "llama3.2:3b"}
    assert cfg.ui.theme == "sparkctl-light" and cfg.ui.refresh_s == 2.0
    assert cfg.sources["lanes.production"] == str(state) and cfg.sources["ui.theme"] == str(state)
    assert cfg.sources["lanes.fast"] == str(user) and cfg.sources["ui.refresh_s"] == str(user)
    assert "ui.history_s" not in cfg.sources  # a built-in default
    assert user.read_text() == USER  # never rewritten


def test_a_later_edit_of_the_users_own_file_wins_and_says_so(files):
    user, state = files
    promote(state, "production", "qwen3:30b-a3b", "gpt-oss:120b")
    user.write_text(USER.replace('"gpt-oss:120b"', '"deepseek-r1:70b"'))
    cfg = load_config(str(user), env={}, state=state)
    assert cfg.lanes["production"] == "deepseek-r1:70b"
    assert cfg.sources["lanes.production"] == str(user)
    (note,) = cfg.notes
    assert "[lanes] production:" in note and "'qwen3:30b-a3b'" in note and "your file wins" in note


def test_setting_the_users_own_value_drops_the_override(files):
    user, state = files
    promote(state, "production", "qwen3:30b-a3b", "gpt-oss:120b")
    s = update_state(lambda s: set_owned(s, "lanes.production", "gpt-oss:120b", "gpt-oss:120b"), state)
    assert s.lanes == {} and s.base == {}
    assert load_config(str(user), env={}, state=state).sources["lanes.production"] == str(user)


def test_on_change_is_a_reserved_key_of_lanes(files):
    user, state = files
    user.write_text(USER.replace("[ui]", 'on_change = "systemctl --user reload router"\n\n[ui]'))
    cfg = load_config(str(user), env={}, state=state)
    assert cfg.lanes_on_change == "systemctl --user reload router"
    assert "on_change" not in cfg.lanes
    user.write_text(USER.replace("[ui]", "on_change = 3\n\n[ui]"))
    with pytest.raises(ConfigError, match=r"\[lanes\] on_change: expected a shell command"):
        load_config(str(user), env={}, state=state)


def test_a_broken_state_file_is_one_line_naming_it(files):
    user, state = files
    state.write_text("[lanes]\nproduction = 3\n")
    with pytest.raises(ConfigError, match=rf"{state}: \[lanes\] production: expected a string, got 3"):
        load_config(str(user), env={}, state=state)
    state.write_text("version = 99\n")
    with pytest.raises(ConfigError, match="written by a newer sparkctl"):
        load_config(str(user), env={}, state=state)


def test_round_trip_keeps_history_fields(tmp_path):
    state = tmp_path / "state.toml"
    promote(state, "production", "qwen3:8b", "gpt-oss:120b")
    text = state.read_text()
    assert text.startswith("# Written by sparkctl")
    again = parse_state(text, state)
    assert again == read_state(state) and again.history[0].model == "qwen3:8b"


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from tests.unit.test_lanes_state import promote
    path, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(n):
        promote(path, f"{{tag}}{{i}}", "qwen3:8b", "")
""")


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    state = tmp_path / "state.toml"
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
    n = 40
    procs = [subprocess.Popen([sys.executable, str(script), str(state), tag, str(n)]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    s = read_state(state)
    assert len(s.lanes) == 2 * n  # every lane from both writers: no update was lost
    assert sorted(h.seq for h in s.history) == list(range(1, 2 * n + 1))  # seqs unique: each re-read under the lock
    assert not list(tmp_path.glob(".state.toml.*.tmp"))


def test_kill_9_between_temp_file_and_rename_leaves_the_old_file_intact(tmp_path):
    state = tmp_path / "state.toml"
    promote(state, "production", "qwen3:8b", "gpt-oss:120b")
    before = state.read_bytes()
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
    proc = subprocess.Popen([sys.executable, str(script), str(state), "late", "1"],
                            env={**os.environ, PAUSE_ENV: "60"})
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob(".state.toml.*.tmp")):
        assert time.monotonic() < deadline and proc.poll() is None, "the writer never wrote its temp file"
        time.sleep(0.02)
    (tmp,) = tmp_path.glob(".state.toml.*.tmp")
    assert "late0" in tmp.read_text()  # the new state was complete in the temp file...
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert state.read_bytes() == before  # ...and the real file is the old one, whole
    assert read_state(state).lanes == {"production": "qwen3:8b"}
    # the lock died with the process: the next writer goes ahead
    promote(state, "fast", "qwen3:8b", "llama3.2:3b")
    assert set(read_state(state).lanes) == {"production", "fast"}


def test_the_sessions_kept_past_the_limit_are_the_newest(tmp_path, monkeypatch):
    """[sessions] holds at most SESSIONS_MAX models, the oldest set going first: the file
    keeps the order they were set in (it was sorted by name, so a reread dropped the
    alphabetically first entry, however recent)."""
    from sparkctl import statefile
    from sparkctl.statefile import record_session

    monkeypatch.setattr(statefile, "SESSIONS_MAX", 3)
    path = tmp_path / "state.toml"
    for model in ("zeta:1b", "beta:1b", "alpha:1b", "gamma:1b"):
        record_session(model, "30m", path)
    assert list(read_state(path).sessions) == ["beta:1b", "alpha:1b", "gamma:1b"]
    record_session("beta:1b", "1h", path)  # set again: the newest now
    kept = read_state(path).sessions
    assert list(kept) == ["alpha:1b", "gamma:1b", "beta:1b"] and kept["beta:1b"].keep_alive == "1h"
    assert kept["beta:1b"].set_at is not None and kept["beta:1b"].set_at.tzinfo is not None


def test_a_sessions_entry_of_an_older_file_or_a_broken_one(tmp_path):
    """An entry written before sparkctl kept the time is a bare keep-alive (read, time
    unknown); anything else is one line naming the file and the model."""
    path = tmp_path / "state.toml"
    state = parse_state('[sessions]\n"gemma3:4b" = "30m"\n', path)
    assert state.sessions["gemma3:4b"].keep_alive == "30m" and state.sessions["gemma3:4b"].set_at is None
    with pytest.raises(Exception) as err:
        parse_state('[sessions]\n"gemma3:4b" = 30\n', path)
    assert str(err.value).startswith(f"{path}: [sessions] gemma3:4b: expected a table")


def test_a_contenders_lane_reaches_the_config_a_bench_reads(files):
    """The CLI's bench reads the contender's lane from the config (layered state file)."""
    from sparkctl.config import save_contender

    user, state = files
    cfg = load_config(str(user), env={}, state=state)
    save_contender(cfg, "qwen3:30b-a3b", True, state, lane="fast")
    cfg = load_config(str(user), env={}, state=state)
    assert cfg.contenders == ("qwen3:30b-a3b",) and cfg.contender_lanes == {"qwen3:30b-a3b": "fast"}
    save_contender(cfg, "qwen3:30b-a3b", False, state)
    cfg = load_config(str(user), env={}, state=state)
    assert cfg.contenders == () and cfg.contender_lanes == {}
