"""What every model action shares: name lookups with "did you mean", lane labels, and whether
the engine runs on this machine. (The errors they raise are in errors.py.)"""

from __future__ import annotations

import difflib
import re

from sparkctl.config import Config
from sparkctl.core.names import same_model
from sparkctl.engines.base import ModelNotFound


def _find(models, name: str):
    for m in models:
        if same_model(m.name, name):
            return m
    return None


def close_names(typed: str, names, n: int = 3) -> list[str]:
    """Local names a mistyped one probably meant, best first: "qwen3:8" -> qwen3:8b,
    "qwen3" -> qwen3:8b, qwen3:30b-a3b (same model, any tag), then difflib's close matches."""
    low = typed.strip().lower()
    short = [str(x) for x in names]
    has_tag = ":" in low.rsplit("/", 1)[-1]
    base, _, tag = low.rpartition(":") if has_tag else (low, "", "")
    out: list[str] = []
    for name in short:
        nl = name.lower()
        if nl == low:
            continue
        if tag in ("", "latest"):
            if nl.split(":", 1)[0] == base:  # the same model under another tag
                out.append(name)
        elif nl.startswith(low):  # a tag cut short: "qwen3:8" for "qwen3:8b"
            out.append(name)
    squeezed = "".join(low.split())
    for name in difflib.get_close_matches(squeezed, [x.lower() for x in short], n=n, cutoff=0.6):
        real = next(x for x in short if x.lower() == name)
        if real not in out and real.lower() != low:
            out.append(real)
    return out[:n]


def did_you_mean(typed: str, names) -> str:
    """ "; did you mean qwen3:8b?" (or "" when nothing is close)."""
    near = close_names(typed, names)
    if not near:
        return ""
    return "; did you mean " + " or ".join(near) + "?"


def not_found(name: str, local, message: str | None = None) -> ModelNotFound:
    """Ollama's "model 'x' not found" (the engine's own words when there are some), with
    the close local names."""
    message = message or f"model '{name}' not found"
    return ModelNotFound(f"{message}{did_you_mean(name, [m.name for m in local])}", 404)


def lane_map(cfg: Config) -> dict[str, str]:
    """model name -> lane, as judge_fit wants it."""
    return {model: lane for lane, model in cfg.lanes.items()}


def lane_label(cfg: Config, name: str) -> str:
    lane = cfg.lane_of(name)
    return f"{name} (lane {lane})" if lane else name


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")


def _is_local(host: str) -> bool:
    m = re.match(r"^(?:https?://)?(\[[^\]]+\]|[^:/]+)", host.strip())
    name = m.group(1) if m else ""
    if name in LOCAL_HOSTS:
        return True
    try:
        import socket

        return name == socket.gethostname()
    except OSError:
        return False

