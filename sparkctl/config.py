"""Load, validate and save sparkctl.toml.

Every problem becomes one ConfigError line that names the file, the key (with its line
when we can find it) and what was expected, so the CLI can print it and exit 2.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from sparkctl import paths
from sparkctl.core.limits import MAX_CONCURRENCY, MAX_REPS, MAX_WARMUP
from sparkctl.core.names import InvalidModelName, model_key, validate_model_name
from sparkctl.core.textfile import UnreadableFile, read_text

DEFAULT_HOST = "http://127.0.0.1:11434"

DEFAULT_PROMPT = (
    "You are writing for engineers who run language models on a single workstation with "
    "unified memory. Explain, in plain prose of about four paragraphs, why token generation "
    "on such a machine is limited by memory bandwidth rather than by arithmetic, how the "
    "size of the weights and the quantization format change the number of bytes that must be "
    "read for every generated token, and why the key-value cache grows with the context "
    "length. Then describe how an engineer should measure decode speed fairly when comparing "
    "two models: what to hold fixed (prompt, context length, sampling settings, engine "
    "version), why a warm-up request matters, how many repetitions are enough, and which "
    "signs suggest that a measurement is not valid, such as a model that spilled part of its "
    "layers to the CPU, a reload between requests, thermal throttling, or a prompt that was "
    "silently truncated. Finish with a short checklist the engineer can follow before "
    "trusting a number. Do not use bullet points except in the final checklist, and do not "
    "include code."
)


class ConfigError(Exception):
    """A bad config file: one line, naming file, key and what was expected."""


@dataclass(frozen=True)
class EngineConfig:
    kind: str = "ollama"
    host: str = DEFAULT_HOST
    timeout_s: float = 5.0
    # The server's own settings, stated for an engine whose process and unit sparkctl cannot
    # read (another machine, another user without a systemd unit): used only then, in place
    # of Ollama's defaults. 0 / "" = not stated. See docs/engines.md.
    context_length: int = 0  # OLLAMA_CONTEXT_LENGTH
    num_parallel: int = 0  # OLLAMA_NUM_PARALLEL
    kv_cache_type: str = ""  # OLLAMA_KV_CACHE_TYPE
    flash_attention: str = ""  # OLLAMA_FLASH_ATTENTION: "on", "off" or "auto"
    keep_alive: str = ""  # OLLAMA_KEEP_ALIVE
    max_loaded_models: int = 0  # OLLAMA_MAX_LOADED_MODELS

    def stated_settings(self) -> dict[str, int | str]:
        """The server settings this section states (core/engine_settings.py's names)."""
        return {k: getattr(self, k) for k in ("context_length", "num_parallel", "kv_cache_type",
                                              "flash_attention", "keep_alive", "max_loaded_models")
                if getattr(self, k) not in (0, "")}


@dataclass(frozen=True)
class NamedEngineConfig:
    """An extra engine for benches, e.g. llama.cpp's server: [engines.NAME]."""

    name: str
    kind: str = "openai"
    url: str = ""
    model: str = ""
    timeout_s: float = 5.0


@dataclass(frozen=True)
class HostConfig:
    """Another sparkctl host the fleet view reads over ssh: [hosts.NAME]."""

    name: str
    ssh: str = ""  # ssh destination ("user@spark-01", an alias of the ssh config); "" = the name
    engine: str = ""  # the engine URL as seen from that host ("" = that host's own config)
    sparkctl: str = ""  # the command there ("" = [fleet] sparkctl)
    lanes: dict[str, str] = field(default_factory=dict)  # what it should serve, over its own [lanes]

    @property
    def destination(self) -> str:
        return self.ssh or self.name


@dataclass(frozen=True)
class FleetConfig:
    refresh_s: float = 5.0  # the fleet screen asks every host again this often
    timeout_s: float = 10.0  # per host: ssh and `sparkctl status --json` together
    sparkctl: str = "sparkctl"  # the command on every host (a host's own `sparkctl` key wins)
    ssh_config: str = ""  # an ssh config file for ssh -F ("" = ssh's own, ~/.ssh/config)
    ssh_hosts: str = ""  # a glob of Host names in that ssh config to add as hosts ("spark-*")


@dataclass(frozen=True)
class BudgetConfig:
    reserve_gib: float = 8.0
    warn_gib: float = 16.0


@dataclass(frozen=True)
class UiConfig:
    refresh_s: float = 1.0
    history_s: int = 300
    theme: str = "sparkctl-dark"


@dataclass(frozen=True)
class TrackingConfig:
    uri: str = ""
    experiment: str = "sparkctl-bench"
    # a tracking server: the most one write or read may take, all its requests together
    timeout_s: float = 60.0


@dataclass(frozen=True)
class ModelsConfig:
    keep_alive: str | int | float = "-1"  # see core.keepalive: a number is seconds, -1 forever
    num_ctx: int = 0  # 0: let the engine choose (Ollama: by memory size)
    registry: str = ""  # base URL for names without a host ("": https://registry.ollama.ai)
    # the most a fit check may spend reading the registry (manifest, config blob and GGUF
    # header together): a registry that drips its answer is given up on, never waited out
    registry_timeout_s: float = 60.0


@dataclass(frozen=True)
class BenchProfile:
    """A workload profile from [bench.profiles.NAME]: its own prompt and token ceiling, and
    for structured output a format ("json", or a JSON schema as JSON text)."""

    name: str
    prompt: str
    num_predict: int | None = None  # None: [bench] num_predict
    format: str | None = None


@dataclass(frozen=True)
class BenchConfig:
    prompt: str = DEFAULT_PROMPT
    num_predict: int = 512
    temperature: float = 0.0
    seed: int = 42
    num_ctx: int = 8192
    warmup: int = 1
    reps: int = 5
    timeout_s: float = 900.0
    mode: str = "beside"
    keep_alive: str | int | float = "30m"
    bandwidth_gbps: float = 273.0
    reload_threshold_s: float = 1.0
    think: bool = True
    # models the bench loaded stay resident after it (default: unloaded, so the residency
    # set after a bench is the set before it)
    keep_loaded: bool = False
    profiles: tuple[BenchProfile, ...] = ()  # [bench.profiles.NAME], beside the built-in ones


@dataclass(frozen=True)
class EvalConfig:
    n: int = 100  # items per suite; `--n all` on the command line for the whole suite
    seed: int = 1234  # picks the sample: the same seed gives every model the same items
    timeout_s: float = 900.0  # per-item ceiling; past it the item is cancelled and scored DNF
    concurrency: int = 1  # items in flight at once (Ollama runs them in parallel only with NUM_PARALLEL > 1)
    num_predict: int = 4096  # token ceiling per answer; thinking models need room
    think: bool = True  # let thinking models think; the answer is scored on the content only
    suites_dir: str = ""  # empty: the data dir's suites/ (filled by `sparkctl suites pull`)


def _default_margins() -> dict[str, float]:
    from sparkctl.core.margins import DEFAULT_MARGINS_PP

    return dict(DEFAULT_MARGINS_PP)


@dataclass(frozen=True)
class PromoteConfig:
    # percentage points a contender may be worse than the incumbent per suite: promotion
    # needs the interval's lower bound above -margin (core/noninferiority.py says why 2 and 3)
    quality_margin_pp: dict[str, float] = field(default_factory=_default_margins)
    # optional limits on what a faster contender may cost (None: no limit, the row is only
    # named): compare's recommendation says keep when the interval lies wholly beyond one
    max_ttft_increase_pct: float | None = None
    max_memory_increase_pct: float | None = None

    def limits(self) -> dict[str, float]:
        """The limits set, keyed as services.runs.decision reads them."""
        out = {"ttft_pct": self.max_ttft_increase_pct, "memory_pct": self.max_memory_increase_pct}
        return {k: float(v) for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Config:
    engine: EngineConfig = EngineConfig()
    lanes: dict[str, str] = field(default_factory=dict)
    budget: BudgetConfig = BudgetConfig()
    ui: UiConfig = UiConfig()
    tracking: TrackingConfig = TrackingConfig()
    models: ModelsConfig = ModelsConfig()
    bench: BenchConfig = BenchConfig()
    eval: EvalConfig = EvalConfig()
    promote: PromoteConfig = PromoteConfig()
    engines: dict[str, NamedEngineConfig] = field(default_factory=dict)
    fleet: FleetConfig = FleetConfig()
    hosts: dict[str, HostConfig] = field(default_factory=dict)
    source: str = "built-in defaults"
    # [lanes] on_change: a shell command run after a promotion or rollback ("" = none).
    # A reserved key of [lanes], so no lane can be named "on_change".
    lanes_on_change: str = ""
    # [lanes.keep_alive]: lane -> the keep-alive (session length) the user's router gives
    # that lane's model. A lane model a bench had to unload comes back with it (with none,
    # the engine's default). A reserved key of [lanes] too.
    lane_keep_alive: dict[str, str | int | float] = field(default_factory=dict)
    # "section.key" -> the file it came from, for every key a file set (absent: built-in
    # default). Lanes and the theme may come from the owned state file (statefile.py).
    sources: dict[str, str] = field(default_factory=dict)
    state_file: str = ""  # the owned file layered over `source` ("" when none was read)
    contenders: tuple[str, ...] = ()  # models the TUI marked contender (from the owned file)
    # contender -> the lane it is evaluated for (its context pairs with that lane model's)
    contender_lanes: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # layering notes: an owned value the user's file overrides

    def lane_of(self, model: str) -> str | None:
        """The lane a model serves, matching by Ollama's name rules (implicit ':latest')."""
        want = model_key(model)
        for lane, name in self.lanes.items():
            if model_key(name) == want:
                return lane
        return None

    def lane_models(self) -> set[str]:
        """Lane models as comparison keys (core.names.model_key)."""
        return {model_key(m) for m in self.lanes.values()}


# ---- validation ------------------------------------------------------------------------

Check = Callable[[Any], str | None]  # returns what was expected, or None when fine


# A config is a few KiB; a file far larger is refused before it is parsed.
CONFIG_MAX_BYTES = 1 << 20

# TOML integers are unbounded in Python's reader; everything a number here sizes or is sent
# as (an engine's option, a count) is 64-bit at most.
_INT64 = 2**63


def _number(minimum: float | None = None, exclusive: bool = False, integer: bool = False,
            maximum: float | None = None) -> Check:
    """A number check. nan and inf are refused for every key: TOML allows them, and
    nan compares false with every bound, so a nan timeout waited forever."""
    def check(v: Any) -> str | None:
        kind = "an integer" if integer else "a number"
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type:
            return kind
        bound = "" if minimum is None else f" {'>' if exclusive else '>='} {minimum:g}"
        if isinstance(v, float) and not math.isfinite(v):
            return f"a finite number{bound}"
        if isinstance(v, int) and not -_INT64 <= v < _INT64:
            return f"{kind}{bound} that fits in 64 bits"
        if maximum is not None and v > maximum:
            low = "" if minimum is None else f"from {minimum:g} "
            return f"{kind} {low}up to {maximum:g}"
        if minimum is not None and (v <= minimum if exclusive else v < minimum):
            return f"{kind} {'>' if exclusive else '>='} {minimum:g}"
        return None

    return check


def _string(choices: tuple[str, ...] | None = None, pattern: str | None = None, what: str = "") -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, str):
            return "a string"
        if choices is not None and v not in choices:
            return "one of " + ", ".join(repr(c) for c in choices)
        if pattern is not None and not re.fullmatch(pattern, v):
            return what or f"a string matching {pattern}"
        return None

    return check


def _keep_alive(v: Any) -> str | None:
    from sparkctl.core.keepalive import HINT, parse_keep_alive

    try:
        parse_keep_alive(v)
    except ValueError:
        return HINT
    return None


def _server_keep_alive(v: Any) -> str | None:
    """[engine] keep_alive: OLLAMA_KEEP_ALIVE as the server has it ("" = not stated)."""
    if not isinstance(v, str):
        return 'a duration string like "5m" or "-1" (forever)'
    return None if v == "" else _keep_alive(v)


def _boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else "true or false"


def _margins(v: Any) -> str | None:
    """A margin in percentage points for every suite, or a table suite -> margin."""
    from sparkctl.core.margins import DEFAULT_MARGINS_PP

    expected = ("a margin in percentage points from 0 to 50, or a table like { gsm8k = 2.0, ifeval = 3.0 } "
                f"(suites: {', '.join(DEFAULT_MARGINS_PP)})")
    values = v.values() if isinstance(v, dict) else [v]
    if isinstance(v, dict) and (not v or any(k not in DEFAULT_MARGINS_PP for k in v)):
        return expected
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 50 for x in values):
        return expected
    return None


