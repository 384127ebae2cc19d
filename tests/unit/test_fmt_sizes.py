"""Sizes below a GiB and memory notes whose two numbers would print alike."""

from __future__ import annotations

from sparkctl.core.budget import build_budget
from sparkctl.core.fmt import size, sizes_apart
from sparkctl.core.snapshots import GIB, MemInfo
from sparkctl.services.models import close_names


def test_size_picks_a_unit_that_keeps_the_number_readable():
    assert size(1_000_000) == "976.6 KiB"
    assert size(1_500_000) == "1.4 MiB"
    assert size(68 * GIB) == "68.0 GiB"
    assert size(512) == "512 B" and size(None) == "n/a" and size(-2 * 1024**2) == "-2.0 MiB"


def test_sizes_apart_adds_digits_until_they_differ():
    assert sizes_apart(int(1.52 * GIB), int(1.48 * GIB)) == ("1.52 GiB", "1.48 GiB")
    a, b = sizes_apart(int(1.5 * GIB) + 5_000_000, int(1.5 * GIB))
    assert a != b
    assert sizes_apart(GIB, GIB) == ("1.0 GiB", "1.0 GiB")


def test_the_overclaim_note_never_reads_as_equal_numbers():
    from testkit.fakes.host import spark_snapshot
    from sparkctl.core.snapshots import ResidentModel

    snap = spark_snapshot(available_gib=100.0)
    m = snap.meminfo
    used = m.total - m.available
    # models claim a few MiB more than the memory in use
    resident = (ResidentModel(name="x:1b", size=used + 3 * 1024**2, size_vram=used + 3 * 1024**2),)
    assert isinstance(m, MemInfo)
    b = build_budget(m, snap.gpu, resident, lambda _n: None, 8.0, 16.0)
    note = next(n for n in b.notes if "models claim" in n)
    claimed, rest = note.removeprefix("models claim ").split(" but only ")
    in_use = rest.split(" of memory")[0]
    assert claimed != in_use and note.endswith("(3.0 MiB more)")


def test_close_names():
    names = ["gpt-oss:120b", "qwen3:8b", "llama3.2:3b", "qwen3:30b-a3b"]
    assert close_names("qwen3:8", names)[0] == "qwen3:8b"
    assert close_names("llama3.2", names) == ["llama3.2:3b"]
    assert close_names("gpt-oss:12b", names) == ["gpt-oss:120b"]
    assert close_names("mistral", names) == []
