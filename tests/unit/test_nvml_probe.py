"""NvmlProbe against a fake ``pynvml`` module, plus the real probe on this machine.

Why a fake: the machine these tests run on has no NVIDIA GPU or driver, and the GB10
behaviours that matter (memory queries answering NOT_SUPPORTED or zeros or ~MemTotal,
no power cap) cannot be produced on demand even where there is a GPU. The fake is a
copy of the real nvidia-ml-py module, so its constants and its error classes
(``NVMLError_NotSupported`` and friends, built from NVML return codes) are the real
ones; only the functions that would call into libnvidia-ml are replaced. It is put in
``sys.modules["pynvml"]`` with monkeypatch, which is where the probe's lazy
``import pynvml`` finds it.
"""

from __future__ import annotations

import ctypes
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml as real_pynvml  # the real nvidia-ml-py, for its error classes and constants
import pytest

from sparkctl.core.gpu import (
    decode_clock_event_reasons,
    format_cuda_version,
    is_throttled,
    looks_unified,
)
from sparkctl.core.snapshots import GIB, GpuMemory, GpuProcess, GpuReport, MemInfo, Unavailable
from sparkctl.probes.host import SystemProbes, disk_free
from sparkctl.probes.nvml import NvmlProbe

NOT_SUPPORTED = real_pynvml.NVMLError_NotSupported
SPARK_MEMTOTAL = 127600748 * 1024  # ~121.7 GiB, MemTotal of a DGX Spark

IDLE = real_pynvml.nvmlClocksEventReasonGpuIdle
SW_POWER_CAP = real_pynvml.nvmlClocksEventReasonSwPowerCap
HW_THERMAL = real_pynvml.nvmlClocksEventReasonHwThermalSlowdown


def _mem_v1(total: int, used: int) -> Any:
    return types.SimpleNamespace(total=total, used=used, free=total - used)


def _mem_v2(total: int, used: int, reserved: int = 0) -> Any:
    return types.SimpleNamespace(version=real_pynvml.nvmlMemory_v2, total=total, reserved=reserved,
                                 used=used, free=total - used)


def _proc(pid: int, used: int | None) -> Any:
    return types.SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF,
                                 computeInstanceId=0xFFFFFFFF)


@dataclass
class FakeGpu:
    """One device's answers; an exception instance is raised instead of returned."""

    name: str = "NVIDIA GB10"
    uuid: str = "GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5"
    util_gpu: int = 0
    temperature: Any = 35
    power_mw: Any = 11170
    power_limit_mw: Any = field(default_factory=NOT_SUPPORTED)
    sm_clock: Any = 2405
    sm_clock_max: Any = 3003
    reasons: Any = IDLE
    memory_v2: Any = field(default_factory=NOT_SUPPORTED)
    memory_v1: Any = field(default_factory=NOT_SUPPORTED)
    processes: Any = ()


def _answer(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


def make_fake_pynvml(
    gpus: list[FakeGpu],
    *,
    init_error: BaseException | None = None,
    driver: str = "580.95.05",
    cuda: int = 13000,
) -> types.ModuleType:
    """A pynvml look-alike: the real module's namespace with the NVML calls replaced."""
    fake = types.ModuleType("pynvml")
    fake.__dict__.update({k: v for k, v in vars(real_pynvml).items() if not k.startswith("__")})
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    fake.calls = calls  # type: ignore[attr-defined]

    def record(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, args, kwargs))
            return fn(*args, **kwargs)

        return wrapper

    def init() -> None:
        if init_error is not None:
            raise init_error

    def memory_info(handle: FakeGpu, version: int | None = None) -> Any:
        return _answer(handle.memory_v2 if version else handle.memory_v1)

    replacements: dict[str, Any] = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: gpus[i],
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlSystemGetCudaDriverVersion_v2": lambda: cuda,
        "nvmlDeviceGetName": lambda h: _answer(h.name),
        "nvmlDeviceGetUUID": lambda h: _answer(h.uuid),
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=h.util_gpu, memory=0),
        "nvmlDeviceGetTemperature": lambda h, sensor: _answer(h.temperature),
        "nvmlDeviceGetPowerUsage": lambda h: _answer(h.power_mw),
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: _answer(h.power_limit_mw),
        "nvmlDeviceGetClockInfo": lambda h, clock: _answer(h.sm_clock),
        "nvmlDeviceGetMaxClockInfo": lambda h, clock: _answer(h.sm_clock_max),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: _answer(h.reasons),
        "nvmlDeviceGetMemoryInfo": memory_info,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: list(_answer(h.processes)),
    }
    for name, fn in replacements.items():
        assert hasattr(real_pynvml, name), f"the real pynvml has no {name}: fake drifted"
        setattr(fake, name, record(name, fn))
    return fake