_URL = r"(https?://)?[A-Za-z0-9._\-\[\]:]+(:\d+)?(/.*)?"

SECTIONS: dict[str, tuple[type, dict[str, Check]]] = {
    "engine": (
        EngineConfig,
        {
            "kind": _string(("ollama",)),
            "host": _string(pattern=_URL, what="a URL like http://127.0.0.1:11434"),
            "timeout_s": _number(0, exclusive=True),
            "context_length": _number(0, integer=True),
            "num_parallel": _number(0, integer=True),
            "kv_cache_type": _string(("", "f16", "q8_0", "q4_0")),
            "flash_attention": _string(("", "on", "off", "auto")),
            "keep_alive": _server_keep_alive,
            "max_loaded_models": _number(0, integer=True),
        },
    ),
    "budget": (
        BudgetConfig,
        {"reserve_gib": _number(0), "warn_gib": _number(0)},
    ),
    "ui": (
        UiConfig,
        {
            "refresh_s": _number(0.1),
            "history_s": _number(10, integer=True),
            "theme": _string(pattern=r"[A-Za-z0-9_.\-]+", what="a theme name"),
        },
    ),
    "tracking": (
        TrackingConfig,
        {"uri": _string(), "experiment": _string(pattern=r".+", what="a non-empty name"),
         "timeout_s": _number(0, exclusive=True)},
    ),
    "models": (
        ModelsConfig,
        {
            "keep_alive": _keep_alive,
            "num_ctx": _number(0, integer=True),
            "registry": _string(pattern=_URL + "|", what="a URL like https://registry.ollama.ai"),
            "registry_timeout_s": _number(0, exclusive=True),
        },
    ),
    "bench": (
        BenchConfig,
        {
            "prompt": _string(pattern=r"(?s).*\S.*", what="a non-empty prompt"),
            "num_predict": _number(1, integer=True),
            "temperature": _number(0),
            "seed": _number(integer=True),
            "num_ctx": _number(256, integer=True),
            "warmup": _number(0, integer=True, maximum=MAX_WARMUP),
            "reps": _number(1, integer=True, maximum=MAX_REPS),
            "timeout_s": _number(0, exclusive=True),
            "mode": _string(("beside", "solo")),
            "keep_alive": _keep_alive,
            "bandwidth_gbps": _number(0, exclusive=True),
            "reload_threshold_s": _number(0),
            "think": _boolean,
            "keep_loaded": _boolean,
        },
    ),
    "eval": (
        EvalConfig,
        {
            "n": _number(1, integer=True),
            "seed": _number(integer=True),
            "timeout_s": _number(0, exclusive=True),
            "concurrency": _number(1, integer=True, maximum=MAX_CONCURRENCY),
            "num_predict": _number(1, integer=True),
            "think": _boolean,
            "suites_dir": _string(),
        },
    ),
    "promote": (
        PromoteConfig,
        {"quality_margin_pp": _margins, "max_ttft_increase_pct": _number(0),
         "max_memory_increase_pct": _number(0)},
    ),
    "fleet": (
        FleetConfig,
        {
            "refresh_s": _number(1),
            "timeout_s": _number(0, exclusive=True),
            "sparkctl": _string(pattern=r"\S+", what="a command without spaces"),
            "ssh_config": _string(),
            "ssh_hosts": _string(),
        },
    ),
}

