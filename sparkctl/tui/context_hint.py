"""The context a bench or eval on the dashboard's engine will run at, said on the Bench and
Eval screens before the run: the same choice the runner makes (services/bench/context.py),
from the app's last sample of what is resident (no request here; the runner asks the engine
again when it starts)."""

from __future__ import annotations

from sparkctl.services.bench.context import EXPLICIT, ContextChoice, choose_context, resident_contexts


def predicted_context(app, models: list[str], explicit: int | None) -> ContextChoice:
    cfg = app.config
    if explicit is not None:
        return ContextChoice(explicit, EXPLICIT)
    report = getattr(app, "report", None)
    resident = report.engine.resident if report is not None and report.engine.reachable else ()
    return choose_context(models, cfg.lanes, getattr(app, "contenders", ()), resident_contexts(resident),
                          cfg.bench.num_ctx, getattr(app, "contender_lanes", None))


def context_label(choice: ContextChoice) -> str:
    """"num_ctx 4096 (production's)", for a settings line."""
    why = choice.why
    return f"num_ctx {choice.num_ctx}" + (f" ({why})" if why and choice.source != EXPLICIT else "")


def explicit_ctx(raw: str) -> int | None:
    """The num_ctx field: empty or "auto" is the choice above; a number is that context.
    ValueError past what an engine can take (core/limits.py MAX_NUM_CTX), as the CLI's --ctx."""
    from sparkctl.core.limits import MAX_NUM_CTX

    raw = raw.strip().lower()
    if raw in ("", "auto"):
        return None
    value = int(raw)
    if value > MAX_NUM_CTX:
        raise ValueError(f"num_ctx must be at most {MAX_NUM_CTX}")
    return value


def ctx_field(raw: str) -> int | None:
    """The num_ctx field as the Bench and Eval screens take it: explicit_ctx, at least 256.
    ValueError carries the one line the screen shows, naming what was typed."""
    from sparkctl.core.limits import MAX_NUM_CTX

    try:
        num_ctx = explicit_ctx(raw)
        if num_ctx is not None and num_ctx < 256:
            raise ValueError
    except ValueError:
        typed = raw.strip()
        shown = repr(typed) if len(typed) <= 24 else f"a {len(typed)}-character value"
        raise ValueError(f"num_ctx must be a whole number from 256 to {MAX_NUM_CTX}, or empty for one "
                         f"context chosen for every model, not {shown}") from None
    return num_ctx
