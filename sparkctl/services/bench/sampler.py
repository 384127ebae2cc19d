"""GPU samples during a bench: power, clocks, temperature, utilization, throttle reasons.

Every GPU is read (a box with several GPUs runs the engine on any of them); figures are
summed (power) or taken at their worst (clock, temperature, utilization) over the GPUs the
engine uses when the runner knows them, else over all. Each sample keeps the per-GPU
readings too, for the run's artifact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sparkctl.core.snapshots import GpuReport, Unavailable

GPU_SAMPLE_S = 0.5
# NVML's utilization covers the last sample period of the driver (up to ~1 s), so a
# reading this soon after the bench's own request still shows that request.
NVML_AVERAGING_S = 1.0
FOREIGN_UTIL_PCT = 20.0


def _num(x: Any) -> float | None:
    return None if isinstance(x, Unavailable) or x is None else float(x)


class GpuSampler:
    """Samples the GPUs in its own thread every `period_s` during a bench."""

    def __init__(self, read_gpu: Callable[[], GpuReport], period_s: float = GPU_SAMPLE_S) -> None:
        self.read_gpu = read_gpu
        self.period_s = period_s
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self.indices: set[int] | None = None  # the engine's GPUs, once known
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)

    def start(self) -> "GpuSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.period_s)

    def sample_once(self) -> None:
        """One reading now (blocking: NVML). The bench also takes one at the end of every
        request, so a request shorter than the period still has its own sample."""
        try:
            report = self.read_gpu()
        except Exception:  # a probe failure must not end the bench; the gap shows in the data
            report = GpuReport(unavailable=Unavailable("probe failed"))
        sample = self.aggregate(report)
        if sample is not None:
            with self._lock:  # the sampler thread and the bench's own reads both add
                self.samples.append((time.perf_counter(), sample))
                self.samples.sort(key=lambda x: x[0])

    def aggregate(self, report: GpuReport) -> dict[str, Any] | None:
        gpus = [g for g in report.gpus if self.indices is None or g.index in self.indices] or list(report.gpus)
        if not gpus:
            return None
        per = [{
            "index": g.index, "power_w": _num(g.power_w), "sm_clock_mhz": _num(g.sm_clock_mhz),
            "temperature_c": _num(g.temperature_c), "util_pct": _num(g.utilization_pct),
            "throttle": list(g.throttle_reasons) if isinstance(g.throttle_reasons, tuple) else None,
        } for g in gpus]

        def vals(key):
            return [p[key] for p in per if p[key] is not None]

        throttle = sorted({r for p in per for r in (p["throttle"] or [])})
        return {
            "power_w": sum(vals("power_w")) if vals("power_w") else None,
            "sm_clock_mhz": min(vals("sm_clock_mhz")) if vals("sm_clock_mhz") else None,
            "temperature_c": max(vals("temperature_c")) if vals("temperature_c") else None,
            "util_pct": max(vals("util_pct")) if vals("util_pct") else None,
            "throttle": throttle if any(p["throttle"] is not None for p in per) else None,
            "gpus": per,
        }

    def snapshot(self) -> list[tuple[float, dict[str, Any]]]:
        """A copy of the samples so far (the sampler thread keeps adding and sorting)."""
        with self._lock:
            return list(self.samples)

    def power_series(self) -> list[tuple[float, float]]:
        return [(t, s["power_w"]) for t, s in self.snapshot() if s["power_w"] is not None]

    def within(self, windows: list[tuple[float, float]] | None) -> list[tuple[float, dict[str, Any]]]:
        """Samples taken inside any of `windows` (one model's requests), or all of them."""
        if windows is None:
            return self.snapshot()
        return [(t, v) for t, v in self.snapshot() if any(a <= t <= b for a, b in windows)]

    def busy_outside(self, windows: list[tuple[float, float]], start: float, end: float,
                     threshold_pct: float = FOREIGN_UTIL_PCT) -> list[tuple[float, float]]:
        """(time, util%) of samples between `start` and `end` taken while none of the bench's
        own requests ran (nor had run within NVML's averaging period) that show the GPU busy."""
        out = []
        for t, v in self.snapshot():
            u = v.get("util_pct")
            if u is None or u < threshold_pct or not start <= t <= end:
                continue
            if any(a <= t <= b + NVML_AVERAGING_S for a, b in windows):
                continue
            out.append((t, u))
        return out

    def summary(self, windows: list[tuple[float, float]] | None = None) -> dict[str, Any]:
        samples = self.within(windows)

        def stat(key):
            xs = [s[key] for _, s in samples if s.get(key) is not None]
            return (min(xs), max(xs), sum(xs) / len(xs)) if xs else None

        reasons: set[str] = set()
        for _, s in samples:
            reasons.update(s["throttle"] or [])
        return {"n": len(samples), "power": stat("power_w"), "sm_clock": stat("sm_clock_mhz"),
                "temperature": stat("temperature_c"), "util": stat("util_pct"),
                "throttle_reasons": sorted(reasons)}
