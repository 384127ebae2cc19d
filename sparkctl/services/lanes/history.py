"""Lane history from the owned state file: what a lane serves since when, and what a
rollback goes back to. Pure over a statefile.OwnedState."""

from __future__ import annotations

from sparkctl.core.names import same_model
from sparkctl.statefile import HistoryEntry, OwnedState


class NothingToRollBack(Exception):
    """The lane has no promotion left to undo (one line for the user)."""


def lane_entries(state: OwnedState, lane: str) -> list[HistoryEntry]:
    return [h for h in state.history if h.lane == lane]


def current_entry(state: OwnedState, lane: str, model: str) -> HistoryEntry | None:
    """The newest change that put `model` on `lane` (None: sparkctl never did)."""
    for h in reversed(lane_entries(state, lane)):
        if same_model(h.model, model):
            return h
    return None


def rollback_target(state: OwnedState, lane: str, current: str) -> HistoryEntry:
    """The promotion a rollback of `lane` undoes: the newest one not already undone. Its
    `previous` is the model the rollback loads. Rollbacks stack: after A -> B -> C, one
    rollback gives B, a second A (promote again to go forward)."""
    entries = lane_entries(state, lane)
    undone = {h.undoes for h in entries if h.action == "rollback"}
    for h in reversed(entries):
        if h.action != "promote" or h.seq in undone:
            continue
        if not same_model(h.model, current):
            raise NothingToRollBack(
                f"lane {lane} serves {current}, but sparkctl's last promotion of it set {h.model} "
                f"(your sparkctl.toml changed it since): nothing to roll back")
        if not h.previous:
            raise NothingToRollBack(f"lane {lane} had no model before {h.model} was promoted")
        return h
    raise NothingToRollBack(f"lane {lane} has no promotion to roll back "
                            f"(its model {current} was not set by sparkctl promote)")
