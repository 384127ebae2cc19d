"""Who owns a journaled run, and whether that owner is still alive.

A partial run in the spool names the process that was benching it: pid, the process's
start time (a pid alone is reused), the kernel's boot id (after a power cut every pid is
dead, whatever number now sits on it) and the host name (a data dir shared between
machines over NFS must not have one machine close another machine's live bench).
"""

from __future__ import annotations

import os
import socket
from typing import Any

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"

# psutil derives a start time from the boot time in /proc/stat, which the kernel may
# report a second apart between reads; two processes on one pid within a second of
# each other is not a case worth a false "dead".
CREATE_TIME_TOLERANCE_S = 1.0

ALIVE, DEAD, UNKNOWN = "alive", "dead", "unknown"

_cache: dict[int, dict[str, Any]] = {}


def boot_id() -> str | None:
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def current_owner() -> dict[str, Any]:
    """This process, as a journal line names it (computed once per pid: a forked child
    gets its own)."""
    pid = os.getpid()
    owner = _cache.get(pid)
    if owner is None:
        import psutil

        owner = {
            "pid": pid,
            "create_time": psutil.Process(pid).create_time(),
            "boot_id": boot_id(),
            "host": socket.gethostname(),
        }
        _cache.clear()
        _cache[pid] = owner
    return dict(owner)


def owner_state(owner: Any) -> tuple[str, str]:
    """``(ALIVE | DEAD | UNKNOWN, why)`` for an owner written by ``current_owner``.

    UNKNOWN: another machine's process (its host name and boot id both differ from
    ours), which this machine cannot see; it is left alone."""
    if not isinstance(owner, dict):
        return DEAD, "the journal names no owner process"
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return DEAD, "the journal names no owner process"
    ours_boot = boot_id()
    their_boot = owner.get("boot_id")
    same_boot = ours_boot is None or their_boot is None or their_boot == ours_boot
    their_host = owner.get("host")
    if their_host not in (None, socket.gethostname()) and not (ours_boot and their_boot == ours_boot):
        return UNKNOWN, f"owned by pid {pid} on another host ({their_host})"
    if not same_boot:
        return DEAD, "the machine has restarted since"

    import psutil

    try:
        proc = psutil.Process(pid)
        started = proc.create_time()
        status = proc.status()
    except psutil.NoSuchProcess:
        return DEAD, f"pid {pid} is gone"
    except psutil.AccessDenied:
        return ALIVE, f"pid {pid} exists (not ours to inspect)"
    if status == psutil.STATUS_ZOMBIE:
        return DEAD, f"pid {pid} has exited"
    their_start = owner.get("create_time")
    if isinstance(their_start, (int, float)) and abs(started - float(their_start)) > CREATE_TIME_TOLERANCE_S:
        return DEAD, f"pid {pid} now belongs to another process"
    return ALIVE, f"pid {pid} is still running"