NAMED_ENGINE_KEYS: dict[str, Check] = {
    "kind": _string(("openai", "ollama")),
    "url": _string(pattern=_URL, what="a URL like http://127.0.0.1:8080"),
    "model": _string(),
    "timeout_s": _number(0, exclusive=True),
}


# an ssh destination ([user@]host, an alias): never an option ("-oProxyCommand=...") or two words
_SSH_DEST = r"[A-Za-z0-9_.@\[\]:%+][A-Za-z0-9_.@\[\]:%+\-]*"

HOST_KEYS: dict[str, Check] = {
    "ssh": _string(pattern=_SSH_DEST, what="an ssh destination like alice@spark-01 (no spaces, not starting with '-')"),
    "engine": _string(pattern=_URL, what="a URL like http://127.0.0.1:11434"),
    "sparkctl": _string(pattern=r"\S+", what="a command without spaces"),
}


def _hosts(table: Any, origin: str, text: str) -> dict[str, HostConfig]:
    """[hosts.NAME] tables: ssh, engine, sparkctl, and a [hosts.NAME.lanes] table."""
    out: dict[str, HostConfig] = {}
    for hname, body in (table or {}).items():
        section = f"hosts.{hname}"
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", hname) or hname.startswith("-"):
            raise _fail(origin, text, section, None, "expected a host name of letters, digits, '.', '-' or '_'")
        if not isinstance(body, dict):
            raise _fail(origin, text, "hosts", hname, f"expected a table, got {_describe(body)}")
        values: dict[str, Any] = {}
        for key, value in body.items():
            if key == "lanes":
                if not isinstance(value, dict):
                    raise _fail(origin, text, section, key, f"expected a table of lane = model, got {_describe(value)}")
                for lane, model in value.items():
                    if not isinstance(model, str) or not model.strip():
                        raise _fail(origin, text, f"{section}.lanes", lane, f"expected a model name, got {_describe(model)}")
                    try:
                        validate_model_name(model.strip())
                    except InvalidModelName as exc:
                        raise _fail(origin, text, f"{section}.lanes", lane, str(exc)) from None
                values["lanes"] = {lane: m.strip() for lane, m in value.items()}
                continue
            if key not in HOST_KEYS:
                raise _fail(origin, text, section, key,
                            "unknown key; expected one of " + ", ".join(sorted([*HOST_KEYS, "lanes"])))
            expected = HOST_KEYS[key](value)
            if expected:
                raise _fail(origin, text, section, key, f"expected {expected}, got {_describe(value)}")
            values[key] = value
        out[hname] = HostConfig(name=hname, **values)
    return out


