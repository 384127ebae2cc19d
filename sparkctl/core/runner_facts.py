"""What a llama-server runner says about itself, read from its command line and its own
loopback endpoints. Pure: probes/ollama_runner.py reads the process table and the HTTP
answers; this module only parses them.

Since Ollama 0.30 each GGUF model is served by an upstream llama-server child process
(llm/llama_server.go, startLlamaServer), started with

    --model <blob> --port N --host 127.0.0.1 --no-webui --offline
    -c <num_ctx x parallel> -np <parallel>
    [--cache-type-k T --cache-type-v T] --flash-attn on|off|auto
    [--spec-type draft-mtp|draft-dflash --spec-draft-n-max N [--spec-draft-model <blob>]]
    [--load-mode dio|none]

Ollama's API hides what that runner knows; the runner itself answers on 127.0.0.1:N:
- GET /props: `default_generation_settings.n_ctx` (per slot), `total_slots`, `build_info`,
  `model_path`, `endpoint_slots` / `endpoint_metrics` (whether those two answer);
- GET /slots (on unless --no-slots): per slot `n_ctx`, `speculative`, `is_processing`, and for
  its current or last task `id_task`, `params` (the sampling the request really ran with),
  `n_prompt_tokens_cache` (prompt tokens reused from the cache; valid while the slot is
  processing, reset when it is released);
- GET /metrics (only with --metrics, which Ollama never passes, or LLAMA_ARG_ENDPOINT_METRICS
  in the environment the runner inherits from the Ollama server): Prometheus counters
  `llamacpp:prompt_tokens_cached_total`, `llamacpp:spec_decode_num_draft_tokens_total`,
  `..._num_accepted_tokens_total`, `..._num_drafts_total` and
  `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="k"}`.
Flash attention and the KV cache type are on the command line only (/props has neither).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

LLAMA_SERVER = "llama-server"


def _flag(cmdline: Sequence[str], names: Sequence[str]) -> tuple[bool, str | None]:
    """(present, value) of a flag given as `--x v` or `--x=v`; a bare flag has value None."""
    for i, arg in enumerate(cmdline):
        for name in names:
            if arg == name:
                nxt = cmdline[i + 1] if i + 1 < len(cmdline) else None
                return True, None if nxt is None or (nxt.startswith("-") and not _number(nxt)) else nxt
            if arg.startswith(name + "="):
                return True, arg.split("=", 1)[1]
    return False, None


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def is_llama_server(cmdline: Sequence[str]) -> bool:
    return bool(cmdline) and cmdline[0].rsplit("/", 1)[-1].startswith(LLAMA_SERVER)


def runner_kind(cmdline: Sequence[str]) -> str:
    """"llama-server", "mlx" (Ollama's MLX runner), "ollama runner" (its own runner, before
    0.30, or for models llama-server cannot serve), or "" for anything else."""
    if is_llama_server(cmdline):
        return LLAMA_SERVER
    if len(cmdline) > 1 and "runner" in cmdline[1:3]:
        return "mlx" if "--mlx-engine" in cmdline else "ollama runner"
    return ""


@dataclass(frozen=True)
class RunnerLaunch:
    """A llama-server runner as its command line started it."""

    cmdline: tuple[str, ...]
    model: str = ""
    port: int | None = None
    ctx_total: int | None = None  # -c: num_ctx x parallel as Ollama passes it
    parallel: int | None = None  # -np
    flash_attn: str | None = None  # as given: on, off, auto
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    spec_type: str | None = None
    draft_model: str | None = None
    draft_n_max: int | None = None
    load_mode: str | None = None
    pid: int | None = None


def parse_launch(cmdline: Sequence[str], pid: int | None = None) -> RunnerLaunch | None:
    """The flags sparkctl relies on (docs/engines.md lists them with their Ollama versions);
    None when the command line is not a llama-server's."""
    if not is_llama_server(cmdline):
        return None
    cmd = tuple(cmdline)

    def value(*names: str) -> str | None:
        return _flag(cmd, names)[1]

    fa_present, fa = _flag(cmd, ("-fa", "--flash-attn"))
    return RunnerLaunch(
        cmdline=cmd, model=value("-m", "--model") or "", port=_int(value("--port")),
        ctx_total=_int(value("-c", "--ctx-size")), parallel=_int(value("-np", "--parallel")),
        flash_attn=(fa or "on") if fa_present else None,  # a bare -fa (older builds) meant on
        cache_type_k=value("-ctk", "--cache-type-k"), cache_type_v=value("-ctv", "--cache-type-v"),
        spec_type=value("--spec-type"), draft_model=value("-md", "--model-draft", "--spec-draft-model"),
        draft_n_max=_int(value("--spec-draft-n-max", "--draft-max", "--draft")),
        load_mode=value("-lm", "--load-mode"), pid=pid)


