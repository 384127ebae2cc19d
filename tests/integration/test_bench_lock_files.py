"""The bench lock lives in a directory every user of the machine shares: what it writes
there, and what another user can make it do by planting things there. Real files, real
flocks; the lock directory is a test folder given by $SPARKCTL_LOCK_DIR, as a user would.
The engine behind the CLI test is the FAKE Ollama (testkit/fakes/ollama_server.py)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sparkctl.services.bench.lock import BenchBusy, BenchLock, LockUnavailable, lock_path
from testkit.fakes.ollama_server import FakeOllama, default_state

REPO = Path(__file__).resolve().parents[2]
SECRET_URL = "http://user:pass@127.0.0.1:8080/v1?api_key=XYZ"
SECRETS = ("user", "pass", "XYZ")
NOBODY = 65534  # another user's uid (Debian's `nobody`)
ENGINE = "http://127.0.0.1:11434"
PRECIOUS = "a file of the user's own, put under the lock's name by someone else\n"


@pytest.fixture
def locks(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "locks"
    monkeypatch.setenv("SPARKCTL_LOCK_DIR", str(folder))
    return folder


def _planted(locks: Path, tmp_path: Path, link, url: str = ENGINE) -> Path:
    """The shared lock directory with `link` (os.symlink, os.link) of a file of the user's
    own standing where the engine's lock file would be; returns that file."""
    locks.mkdir(mode=0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    link(victim, lock_path(url))
    return victim


def _holding(url: str) -> int:
    """Hold the engine's lock from another open file (flocks of two opens conflict even in
    one process, as between two sparkctl processes)."""
    fd = os.open(lock_path(url), os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _notices_while_waiting(url: str) -> list[str]:
    said: list[str] = []

    async def wait_once():
        waiter = asyncio.ensure_future(BenchLock(url, ["qwen3:8b"]).acquire(True, said.append))
        while not said:
            await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(asyncio.wait_for(wait_once(), 10))
    return said


def test_a_url_with_credentials_is_neither_in_the_lock_file_nor_in_what_a_waiter_reads(locks):
    holder = BenchLock(SECRET_URL, ["llama3.2:3b"])
    assert holder.try_acquire() is None
    try:
        content = holder.path.read_text()
        assert not any(s in content for s in SECRETS), content
        assert json.loads(content)["host"] == "http://***@127.0.0.1:8080/v1?api_key=***"  # still says where
        said = _notices_while_waiting(SECRET_URL)
        assert len(said) == 1 and said[0].startswith("waiting for another bench to finish: pid ")
        assert "http://***@127.0.0.1:8080/v1?api_key=***" in said[0]
        assert not any(s in said[0] for s in SECRETS), said
        with pytest.raises(BenchBusy) as busy:
            asyncio.run(BenchLock(SECRET_URL, ["qwen3:8b"]).acquire(False, print))
        assert not any(s in str(busy.value) for s in SECRETS), busy.value
    finally:
        holder.release()


def test_the_lock_file_is_readable_by_all_writable_by_its_owner_only(locks):
    lock = BenchLock(ENGINE, ["m"])
    assert lock.try_acquire() is None
    lock.release()
    assert stat.S_IMODE(lock.path.stat().st_mode) == 0o644
    assert stat.S_IMODE(locks.stat().st_mode) == 0o1777  # shared, sticky: nobody removes another's file


def test_a_planted_symlink_is_not_followed_and_its_target_stays_intact(locks, tmp_path):
    url = ENGINE
    victim = _planted(locks, tmp_path, os.symlink)
    with pytest.raises(LockUnavailable) as refused:
        BenchLock(url, ["m"]).try_acquire()
    message = str(refused.value)
    assert message == (f"cannot use the bench lock {lock_path(url)}: it is a symbolic link (left there by "
                       "someone else?); it was not followed; remove it or set $SPARKCTL_LOCK_DIR to a "
                       "directory of your own")
    assert victim.read_text() == PRECIOUS
    # a dangling link (to where a file would be created) is refused the same way
    os.unlink(lock_path(url))
    os.symlink(tmp_path / "would-be-created", lock_path(url))
    with pytest.raises(LockUnavailable, match="symbolic link"):
        BenchLock(url, ["m"]).try_acquire()
    assert not (tmp_path / "would-be-created").exists()


def test_the_cli_refuses_a_planted_symlink_in_one_line_and_leaves_the_target_alone(locks, tmp_path):
    fake = FakeOllama(default_state()).start()
    try:
        config = tmp_path / "sparkctl.toml"
        config.write_text(f'[engine]\nhost = "{fake.url}"\n[tracking]\nuri = "http://127.0.0.1:9"\n'
                          "[bench]\nwarmup = 0\nreps = 1\n")
        victim = _planted(locks, tmp_path, os.symlink, fake.url)
        done = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "bench", "llama3.2:3b"],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data"),
                                   "SPARKCTL_LOCK_DIR": str(locks), "PYTHONPATH": str(REPO)})
    finally:
        fake.stop()
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"sparkctl: cannot use the bench lock {lock_path(fake.url)}: it is a symbolic link")
    assert victim.read_text() == PRECIOUS
    assert not [c for c in fake.calls("/api/generate") if c.body.get("prompt")]  # no bench ran


