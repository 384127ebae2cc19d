"""Budget and placement math on a Spark-like box, a discrete-GPU box and a box with no GPU."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sparkctl.config import Config
from sparkctl.core.budget import Level, Pool, bar_cells, build_budget, reserve_cell
from sparkctl.core.placement import attribute_gpu_memory, placement, until_label
from sparkctl.core.snapshots import GIB, GpuProcess, ModelDetails, ResidentModel
from testkit.fakes.host import h200_snapshot, no_gpu_snapshot, spark_snapshot

CFG = Config(lanes={"production": "qwen3:32b", "fast": "qwen3:4b"})


def resident() -> list[ResidentModel]:
    return [
        ResidentModel("qwen3:32b", size=int(27 * GIB), size_vram=int(27 * GIB), details=ModelDetails(quantization_level="Q4_K_M")),
        ResidentModel("gemma3:12b", size=int(12 * GIB), size_vram=int(7 * GIB)),
    ]


def test_spark_budget_adds_up_to_memtotal_and_colours_lanes():
    snap = spark_snapshot(available_gib=61.0)
    b = build_budget(snap.meminfo, snap.gpu, resident(), CFG.lane_of, reserve_gib=8, warn_gib=16)
    assert b.pool is Pool.UNIFIED
    assert b.total == int(121 * GIB)  # MemTotal, not the marketing 128 GiB
    assert sum(s.bytes for s in b.segments) == b.total
    models = [s for s in b.segments if s.kind == "model"]
    assert [(s.label, s.lane) for s in models] == [("qwen3:32b", "production"), ("gemma3:12b", "other")]
    # unified: a model's whole size counts, whatever the CPU/GPU split
    assert b.models_bytes == int(39 * GIB)
    # used = 121 - 61 = 60 GiB, of which 39 are models -> 21 GiB other use
    assert b.segment("other") == int(121 * GIB) - int(61 * GIB) - int(39 * GIB)
    # reclaimable = Cached + Buffers + SReclaimable - Shmem = 27 + 0.5 + 0.4 - 0.5
    assert b.segment("cache") == pytest.approx(27.4 * GIB, rel=1e-6)
    assert b.available == int(61 * GIB)
    assert b.headroom == int(61 * GIB) - 8 * GIB
    assert b.level is Level.OK


@pytest.mark.parametrize(
    "available, level", [(61.0, Level.OK), (12.0, Level.WARN), (8.0, Level.CRITICAL), (3.0, Level.CRITICAL)]
)
def test_warning_level_follows_reserve(available, level):
    snap = spark_snapshot(available_gib=available)
    b = build_budget(snap.meminfo, snap.gpu, [], CFG.lane_of, reserve_gib=8, warn_gib=16)
    assert b.level is level


def test_models_claiming_more_than_used_is_noted_not_hidden():
    snap = spark_snapshot(available_gib=100.0)  # only 21 GiB in use
    b = build_budget(snap.meminfo, snap.gpu, resident(), CFG.lane_of, 8, 16)
    assert b.segment("other") == 0
    assert any("models claim 39.0 GiB" in n for n in b.notes)
    assert sum(s.bytes for s in b.segments) == b.total


def test_discrete_gpu_budget_is_vram_with_vram_share_of_models():
    snap = h200_snapshot()
    b = build_budget(snap.meminfo, snap.gpu, resident(), CFG.lane_of, 8, 16)
    assert b.pool is Pool.VRAM
    assert b.total == int(141 * GIB)
    assert b.available == int(101 * GIB)
    # on a discrete GPU only the VRAM part of a split model is in this pool
    assert b.models_bytes == int(34 * GIB)
    assert b.segment("other") == int(6 * GIB)
    assert b.segment("free") == int(101 * GIB)
    assert b.segment("cache") == 0


def test_no_gpu_box_budgets_host_ram():
    snap = no_gpu_snapshot()
    b = build_budget(snap.meminfo, snap.gpu, [], CFG.lane_of, 8, 16)
    assert b.pool is Pool.HOST
    assert b.total == int(23 * GIB)
    assert b.available == int(20 * GIB)


def test_bar_cells_fill_width_and_keep_tiny_models_visible():
    snap = spark_snapshot(available_gib=61.0)
    tiny = ResidentModel("qwen3:4b", size=int(0.1 * GIB), size_vram=int(0.1 * GIB))
    b = build_budget(snap.meminfo, snap.gpu, resident() + [tiny], CFG.lane_of, 8, 16)
    cells = bar_cells(b, 100)
    assert sum(n for _, n in cells) == 100
    assert dict((s.label, n) for s, n in cells)["qwen3:4b"] >= 1
    rc = reserve_cell(b, 100)
    assert rc == round((121 - 8) / 121 * 100)


@pytest.mark.parametrize(
    "size, vram, label",
    [
        (100, 100, "100% GPU"),
        (100, 0, "100% CPU"),
        (100, 58, "42%/58% CPU/GPU"),
        (0, 0, "100% CPU"),  # size_vram == 0 is checked first, as ollama ps does
        (0, 5, "Unknown"),
        (100, 120, "Unknown"),
        (1000, 995, "0%/100% CPU/GPU"),  # rounds like ollama ps: not a full offload
    ],
)
def test_placement_matches_ollama_ps(size, vram, label):
    assert placement(size, vram).label == label


def test_until_label():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    assert until_label(now + timedelta(minutes=4, seconds=30), now) == "5 min"
    assert until_label(now + timedelta(seconds=42), now) == "42 s"
    assert until_label(now + timedelta(hours=2, minutes=3), now) == "2 h 3 min"
    assert until_label(now + timedelta(days=365 * 290), now) == "Forever"
    assert until_label(now - timedelta(seconds=1), now) == "Stopping..."
    assert until_label(None, now) == "n/a"


def test_gpu_attribution_flags_split_with_nothing_on_gpu():
    res = resident()
    ok = attribute_gpu_memory(res, (GpuProcess(1, int(33 * GIB), "ollama"),))
    assert ok.mismatch is None and ok.nvml_bytes == int(33 * GIB)
    bad = attribute_gpu_memory(res, (GpuProcess(1, 0, "ollama"),))
    assert "NVML attributes 0.0 GiB" in bad.mismatch
    none = attribute_gpu_memory(res, ())
    assert "lists no engine process" in none.mismatch
    unknown = attribute_gpu_memory(res, None)
    assert unknown.mismatch is None and unknown.nvml_bytes is None
