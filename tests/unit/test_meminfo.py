"""Host memory and PSI parsing, against a DGX Spark-like /proc/meminfo."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkctl.core.snapshots import GIB, MemInfo, Pressure, Unavailable
from sparkctl.probes.meminfo import parse_meminfo, parse_pressure, read_meminfo, read_pressure

KIB = 1024

# Shaped like a Spark right after a large model loaded: almost nothing "free", ~27 GiB of
# page cache, ~27 GiB available (reference/SPARK.md). Figures in kB as the kernel prints them.
SPARK_MEMINFO = """\
MemTotal:       127600748 kB
MemFree:          838860 kB
MemAvailable:   28311552 kB
Buffers:          104857 kB
Cached:         28311552 kB
SwapCached:            0 kB
Active:         60000000 kB
Inactive:       30000000 kB
Shmem:            524288 kB
KReclaimable:     786432 kB
Slab:            1572864 kB
SReclaimable:     786432 kB
SUnreclaim:       786432 kB
SwapTotal:      16777212 kB
SwapFree:       16777212 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:               0 kB
"""

PSI = """\
some avg10=1.25 avg60=0.50 avg300=0.10 total=123456
full avg10=0.75 avg60=0.20 avg300=0.05 total=65432
"""


def test_parse_spark_meminfo_converts_kb_to_bytes() -> None:
    info = parse_meminfo(SPARK_MEMINFO)
    assert info.total == 127600748 * KIB
    assert 119 * GIB < info.total < 122 * GIB  # ~121.7 GiB on a "128 GB" Spark, not 128
    assert info.available == 28311552 * KIB
    assert info.free == 838860 * KIB
    assert info.cached == 28311552 * KIB  # 27 GiB of page cache
    assert round(info.cached / GIB) == 27
    assert info.buffers == 104857 * KIB
    assert info.shmem == 524288 * KIB
    assert info.sreclaimable == 786432 * KIB
    assert info.swap_total == info.swap_free == 16777212 * KIB
    assert info.hugepages_total == 0 and info.hugepages_free == 0
    assert info.hugepage_size == 2048 * KIB


def test_spark_budget_properties() -> None:
    info = parse_meminfo(SPARK_MEMINFO)
    # Reclaimable cache is its own part of the budget: Cached + Buffers + SReclaimable - Shmem.
    assert info.reclaimable == (28311552 + 104857 + 786432 - 524288) * KIB
    # NVIDIA's rule for what a unified-memory GPU can still allocate.
    assert info.gpu_allocatable == info.available + info.swap_free


def test_hugepages_are_counts_not_kb() -> None:
    text = SPARK_MEMINFO.replace("HugePages_Total:       0", "HugePages_Total:      64").replace(
        "HugePages_Free:        0", "HugePages_Free:       16"
    )
    text = text.replace("Hugepagesize:       2048 kB", "Hugepagesize:    1048576 kB")
    info = parse_meminfo(text)
    assert info.hugepages_total == 64
    assert info.hugepages_free == 16
    assert info.hugepage_size == GIB
    assert info.gpu_allocatable == 16 * GIB  # swap counts as 0 with hugepages


def test_parse_without_memavailable_estimates_it() -> None:
    text = "MemTotal: 1000 kB\nMemFree: 100 kB\nCached: 200 kB\nBuffers: 50 kB\n"
    info = parse_meminfo(text)
    assert info.available == 350 * KIB
    assert info.swap_total == 0


def test_parse_rejects_text_without_memtotal() -> None:
    with pytest.raises(ValueError):
        parse_meminfo("not meminfo\n")


def test_read_meminfo_from_file(tmp_path: Path) -> None:
    path = tmp_path / "meminfo"
    path.write_text(SPARK_MEMINFO)
    assert read_meminfo(str(path)) == parse_meminfo(SPARK_MEMINFO)


def test_read_meminfo_missing_file_falls_back_to_psutil(tmp_path: Path) -> None:
    info = read_meminfo(str(tmp_path / "absent"))
    assert isinstance(info, MemInfo)  # psutil's view of this machine
    assert info.total > 0
    assert 0 <= info.available <= info.total


def test_read_meminfo_missing_file_without_fallback_is_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    info = read_meminfo(str(missing), use_psutil=False)
    assert isinstance(info, Unavailable)
    assert str(missing) in info.reason
    assert str(info).startswith("n/a (")


def test_read_meminfo_garbage_without_fallback_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "meminfo"
    path.write_text("garbage\n")
    assert isinstance(read_meminfo(str(path), use_psutil=False), Unavailable)


def test_parse_pressure() -> None:
    assert parse_pressure(PSI) == Pressure(
        some_avg10=1.25,
        some_avg60=0.5,
        some_avg300=0.1,
        full_avg10=0.75,
        full_avg60=0.2,
        full_avg300=0.05,
    )


def test_parse_pressure_without_full_line_reads_zero() -> None:
    pressure = parse_pressure(PSI.splitlines()[0])
    assert pressure.some_avg10 == 1.25
    assert pressure.full_avg10 == pressure.full_avg60 == pressure.full_avg300 == 0.0


def test_parse_pressure_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_pressure("")


def test_read_pressure_present(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    path.write_text(PSI)
    pressure = read_pressure(str(path))
    assert isinstance(pressure, Pressure)
    assert pressure.full_avg10 == 0.75


def test_read_pressure_absent_means_no_psi(tmp_path: Path) -> None:
    assert read_pressure(str(tmp_path / "pressure" / "memory")) == Unavailable("kernel has no PSI")


def test_read_pressure_unparseable(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    path.write_text("nonsense\n")
    result = read_pressure(str(path))
    assert isinstance(result, Unavailable)
    assert "PSI" in result.reason