def test_a_hard_link_to_a_users_own_file_is_locked_but_never_written(locks, tmp_path):
    mine = _planted(locks, tmp_path, os.link)
    lock = BenchLock(ENGINE, ["m"])
    assert lock.try_acquire() is None
    lock.release()
    assert mine.read_text() == PRECIOUS


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root (chown)")
def test_another_users_lock_file_is_locked_but_never_truncated(locks):
    locks.mkdir(mode=0o1777)
    url = ENGINE
    theirs = lock_path(url)
    theirs.write_text('{"pid": 4242, "models": ["theirs:1b"], "since": 1700000000.0}')
    os.chown(theirs, NOBODY, NOBODY)
    os.chmod(theirs, 0o666)  # as the old sparkctl made them: even writable, it is not ours to write
    lock = BenchLock(url, ["m"])
    assert lock.try_acquire() is None
    # it is held: another process (of any user) waits for it
    assert BenchLock(url, ["n"]).try_acquire() is not None
    lock.release()
    assert theirs.read_text() == '{"pid": 4242, "models": ["theirs:1b"], "since": 1700000000.0}'


def test_a_lock_directory_that_is_a_symlink_is_refused(locks, tmp_path):
    elsewhere = tmp_path / "someone-elses-dir"
    elsewhere.mkdir()
    os.symlink(elsewhere, locks)
    with pytest.raises(LockUnavailable) as refused:
        BenchLock(ENGINE, ["m"]).try_acquire()
    assert str(refused.value) == (f"cannot use the bench lock directory {locks}: it is a symbolic link; "
                                  "set $SPARKCTL_LOCK_DIR to a directory of your own")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's directory needs root (chown)")
def test_another_users_lock_directory_must_have_the_sticky_bit(locks):
    locks.mkdir()
    os.chown(locks, NOBODY, NOBODY)
    os.chmod(locks, 0o777)  # its owner, or anyone, could swap the lock file for a link between two calls
    with pytest.raises(LockUnavailable) as refused:
        BenchLock(ENGINE, ["m"]).try_acquire()
    assert str(refused.value) == (f"cannot use the bench lock directory {locks}: it belongs to uid {NOBODY} "
                                  "and anyone may replace the files in it (mode 777, no sticky bit); remove it "
                                  "or set $SPARKCTL_LOCK_DIR to a directory of your own")
    os.chmod(locks, 0o1777)  # /tmp's own arrangement: shared, each file safe from the others
    lock = BenchLock(ENGINE, ["m"])
    assert lock.try_acquire() is None
    lock.release()


def test_what_another_holder_wrote_reaches_the_terminal_without_control_characters(locks):
    url = ENGINE
    locks.mkdir(mode=0o1777)
    lock_path(url).write_text(json.dumps({"pid": 4242, "models": ["\x1b]0;owned\x07\x1b[2Jqwen3:8b"],
                                          "since": 1e300}))
    fd = _holding(url)
    try:
        said = _notices_while_waiting(url)
    finally:
        os.close(fd)
    assert len(said) == 1 and "\x1b" not in said[0] and "\x07" not in said[0]
    assert said[0] == "waiting for another bench to finish: pid 4242 benching ]0;owned[2Jqwen3:8b on " \
                      "http://127.0.0.1:11434 since ?"


@pytest.mark.parametrize("planted", ["[" * 4095, "[1, 2]", '{"pid": 1' + "0" * 400 + ', "since": 1}'],
                         ids=["deep", "a-list", "huge-pid"])
def test_a_holder_record_of_another_shape_is_not_a_crash(locks, planted):
    url = ENGINE
    locks.mkdir(mode=0o1777)
    lock_path(url).write_text(planted)
    fd = _holding(url)
    try:
        said = _notices_while_waiting(url)
    finally:
        os.close(fd)
    # what the holder wrote is unreadable: said as unknown, as for a lock file just created
    assert len(said) == 1 and said[0].startswith(
        "waiting for another bench to finish: pid 0 benching ? on http://127.0.0.1:11434 since ")
