"""The tracked bench: the measurement session every bench, sweep and eval runs on (lock, preflight,
residency, sampler, identity, recording), the runner (timing, guards, records), residency (what
was resident is put back), the per-engine lock and the GPU sampler. The public names are
re-exported here."""

from sparkctl.services.bench.events import BenchFinished, ContextChosen, Live, Notice, Phase, RepDone, RepStarted
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.services.bench.lock import BenchBusy, BenchLock
from sparkctl.services.bench.results import ModelRun, RepResult
from sparkctl.services.bench.runner import INVALIDATING, BenchRunner
from sparkctl.services.bench.sampler import GpuSampler
from sparkctl.services.bench.session import MeasurementSession
from sparkctl.services.bench.settings import BenchRefused, BenchSettings

__all__ = [
    "INVALIDATING", "BenchBusy", "BenchFinished", "BenchLock", "BenchRefused", "BenchRunner",
    "BenchSettings", "ContextChosen", "GpuSampler", "LaneRestore", "Live", "MeasurementSession", "ModelRun", "Notice", "Phase", "RepDone",
    "RepResult", "RepStarted",
]