def install(monkeypatch: pytest.MonkeyPatch, fake: types.ModuleType) -> types.ModuleType:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def _probe(**kwargs: Any) -> NvmlProbe:
    kwargs.setdefault("host_mem_total", lambda: SPARK_MEMTOTAL)
    kwargs.setdefault("host_arch", "aarch64")  # a Spark, whatever this test machine is
    kwargs.setdefault("process_name", lambda pid: f"proc{pid}")
    return NvmlProbe(**kwargs)


def _count(fake: types.ModuleType, name: str) -> int:
    return sum(1 for call in fake.calls if call[0] == name)


# --- GB10 ------------------------------------------------------------------------------


def test_gb10_memory_not_supported_is_unified(monkeypatch: pytest.MonkeyPatch) -> None:
    gb10 = FakeGpu(
        util_gpu=97,
        temperature=71,
        power_mw=98_500,
        sm_clock=2405,
        sm_clock_max=3003,
        reasons=0,
        processes=[_proc(4242, 89_700 * 1024**2), _proc(77, None)],
    )
    install(monkeypatch, make_fake_pynvml([gb10]))

    report = _probe().read()

    assert report.unavailable is None
    assert report.driver == "580.95.05"
    assert report.cuda_driver_version == "13.0"
    (gpu,) = report.gpus
    assert gpu.index == 0
    assert gpu.name == "NVIDIA GB10"
    assert gpu.uuid.startswith("GPU-")
    assert gpu.driver == "580.95.05"
    assert gpu.unified_memory is True
    assert gpu.memory is None  # the budget comes from /proc/meminfo
    assert gpu.utilization_pct == 97.0
    assert gpu.temperature_c == 71.0
    assert gpu.power_w == pytest.approx(98.5)
    assert gpu.power_limit_w == Unavailable("Not Supported")  # GB10 has no power cap
    assert gpu.sm_clock_mhz == 2405.0
    assert gpu.sm_clock_max_mhz == 3003.0
    assert gpu.throttle_reasons == ()
    # Per-process memory still works on GB10; a process NVML cannot size stays None.
    assert gpu.processes == (
        GpuProcess(pid=4242, used_bytes=89_700 * 1024**2, name="proc4242"),
        GpuProcess(pid=77, used_bytes=None, name="proc77"),
    )


def test_gb10_tries_memory_v2_then_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, make_fake_pynvml([FakeGpu()]))
    _probe().read()
    memory_calls = [kwargs.get("version") for name, _, kwargs in fake.calls if name == "nvmlDeviceGetMemoryInfo"]
    assert memory_calls == [real_pynvml.nvmlMemory_v2, None]


def test_gb10_memory_zeros_is_unified(monkeypatch: pytest.MonkeyPatch) -> None:
    gb10 = FakeGpu(memory_v2=_mem_v2(0, 0), memory_v1=_mem_v1(0, 0))
    install(monkeypatch, make_fake_pynvml([gb10]))
    (gpu,) = _probe().read().gpus
    assert gpu.unified_memory is True
    assert gpu.memory is None


