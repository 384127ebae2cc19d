"""Reading another host's `sparkctl status --json`, and what the fleet view says about it.

Pure core of sparkctl.services.fleet: the fleet service runs ssh and hands the parsed JSON here. The status JSON carries a
schema version (``STATUS_SCHEMA``); a status without one was written by a sparkctl from
before the version existed (schema 1). This reader accepts the current schema and the one
before it, and says when a host runs an older (or newer) sparkctl instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core.names import same_model

# `sparkctl status --json` writes {"schema": STATUS_SCHEMA, ...}. Raise it when a key the
# fleet reads changes meaning or goes away (adding keys needs no new version).
STATUS_SCHEMA = 2
# Schema 1: the status JSON as it was before it carried a version (no "schema" key).
OLDEST_READ = STATUS_SCHEMA - 1

GPU_ONLY = "100% GPU"


class StatusFormatError(ValueError):
    """What a host answered is not a sparkctl status this reader understands."""


@dataclass(frozen=True)
class ResidentEntry:
    name: str
    lane: str | None
    placement: str
    size: int | None = None
    context_length: int | None = None


@dataclass(frozen=True)
class GpuLine:
    name: str | None
    driver: str | None
    utilization_pct: float | None
    power_w: float | None
    power_limit_w: float | None


@dataclass(frozen=True)
class HardwareClass:
    """What makes two hosts' numbers comparable: the GPU, the memory it has, the driver."""

    gpu: str
    memory_gib: int | None
    driver: str

    @property
    def label(self) -> str:
        mem = f"{self.memory_gib} GiB" if self.memory_gib is not None else "? GiB"
        return f"{self.gpu or 'no GPU'}, {mem}, driver {self.driver or '?'}"


@dataclass(frozen=True)
class HostStatus:
    """The parts of one host's status the fleet shows, read from its JSON."""

    schema: int
    at: str
    hostname: str
    engine_kind: str
    engine_version: str | None
    engine_reachable: bool
    engine_error: str | None
    resident: tuple[ResidentEntry, ...]
    lanes: tuple[tuple[str, str, bool], ...] | None  # (lane, model, resident); None: unknown
    pool: str | None
    total: int | None
    available: int | None
    reserve: int | None
    level: str | None
    gpus: tuple[GpuLine, ...]
    runners: tuple[str, ...]  # names of the processes holding GPU memory, where NVML lists them
    mem_total: int | None
    host_warnings: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def headroom(self) -> int | None:
        if self.available is None or self.reserve is None:
            return None
        return self.available - self.reserve

    @property
    def engine_state(self) -> str:
        """"up", "error" (it answered, with an error) or "down" (no answer)."""
        if not self.engine_reachable:
            return "down"
        return "error" if self.engine_error else "up"

    @property
    def hardware(self) -> HardwareClass:
        g = self.gpus[0] if self.gpus else None
        names = sorted({x.name for x in self.gpus if x.name})
        gpu = " + ".join(names) if len(names) > 1 else (names[0] if names else "")
        if len(self.gpus) > 1 and len(names) == 1:
            gpu = f"{len(self.gpus)}x {gpu}"
        total = self.mem_total
        return HardwareClass(gpu, round(total / 1024**3) if total else None, (g.driver or "") if g else "")


def schema_of(obj: dict[str, Any]) -> int:
    """The status schema a host wrote (1 when it wrote none: sparkctl from before versions)."""
    value = obj.get("schema", OLDEST_READ)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StatusFormatError(f"status schema {value!r} is not a version number")
    return value


def schema_note(schema: int) -> str | None:
    """What the fleet says about a host's status schema; None when it is the current one."""
    if schema == STATUS_SCHEMA:
        return None
    if schema < OLDEST_READ:
        return f"runs a sparkctl too old for the fleet (status schema {schema}, needs {OLDEST_READ} or later): upgrade it"
    if schema < STATUS_SCHEMA:
        return f"runs an older sparkctl (status schema {schema}, this one writes {STATUS_SCHEMA}): upgrade it"
    return (f"runs a newer sparkctl (status schema {schema}, this one reads up to {STATUS_SCHEMA}): "
            "upgrade this one; what it does not know is not shown")


def readable(schema: int) -> bool:
    return schema >= OLDEST_READ


def _num(x: Any) -> float | None:
    if isinstance(x, int) and not isinstance(x, bool):
        return float(x) if abs(x) < 2**1000 else None  # past a float's range: not a figure
    return x if isinstance(x, float) else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2**63 else None


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _warning_text(w: Any) -> str | None:
    """A host's warning as one line: a string, or an object with a message (a later schema
    may say more about each warning; its text is what the fleet shows)."""
    if isinstance(w, str):
        return w
    if isinstance(w, dict):
        return _str(w.get("message")) or _str(w.get("text"))
    return None