_FA_WORDS = {"on": "on", "off": "off", "auto": "auto", "true": "on", "false": "off", "1": "on", "0": "off",
             "enabled": "on", "disabled": "off"}


@dataclass(frozen=True)
class RunnerFacts:
    """One runner as the dashboard and a run show it. None: the runner did not say."""

    model_path: str
    port: int | None
    n_ctx: int | None  # per slot: what one request can use
    slots: int | None  # parallel requests it serves
    kv_cache_type: str
    flash_attn: str
    build: str | None
    spec_type: str | None = None
    draft_n_max: int | None = None
    load_mode: str | None = None
    slots_endpoint: bool | None = None  # /slots answers
    metrics_endpoint: bool | None = None  # /metrics answers (needs --metrics)
    sources: Mapping[str, str] = field(default_factory=dict)
    note: str = ""  # what could not be read, in words

    def short(self) -> str:
        """"8192x4 · KV q8_0 · FA on · b6500-3f4b3c2" for a table cell."""
        ctx = "?" if self.n_ctx is None else str(self.n_ctx)
        parts = [f"{ctx}x{self.slots if self.slots is not None else '?'}", f"KV {self.kv_cache_type}",
                 f"FA {self.flash_attn}"]
        if self.spec_type:
            parts.append(self.spec_type)
        parts.append(self.build or "build ?")
        return " · ".join(parts)

    def tags(self) -> dict[str, str]:
        """What a run records about the runner that served it (`runner.*` tags)."""
        out = {"runner.n_ctx": _s(self.n_ctx), "runner.slots": _s(self.slots),
               "runner.kv_cache_type": self.kv_cache_type, "runner.flash_attn": self.flash_attn,
               "runner.build": self.build or "unknown",
               "runner.endpoints": ", ".join(name for name, on in (("props", True), ("slots", self.slots_endpoint),
                                                                   ("metrics", self.metrics_endpoint)) if on)}
        if self.spec_type:
            out["runner.spec_type"] = self.spec_type
            if self.draft_n_max is not None:
                out["runner.draft_n_max"] = str(self.draft_n_max)
        if self.load_mode:
            out["runner.load_mode"] = self.load_mode
        for key, source in self.sources.items():
            out[f"runner.{key}_source"] = source
        if self.note:
            out["runner.note"] = self.note
        return out


def _s(x: Any) -> str:
    return "unknown" if x is None else str(x)


def facts(launch: RunnerLaunch, props: Any = None, props_error: str = "") -> RunnerFacts:
    """The runner's facts from its command line and its /props answer (None when it could
    not be read: `props_error` says why); each fact says where it came from."""
    sources: dict[str, str] = {}
    p = props if isinstance(props, dict) else {}
    gen = p.get("default_generation_settings") if isinstance(p.get("default_generation_settings"), dict) else {}
    n_ctx = gen.get("n_ctx") if isinstance(gen.get("n_ctx"), int) else None
    slots = p.get("total_slots") if isinstance(p.get("total_slots"), int) else None
    if n_ctx is not None:
        sources["n_ctx"] = "/props default_generation_settings.n_ctx"
    elif launch.ctx_total and launch.parallel:
        n_ctx = launch.ctx_total // launch.parallel
        sources["n_ctx"] = "command line: -c / -np"
    if slots is not None:
        sources["slots"] = "/props total_slots"
    elif launch.parallel:
        slots = launch.parallel
        sources["slots"] = "command line: -np"
    k, v = launch.cache_type_k, launch.cache_type_v
    if k or v:
        kk, vv = k or "f16", v or "f16"  # a type not given is llama-server's default
        kv = kk if kk == vv else f"K {kk} / V {vv}"
        sources["kv_cache_type"] = "command line: --cache-type-k/-v"
    else:
        kv = "f16"
        sources["kv_cache_type"] = "llama-server default (no --cache-type-k/-v)"
    if launch.flash_attn is not None:
        fa = _FA_WORDS.get(launch.flash_attn.lower(), launch.flash_attn.lower())
        sources["flash_attn"] = "command line: --flash-attn"
    else:
        fa = "auto"
        sources["flash_attn"] = "llama-server default (no --flash-attn)"
    build = p.get("build_info") if isinstance(p.get("build_info"), str) and p.get("build_info") else None
    if build:
        sources["build"] = "/props build_info"
    note = f"/props not read: {props_error}" if props is None and props_error else ""
    return RunnerFacts(
        model_path=launch.model, port=launch.port, n_ctx=n_ctx, slots=slots, kv_cache_type=kv, flash_attn=fa,
        build=build, spec_type=launch.spec_type, draft_n_max=launch.draft_n_max if launch.spec_type else None,
        load_mode=launch.load_mode,
        slots_endpoint=p.get("endpoint_slots") if isinstance(p.get("endpoint_slots"), bool) else None,
        metrics_endpoint=p.get("endpoint_metrics") if isinstance(p.get("endpoint_metrics"), bool) else None,
        sources=sources, note=note)