def test_zero_total_is_unified_whatever_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    igpu = FakeGpu(name="NVIDIA Integrated", memory_v2=_mem_v2(0, 0))
    install(monkeypatch, make_fake_pynvml([igpu]))
    (gpu,) = _probe().read().gpus
    assert (gpu.unified_memory, gpu.memory) == (True, None)


def test_gb10_memory_total_close_to_memtotal_is_unified(monkeypatch: pytest.MonkeyPatch) -> None:
    gb10 = FakeGpu(memory_v2=_mem_v2(SPARK_MEMTOTAL - 256 * 1024**2, 6 * GIB))
    install(monkeypatch, make_fake_pynvml([gb10]))
    (gpu,) = _probe().read(host_mem_total=SPARK_MEMTOTAL).gpus
    assert (gpu.unified_memory, gpu.memory) == (True, None)


def test_total_close_to_memtotal_is_unified_even_without_the_gb10_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # The name check alone would not catch this; the MemTotal comparison must.
    igpu = FakeGpu(name="NVIDIA Integrated", memory_v2=_mem_v2(int(SPARK_MEMTOTAL * 0.98), 6 * GIB))
    install(monkeypatch, make_fake_pynvml([igpu]))
    (gpu,) = _probe().read(host_mem_total=SPARK_MEMTOTAL).gpus
    assert (gpu.unified_memory, gpu.memory) == (True, None)
    # Without a figure passed in, the probe asks its host_mem_total callable.
    (gpu,) = _probe(host_mem_total=lambda: SPARK_MEMTOTAL).read().gpus
    assert (gpu.unified_memory, gpu.memory) == (True, None)


def test_total_close_to_memtotal_on_x86_stays_discrete(monkeypatch: pytest.MonkeyPatch) -> None:
    # An 80 GB A100 in a VM with ~80 GiB of RAM: a coincidence, not unified memory.
    a100_total = 85_899_345_920
    a100 = FakeGpu(name="NVIDIA A100-SXM4-80GB", memory_v2=_mem_v2(a100_total, GIB))
    install(monkeypatch, make_fake_pynvml([a100]))
    (gpu,) = _probe(host_arch="x86_64").read(host_mem_total=int(a100_total * 0.98)).gpus
    assert gpu.unified_memory is False
    assert gpu.memory == GpuMemory(total=a100_total, used=GIB, free=a100_total - GIB)


# --- discrete GPU ----------------------------------------------------------------------

H200_TOTAL = 143_771_336_704  # 141 GB of HBM3e, as NVML reports it


def _h200(**overrides: Any) -> FakeGpu:
    values: dict[str, Any] = dict(
        name="NVIDIA H200",
        uuid="GPU-00000000-1111-2222-3333-444444444444",
        util_gpu=12,
        temperature=31,
        power_mw=121_000,
        power_limit_mw=700_000,
        sm_clock=1980,
        sm_clock_max=1980,
        reasons=0,
        memory_v2=_mem_v2(H200_TOTAL, 20 * GIB, reserved=512 * 1024**2),
        memory_v1=_mem_v1(H200_TOTAL, 21 * GIB),
        processes=[_proc(1234, 19 * GIB)],
    )
    values.update(overrides)
    return FakeGpu(**values)


def test_discrete_h200_reports_vram_from_memory_v2(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, make_fake_pynvml([_h200()], driver="580.159.04", cuda=13000))
    # A big host: 2 TiB of RAM, nowhere near the GPU's total.
    (gpu,) = _probe().read(host_mem_total=2048 * GIB).gpus
    assert gpu.unified_memory is False
    assert gpu.memory == GpuMemory(total=H200_TOTAL, used=20 * GIB, free=H200_TOTAL - 20 * GIB)
    assert gpu.power_limit_w == 700.0
    assert gpu.power_w == 121.0
    assert gpu.processes == (GpuProcess(pid=1234, used_bytes=19 * GIB, name="proc1234"),)


