"""The tracked bench: runner (timing, guards, records), residency (what was resident is put back), the per-engine lock and
the GPU sampler. The public names are re-exported here."""

from sparkctl.services.bench.lanes import LaneRestore
from sparkctl.services.bench.lock import BenchBusy, BenchLock
from sparkctl.services.bench.runner import (
    INVALIDATING,
    BenchFinished,
    BenchRefused,
    BenchRunner,
    BenchSettings,
    ContextChosen,
    Live,
    ModelRun,
    Notice,
    Phase,
    RepDone,
    RepResult,
    RepStarted,
)
from sparkctl.services.bench.sampler import GpuSampler

__all__ = [
    "INVALIDATING", "BenchBusy", "BenchFinished", "BenchLock", "BenchRefused", "BenchRunner",
    "BenchSettings", "ContextChosen", "GpuSampler", "LaneRestore", "Live", "ModelRun", "Notice", "Phase", "RepDone",
    "RepResult", "RepStarted",
]
