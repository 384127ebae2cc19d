"""One context per decision: the num_ctx every model of a bench or eval runs at, chosen
for the user.

A run is comparable to another only at the same context (core.workload). Benching each
model at a context of its own (a resident lane model at its own, a contender at
``[bench] num_ctx``) made the default path end in "not like for like": production resident
at 4096, a contender measured at 8192, and the head to head and the quality gate refusing
the pair. So a bench or eval of several models runs them all at one context:

1. the resident context of the lane model among them (the first lane, in the config's
   order, whose model is resident): that model is measured without a reload, the others
   like for like with it;
2. none among them, but a contender among them (a model marked to be evaluated for a
   lane): the context the lane model it will be compared with is resident at, so its runs
   pair with the lane model's. That is the lane recorded with its mark (the Models
   screen's load asks for it); a mark without one (an older state file) falls back to the
   first lane whose model is resident, and a recorded lane whose model is not resident
   gives no context here (another lane's would pair it with the wrong model);
3. every model resident at one context: that one (nothing is reloaded);
4. else ``[bench] num_ctx``.

``--ctx N`` (the num_ctx setting on the Bench and Eval screens) overrides it. The CLI and
the screens ask this one function, so ``sparkctl bench A B`` and the Bench screen pick the
same context, and the screens say it before the run. Pure: the caller reads what is
resident (``/api/ps``, or the dashboard's last sample).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparkctl.core.names import model_key

LANE = "lane"  # a lane model among them is resident at it
CONTENDER = "contender"  # the lane model a contender is compared with is resident at it
RESIDENT = "resident"  # every model is resident at it
CONFIG = "config"  # [bench] num_ctx
EXPLICIT = "explicit"  # --ctx / the num_ctx setting


@dataclass(frozen=True)
class ContextChoice:
    num_ctx: int
    source: str  # LANE, CONTENDER, RESIDENT, CONFIG or EXPLICIT
    lane: str = ""  # the lane whose model's context it is (LANE, CONTENDER)
    model: str = ""  # that model
    note: str = ""  # said before the run, recorded with it ("" for CONFIG and EXPLICIT)

    @property
    def why(self) -> str:
        """A few words for a settings line: where the number comes from ("" for the config's)."""
        if self.source in (LANE, CONTENDER):
            return f"{self.lane}'s"
        return {RESIDENT: "as resident", EXPLICIT: "given"}.get(self.source, "")


def choose_context(models: Iterable[str], lanes: Mapping[str, str], contenders: Iterable[str],
                   resident: Mapping[str, int | None], default: int,
                   contender_lanes: Mapping[str, str] | None = None) -> ContextChoice:
    """The one num_ctx for `models` (rules above). `lanes`: lane -> model, in the config's
    order; `contenders`: models marked contender (names or model keys); `resident`: model
    key -> the context it is resident at (None or absent: unknown, not resident);
    `contender_lanes`: contender (name or key) -> the lane it is evaluated for."""
    models = list(dict.fromkeys(models))
    keys = {model_key(m): m for m in models}
    marked = {model_key(c) for c in contenders}
    own_lanes = {model_key(c): lane for c, lane in (contender_lanes or {}).items() if lane in lanes}
    many = len(models) > 1

    def ctx_of(model: str) -> int | None:
        ctx = resident.get(model_key(model))
        return int(ctx) if ctx else None

    for lane, lane_model in lanes.items():
        ctx = ctx_of(lane_model)
        if model_key(lane_model) in keys and ctx:
            others = [m for k, m in keys.items() if k != model_key(lane_model)]
            tail = (f"; {' and '.join(others)} run{'s' if len(others) == 1 else ''} at it too, like for like"
                    if others else "")
            return ContextChoice(ctx, LANE, lane, lane_model, (
                f"num_ctx {ctx}: lane {lane}'s {lane_model} is resident at that context, so it is measured "
                f"without a reload{tail} ([bench] num_ctx is {default}; --ctx sets another)"))
    in_lanes = {model_key(m) for m in lanes.values()}
    if not keys.keys() & in_lanes and keys.keys() & marked:
        # the lane each contender among them is evaluated for, in the config's order; none
        # recorded: any lane (the first resident one)
        wanted = {own_lanes[k] for k in keys.keys() & marked if k in own_lanes}
        for lane, lane_model in lanes.items():
            ctx = ctx_of(lane_model)
            if ctx and (not wanted or lane in wanted):
                who = " and ".join(m for k, m in keys.items())
                return ContextChoice(ctx, CONTENDER, lane, lane_model, (
                    f"num_ctx {ctx}: the context lane {lane}'s {lane_model} is resident at, so {who} "
                    f"compare{'' if many else 's'} like for like with it ([bench] num_ctx is {default}; "
                    "--ctx sets another)"))
    contexts = {ctx_of(m) for m in models}
    if len(contexts) == 1 and None not in contexts:
        ctx = contexts.pop()
        if ctx != default:
            what = "every model is" if many else f"{models[0]} is"
            return ContextChoice(ctx, RESIDENT, note=(
                f"num_ctx {ctx}: {what} resident at that context, so nothing is reloaded "
                f"([bench] num_ctx is {default}; --ctx sets another)"))
        return ContextChoice(ctx, RESIDENT)
    return ContextChoice(default, CONFIG)


def resident_contexts(resident: Iterable) -> dict[str, int | None]:
    """model key -> context, from resident models (core.snapshots.ResidentModel)."""
    return {model_key(r.name): r.context_length for r in resident}
