"""Lanes: promote a contender into a lane, roll back, list lanes; the lane change goes to
sparkctl's own state file (sparkctl/statefile.py), never the user's sparkctl.toml."""

from sparkctl.services.lanes.history import NothingToRollBack, rollback_target
from sparkctl.services.lanes.hook import HookResult, run_hook
from sparkctl.services.lanes.listing import LaneRow, lane_rows
from sparkctl.services.lanes.promote import (
    KIND_PROMOTION,
    LaneError,
    PromotionOutcome,
    PromotionPlan,
    PromotionRefused,
    execute,
    plan_promotion,
    plan_rollback,
    promotion_record,
    switch_lock,
)

__all__ = [
    "KIND_PROMOTION", "HookResult", "LaneError", "LaneRow", "NothingToRollBack", "PromotionOutcome",
    "PromotionPlan", "PromotionRefused", "execute", "lane_rows", "plan_promotion", "plan_rollback",
    "promotion_record", "rollback_target", "run_hook", "switch_lock",
]