# Keys of [lanes] that are settings, not lane names.
LANES_RESERVED = ("on_change", "keep_alive")


def _lane_keep_alive(table: Any, origin: str, text: str) -> dict[str, str | int | float]:
    """[lanes.keep_alive]: lane -> keep-alive, each checked like every other keep-alive."""
    if not isinstance(table, dict):
        raise _fail(origin, text, "lanes", "keep_alive",
                    f"expected a table of lane = keep-alive ([lanes.keep_alive]), got {_describe(table)}")
    for lane, value in table.items():
        expected = _keep_alive(value)
        if expected:
            raise _fail(origin, text, "lanes.keep_alive", lane, f"expected {expected}, got {_describe(value)}")
    return dict(table)


def _line_of(text: str, section: str, key: str | None) -> int | None:
    """Best-effort line number of `key` inside `[section]` (tomllib reports none for values)."""
    lines = text.splitlines()
    in_section = section == ""
    header = re.compile(r"^\s*\[\s*" + re.escape(section) + r"\s*\]\s*(#.*)?$")
    any_header = re.compile(r"^\s*\[")
    for i, line in enumerate(lines, 1):
        if any_header.match(line):
            in_section = bool(header.match(line))
            if in_section and key is None:
                return i
            continue
        if in_section and key is not None and re.match(r"^\s*\"?" + re.escape(key) + r"\"?\s*=", line):
            return i
    return None


