"""An Ollama server's own settings, and where each was learnt.

What a model costs and how a bench runs depend on the server's settings, not on the shell
that runs sparkctl: the default context (OLLAMA_CONTEXT_LENGTH), the KV cache's slots
(OLLAMA_NUM_PARALLEL), its type (OLLAMA_KV_CACHE_TYPE, applied only with flash attention),
flash attention (OLLAMA_FLASH_ATTENTION), the session length a load gets
(OLLAMA_KEEP_ALIVE) and how many models stay loaded (OLLAMA_MAX_LOADED_MODELS). On a Spark
Ollama runs as the systemd service of user `ollama` with its own `Environment=`.

This module is pure, the pure core of sparkctl.services.engine_settings: `resolve` takes the places the settings were read from (`Layer`s:
the server's process environment, its unit's Environment=, a runner's command line, the
user's `[engine]` statement), best first, and Ollama's documented defaults for the
server's version, and says for each setting its value and where it came from
(probes/settings_sources.py does the reading). The environment values are parsed the way
Ollama's envconfig parses them (surrounding spaces and quotes dropped; an unparsable number
falls back to the default; an unparsable flag counts as on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkctl.core.engine_identity import FLASH_ATTN, KV_CACHE_TYPE, UNKNOWN, version_at_least

# setting -> the server's environment variable
ENV_VARS: dict[str, str] = {
    "context_length": "OLLAMA_CONTEXT_LENGTH",
    "num_parallel": "OLLAMA_NUM_PARALLEL",
    "kv_cache_type": "OLLAMA_KV_CACHE_TYPE",
    "flash_attention": "OLLAMA_FLASH_ATTENTION",
    "keep_alive": "OLLAMA_KEEP_ALIVE",
    "max_loaded_models": "OLLAMA_MAX_LOADED_MODELS",
}
SETTINGS = tuple(ENV_VARS)
# the ones a fit estimate depends on (keep-alive does not change what a load costs)
FIT_SETTINGS = ("context_length", "num_parallel", "kv_cache_type", "flash_attention", "max_loaded_models")
ASSUMED = "assumed: "  # how a default's source starts
FLASH_VALUES = ("on", "off", "auto")

# Ollama's defaults by version (envconfig/config.go and server/routes.go history):
CTX_TIERS_SINCE = (0, 15, 5)  # 4k / 32k / 256k by total GPU memory (before: one number)
CTX_4096_SINCE = (0, 6, 7)  # 4096 from 0.6.7 to 0.15.4; 2048 before
PARALLEL_ONE_SINCE = (0, 10, 0)  # 1 since 0.10.0; before, "auto": 4 where memory allowed, else 1
FLASH_AUTO_SINCE = (0, 12, 4)  # per model and GPU since 0.12.4; off unless set before


@dataclass(frozen=True)
class Setting:
    """One setting: its value, where it came from, and whether the server itself said so."""

    value: int | str | None  # None: Ollama decides by memory (context_length, max_loaded_models)
    source: str  # where it came from, in words
    read: bool  # read from the server (its process or unit); False: stated in config or assumed

    @property
    def assumed(self) -> bool:
        return not self.read


@dataclass(frozen=True)
class Layer:
    """A place the server's environment was read from. `complete`: a variable absent here is
    unset on the server (its process environment; a unit whose every file was read); else
    absence says nothing (a runner's command line shows only a few)."""

    source: str  # "the server's environment (PID 812)"; for the user's statement, the config file
    env: Mapping[str, str]  # variable -> raw value, as the server would see it
    complete: bool
    read: bool = True  # False: the user's statement in the config, not the server's


@dataclass(frozen=True)
class EngineSettings:
    context_length: Setting
    num_parallel: Setting
    kv_cache_type: Setting
    flash_attention: Setting
    keep_alive: Setting
    max_loaded_models: Setting
    where: str  # where they were read from, or why they could not be
    version: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def get(self, name: str) -> Setting:
        return getattr(self, name)

    @property
    def read(self) -> bool:
        """Every setting came from the server itself."""
        return all(self.get(n).read for n in SETTINGS)

    def assumed(self) -> list[Setting]:
        return [self.get(n) for n in SETTINGS if self.get(n).assumed]

    def kv_cache(self, bytes_per_type: Mapping[str, float]) -> tuple[str, float]:
        """The KV cache type the runner will use and its bytes per element: Ollama applies a
        quantised type only with flash attention, so an explicit "off" keeps f16, and a type
        this table does not know is counted as f16."""
        kind = str(self.kv_cache_type.value or "f16").lower()
        if kind not in bytes_per_type or (kind != "f16" and self.flash_attention.value == "off"):
            return "f16", bytes_per_type["f16"]
        return kind, bytes_per_type[kind]

    def kv_cache_said(self, bytes_per_type: Mapping[str, float]) -> str:
        """The KV cache type the estimate uses, in words for the fit, when it is not plainly
        the default: a quantised type, or one stated that the runner will not use (so a
        reader who sees `kv_cache_type q8_0` among the settings knows f16 was counted)."""
        used, _ = self.kv_cache(bytes_per_type)
        stated = str(self.kv_cache_type.value or "f16").lower()
        if used != "f16":
            return f"KV cache {used} ({self.kv_cache_type.source})"
        if stated == "f16":
            return ""
        if stated in bytes_per_type:  # known, so set aside for flash attention being off
            return (f"KV cache f16: {stated} stated, f16 used: Ollama quantizes the KV cache only with flash "
                    f"attention (kv_cache_type from {self.kv_cache_type.source}; flash_attention off from "
                    f"{self.flash_attention.source})")
        return (f"KV cache f16: {stated} stated, f16 used: not a KV cache type Ollama knows "
                f"({', '.join(bytes_per_type)}; {self.kv_cache_type.source})")

    def max_models(self, gpus: int) -> int:
        """OLLAMA_MAX_LOADED_MODELS, or Ollama's own choice: 3 per GPU (3 without one)."""
        v = self.max_loaded_models.value
        return int(v) if isinstance(v, int) and v > 0 else 3 * max(1, gpus)

    def describe(self, name: str) -> str:
        """'num_parallel 4 (OLLAMA_NUM_PARALLEL=4 in the server's environment (PID 812))'."""
        s = self.get(name)
        return f"{name} {value_text(name, s.value)} ({s.source})"

    def assumed_line(self, names: Sequence[str] = SETTINGS) -> str | None:
        """Which of `names` were not read from the server, with where each came from, in one
        line ("context_length 262144 ([engine] in ~/sparkctl.toml); Ollama 0.32.1's defaults:
        num_parallel 1, kv_cache_type f16"); None when all were read."""
        stated = [self.describe(n) for n in names if self.get(n).assumed and not self.get(n).source.startswith(ASSUMED)]
        defaults = [f"{n} {value_text(n, self.get(n).value)}" for n in names
                    if self.get(n).source.startswith(ASSUMED)]
        who = f"Ollama {self.version}'s defaults" if self.version else "Ollama's defaults"
        parts = stated + ([f"{who}: {', '.join(defaults)}"] if defaults else [])
        return "; ".join(parts) if parts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "version": self.version,
            "read": self.read,
            **{n: {"value": self.get(n).value, "source": self.get(n).source, "read": self.get(n).read}
               for n in SETTINGS},
            "notes": list(self.notes),
        }


