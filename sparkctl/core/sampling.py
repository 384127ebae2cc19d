"""The sampling a request really ran with, and what changed between two runs.

A quality score depends on more than the options a client sends: Ollama layers a request's
options over the model's Modelfile PARAMETERs over its own DefaultOptions (api/types.go),
and those defaults change between versions. Ollama 0.32.10 stopped adding repeat_penalty 1.1
to every request whose model sets none (commit 6a261db7d, "api: stop applying
repeat_penalty 1.1 to models that don't set one"): the same eval on 0.32.9 and 0.32.10 ran
different samplers. An eval therefore records what it sent and what ran: the runner's own
/slots `params` where it can be read (core/runner_facts.recent_sampling), else the layering
worked out here, said to be inferred. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sparkctl.core.engine_identity import version_at_least
from sparkctl.core.runner_facts import SAMPLING_KEYS

REPEAT_PENALTY_DROPPED = (0, 32, 10)  # the first Ollama whose default repeat_penalty is 1.0


def ollama_defaults(version: str) -> dict[str, Any]:
    """api.DefaultOptions()'s sampling of that Ollama version (unparsable: the newest's)."""
    old = bool(version) and not version_at_least(version, REPEAT_PENALTY_DROPPED) and version_at_least(version, (0,))
    return {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0, "typical_p": 1.0,
            "repeat_penalty": 1.1 if old else 1.0, "repeat_last_n": 64, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "seed": -1}


def parse_parameters(text: str) -> dict[str, Any]:
    """The sampling keys of /api/show's `parameters` (one `name value` a line, as `ollama
    show --parameters` prints them); other keys (stop, num_ctx) are left out."""
    out: dict[str, Any] = {}
    for line in (text or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name in SAMPLING_KEYS:
            out[name] = _number(value.strip())
    return out


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip('"')


def ollama_effective(version: str, model_params: Mapping[str, Any], sent: Mapping[str, Any]) -> dict[str, Any]:
    """What Ollama sends its runner: its defaults, under the model's parameters, under the
    request's options (only the sampling keys)."""
    out = ollama_defaults(version)
    out.update({k: v for k, v in model_params.items() if k in SAMPLING_KEYS})
    out.update({k: v for k, v in sent.items() if k in SAMPLING_KEYS})
    return out


def canonical(d: Mapping[str, Any]) -> str:
    """One JSON text per sampling, keys sorted, numbers tidied (1.100000023841858 -> 1.1),
    so that two runs' settings compare as strings."""
    return json.dumps({k: _tidy(d[k]) for k in sorted(d)}, separators=(",", ":"))


def _tidy(x: Any) -> Any:
    """A float as it was meant (float32's 1.100000023841858 is 1.1); ints stay ints. Values
    compare by number, so 0 sent and 0.0 run are the same."""
    return round(x, 4) if isinstance(x, float) else x


def parse(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """"repeat_penalty 1.1 -> 1.0" for every sampling key both runs recorded and that differs
    (a key one of them did not record is no change: an older run is not evidence)."""
    out = []
    for key in SAMPLING_KEYS:
        if key in before and key in after and _tidy(before[key]) != _tidy(after[key]):
            out.append(f"{key} {_tidy(before[key])} -> {_tidy(after[key])}")
    return out
