"""Workload profiles: what a sweep's requests ask for. Output predictability changes decode
speed under speculative decoding (the same model decoded ~85 tok/s on JSON and ~72 on
prose), so each profile is its own row and its own MLflow run.

Built in: prose (the configured [bench] prompt, so a sweep's prose row is the classic
bench), json, code and tool-call; `[bench.profiles.NAME]` adds more or replaces one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparkctl.config import BenchConfig, BenchProfile

DEFAULT_PROFILE = "prose"

_JSON_PROMPT = (
    "Return a JSON object describing three fictional weather stations. Each station has the keys "
    "\"name\" (string), \"latitude\" and \"longitude\" (numbers), \"elevation_m\" (integer), "
    "\"instruments\" (an array of strings) and \"readings\" (an array of five objects with \"hour\", "
    "\"temperature_c\", \"pressure_hpa\" and \"wind_kts\"). Output only the JSON."
)
_CODE_PROMPT = (
    "Write a Python module that implements an LRU cache class with get, put and delete, a "
    "thread-safe variant using a lock, type hints throughout, and pytest tests covering eviction "
    "order, capacity one, and concurrent access. Output only the code."
)
_TOOL_PROMPT = (
    "You can call one tool, get_forecast(city: string, days: integer, units: \"metric\"|\"imperial\"). "
    "A user asks: \"Will I need an umbrella in Lisbon over the next four days? Use Celsius.\" "
    "Reply with the tool call only, as a JSON object {\"name\": ..., \"arguments\": {...}}."
)
_TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": ["get_forecast"]},
        "arguments": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                           "units": {"type": "string", "enum": ["metric", "imperial"]}},
            "required": ["city", "days", "units"],
        },
    },
    "required": ["name", "arguments"],
}


@dataclass(frozen=True)
class Profile:
    name: str
    prompt: str
    num_predict: int
    format: str | dict | None = None  # sent to the engine as structured output
    # llama-benchy's pp: each measured request adds this many tokens of fresh text after the
    # (cached) context, sized per model from the depth calibration; 0: the prompt alone
    pp_tokens: int = 0
    # llama-benchy's prefix caching: before a cell's rounds, one request per concurrent slot
    # loads its context into the cache (not measured), so measured requests prefill only pp
    context_load: bool = False

    @property
    def format_text(self) -> str:
        if self.format is None:
            return "none"
        return self.format if isinstance(self.format, str) else json.dumps(self.format, sort_keys=True)


def builtin_profiles(b: BenchConfig) -> dict[str, Profile]:
    return {
        "prose": Profile("prose", b.prompt, b.num_predict),
        "json": Profile("json", _JSON_PROMPT, b.num_predict, "json"),
        "code": Profile("code", _CODE_PROMPT, b.num_predict),
        "tool-call": Profile("tool-call", _TOOL_PROMPT, min(b.num_predict, 256), _TOOL_SCHEMA),
    }


def _from_config(p: BenchProfile, b: BenchConfig) -> Profile:
    fmt: str | dict | None = p.format
    if isinstance(fmt, str) and fmt != "json":
        fmt = json.loads(fmt)
    return Profile(p.name, p.prompt, p.num_predict or b.num_predict, fmt)


def available(b: BenchConfig) -> dict[str, Profile]:
    out = builtin_profiles(b)
    for p in b.profiles:
        out[p.name] = _from_config(p, b)
    return out


def resolve(names: str, b: BenchConfig, num_predict: int | None = None, prompt: str | None = None) -> list[Profile]:
    """`prose,json` or `all` -> profiles, in the order given. `num_predict`/`prompt` (the
    command line's --num-predict/--prompt) override every profile's / the prose prompt.
    Raises ValueError naming the profiles there are."""
    known = available(b)
    wanted = list(known) if names.strip() == "all" else [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        raise ValueError("--profile: empty list")
    out = []
    for n in dict.fromkeys(wanted):
        if n not in known:
            from sparkctl.core.arena import by_name

            if by_name(n) is not None:  # the TUI's sweep form: a published grid runs from the CLI
                raise ValueError(f"--profile: {n} is Spark Arena's whole grid: run it with "
                                 f"`sparkctl sweep MODEL --profile {by_name(n).name}`")
            raise ValueError(f"--profile: unknown profile {n!r}; known: {', '.join(known)}, all")
        p = known[n]
        if num_predict is not None:
            p = Profile(p.name, p.prompt, num_predict, p.format)
        if prompt is not None and n == "prose":
            p = Profile(p.name, prompt, p.num_predict, p.format)
        out.append(p)
    return out


# The instruction after an Arena cell's context and pp text (llama-benchy's prompts are text
# to process, not questions: any fixed instruction keeps the answer running to tg tokens).
ARENA_INSTRUCTION = "Continue the record above in the same style, one entry after another."


def arena(profile) -> Profile:
    """The prompt profile of a Spark Arena grid (core.arena.ArenaProfile): pp tokens of fresh
    text per request, tg tokens out, context loaded first when the profile caches prefixes."""
    return Profile(profile.name, ARENA_INSTRUCTION, profile.tg, None, pp_tokens=profile.pp,
                   context_load=profile.prefix_caching)