def value_text(name: str, value: int | str | None) -> str:
    if value is None:
        return {"context_length": "by GPU memory", "max_loaded_models": "3 per GPU"}.get(name, "unset")
    return str(value)


# ---- Ollama's parsing ---------------------------------------------------------------------


def _var(raw: str) -> str:
    """envconfig.Var: surrounding spaces, then quotes, dropped."""
    return raw.strip().strip("\"'")


def _parse_bool(text: str) -> bool | None:
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _go_duration_ok(text: str) -> bool:
    from sparkctl.core.keepalive import parse_keep_alive

    try:
        parse_keep_alive(text)
    except ValueError:
        return False
    return True


def parse_value(name: str, raw: str, version: str | None) -> tuple[int | str | None, str | None]:
    """A server variable's value as Ollama takes it, and a note when Ollama would ignore it
    (it logs "invalid ..., using default" and goes on)."""
    text = _var(raw)
    var = ENV_VARS[name]
    if name in ("context_length", "num_parallel", "max_loaded_models"):
        if not text.isdigit():
            if not text:
                return _default(name, version)[0], None
            return _default(name, version)[0], f"{var}={raw!r} is not a number: Ollama uses its default"
        n = int(text)
        if name == "max_loaded_models":
            return (n if n > 0 else None), None  # 0: Ollama's own choice
        return (n if n > 0 else _default(name, version)[0]), None  # 0: the default, as unset
    if name == "kv_cache_type":
        return (text.lower() or "f16"), None
    if name == "flash_attention":
        if not text:
            return _default(name, version)[0], None
        b = _parse_bool(text)
        return ("on" if b is None or b else "off"), None  # Ollama: an unparsable value turns it on
    # keep_alive
    if not text:
        return "5m", None
    if not _go_duration_ok(text):
        return "5m", f"{var}={raw!r} is not a duration: Ollama uses 5m"
    return text, None


def _since(version: str | None, wanted: tuple[int, ...]) -> bool:
    """Unknown versions count as current: sparkctl targets the Ollama a Spark runs today."""
    return not version or version_at_least(version, wanted) or not version_at_least(version, (0,))


