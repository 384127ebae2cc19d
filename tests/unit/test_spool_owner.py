"""Owner liveness for journaled runs, against real processes."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from sparkctl.tracking.owner import ALIVE, DEAD, UNKNOWN, current_owner, owner_state


def test_an_exited_but_unreaped_process_is_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        owner = current_owner() | {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}
        assert owner_state(owner)[0] == DEAD
    finally:
        proc.wait()
    assert owner_state(owner) == (DEAD, f"pid {proc.pid} is gone")


def test_owner_states():
    me = current_owner()
    assert owner_state(me)[0] == ALIVE
    assert owner_state(None)[0] == DEAD  # a journal line without an owner can never finish
    assert owner_state({"pid": "12"})[0] == DEAD
    # renamed host, same boot: still this machine, judged by pid
    assert owner_state(me | {"host": "renamed"})[0] == ALIVE
    assert owner_state(me | {"host": "other", "boot_id": "other-boot"})[0] == UNKNOWN