def test_discrete_memory_falls_back_to_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    old = _h200(memory_v2=real_pynvml.NVMLError_FunctionNotFound())
    install(monkeypatch, make_fake_pynvml([old]))
    (gpu,) = _probe().read(host_mem_total=2048 * GIB).gpus
    assert gpu.memory == GpuMemory(total=H200_TOTAL, used=21 * GIB, free=H200_TOTAL - 21 * GIB)


def test_discrete_memory_error_other_than_not_supported_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = real_pynvml.NVMLError_NoPermission()
    install(monkeypatch, make_fake_pynvml([_h200(memory_v2=denied, memory_v1=denied)]))
    (gpu,) = _probe().read(host_mem_total=2048 * GIB).gpus
    assert gpu.unified_memory is False
    assert gpu.memory == Unavailable("Insufficient Permissions")


def test_process_memory_not_available_marker_reads_none(monkeypatch: pytest.MonkeyPatch) -> None:
    marker = real_pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
    install(monkeypatch, make_fake_pynvml([_h200(processes=[_proc(9, marker)])]))
    (gpu,) = _probe().read(host_mem_total=2048 * GIB).gpus
    assert gpu.processes == (GpuProcess(pid=9, used_bytes=None, name="proc9"),)


def test_two_gpus_each_read(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, make_fake_pynvml([_h200(), _h200(uuid="GPU-2")]))
    report = _probe().read(host_mem_total=2048 * GIB)
    assert [g.index for g in report.gpus] == [0, 1]
    assert report.gpus[1].uuid == "GPU-2"


# --- throttling ------------------------------------------------------------------------


def test_throttled_gpu_reasons_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A degraded USB-PD state on a Spark: clocks far below max, power cap and thermal.
    hot = FakeGpu(sm_clock=850, temperature=92, reasons=SW_POWER_CAP | HW_THERMAL)
    install(monkeypatch, make_fake_pynvml([hot]))
    (gpu,) = _probe().read().gpus
    assert gpu.throttle_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert is_throttled(gpu.throttle_reasons) is True
    assert gpu.sm_clock_mhz == 850.0


def test_idle_gpu_is_not_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, make_fake_pynvml([FakeGpu(reasons=IDLE)]))
    (gpu,) = _probe().read().gpus
    assert gpu.throttle_reasons == ("gpu_idle",)
    assert is_throttled(gpu.throttle_reasons) is False


def test_reasons_fall_back_to_the_older_throttle_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_fake_pynvml([FakeGpu()])
    del fake.nvmlDeviceGetCurrentClocksEventReasons  # an older nvidia-ml-py
    fake.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: SW_POWER_CAP
    install(monkeypatch, fake)
    (gpu,) = _probe().read().gpus
    assert gpu.throttle_reasons == ("sw_power_cap",)


def test_decode_all_known_reasons_and_unknown_bits() -> None:
    assert decode_clock_event_reasons(0) == ()
    names = decode_clock_event_reasons(0x1FF)
    assert names == (
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake",
        "display_clocks_setting",
    )
    assert decode_clock_event_reasons(0x10000) == ("unknown_0x10000",)
    # The hard-coded bits in core match the real library's constants.
    assert decode_clock_event_reasons(real_pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown) == (
        "hw_power_brake",
    )
    assert decode_clock_event_reasons(real_pynvml.nvmlClocksEventReasonDisplayClockSetting) == (
        "display_clocks_setting",
    )


def test_is_throttled_rules() -> None:
    assert is_throttled(()) is False
    assert is_throttled(("gpu_idle",)) is False
    assert is_throttled(("gpu_idle", "hw_slowdown")) is True
    assert is_throttled(("sync_boost",)) is True
    assert is_throttled(Unavailable("Not Supported")) is False


