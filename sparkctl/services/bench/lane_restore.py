"""What a bench did to the models it found resident, and to the ones it loaded: the
outcome every runner (bench, sweep, eval) records on its runs and shows on screen.

The work itself is in residency_guard.py (the guard and the put-back; the journal is tracking/residency_journal.py); this is the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LaneRestore:
    """What happened to each model at the end of a bench.

    `failed` holds lane models (and other models resident before) that could not be put
    back as they were: loud, recorded, the run invalid. `leftover` holds models the bench
    loaded that could not be unloaded: loud too, but the numbers stand."""

    untouched: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # "name (what was put back)"
    expired: list[str] = field(default_factory=list)  # its own keep-alive ran out meanwhile
    failed: list[str] = field(default_factory=list)  # "name: why"
    unloaded: list[str] = field(default_factory=list)  # loaded by the bench, unloaded at its end
    kept_loaded: list[str] = field(default_factory=list)  # loaded by the bench, kept as asked
    # lanes changed while the bench ran: "X: not put back, lane L no longer serves it", "Y: left
    # loaded, lane L serves it now"
    lane_changed: list[str] = field(default_factory=list)
    leftover: list[str] = field(default_factory=list)  # "name: why" it could not be unloaded
    notes: list[str] = field(default_factory=list)  # what could not be kept exactly, and why
    lane_models: set[str] = field(default_factory=set)  # which of the names serve a lane

    @property
    def ok(self) -> bool:
        return not self.failed

    def tag(self) -> str:
        """guard.lane_restore: FAILED…, restored…, unchanged, or nothing resident."""
        if self.failed:
            return "FAILED: " + "; ".join(self.failed)
        if self.restored:
            return "restored: " + "; ".join(self.restored)
        return "unchanged" if self.untouched else "no lane model resident"

    def residency_tag(self) -> str:
        """guard.residency: every change the end of the bench made, in one line."""
        parts = []
        for word, items in (("restored", self.restored), ("unloaded", self.unloaded),
                            ("kept loaded", self.kept_loaded), ("expired meanwhile", self.expired),
                            ("lanes changed meanwhile", self.lane_changed),
                            ("NOT restored", self.failed), ("NOT unloaded", self.leftover)):
            if items:
                parts.append(f"{word}: " + ", ".join(items))
        return "; ".join(parts) or "as before"

    def errors(self) -> list[str]:
        """The lines a user must see even when output is piped."""
        out = []
        for failure in self.failed:
            lane = any(failure.startswith((f"{n}:", f"{n} (")) for n in self.lane_models)
            what = "lane model" if lane or not self.lane_models else "model"
            out.append(f"ERROR: {what} not restored: {failure}")
        out.extend(f"ERROR: model the bench loaded is still resident: {x}" for x in self.leftover)
        return out

    def summary(self) -> list[str]:
        """What a user reads on screen after the bench (empty when nothing changed)."""
        out = [f"put back {x}" for x in self.restored]
        out += [f"unloaded {x} (the bench loaded it)" for x in self.unloaded]
        out += [f"kept {x} loaded, as asked" for x in self.kept_loaded]
        out += list(self.lane_changed)
        out += [f"left {x} unloaded: its own keep-alive ran out during the bench" for x in self.expired]
        return out + list(self.notes)

    def merge(self, other: "LaneRestore") -> None:
        for name in ("untouched", "restored", "expired", "failed", "unloaded", "kept_loaded", "leftover", "notes",
                     "lane_changed"):
            getattr(self, name).extend(getattr(other, name))
        self.lane_models |= other.lane_models