def _fail(origin: str, text: str, section: str, key: str | None, message: str) -> ConfigError:
    where = f"[{section}]" + (f" {key}" if key else "")
    line = _line_of(text, section, key)
    at = f"{origin}:{line}" if line else origin
    return ConfigError(f"{at}: {where}: {message}")


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        from sparkctl.core.redact import redact_uri

        v = redact_uri(v)  # a bad URL value may carry a password: never echo it
        return repr(v) if len(v) < 40 else repr(v[:37] + "...")
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, int) and len(str(v)) > 20:
        return f"a {len(str(v).lstrip('-'))}-digit number"
    return repr(v)


PROFILE_KEYS = ("prompt", "num_predict", "format")


def _bench_profiles(table: Any, origin: str, text: str) -> tuple[BenchProfile, ...]:
    """[bench.profiles.NAME] tables: prompt (required), num_predict, format ("json" or a
    JSON schema, as a table or as JSON text)."""
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise _fail(origin, text, "bench", "profiles", f"expected [bench.profiles.NAME] tables, got {_describe(table)}")
    out = []
    for pname, body in table.items():
        section = f"bench.profiles.{pname}"
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", pname):
            raise _fail(origin, text, section, None, "expected a profile name of letters, digits, '-' or '_'")
        if not isinstance(body, dict):
            raise _fail(origin, text, "bench.profiles", pname, f"expected a table, got {_describe(body)}")
        for key, value in body.items():
            if key not in PROFILE_KEYS:
                raise _fail(origin, text, section, key, "unknown key; expected one of " + ", ".join(PROFILE_KEYS))
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise _fail(origin, text, section, "prompt" if "prompt" in body else None,
                        "expected a non-empty prompt" + (f", got {_describe(prompt)}" if "prompt" in body else
                                                         " (missing key prompt)"))
        num_predict = body.get("num_predict")
        if num_predict is not None and (expected := _number(1, integer=True)(num_predict)):
            raise _fail(origin, text, section, "num_predict", f"expected {expected}, got {_describe(num_predict)}")
        fmt = body.get("format")
        if isinstance(fmt, dict):
            import json

            fmt = json.dumps(fmt, sort_keys=True)
        elif fmt is not None:
            ok = isinstance(fmt, str) and (fmt == "json" or fmt.lstrip().startswith("{"))
            if ok and fmt != "json":
                import json

                try:
                    ok = isinstance(json.loads(fmt), dict)
                except ValueError:
                    ok = False
            if not ok:
                raise _fail(origin, text, section, "format",
                            f"expected \"json\" or a JSON schema (a table or JSON text), got {_describe(fmt)}")
        out.append(BenchProfile(name=pname, prompt=prompt, num_predict=num_predict, format=fmt))
    return tuple(out)


