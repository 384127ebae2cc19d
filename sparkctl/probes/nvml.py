"""GPU state from NVML (nvidia-ml-py), degrading to reasons instead of exceptions.

GB10 (DGX Spark) notes that shape this module (see reference/SPARK.md):
- nvmlDeviceGetMemoryInfo (v1 and v2) answers NOT_SUPPORTED, or zeros, or on some
  drivers a total close to the host's MemTotal. In all three cases the GPU has no
  memory of its own to report: ``unified_memory=True`` and ``memory=None``, and the
  budget comes from /proc/meminfo instead.
- Power limit, fan and memory clock are NOT_SUPPORTED there; name, utilization,
  temperature, power draw, SM clock, clock-event reasons and per-process memory work.

Blocking; the TUI calls ``read()`` from a thread worker. ``pynvml`` is imported lazily
inside the probe so that importing sparkctl costs nothing on a box without NVIDIA.
"""

from __future__ import annotations

import math
import platform
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkctl.core.gpu import (
    decode_clock_event_reasons,
    format_cuda_version,
    has_unified_memory_name,
    looks_unified,
)
from sparkctl.core.snapshots import GpuMemory, GpuProcess, GpuReport, GpuSnapshot, Unavailable

# NVML's "value not available" marker for 64-bit fields (usedGpuMemory), i.e. (unsigned)-1.
_ULL_NOT_AVAILABLE = 2**64 - 1

DEFAULT_RETRY_INTERVAL_S = 30.0

# Every NVIDIA part whose GPU reports host memory (GB10, Jetson/Thor) sits beside an Arm
# CPU. On x86 a GPU is discrete, so "total within 5% of MemTotal" is only a coincidence
# there (an 80 GB A100 in an 80 GiB VM) and must not turn VRAM reporting off.
_ARM_MACHINES = frozenset({"aarch64", "arm64", "armv8l", "armv8b"})

_NO_FUNCTION = "no-function"  # _last_code when pynvml or the driver lacks the call
_NOT_LOOKED_UP = object()


def _default_host_mem_total() -> int | None:
    from sparkctl.probes.meminfo import read_meminfo

    info = read_meminfo()
    return None if isinstance(info, Unavailable) else info.total


def _default_process_name(pid: int) -> str:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # gone, other namespace, no permission, no psutil: a name is optional
        return ""


def _init_failure_reason(nvml: Any, exc: BaseException) -> str:
    """A short, human reason for why NVML could not start."""
    if isinstance(exc, getattr(nvml, "NVMLError_LibraryNotFound", ())):
        return "NVML not found (no NVIDIA driver)"
    if isinstance(exc, getattr(nvml, "NVMLError_DriverNotLoaded", ())):
        return "NVIDIA driver not loaded"
    if isinstance(exc, getattr(nvml, "NVMLError_NoPermission", ())):
        return "no permission to use NVML"
    if isinstance(exc, getattr(nvml, "NVMLError_LibRmVersionMismatch", ())):
        return "NVML/driver version mismatch (reboot after a driver upgrade?)"
    return f"NVML init failed: {_error_text(exc)}"


def _error_text(exc: BaseException) -> str:
    # NVMLError.__str__ may itself call into the library for unknown codes; never let
    # describing an error become a second error.
    try:
        text = str(exc)
    except Exception:
        text = ""
    return text or type(exc).__name__