def test_looks_unified_and_cuda_version() -> None:
    assert looks_unified("NVIDIA GB10", 500 * GIB, None)
    assert looks_unified("NVIDIA H200", 0, None)
    assert not looks_unified("NVIDIA H200", H200_TOTAL, None)
    assert not looks_unified("NVIDIA H200", H200_TOTAL, 2048 * GIB)
    assert looks_unified("NVIDIA X", 100 * GIB, 104 * GIB)
    assert not looks_unified("NVIDIA X", 100 * GIB, 110 * GIB)
    assert format_cuda_version(13000) == "13.0"
    assert format_cuda_version(12040) == "12.4"
    assert format_cuda_version(12021) == "12.2.1"


# --- degraded NVML ---------------------------------------------------------------------


def test_library_missing_reports_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, make_fake_pynvml([], init_error=real_pynvml.NVMLError_LibraryNotFound()))
    report = _probe().read()
    assert report.gpus == ()
    assert report.unavailable == Unavailable("NVML not found (no NVIDIA driver)")
    assert _count(fake, "nvmlDeviceGetCount") == 0


def test_driver_not_loaded_reports_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, make_fake_pynvml([], init_error=real_pynvml.NVMLError_DriverNotLoaded()))
    assert _probe().read().unavailable == Unavailable("NVIDIA driver not loaded")


def test_init_is_retried_at_most_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    fake = install(monkeypatch, make_fake_pynvml([], init_error=real_pynvml.NVMLError_LibraryNotFound()))
    probe = _probe(retry_interval_s=30.0, clock=lambda: now[0])

    for _ in range(5):  # five 1 s samples: one init attempt
        probe.read()
        now[0] += 1.0
    assert _count(fake, "nvmlInit") == 1

    now[0] += 30.0
    probe.read()
    assert _count(fake, "nvmlInit") == 2


def test_init_recovers_once_the_driver_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    install(monkeypatch, make_fake_pynvml([], init_error=real_pynvml.NVMLError_DriverNotLoaded()))
    probe = _probe(retry_interval_s=10.0, clock=lambda: now[0])
    assert probe.read().unavailable is not None

    install(monkeypatch, make_fake_pynvml([FakeGpu()]))  # driver loaded meanwhile
    now[0] = 11.0
    report = probe.read()
    assert report.unavailable is None and len(report.gpus) == 1
    assert probe.initialised
    probe.close()
    assert not probe.initialised


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    report = NvmlProbe().read()
    assert report.unavailable == Unavailable("nvidia-ml-py (pynvml) not installed")


def test_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, make_fake_pynvml([]))
    report = _probe().read()
    assert report.gpus == ()
    assert report.unavailable == Unavailable("no NVIDIA GPU found")
    assert report.driver == "580.95.05"


def test_every_field_failing_degrades_without_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    lost = real_pynvml.NVMLError_GpuIsLost()
    broken = FakeGpu(
        name=lost, uuid=lost, temperature=lost, power_mw=lost, power_limit_mw=lost,
        sm_clock=lost, sm_clock_max=lost, reasons=lost, memory_v2=lost, memory_v1=lost,
        processes=lost,
    )
    install(monkeypatch, make_fake_pynvml([broken]))
    (gpu,) = _probe().read(host_mem_total=SPARK_MEMTOTAL).gpus
    gone = Unavailable("GPU is lost")
    assert gpu.name == gpu.uuid == gpu.temperature_c == gpu.power_w == gone
    assert gpu.sm_clock_mhz == gpu.sm_clock_max_mhz == gpu.throttle_reasons == gone
    assert gpu.memory == gone and gpu.unified_memory is False
    assert gpu.processes == gone