def with_note(f: RunnerFacts, note: str) -> RunnerFacts:
    return replace(f, note="; ".join(x for x in (f.note, note) if x))


# ---- /slots --------------------------------------------------------------------------------


def processing_cache_n(slots: Any) -> int | None:
    """Prompt tokens the one request in flight reused from the cache (`n_prompt_tokens_cache`
    of the one slot that is processing); None when no slot, or more than one, is processing
    (whose request it is could not be told), or the build does not report it."""
    if not isinstance(slots, list):
        return None
    busy = [s for s in slots if isinstance(s, dict) and s.get("is_processing") is True]
    if len(busy) != 1:
        return None
    value = busy[0].get("n_prompt_tokens_cache")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# The sampling settings a quality result depends on, by llama-server's names (Ollama's
# options of the same names map one to one: llm/llama_server.go llamaServerCompletionRequest).
SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty", "repeat_last_n",
                 "presence_penalty", "frequency_penalty", "seed")


def recent_sampling(slots: Any) -> tuple[int, dict[str, Any]] | None:
    """(task id, sampling) of the newest task any slot ran or runs: the `params` a request
    really ran with, after the engine layered its defaults under the request's options.
    Floats are rounded to 6 places (llama-server keeps them as float32: 1.1 is
    1.100000023841858)."""
    if not isinstance(slots, list):
        return None
    best: tuple[int, dict[str, Any]] | None = None
    for s in slots:
        if not isinstance(s, dict) or not isinstance(s.get("params"), dict) or not isinstance(s.get("id_task"), int):
            continue
        if best is None or s["id_task"] > best[0]:
            params = s["params"]
            best = (s["id_task"], {k: _tidy(params[k]) for k in SAMPLING_KEYS if k in params})
    return best


def _tidy(x: Any) -> Any:
    return round(x, 6) if isinstance(x, float) else x


# ---- /metrics ------------------------------------------------------------------------------

CACHED = "llamacpp:prompt_tokens_cached_total"
PROMPT = "llamacpp:prompt_tokens_total"
DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"
DRAFTS = "llamacpp:spec_decode_num_drafts_total"
ACCEPTED_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_POSITION = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class RunnerCounters:
    """The cumulative counters of one /metrics reading (None: not on the page)."""

    prompt_cached: int | None = None
    prompt_evaluated: int | None = None
    draft_tokens: int | None = None
    accepted: int | None = None
    drafts: int | None = None
    accepted_per_pos: tuple[int, ...] = ()

    def minus(self, before: "RunnerCounters") -> "RunnerCounters":
        def d(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else max(0, a - b)

        pos = ()
        if self.accepted_per_pos and len(before.accepted_per_pos) <= len(self.accepted_per_pos):
            old = before.accepted_per_pos + (0,) * (len(self.accepted_per_pos) - len(before.accepted_per_pos))
            pos = tuple(max(0, a - b) for a, b in zip(self.accepted_per_pos, old))
        return RunnerCounters(d(self.prompt_cached, before.prompt_cached),
                              d(self.prompt_evaluated, before.prompt_evaluated),
                              d(self.draft_tokens, before.draft_tokens), d(self.accepted, before.accepted),
                              d(self.drafts, before.drafts), pos)


def parse_metrics(text: str) -> RunnerCounters:
    """The llamacpp: counters sparkctl uses from a Prometheus text page (one sample a line:
    `name{labels} value`; comments skipped)."""
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, raw = m.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        if name == ACCEPTED_PER_POS:
            pos = _POSITION.search(labels or "")
            if pos:
                per_pos[int(pos.group(1))] = value
        elif name in (CACHED, PROMPT, DRAFT_TOKENS, ACCEPTED, DRAFTS):
            values[name] = values.get(name, 0.0) + value

    def get(name: str) -> int | None:
        return int(round(values[name])) if name in values else None

    positions = tuple(int(round(per_pos.get(i, 0.0))) for i in range(max(per_pos) + 1)) if per_pos else ()
    return RunnerCounters(get(CACHED), get(PROMPT), get(DRAFT_TOKENS), get(ACCEPTED), get(DRAFTS), positions)