def _default(name: str, version: str | None) -> tuple[int | str | None, str]:
    """Ollama's documented default for `version`, and the words for it."""
    who = f"Ollama {version}'s default" if version else "Ollama's default"
    if name == "context_length":
        if _since(version, CTX_TIERS_SINCE):
            return None, f"{who}: 4096, 32768 or 262144 by GPU memory"
        return (4096 if _since(version, CTX_4096_SINCE) else 2048), who
    if name == "num_parallel":
        if _since(version, PARALLEL_ONE_SINCE):
            return 1, who
        return 1, f"{who} (auto: 4 where memory allowed, else 1; 1 assumed)"
    if name == "kv_cache_type":
        return "f16", who
    if name == "flash_attention":
        if _since(version, FLASH_AUTO_SINCE):
            return "auto", f"{who} (on where the model and GPU support it)"
        return "off", who
    if name == "keep_alive":
        return "5m", who
    return None, f"{who} (3 per GPU)"


def resolve(layers: Sequence[Layer], version: str | None, where: str,
            notes: Sequence[str] = ()) -> EngineSettings:
    """Each setting from the first layer that knows it; a complete layer that lacks it means
    unset on the server (Ollama's default, read); past every layer, the default (assumed)."""
    if version is not None and not version_at_least(version, (0,)):
        version = None  # "unknown", "": no version to take defaults for (the current ones apply)
    out: dict[str, Setting] = {}
    said = list(notes)
    for name in SETTINGS:
        var = ENV_VARS[name]
        setting = None
        for layer in layers:
            if var in layer.env:
                value, note = parse_value(name, layer.env[var], version)
                if note:
                    said.append(note)
                source = (f"{var}={_var(layer.env[var])} in {layer.source}" if layer.read
                          else f"[engine] in {layer.source}")
                setting = Setting(value, source, layer.read)
                break
            if layer.complete:
                value, why = _default(name, version)
                setting = Setting(value, f"unset in {layer.source}: {why}", layer.read)
                break
        if setting is None:
            value, why = _default(name, version)
            setting = Setting(value, f"{ASSUMED}{why}", False)
        out[name] = setting
    return EngineSettings(**out, where=where, version=version, notes=tuple(said))


@dataclass(frozen=True)
class ServerVariable:
    """One more of the server's variables (OLLAMA_MODELS: where it keeps models), read from
    the same layers as the settings: its value, or None when the server has it unset (`read`)
    or when nothing of the server could be read (not `read`; `source` says why)."""

    name: str
    value: str | None
    source: str
    read: bool


def server_variable(layers: Sequence[Layer], name: str, where: str) -> ServerVariable:
    """`name` from the first layer that knows it; a complete layer without it means unset on
    the server; past every layer, not read (`where`: why the server could not be read)."""
    for layer in layers:
        if not layer.read:
            continue  # the user's [engine] statements hold the settings only
        if name in layer.env:
            return ServerVariable(name, _var(layer.env[name]) or None, f"{name} in {layer.source}", True)
        if layer.complete:
            return ServerVariable(name, None, f"{name} unset in {layer.source}", True)
    return ServerVariable(name, None, where or "the server's settings were not read", False)


def stated_layer(stated: Mapping[str, Any], origin: str) -> Layer | None:
    """The user's `[engine]` statement of a remote server's settings, as a layer: keys left
    at their "not stated" value (0 or "") are absent."""
    env: dict[str, str] = {}
    for name, value in stated.items():
        if name not in ENV_VARS or value in (None, "", 0):
            continue
        if name == "flash_attention":
            if value == "auto":
                continue  # Ollama's own choice: the same as unset
            value = "1" if value == "on" else "0"
        env[ENV_VARS[name]] = str(value)
    if not env:
        return None
    return Layer(origin, env, complete=False, read=False)


def runner_layer(cmdline: Sequence[str], pid: int) -> Layer | None:
    """What an Ollama llama-server runner's command line shows of the server's settings:
    `-np` is OLLAMA_NUM_PARALLEL, `--cache-type-k` is OLLAMA_KV_CACHE_TYPE (Ollama passes both
    through; the context flag is one model's, not the default, and is left out)."""
    env: dict[str, str] = {}
    args = list(cmdline)
    for i, word in enumerate(args[:-1]):
        nxt = args[i + 1]
        if word in ("-np", "--parallel") and nxt.isdigit():
            env["OLLAMA_NUM_PARALLEL"] = nxt
        elif word in ("-ctk", "--cache-type-k", "--kv-cache-type"):
            env["OLLAMA_KV_CACHE_TYPE"] = nxt
    if not env:
        return None
    return Layer(f"the runner's command line (PID {pid})", env, complete=False)


def identity_tags(settings: EngineSettings) -> dict[str, str]:
    """Flash attention and KV cache type for a run's engine identity, from an Ollama server's
    settings when it passes no runner command line to read them from. Only what was read from
    the server itself counts: a statement or a default is not evidence of what ran."""
    out: dict[str, str] = {}
    for key, name in ((FLASH_ATTN, "flash_attention"), (KV_CACHE_TYPE, "kv_cache_type")):
        s = settings.get(name)
        if s.read:
            out[key], out[key + "_source"] = str(s.value), s.source
        else:
            out[key] = UNKNOWN
            out[key + "_source"] = (settings.where if settings.where.startswith("not read")
                                    else "not read from the Ollama server")
    return out