def test_unexpected_exception_in_a_device_call_does_not_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_fake_pynvml([FakeGpu()])
    fake.nvmlDeviceGetUtilizationRates = lambda h: (_ for _ in ()).throw(RuntimeError("boom"))
    install(monkeypatch, fake)
    report = _probe().read()
    (gpu,) = report.gpus
    assert isinstance(gpu.utilization_pct, Unavailable)
    assert "boom" in gpu.utilization_pct.reason


def test_unversioned_process_call_mismatch_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_fake_pynvml([FakeGpu()])

    def mismatch(handle: Any) -> Any:
        raise real_pynvml.NVMLLibraryMismatchError("driver too old for the unversioned call")

    fake.nvmlDeviceGetComputeRunningProcesses = mismatch
    fake.nvmlDeviceGetComputeRunningProcesses_v3 = mismatch
    fake.nvmlDeviceGetComputeRunningProcesses_v2 = lambda h: [_proc(5, GIB)]
    install(monkeypatch, fake)
    (gpu,) = _probe().read().gpus
    assert gpu.processes == (GpuProcess(pid=5, used_bytes=GIB, name="proc5"),)


# --- SystemProbes wiring ---------------------------------------------------------------


class RecordingGpuProbe:
    def __init__(self) -> None:
        self.host_totals: list[int | None] = []
        self.closed = False

    def read(self, host_mem_total: int | None = None) -> GpuReport:
        self.host_totals.append(host_mem_total)
        return GpuReport(unavailable=Unavailable("test"))

    def close(self) -> None:
        self.closed = True


def test_system_probes_combine_readings(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 127600748 kB\nMemAvailable: 28311552 kB\nMemFree: 838860 kB\n")
    gpu_probe = RecordingGpuProbe()
    probes = SystemProbes(
        meminfo_path=str(meminfo),
        pressure_path=str(tmp_path / "no-psi"),
        nvml=gpu_probe,
        cpu_percent_fn=lambda: 12.5,
    )
    snap = probes.read()
    assert isinstance(snap.meminfo, MemInfo) and snap.meminfo.total == SPARK_MEMTOTAL
    assert snap.pressure == Unavailable("kernel has no PSI")
    assert snap.gpu.unavailable == Unavailable("test")
    assert gpu_probe.host_totals == [SPARK_MEMTOTAL]  # the GPU probe gets MemTotal
    assert snap.cpu_percent == 12.5
    assert snap.cpu_count > 0 and snap.hostname
    probes.close()
    assert gpu_probe.closed


def test_disk_free(tmp_path: Path) -> None:
    free = disk_free(tmp_path)
    assert isinstance(free, int) and free >= 0
    missing = disk_free(tmp_path / "absent" / "deeper")
    assert isinstance(missing, Unavailable)


# --- the real thing --------------------------------------------------------------------


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_real_nvml_probe_on_this_machine() -> None:
    """The real probe and the real pynvml, no fakes: it must answer, not raise."""
    probe = NvmlProbe()
    try:
        report = probe.read()
        again = probe.read()  # within the retry interval: same answer, no second init
    finally:
        probe.close()
    assert isinstance(report, GpuReport)
    if _nvml_library_present():
        # On a GPU machine (e.g. the H200) the real readings must come through: a named
        # GPU with a temperature and clock, and either unified memory or a VRAM total.
        assert report.unavailable is None, report.unavailable
        assert report.gpus, "NVML loaded but listed no GPU"
        for gpu in report.gpus:
            assert isinstance(gpu.name, str) and gpu.name.startswith("NVIDIA")
            assert isinstance(gpu.temperature_c, float) and isinstance(gpu.sm_clock_mhz, float)
            assert gpu.unified_memory or (isinstance(gpu.memory, GpuMemory) and gpu.memory.total > 0)
            assert isinstance(gpu.processes, tuple)
        return
    # This development machine has no NVIDIA driver: a reason, no GPUs, no exception.
    assert report.gpus == ()
    assert report.unavailable == Unavailable("NVML not found (no NVIDIA driver)")
    assert again == report