def parse_status(obj: Any) -> HostStatus:
    """A host's status JSON (already decoded) as a HostStatus. Raises StatusFormatError
    when it is not a status at all or its schema is older than this reader reads."""
    if not isinstance(obj, dict) or not isinstance(obj.get("engine"), dict):
        raise StatusFormatError("not a sparkctl status (no engine object)")
    schema = schema_of(obj)
    if not readable(schema):
        raise StatusFormatError(schema_note(schema) or "")
    e = obj["engine"]
    resident = tuple(
        ResidentEntry(str(r.get("name", "?")), _str(r.get("lane")), _str(r.get("placement")) or "?",
                      _int(r.get("size")), _int(r.get("context_length")))
        for r in _list(obj.get("resident")) if isinstance(r, dict))
    lanes_raw = obj.get("lanes")
    lanes = None if not isinstance(lanes_raw, list) else tuple(
        (str(x.get("lane")), str(x.get("model")), bool(x.get("resident")))
        for x in lanes_raw if isinstance(x, dict))
    budget = _dict(obj.get("budget"))
    memory = _dict(obj.get("memory"))
    gpus = []
    runners: list[str] = []
    for g in _list(obj.get("gpus")):
        if not isinstance(g, dict):
            continue
        gpus.append(GpuLine(_str(g.get("name")), _str(g.get("driver")), _num(g.get("utilization_pct")),
                            _num(g.get("power_w")), _num(g.get("power_limit_w"))))
        for p in _list(g.get("processes")):
            name = _str(_dict(p).get("name"))
            if name and name not in runners:
                runners.append(name)
    host = _dict(obj.get("host"))
    warnings = tuple(t for t in (_warning_text(w) for w in _list(obj.get("warnings"))) if t)
    return HostStatus(
        schema=schema, at=_str(obj.get("at")) or "", hostname=_str(host.get("hostname")) or "",
        engine_kind=_str(e.get("kind")) or "?", engine_version=_str(e.get("version")),
        engine_reachable=bool(e.get("reachable")), engine_error=_str(e.get("error")),
        resident=resident, lanes=lanes, pool=_str(budget.get("pool")), total=_int(budget.get("total")),
        available=_int(budget.get("available")), reserve=_int(budget.get("reserve")),
        level=_str(budget.get("level")), gpus=tuple(gpus), runners=tuple(runners),
        mem_total=_int(memory.get("total")), host_warnings=warnings, raw=obj)


# ---- what the fleet warns about ---------------------------------------------------------


def lane_table(status: HostStatus, override: dict[str, str] | None) -> tuple[tuple[str, str, bool], ...] | None:
    """(lane, model, resident) for each lane: the host's own lanes, or the fleet's override
    for that host matched against what it holds. None while its resident models are unknown."""
    if status.engine_state != "up":
        return None
    if not override:
        return status.lanes
    return tuple((lane, model, any(same_model(r.name, model) for r in status.resident))
                 for lane, model in override.items())


def lane_of(status: HostStatus, override: dict[str, str] | None, model: str) -> str | None:
    if not override:
        return next((r.lane for r in status.resident if r.name == model), None)
    return next((lane for lane, m in override.items() if same_model(m, model)), None)


@dataclass(frozen=True)
class LaneBench:
    """A lane model's newest valid bench on one host (from the tracking store)."""

    lane: str
    model: str
    engine_version: str | None  # None: never benched on that host
    decode_tps: float | None = None
    start_ms: int | None = None


def fleet_warnings(status: HostStatus, override: dict[str, str] | None = None,
                   benches: tuple[LaneBench, ...] = ()) -> list[str]:
    """What the host itself warned about (a dead bench's models not put back, ...), then lanes
    missing, lanes spilled off the GPU, the engine changed since a lane's last bench.

    The host's own lane warnings are left out: they use the host's config, and the fleet
    recomputes them with `[hosts.NAME.lanes]` where that overrides it."""
    out: list[str] = [w for w in status.host_warnings if not w.startswith("lane ")]
    if status.engine_state == "down":
        out.append(f"engine down: {status.engine_error or 'no answer'}")
    elif status.engine_state == "error":
        out.append(f"engine error: {status.engine_error}")
    for lane, model, resident in lane_table(status, override) or ():
        if not resident:
            out.append(f"lane {lane}: {model} not resident")
    for r in status.resident:
        lane = lane_of(status, override, r.name)
        if lane and r.placement != GPU_ONLY:
            out.append(f"lane {lane}: {r.name} spilled ({r.placement})")
    if status.engine_state == "up" and status.engine_version:
        for b in benches:
            if b.engine_version is not None and b.engine_version != status.engine_version:
                out.append(f"lane {b.lane}: engine {status.engine_version} since its last bench "
                           f"({b.engine_version}): re-bench")
    return out


def age_label(seconds: float | None) -> str:
    """How old a reading is, the way a person says it: "12 s", "4 min", "3 h", "2 d"."""
    if seconds is None:
        return "never"
    s = max(0, int(seconds))
    if s < 90:
        return f"{s} s"
    if s < 90 * 60:
        return f"{round(s / 60)} min"
    if s < 36 * 3600:
        return f"{round(s / 3600)} h"
    return f"{round(s / 86400)} d"
