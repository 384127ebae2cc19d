"""What a run's detail shows below its repetitions, read from its artifacts (blocking:
called from the detail's worker thread): for a bench, the GPU samples during its
requests and the first repetition's output; for an eval, the items with their verdicts.

Artifacts hold text a model or another user wrote: every string from them goes through
core/termtext.py before it is drawn (Textual passes escape sequences to the terminal)."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from sparkctl.core.termtext import safe_line, safe_text

OUTPUT_CHARS = 600
ITEMS_SHOWN = 40


def _gpu(store: Any, run_id: str) -> Text | None:
    try:
        samples = json.loads(store.read_artifact(run_id, "gpu_samples.json"))
    except Exception:
        return None
    t = Text()
    t.append("GPU samples: ", style="bold")
    if not samples:
        t.append("none (no NVML on the engine's GPU)")
        return t

    def values(key: str) -> list[float]:
        return [float(s[key]) for s in samples if isinstance(s.get(key), (int, float))]

    parts = [f"{len(samples)} over {samples[-1].get('t_s', 0):.1f} s"]
    for key, label, unit, pick in (("power_w", "power", "W", "mean"), ("temperature_c", "temp", "°C", "max"),
                                   ("sm_clock_mhz", "SM clock", "MHz", "min"), ("util_pct", "util", "%", "mean")):
        v = values(key)
        if v:
            x = sum(v) / len(v) if pick == "mean" else max(v) if pick == "max" else min(v)
            parts.append(f"{label} {pick} {x:.0f} {unit}")
    reasons = sorted({safe_line(r) for s in samples for r in (s.get("throttle") or [])})
    parts.append("throttle " + (", ".join(reasons) if reasons else "none"))
    t.append(" · ".join(parts))
    return t


def _output(store: Any, run_id: str) -> Text | None:
    try:
        outputs = json.loads(store.read_artifact(run_id, "outputs.json"))
    except Exception:
        return None
    if not outputs:
        return None
    first = outputs[0]
    t = Text()
    t.append("\noutput (rep 1): ", style="bold")
    if first.get("thinking"):
        t.append(safe_text(first["thinking"])[:OUTPUT_CHARS // 2].strip() + "… ", style="dim italic")
    body = safe_text(first.get("output") or "").strip()
    t.append(body[:OUTPUT_CHARS] + ("…" if len(body) > OUTPUT_CHARS else ""))
    return t


def _items(store: Any, run_id: str) -> Text | None:
    try:
        lines = store.read_artifact(run_id, "items.jsonl").splitlines()
    except Exception:
        return None
    try:
        rows = [json.loads(line) for line in lines if line.strip()]
    except ValueError:
        return Text("items.jsonl could not be read", style="yellow")
    from sparkctl.core.suites.cells import DNF, ERROR, GLYPH, LEGEND, PASS, state_of

    style = {PASS: "green", DNF: "bold magenta", ERROR: "bold yellow"}
    t = Text()
    t.append("items: ", style="bold")
    for r in rows:
        state = state_of(r)
        t.append(GLYPH[state], style=style.get(state, "red"))
    t.append(f"  ({LEGEND})", style="dim")
    for r in rows[:ITEMS_SHOWN]:
        v = r.get("verdict") or {}
        mark = {DNF: "DNF", ERROR: "ERR", PASS: "pass"}.get(state_of(r), "wrong")
        got = safe_line(v.get("strict")) if "strict" in v else ""
        t.append(f"\n  {safe_line(r.get('item_id')):>5} {mark:<5} {r.get('tokens') or 0:>6} tok {r.get('seconds') or 0:>7.1f} s  ")
        if got:
            t.append(f"answer {got} (gold {safe_line(v.get('gold'))})  ")
        t.append(" ".join(safe_text(r.get("response") or "").split())[:60], style="dim")
    if len(rows) > ITEMS_SHOWN:
        t.append(f"\n  … {len(rows) - ITEMS_SHOWN} more in items.jsonl (mlflow ui)", style="dim")
    return t


def _engine(row: Any) -> Text | None:
    """The engine's identity as recorded (runner, its build, flash attention, KV cache type)."""
    from sparkctl.core import engine_identity as ei

    facts = ei.parse_compact(getattr(row, "engine_identity", "") or "")
    if not facts:
        return None
    t = Text()
    t.append("engine: ", style="bold")
    t.append(" · ".join(f"{ei.LABELS[k]} {safe_line(facts[k])}" for k in ei.COMPARED if k in facts))
    if getattr(row, "spec_acceptance_pct", None) is not None:
        t.append(f" · speculative acceptance {row.spec_acceptance_pct:.1f}%")
    t.append("\n")
    return t


def run_extra(store: Any, row: Any) -> Text | None:
    if row.kind == "eval":
        return _items(store, row.run_id)
    parts = [p for p in (_engine(row), _gpu(store, row.run_id), _output(store, row.run_id)) if p is not None]
    if not parts:
        return None
    out = Text()
    for p in parts:
        out.append_text(p)
    return out
