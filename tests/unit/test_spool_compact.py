"""Spool compaction on real files: what stays, what goes, and that the rewrite is atomic."""

from __future__ import annotations

import json
import os

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool


def rec(name: str, **kw) -> RunRecord:
    return RunRecord(experiment="e", run_name=name, start_ms=1, end_ms=2, **kw)


def kinds_and_names(spool: Spool) -> list[tuple[str, str]]:
    out = []
    for line in spool.path.read_text().splitlines():
        obj = json.loads(line)
        out.append((obj["kind"], obj.get("record", {}).get("run_name") or obj.get("record_id")))
    return out


def test_compact_keeps_pending_and_the_latest_live_partial_only(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    synced = rec("synced")
    spool.journal(synced)
    spool.append(synced)
    spool.mark_synced(synced.record_id, "run-1")
    waiting = rec("waiting")
    spool.journal(waiting)  # superseded by its final record below
    spool.append(waiting)
    running = rec("running", status="KILLED", step_metrics={"tps": [1.0]})
    spool.journal(running)
    running.step_metrics["tps"].append(2.0)
    spool.journal(running)  # the latest partial: the one to keep
    with open(spool.path, "a") as fh:
        fh.write('{"kind":"from-a-newer-sparkctl","x":1}\n')  # not ours to drop
        fh.write('{"kind":"record","rec')  # a writer killed mid-line
    pending_before = spool.pending()
    in_progress_before = spool.in_progress()

    # the synced run's 3 lines, the superseded partial, the older partial, the broken line
    assert spool.compact() == 6
    assert kinds_and_names(spool) == [
        ("record", "waiting"),
        ("partial", "running"),
        ("from-a-newer-sparkctl", None),
    ]
    assert spool.pending() == pending_before
    assert spool.in_progress() == in_progress_before
    assert spool.in_progress()[0][0].step_metrics["tps"] == [1.0, 2.0]
    assert not [p for p in tmp_path.iterdir() if p.name != "spool.jsonl"]  # no temp file left
    assert oct(spool.path.stat().st_mode & 0o777) == "0o600"


def test_compact_leaves_a_file_with_nothing_to_drop_untouched(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    assert spool.compact() == 0  # no file yet
    assert not spool.path.exists()
    spool.append(rec("a"))
    inode = os.stat(spool.path).st_ino
    assert spool.compact() == 0
    assert os.stat(spool.path).st_ino == inode


def test_writer_waiting_on_the_lock_across_a_compaction_writes_to_the_new_file(tmp_path):
    """The race compaction must survive: a writer opens the spool, then waits for the
    lock while a compaction renames a new file over the path. When it gets the lock it
    must notice (inode changed) and write to the new file; a line written to the old,
    unlinked one would be lost."""
    import fcntl
    import threading
    import time

    spool = Spool(tmp_path / "spool.jsonl")
    done = rec("done")
    spool.append(done)
    spool.mark_synced(done.record_id, "r")
    holder = os.open(spool.path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a compaction in progress holds the lock
    late = rec("late")
    writer = threading.Thread(target=spool.append, args=(late,))
    writer.start()

    def fds_on_spool() -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}") == str(spool.path)
            except OSError:
                pass
        return n

    deadline = time.monotonic() + 10
    while fds_on_spool() < 2:  # the writer has opened the (old) file and waits for the lock
        assert time.monotonic() < deadline
        time.sleep(0.005)
    new = tmp_path / "new.tmp"
    new.write_bytes(b"")
    os.replace(new, spool.path)  # what compact() does while it holds the lock
    fcntl.flock(holder, fcntl.LOCK_UN)
    writer.join(10)
    assert not writer.is_alive()
    assert b"late" not in os.pread(holder, 1 << 20, 0)  # nothing went to the replaced file
    os.close(holder)
    assert [r.run_name for r in spool.pending()] == ["late"]


def test_all_synced_compacts_to_an_empty_file(tmp_path):
    spool = Spool(tmp_path / "spool.jsonl")
    for name in ("a", "b"):
        r = rec(name)
        spool.append(r)
        spool.mark_synced(r.record_id, name)
    assert spool.compact() == 4
    assert spool.path.read_bytes() == b""
    assert spool.pending() == []