def parse_config(text: str, origin: str = "<config>", env: dict[str, str] | None = None) -> Config:
    """Validate TOML text into a Config; raise ConfigError with a one-line message."""
    from sparkctl.core.safeload import Unparsable, load_toml

    env = os.environ if env is None else env
    try:
        raw = load_toml(text, max_bytes=CONFIG_MAX_BYTES)
    except Unparsable as exc:
        raise ConfigError(f"{origin}: cannot be read as a config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)"
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        at = f"{origin}:{m.group(1)}:{m.group(2)}" if m else origin
        raise ConfigError(f"{at}: invalid TOML: {msg}") from None

    known = set(SECTIONS) | {"lanes", "engines", "hosts"}
    for name, value in raw.items():
        if name not in known:
            line = _line_of(text, name, None)
            at = f"{origin}:{line}" if line else origin
            raise ConfigError(
                f"{at}: unknown section [{name}]; expected one of " + ", ".join(f"[{k}]" for k in sorted(known))
            )
        if not isinstance(value, dict):
            raise _fail(origin, text, "", name, f"expected a [{name}] table, got {_describe(value)}")

    built: dict[str, Any] = {}
    for name, (cls, checks) in SECTIONS.items():
        table = raw.get(name, {})
        if name == "bench":  # [bench.profiles.NAME] tables are checked by _bench_profiles
            table = {k: v for k, v in table.items() if k != "profiles"}
        values = {}
        for key, value in table.items():
            if key not in checks:
                raise _fail(
                    origin, text, name, key, "unknown key; expected one of " + ", ".join(sorted(checks))
                )
            expected = checks[key](value)
            if expected:
                raise _fail(origin, text, name, key, f"expected {expected}, got {_describe(value)}")
            if name == "promote" and key == "quality_margin_pp":  # one number: every suite
                value = ({k: float(x) for k, x in value.items()} if isinstance(value, dict)
                         else {k: float(value) for k in _default_margins()})
                value = {**_default_margins(), **value}
            if name == "promote" and key.startswith("max_"):  # optional: no default value to take the type from
                value = float(value)
            values[key] = float(value) if isinstance(getattr(cls(), key), float) else value
        built[name] = cls(**values)
    built["bench"] = replace(built["bench"], profiles=_bench_profiles(raw.get("bench", {}).get("profiles"), origin, text))

    lanes: dict[str, str] = {}
    lane_keep_alive = _lane_keep_alive(raw.get("lanes", {}).get("keep_alive", {}), origin, text)
    on_change = raw.get("lanes", {}).get("on_change", "")
    if not isinstance(on_change, str):
        raise _fail(origin, text, "lanes", "on_change", f"expected a shell command (a string), got {_describe(on_change)}")
    for lane, model in raw.get("lanes", {}).items():
        if lane in LANES_RESERVED:
            continue
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", lane):
            raise _fail(origin, text, "lanes", lane, "expected a lane name of letters, digits, '-' or '_'")
        if not isinstance(model, str) or not model.strip():
            raise _fail(origin, text, "lanes", lane, f"expected a model name, got {_describe(model)}")
        try:
            validate_model_name(model.strip())
        except InvalidModelName as exc:
            raise _fail(origin, text, "lanes", lane, str(exc)) from None
        lanes[lane] = model.strip()

    engines: dict[str, NamedEngineConfig] = {}
    for ename, table in raw.get("engines", {}).items():
        section = f"engines.{ename}"
        if not isinstance(table, dict):
            raise _fail(origin, text, "engines", ename, f"expected a table, got {_describe(table)}")
        for key, value in table.items():
            if key not in NAMED_ENGINE_KEYS:
                raise _fail(
                    origin, text, section, key,
                    "unknown key; expected one of " + ", ".join(sorted(NAMED_ENGINE_KEYS)),
                )
            expected = NAMED_ENGINE_KEYS[key](value)
            if expected:
                raise _fail(origin, text, section, key, f"expected {expected}, got {_describe(value)}")
        if not table.get("url"):
            raise _fail(origin, text, section, None, "missing key url (the server's base URL)")
        engines[ename] = NamedEngineConfig(name=ename, **table)

    hosts = _hosts(raw.get("hosts"), origin, text)

    sources = {f"{name}.{key}": origin for name in SECTIONS for key in raw.get(name, {})}
    sources.update({f"lanes.{key}": origin for key in raw.get("lanes", {})})
    sources.update({f"engines.{e}.{key}": origin for e, t in raw.get("engines", {}).items() for key in t})
    for lane in lane_keep_alive:
        if lane not in lanes:
            raise _fail(origin, text, "lanes.keep_alive", lane,
                        f"no lane {lane!r} in [lanes] ({', '.join(sorted(lanes)) or 'none'})")
    cfg = Config(**built, lanes=lanes, engines=engines, hosts=hosts, source=origin, lanes_on_change=on_change.strip(),
                 lane_keep_alive=lane_keep_alive, sources=sources)

    if cfg.budget.warn_gib < cfg.budget.reserve_gib:
        raise _fail(
            origin, text, "budget", "warn_gib",
            f"expected a number >= reserve_gib ({cfg.budget.reserve_gib:g}), got {cfg.budget.warn_gib:g}",
        )
    env_host = env.get("OLLAMA_HOST", "").strip()
    if env_host:
        cfg = replace(cfg, engine=replace(cfg.engine, host=env_host),
                      sources={**cfg.sources, "engine.host": "$OLLAMA_HOST"})
    return cfg


def find_config_file(explicit: str | None, env: dict[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """The first config in the look-up order, or None for built-in defaults."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    if env.get("SPARKCTL_CONFIG"):
        return Path(env["SPARKCTL_CONFIG"])
    local = (cwd or Path.cwd()) / "sparkctl.toml"
    if local.is_file():
        return local
    user = paths.user_config_file()
    if user.is_file():
        return user
    return None


_STATE_DEFAULT: Any = object()


def load_config(explicit: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None,
                state: Path | None = _STATE_DEFAULT) -> Config:
    """The user's config (or built-in defaults) with sparkctl's owned state file layered
    over it (`state`: that file, None for none; default paths.state_file())."""
    cfg = _load_user_config(explicit, env, cwd)
    if state is _STATE_DEFAULT:
        state = paths.state_file(env)
    if state is None:
        return cfg
    from sparkctl.statefile import StateError, read_state

    try:
        owned = read_state(state)
    except StateError as exc:
        raise ConfigError(str(exc)) from None
    return layer_state(cfg, owned)


def layer_state(cfg: Config, owned: Any) -> Config:
    """`cfg` with the owned state's lanes and theme over it (statefile.OwnedState).

    An owned value applies while the user's file still says what it said when sparkctl
    wrote it (`owned.base`); once the user has edited that key, their edit wins and a
    note says which owned value was set aside."""
    where = str(owned.path)
    contenders = tuple(getattr(owned, "contenders", ()))
    contender_lanes = dict(getattr(owned, "contender_lanes", {}) or {})
    if not owned.lanes and not owned.theme:
        return replace(cfg, state_file=where, contenders=contenders, contender_lanes=contender_lanes)
    lanes, sources, notes = dict(cfg.lanes), dict(cfg.sources), list(cfg.notes)
    ui = cfg.ui

    def user_value(key: str) -> str:
        section, _, name = key.partition(".")
        if key not in cfg.sources:
            return ""
        return cfg.lanes.get(name, "") if section == "lanes" else cfg.ui.theme

    def applies(key: str, value: str) -> bool:
        base, now = owned.base.get(key, ""), user_value(key)
        if now == base:
            return True
        section, _, name = key.partition(".")
        notes.append(f"[{section}] {name}: {cfg.source} now says {now or '(nothing)'!r} (it said "
                     f"{base or '(nothing)'!r} when sparkctl set {value!r} in {where}): your file wins")
        return False

    for lane, model in owned.lanes.items():
        if applies(f"lanes.{lane}", model):
            lanes[lane] = model
            sources[f"lanes.{lane}"] = where
    if owned.theme and applies("ui.theme", owned.theme):
        ui = replace(cfg.ui, theme=owned.theme)
        sources["ui.theme"] = where
    return replace(cfg, lanes=lanes, ui=ui, sources=sources, state_file=where, notes=tuple(notes),
                   contenders=contenders, contender_lanes=contender_lanes)


def user_file_value(cfg: Config, key: str) -> str:
    """What the user's own file says for an owned key ("lanes.NAME", "ui.theme"); ""
    when it says nothing. The owned file records it as the base of what it overrides."""
    src = cfg.sources.get(key)
    if src is None or (cfg.state_file and src == cfg.state_file):
        # set by the owned file (or not at all): the user's value is what the owned file
        # recorded as its base
        if src is None:  # a Config built in code: its lanes are the user's own
            return cfg.lanes.get(key.partition(".")[2], "") if key.startswith("lanes.") else ""
        from sparkctl.statefile import read_state

        return read_state(Path(cfg.state_file)).base.get(key, "")
    section, _, name = key.partition(".")
    return cfg.lanes.get(name, "") if section == "lanes" else cfg.ui.theme


def _load_user_config(explicit: str | None, env: dict[str, str] | None, cwd: Path | None) -> Config:
    path = find_config_file(explicit, env, cwd)
    if path is None:
        return parse_config("", "built-in defaults", env)
    try:
        text = read_text(path, missing="config file not found", directory="is a directory, expected a TOML file")
    except UnreadableFile as exc:
        raise ConfigError(str(exc)) from None
    return parse_config(text, str(path), env)


def to_toml_dict(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (cls, _checks) in SECTIONS.items():
        section = getattr(cfg, name)
        # an optional key left unset is left out (TOML has no null)
        out[name] = {f.name: getattr(section, f.name) for f in fields(cls) if getattr(section, f.name) is not None}
    profiles = out["bench"].pop("profiles", ())
    if profiles:  # back as [bench.profiles.NAME] tables, None values left out (TOML has no null)
        out["bench"]["profiles"] = {
            p.name: {k: v for k, v in vars(p).items() if k != "name" and v is not None} for p in profiles}
    out["lanes"] = dict(cfg.lanes)
    if cfg.lanes_on_change:
        out["lanes"]["on_change"] = cfg.lanes_on_change
    if cfg.lane_keep_alive:
        out["lanes"]["keep_alive"] = dict(cfg.lane_keep_alive)
    if cfg.engines:
        out["engines"] = {
            n: {k: v for k, v in vars(e).items() if k != "name"} for n, e in cfg.engines.items()
        }
    if cfg.hosts:
        out["hosts"] = {n: {k: v for k, v in vars(h).items() if k != "name" and v} for n, h in cfg.hosts.items()}
    return out


def save_config(cfg: Config, path: Path) -> None:
    """Write the whole config atomically (a crash never leaves half a file)."""
    import tomli_w

    paths.atomic_write_text(path, tomli_w.dumps(to_toml_dict(cfg)))


def save_ui_theme(cfg: Config, theme: str, state: Path | None = None) -> None:
    """Persist a theme choice in sparkctl's owned state file (never the user's file, whose
    comments are theirs); `load_config` layers it back at the next start."""
    from sparkctl.statefile import save_theme

    save_theme(theme, user_file_value(cfg, "ui.theme"), state or (Path(cfg.state_file) if cfg.state_file else None))


def save_contender(cfg: Config, model: str, on: bool, state: Path | None = None, lane: str = "") -> None:
    """Persist (or clear) the TUI's contender mark of `model`, with the lane it is evaluated
    for ("" none), in sparkctl's own state file."""
    from sparkctl.statefile import mark_contender

    mark_contender(model, on, state or (Path(cfg.state_file) if cfg.state_file else None), lane)
