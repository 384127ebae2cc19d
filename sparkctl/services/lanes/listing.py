"""`sparkctl lanes`: each lane, its model, where that came from, since when, the evidence
run, and whether the model is resident (from /api/ps)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkctl.config import Config
from sparkctl.core.names import same_model
from sparkctl.core.placement import placement, spill_warning
from sparkctl.core.snapshots import ResidentModel
from sparkctl.services.lanes.history import current_entry
from sparkctl.statefile import OwnedState, read_state


@dataclass(frozen=True)
class LaneRow:
    lane: str
    model: str
    source: str  # the file that set it
    since: str  # ISO time of the change that set it ("" when set by hand)
    action: str  # "promote" | "rollback" | "" (set in the user's file)
    previous: str
    evidence: tuple[str, ...]  # run ids behind the promotion
    forced: bool
    record_id: str
    resident: ResidentModel | None
    engine_known: bool  # False: the engine did not answer, residency unknown
    owned: bool = False  # set in sparkctl's own state file (a promotion or rollback), not the user's

    @property
    def set_by(self) -> str:
        """Who set the lane, in the words the CLI and the TUI share: "promote over X in
        sparkctl's own state file", or "your config (FILE)"."""
        how = f"{self.action}{' (forced)' if self.forced else ''} over {self.previous or '(none)'}" if self.action else ""
        if not self.owned:
            return f"your config ({self.source})"
        return f"{how} in sparkctl's own state file" if how else "sparkctl's own state file"

    @property
    def residency(self) -> str:
        if not self.engine_known:
            return "unknown (engine unreachable)"
        if self.resident is None:
            return "NOT RESIDENT"
        return placement(self.resident.size, self.resident.size_vram).label

    @property
    def warning(self) -> str | None:
        """Its model spilled to the CPU (core.placement.spill_warning), or None."""
        r = self.resident
        return None if r is None else spill_warning(self.lane, self.model, r.size, r.size_vram)

    def to_dict(self) -> dict[str, Any]:
        r = self.resident
        return {"lane": self.lane, "model": self.model, "source": self.source, "set_by": self.set_by,
                "since": self.since or None,
                "action": self.action or None, "previous": self.previous or None, "evidence": list(self.evidence),
                "forced": self.forced, "record_id": self.record_id or None,
                "resident": None if not self.engine_known else r is not None,
                "placement": None if r is None else placement(r.size, r.size_vram).label,
                "size": None if r is None else r.size, "warning": self.warning}


def lane_rows(cfg: Config, resident: list[ResidentModel] | None, state: OwnedState | None = None) -> list[LaneRow]:
    """`resident`: /api/ps now, or None when the engine did not answer."""
    if state is None:
        state = read_state(Path(cfg.state_file) if cfg.state_file else None)
    rows = []
    for lane, model in cfg.lanes.items():
        source = cfg.sources.get(f"lanes.{lane}", cfg.source)
        owned = source == str(state.path)
        entry = current_entry(state, lane, model) if owned else None
        mine = next((m for m in resident or () if same_model(m.name, model)), None)
        rows.append(LaneRow(
            lane, model, source, entry.at if entry else "", entry.action if entry else "",
            entry.previous if entry else "", entry.evidence if entry else (), entry.forced if entry else False,
            entry.record_id if entry else "", mine, resident is not None, owned))
    return rows
