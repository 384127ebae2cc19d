"""What a model action raises: a guard's refusal (with the fit report it was judged on) and a
load the engine refused or failed (with what is resident after it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkctl.core.snapshots import ResidentModel
from sparkctl.engines.base import EngineError

if TYPE_CHECKING:  # fit.py does not import this module: no circle
    from sparkctl.services.models.fit import FitReport


class ModelsRefused(Exception):
    """A guard said no. `reason` is one line without the "how to override" hint, which
    differs between the CLI (--force) and the TUI (a key)."""

    def __init__(self, reason: str, *, fit: "FitReport | None" = None, kind: str = "guard") -> None:
        super().__init__(reason)
        self.reason = reason
        self.fit = fit
        self.kind = kind


class LoadFailed(EngineError):
    """The engine refused or failed the load. `lost_lanes` and `resident_after` say what is
    resident now, because a failed load can still have evicted models (Ollama unloads to
    make room before it tries, and unloads everything after an out-of-memory failure)."""

    def __init__(self, message: str, status: int, *, lost_lanes: tuple[str, ...] = (),
                 resident_after: tuple[ResidentModel, ...] | None = None) -> None:
        super().__init__(message, status)
        self.lost_lanes = lost_lanes
        self.resident_after = resident_after