class NvmlProbe:
    """Reads every NVIDIA GPU through NVML; ``read()`` never raises.

    NVML is initialised on the first ``read()``. If that fails (no driver, no library)
    the reason is returned and the init is retried at most every ``retry_interval_s``,
    not on every sample. ``close()`` shuts NVML down; a later ``read()`` starts it again.
    """

    def __init__(
        self,
        *,
        retry_interval_s: float = DEFAULT_RETRY_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        host_mem_total: Callable[[], int | None] = _default_host_mem_total,
        process_name: Callable[[int], str] = _default_process_name,
        unified_tolerance: float = 0.05,
        host_arch: str | None = None,
    ) -> None:
        self._retry_interval_s = retry_interval_s
        self._clock = clock
        self._host_mem_total = host_mem_total
        self._process_name = process_name
        self._unified_tolerance = unified_tolerance
        arch = (host_arch if host_arch is not None else platform.machine()).lower()
        self._compare_with_host_total = arch in _ARM_MACHINES
        self._lock = threading.Lock()
        self._nvml: Any = None  # the pynvml module once NVML is initialised
        self._init_error: Unavailable | None = None
        self._next_init_at = 0.0
        # Facts that do not change while NVML is up, per device index.
        self._static: dict[int, dict[str, Any]] = {}
        self._last_code: int | str | None = None
        self._host_total_for_read: object = _NOT_LOOKED_UP

    # -- lifecycle -----------------------------------------------------------------

    @property
    def initialised(self) -> bool:
        return self._nvml is not None

    def _ensure_init(self) -> Unavailable | None:
        if self._nvml is not None:
            return None
        now = self._clock()
        if self._init_error is not None and now < self._next_init_at:
            return self._init_error
        try:
            import pynvml
        except ImportError:
            # Installing a package does not happen under a running process: never retry.
            self._init_error = Unavailable("nvidia-ml-py (pynvml) not installed")
            self._next_init_at = math.inf
            return self._init_error
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError subclasses, or OSError from odd loaders
            self._init_error = Unavailable(_init_failure_reason(pynvml, exc))
            self._next_init_at = now + self._retry_interval_s
            return self._init_error
        self._nvml = pynvml
        self._init_error = None
        self._static.clear()
        return None

    def _drop(self, reason: Unavailable) -> None:
        """Forget a broken NVML session; the next init waits for the retry interval."""
        nvml, self._nvml = self._nvml, None
        self._static.clear()
        self._init_error = reason
        self._next_init_at = self._clock() + self._retry_interval_s
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass

    def close(self) -> None:
        with self._lock:
            nvml, self._nvml = self._nvml, None
            self._static.clear()
            self._init_error = None
            self._next_init_at = 0.0
            if nvml is not None:
                try:
                    nvml.nvmlShutdown()
                except Exception:
                    pass

    # -- the one door every NVML call goes through ---------------------------------

    def _call(self, func_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``pynvml.<func_name>``; an NVML error comes back as Unavailable(error text).

        The NVML return code of the last failure is kept in ``self._last_code`` (None on
        success, ``_NO_FUNCTION`` when the function is missing) for the few callers that
        branch on it; reads hold the lock, so this is not shared between threads.
        """
        nvml = self._nvml
        self._last_code = None
        func = getattr(nvml, func_name, None)
        if func is None:
            self._last_code = _NO_FUNCTION
            return Unavailable(f"{func_name} missing from pynvml")
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", None)
        errors: tuple[type[BaseException], ...] = (nvml.NVMLError,)
        if isinstance(mismatch, type):
            errors += (mismatch,)
        try:
            return func(*args, **kwargs)
        except errors as exc:
            if not isinstance(exc, nvml.NVMLError):
                # pynvml's unversioned wrapper found no such symbol in this driver.
                self._last_code = _NO_FUNCTION
                return Unavailable("pynvml/driver version mismatch")
            code = getattr(exc, "value", None)
            self._last_code = _NO_FUNCTION if code == nvml.NVML_ERROR_FUNCTION_NOT_FOUND else code
            return Unavailable(_error_text(exc))

    def _call_first(self, *attempts: tuple[str, tuple[Any, ...]]) -> Any:
        """Try newer then older spellings of a call, moving on only when one is missing."""
        result: Any = Unavailable("no attempt")
        for func_name, args in attempts:
            result = self._call(func_name, *args)
            if self._last_code != _NO_FUNCTION:
                return result
        return result

    # -- reading -------------------------------------------------------------------

    def read(self, host_mem_total: int | None = None) -> GpuReport:
        """One sample of all GPUs. ``host_mem_total`` (bytes) helps spot unified memory."""
        with self._lock:
            try:
                return self._read(host_mem_total)
            except Exception as exc:  # a probe must not take the dashboard down
                return GpuReport(unavailable=Unavailable(f"NVML read failed: {_error_text(exc)}"))

    def _read(self, host_mem_total: int | None) -> GpuReport:
        failure = self._ensure_init()
        if failure is not None:
            return GpuReport(unavailable=failure)
        nvml = self._nvml

        count = self._call("nvmlDeviceGetCount")
        if isinstance(count, Unavailable):
            reason = Unavailable(f"cannot count GPUs: {count.reason}")
            self._drop(reason)
            return GpuReport(unavailable=reason)

        driver = self._text(self._call("nvmlSystemGetDriverVersion"))
        cuda = self._call_first(
            ("nvmlSystemGetCudaDriverVersion_v2", ()),
            ("nvmlSystemGetCudaDriverVersion", ()),
        )
        cuda_version = cuda if isinstance(cuda, Unavailable) else format_cuda_version(int(cuda))

        if count == 0:
            return GpuReport(
                unavailable=Unavailable("no NVIDIA GPU found"),
                driver=driver,
                cuda_driver_version=cuda_version,
            )

        self._host_total_for_read = _NOT_LOOKED_UP if host_mem_total is None else host_mem_total
        gpus = tuple(self._read_device(nvml, i, driver) for i in range(int(count)))
        return GpuReport(gpus=gpus, driver=driver, cuda_driver_version=cuda_version)

    @staticmethod
    def _text(value: Any) -> str | Unavailable:
        if isinstance(value, Unavailable):
            return value
        if isinstance(value, bytes):  # very old pynvml returned bytes
            return value.decode("utf-8", "replace")
        return str(value)

    def _read_device(self, nvml: Any, index: int, driver: str | Unavailable) -> GpuSnapshot:
        handle = self._call("nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, Unavailable):
            return _unreadable_device(index, driver, handle)
        try:
            return self._read_handle(nvml, index, handle, driver)
        except Exception as exc:
            return _unreadable_device(index, driver, Unavailable(f"read failed: {_error_text(exc)}"))

    def _static_fact(self, index: int, key: str, fetch: Callable[[], Any]) -> Any:
        """Name, UUID and max clock do not change: fetch once per NVML session."""
        facts = self._static.setdefault(index, {})
        if key in facts:
            return facts[key]
        value = fetch()
        if not isinstance(value, Unavailable):
            facts[key] = value
        return value

    def _read_handle(self, nvml: Any, index: int, handle: Any, driver: str | Unavailable) -> GpuSnapshot:
        name = self._static_fact(index, "name", lambda: self._text(self._call("nvmlDeviceGetName", handle)))
        uuid = self._static_fact(index, "uuid", lambda: self._text(self._call("nvmlDeviceGetUUID", handle)))

        util = self._call("nvmlDeviceGetUtilizationRates", handle)
        utilization = util if isinstance(util, Unavailable) else float(util.gpu)

        temp = self._call_first(
            ("nvmlDeviceGetTemperature", (handle, nvml.NVML_TEMPERATURE_GPU)),
            ("nvmlDeviceGetTemperatureV", (handle, nvml.NVML_TEMPERATURE_GPU)),
        )
        temperature = temp if isinstance(temp, Unavailable) else float(temp)

        power_w = _milliwatts(self._call("nvmlDeviceGetPowerUsage", handle))
        power_limit_w = _milliwatts(self._call("nvmlDeviceGetEnforcedPowerLimit", handle))

        sm = self._call("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM)
        sm_clock = sm if isinstance(sm, Unavailable) else float(sm)
        sm_max = self._static_fact(
            index, "sm_max", lambda: self._call("nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM)
        )
        sm_clock_max = sm_max if isinstance(sm_max, Unavailable) else float(sm_max)

        mask = self._call_first(
            ("nvmlDeviceGetCurrentClocksEventReasons", (handle,)),
            ("nvmlDeviceGetCurrentClocksThrottleReasons", (handle,)),
        )
        reasons = mask if isinstance(mask, Unavailable) else decode_clock_event_reasons(int(mask))

        memory, unified = self._read_memory(nvml, handle, name)
        processes = self._read_processes(handle)

        return GpuSnapshot(
            index=index,
            name=name,
            uuid=uuid,
            driver=driver,
            utilization_pct=utilization,
            temperature_c=temperature,
            power_w=power_w,
            power_limit_w=power_limit_w,
            sm_clock_mhz=sm_clock,
            sm_clock_max_mhz=sm_clock_max,
            throttle_reasons=reasons,
            memory=memory,
            unified_memory=unified,
            processes=processes,
        )

    def _read_memory(
        self, nvml: Any, handle: Any, name: str | Unavailable
    ) -> tuple[GpuMemory | Unavailable | None, bool]:
        """(memory, unified). Unified memory reads as (None, True): use MemInfo instead."""
        info: Any = Unavailable("no memory query made")
        v2 = getattr(nvml, "nvmlMemory_v2", None)
        if v2 is not None:
            info = self._call("nvmlDeviceGetMemoryInfo", handle, version=v2)
        if isinstance(info, Unavailable):
            # v2 missing from the driver, or refused: v1 is the older, wider-supported call.
            info = self._call("nvmlDeviceGetMemoryInfo", handle)
        if isinstance(info, Unavailable):
            if self._last_code == nvml.NVML_ERROR_NOT_SUPPORTED or has_unified_memory_name(name):
                return None, True
            return info, False

        total = int(info.total)
        if looks_unified(name, total, None, self._unified_tolerance):
            return None, True
        if self._compare_with_host_total and looks_unified(
            name, total, self._host_total(), self._unified_tolerance
        ):
            return None, True
        return GpuMemory(total=total, used=int(info.used), free=int(info.free)), False

    def _host_total(self) -> int | None:
        """Host MemTotal for this read, looked up at most once and only when needed."""
        if self._host_total_for_read is _NOT_LOOKED_UP:
            try:
                self._host_total_for_read = self._host_mem_total()
            except Exception:
                self._host_total_for_read = None
        return self._host_total_for_read  # type: ignore[return-value]

    def _read_processes(self, handle: Any) -> tuple[GpuProcess, ...] | Unavailable:
        procs = self._call_first(
            ("nvmlDeviceGetComputeRunningProcesses", (handle,)),
            ("nvmlDeviceGetComputeRunningProcesses_v3", (handle,)),
            ("nvmlDeviceGetComputeRunningProcesses_v2", (handle,)),
        )
        if isinstance(procs, Unavailable):
            return procs
        out: list[GpuProcess] = []
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            if used is not None and int(used) >= _ULL_NOT_AVAILABLE:
                used = None
            pid = int(proc.pid)
            out.append(GpuProcess(pid=pid, used_bytes=None if used is None else int(used),
                                  name=self._process_name(pid)))
        return tuple(out)


def _milliwatts(value: Any) -> float | Unavailable:
    return value if isinstance(value, Unavailable) else float(value) / 1000.0


def _unreadable_device(index: int, driver: str | Unavailable, why: Unavailable) -> GpuSnapshot:
    return GpuSnapshot(
        index=index,
        name=why,
        uuid=why,
        driver=driver,
        utilization_pct=why,
        temperature_c=why,
        power_w=why,
        power_limit_w=why,
        sm_clock_mhz=why,
        sm_clock_max_mhz=why,
        throttle_reasons=why,
        memory=why,
        unified_memory=False,
        processes=why,
    )
