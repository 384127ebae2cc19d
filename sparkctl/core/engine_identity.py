"""The engine's identity beyond its version: which runner served (Ollama's llama-server or MLX
runner), the llama.cpp build inside it, flash attention and the KV cache type; and, between
two runs, which of these changed. Pure: the facts come from engines/ and probes/.

Each fact is a tag with a plain value that compares equal across runs ("on", "q8_0",
"b6500-3f4b3c2") and, beside it, a `*_source` tag saying where it was read. "unknown" is a
value too: an API that does not reveal something is said, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

UNKNOWN = "unknown"

KIND = "engine.kind"
VERSION = "engine.version"
RUNNER = "engine.runner"
RUNNER_BUILD = "engine.runner_build"
FLASH_ATTN = "engine.flash_attn"
KV_CACHE_TYPE = "engine.kv_cache_type"
# what a regression names when it changed, in this order
COMPARED = (KIND, VERSION, RUNNER, RUNNER_BUILD, FLASH_ATTN, KV_CACHE_TYPE)
LABELS = {KIND: "engine", VERSION: "version", RUNNER: "runner", RUNNER_BUILD: "runner build",
          FLASH_ATTN: "flash attention", KV_CACHE_TYPE: "KV cache type"}

_FA_FLAGS = ("-fa", "--flash-attn")
_CTK_FLAGS = ("-ctk", "--cache-type-k")
_CTV_FLAGS = ("-ctv", "--cache-type-v")
_FA_VALUES = {"on": "on", "off": "off", "auto": "auto", "true": "on", "false": "off", "1": "on", "0": "off",
              "enabled": "on", "disabled": "off"}


def _flag(cmdline: Sequence[str], names: Sequence[str]) -> tuple[bool, str | None]:
    """(present, value) of a command-line flag given as `--x v`, `--x=v` or bare `--x`."""
    for i, arg in enumerate(cmdline):
        for name in names:
            if arg == name:
                nxt = cmdline[i + 1] if i + 1 < len(cmdline) else None
                return True, None if nxt is None or nxt.startswith("-") else nxt
            if arg.startswith(name + "="):
                return True, arg.split("=", 1)[1]
    return False, None


def llama_server_settings(cmdline: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """Flash attention and KV cache type of a llama-server from its command line, then its
    LLAMA_ARG_* environment; a setting given nowhere is the build's default, said so."""
    out: dict[str, str] = {}
    present, value = _flag(cmdline, _FA_FLAGS)
    if present:
        # older builds took a bare -fa (on); newer ones a value: on, off, auto
        out[FLASH_ATTN] = _FA_VALUES.get((value or "on").lower(), (value or "on").lower())
        out[FLASH_ATTN + "_source"] = "llama-server command line"
    elif env.get("LLAMA_ARG_FLASH_ATTN"):
        out[FLASH_ATTN] = _FA_VALUES.get(env["LLAMA_ARG_FLASH_ATTN"].lower(), env["LLAMA_ARG_FLASH_ATTN"].lower())
        out[FLASH_ATTN + "_source"] = "LLAMA_ARG_FLASH_ATTN"
    else:
        out[FLASH_ATTN] = "auto"
        out[FLASH_ATTN + "_source"] = "llama-server default (no -fa on its command line)"
    k_present, k = _flag(cmdline, _CTK_FLAGS)
    v_present, v = _flag(cmdline, _CTV_FLAGS)
    k = k if k_present else env.get("LLAMA_ARG_CACHE_TYPE_K")
    v = v if v_present else env.get("LLAMA_ARG_CACHE_TYPE_V")
    if k or v:
        out[KV_CACHE_TYPE] = f"K {k or 'f16'} / V {v or 'f16'}" if k != v else (k or v or "")
        out[KV_CACHE_TYPE + "_source"] = "llama-server command line or LLAMA_ARG_CACHE_TYPE_*"
    else:
        out[KV_CACHE_TYPE] = "f16"
        out[KV_CACHE_TYPE + "_source"] = "llama-server default (no -ctk/-ctv)"
    spec_present, spec_type = _flag(cmdline, ("--spec-type",))
    draft_present, draft = _flag(cmdline, ("-md", "--model-draft", "--spec-draft-model"))
    if spec_present or draft_present:
        out["engine.spec_type"] = spec_type or "draft model"
    return out


def runner_port(cmdline: Sequence[str]) -> int | None:
    present, value = _flag(cmdline, ("--port",))
    return int(value) if present and value and value.isdigit() else None


def ollama_runner(children: Sequence[Sequence[str]], model_path: str) -> tuple[str, Sequence[str] | None]:
    """(runner name, its command line) for the runner child serving `model_path`: a
    llama-server (Ollama >= 0.30, GGUF), the MLX runner (`runner --mlx-engine`), or Ollama's
    own runner (`runner`, before 0.30). ("", None) when none is seen."""
    candidates = []
    for cmd in children:
        if not cmd:
            continue
        exe = cmd[0].rsplit("/", 1)[-1]
        if exe.startswith("llama-server"):
            name = "llama-server"
        elif "runner" in cmd[1:3] and "--mlx-engine" in cmd:
            name = "mlx"
        elif "runner" in cmd[1:3]:
            name = "ollama runner"
        else:
            continue
        candidates.append((name, cmd))
    if model_path:
        for name, cmd in candidates:
            if model_path in cmd:
                return name, cmd
    return (candidates[0] if len(candidates) == 1 else ("", None))


def version_at_least(version: str, wanted: tuple[int, ...]) -> bool:
    """'0.30.1' >= (0, 30)? False for anything that does not parse."""
    parts = []
    for piece in version.strip().lstrip("v").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return bool(parts) and tuple(parts) >= wanted


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What differs between two runs' identities, in words ("runner build b6500 -> b6600");
    a fact one of them did not record is left out (an older run is not a change)."""
    out = []
    for key in COMPARED:
        a, b = before.get(key), after.get(key)
        if a is None or b is None or a == b:
            continue
        out.append(f"{LABELS[key]} {a} -> {b}")
    return out


def compact(tags: Mapping[str, str]) -> str:
    """The identity in one string ("runner=llama-server; flash_attn=on; ..."), for a row."""
    return "; ".join(f"{k.removeprefix('engine.')}={tags[k]}" for k in COMPARED[2:] if tags.get(k))


def parse_compact(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key:
            out["engine." + key] = value
    return out
