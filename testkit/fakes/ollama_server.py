"""A FAKE Ollama server for tests: real HTTP on 127.0.0.1, scripted behaviour.

This is not Ollama. It speaks Ollama's HTTP API closely enough that the real
`ollama` Python client (and sparkctl's adapter on top of it) cannot tell the
difference for the calls sparkctl makes, and it lets a test script the situations
that are hard to produce with a real server: a model spilling to the CPU, an
eviction, an out-of-memory load, a pull cut off half way, a stream that drops, a
server that goes away and comes back on the same port.

What the responses follow (read from Ollama's sources, not from memory):
- `server/routes.go`: handler order and status codes (GenerateHandler, ChatHandler,
  PullHandler, ShowHandler, ListHandler, PsHandler, DeleteHandler), `streamResponse`
  (NDJSON with chunked transfer encoding; an error before the first line becomes a
  plain JSON error with its status, an error after it becomes a last
  `{"error": ...}` line on HTTP 200), `waitForStream` (pull with `"stream": false`),
  `c.JSON` bodies (`application/json; charset=utf-8`), the empty-prompt load
  (`done_reason: "load"`) and keep_alive 0 unload (`done_reason: "unload"`), answered
  as one JSON object whatever `stream` says, the `"x" does not support thinking` 400,
  `model 'x' not found` 404s, `handleScheduleError`.
- `api/types.go`: field names and order, `omitempty` on the metrics (a zero metric is
  left out), `Duration.UnmarshalJSON` for keep_alive (a number is seconds, a string
  is a Go duration, a negative value means forever), `ProgressResponse`,
  `ProcessModelResponse` (digest without `sha256:`, `context_length`).
- `docs/api.md` and `reference/OLLAMA_API.md` in this project: pull status lines,
  the registry's 412 "requires a newer version of Ollama" text, error texts.
- Go's encoding/json: compact output, `<`, `>`, `&` escaped as `\\u003c`...,
  map keys (model_info) sorted, RFC 3339 timestamps with nanoseconds and the
  trailing zeros trimmed, integral floats without a decimal point.

What it models of a real server's behaviour, each a knob with its source in a comment
(read from ollama's runner/ollamarunner, llm/llama_server.go, server/sched.go,
server/routes.go, api/types.go at v0.12.6 and v0.30.x):
- prompt cache per runner (`FakeState.prompt_cache`, `last_prefill`): only the tokens
  after the longest common prefix with the previous request are evaluated; a reload or
  unload empties it; prompt_eval_count is the whole prompt or only the uncached part
  depending on the server version;
- measured durations (`jitter_pct`, `seed`): prompt_eval_duration, eval_duration (first
  to last token), load_duration and total_duration are clock readings;
- chunks are not tokens (`chunk_plan`, `REALISTIC_CHUNKS`, `thinking_and_content_in_one_chunk`,
  `count_eos_token`, `realistic_streaming()`);
- resident size = weights + KV cache + compute buffers (+ projector)
  (`FakeModel.compute_buffer_bytes`, `projector_bytes`), not sparkctl's formula;
- keep_alive parsed as api.Duration / time.ParseDuration, a runner's session duration kept
  by requests without keep_alive, expiry restarted when the last request ends, never while
  busy; a changed num_ctx (or none, on a resident at another context) reloads the runner
  (`FakeState.num_ctx_auto` for 0.30's auto/auto exception).

Use it from a test:

    server = FakeOllama(two_models_resident()).start()
    ... OllamaEngine(server.url) ...
    server.state.fail("/api/ps", 500, "boom", times=1)
    server.down(); ...; server.up()     # same port, connection refused meanwhile
    server.stop()

Every knob lives on `server.state` (a `FakeState`), which a test may mutate while the
server runs; the handlers read it on every request.
"""

from __future__ import annotations

import hashlib
import json
import itertools
import math
import random
import select
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

from testkit.fakes.serving import RequestTiming, SharedDecode, now as _now
from testkit.fakes.templates import FORMATS, render as render_template

GIB = 1024**3
MAX_DURATION_NS = 2**63 - 1  # Go's math.MaxInt64: what a negative keep_alive becomes

NEWER_VERSION_ERROR = (
    "pull model manifest: 412: \n\nThe model you are attempting to pull requires a newer "
    "version of Ollama.\n\nPlease download the latest version at:\n\n"
    "\thttps://ollama.com/download\n\n"
)
MANIFEST_MISSING_ERROR = "pull model manifest: file does not exist"
RUNNER_DIED_ERROR = "llama-server process has terminated: exit status 2"


def oom_message(required_bytes: int, available_bytes: int) -> str:
    """The older scheduler's memory refusal, with Go's HumanBytes2 formatting."""
    return (
        f"model requires more system memory ({_human_bytes2(required_bytes)}) "
        f"than is available ({_human_bytes2(available_bytes)})"
    )


def _human_bytes2(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fake_digest(seed: str) -> str:
    """A stable 64-hex digest for a made-up blob or manifest."""
    return hashlib.sha256(seed.encode()).hexdigest()


# --------------------------------------------------------------------------- Go-style JSON


def _go_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError("Go's encoder refuses NaN and Inf")
    magnitude = abs(value)
    if value == 0 or 1e-6 <= magnitude < 1e21:
        text = format(Decimal(repr(value)), "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    mantissa, _, exponent = repr(value).partition("e")
    sign = "-" if exponent.startswith("-") else "+"
    digits = exponent.lstrip("+-").lstrip("0") or "0"
    if len(digits) < 2:
        digits = "0" + digits
    return f"{mantissa}e{sign}{digits}"


def _go_string(text: str) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    return (
        encoded.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def go_json(value: Any, *, sort_keys: bool = False) -> str:
    """Encode like Go's json.Marshal: compact, HTML-safe, Go number formatting.

    Struct-like dicts keep their insertion order (Go writes struct fields in
    declaration order); pass sort_keys for Go maps such as model_info.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, GoMap):
        items = sorted(value.items())
        return "{" + ",".join(f"{_go_string(k)}:{go_json(v, sort_keys=True)}" for k, v in items) + "}"
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        return "{" + ",".join(f"{_go_string(str(k))}:{go_json(v, sort_keys=sort_keys)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(go_json(v, sort_keys=sort_keys) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__}")


class GoMap(dict):
    """A dict that Go would hold as a map: its keys are written sorted."""


def go_time(ns: int, tz: tzinfo = timezone.utc) -> str:
    """time.Time's JSON form: RFC 3339 with nanoseconds, trailing zeros trimmed."""
    seconds, frac = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    offset = moment.utcoffset() or timedelta(0)
    if offset == timedelta(0):
        return text + "Z"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


_DURATION_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


class BadRequest(Exception):
    """A request the real server would refuse at JSON binding (400)."""


def _go_quote_duration(text: str) -> str:
    """Go's time.quote: the text in double quotes, `"` and `\\` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_go_duration(text: str) -> int:
    """time.ParseDuration, in nanoseconds; raises BadRequest with Go's exact message.

    Follows Go's time/format.go ParseDuration step by step (read from the Go source):
    an optional sign; the bare string "0" (after the sign) is zero; "" is invalid; then
    one or more groups of digits with an optional fraction ("1.5", ".5", "1." are all
    fine, "." is not) followed by a unit. A group without a unit is `time: missing unit
    in duration "X"` (so "-1", "300" and "5m3" are refused), an unknown unit such as "d"
    or " m" is `time: unknown unit "d" in duration "X"`, anything else that does not
    scan is `time: invalid duration "X"`, as is an overflow past 1<<63-1 ns.
    """
    quoted = _go_quote_duration(text)
    invalid = BadRequest(f"time: invalid duration {quoted}")
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or rest[0].isascii() and rest[0].isdigit()):
            raise invalid
        i = 0
        while i < len(rest) and rest[i].isascii() and rest[i].isdigit():
            i += 1
        whole, rest = rest[:i], rest[i:]
        fraction = ""
        if rest[:1] == ".":
            rest = rest[1:]
            j = 0
            while j < len(rest) and rest[j].isascii() and rest[j].isdigit():
                j += 1
            fraction, rest = rest[:j], rest[j:]
        if not whole and not fraction:
            raise invalid  # e.g. ".s" or "-.s"
        k = 0
        while k < len(rest) and not (rest[k] == "." or rest[k].isascii() and rest[k].isdigit()):
            k += 1
        if k == 0:
            raise BadRequest(f"time: missing unit in duration {quoted}")
        unit, rest = rest[:k], rest[k:]
        if unit not in _DURATION_UNITS_NS:
            raise BadRequest(f"time: unknown unit {_go_quote_duration(unit)} in duration {quoted}")
        scale = _DURATION_UNITS_NS[unit]
        value = int(whole or "0") * scale
        if fraction:
            value += int(int(fraction) * scale / 10 ** len(fraction))
        total += value
        if total > 2**63 - (0 if negative else 1):
            raise invalid
    return -total if negative else total


def _go_type_name(value: Any) -> str:
    """reflect.TypeOf(v).String() for what encoding/json decodes into an `any`."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return type(value).__name__


def keep_alive_ns(value: Any, default_ns: int) -> int:
    """api.Duration.UnmarshalJSON (api/types.go): seconds as a number, a Go duration string,
    negative = forever (math.MaxInt64), any other JSON type a 400 `Unsupported type: 'T'`.

    JSON null (or no field) leaves the request's *Duration nil: `default_ns` comes back here,
    and the scheduler decides what nil means (see `_Handler._inference`).
    """
    if value is None:
        return default_ns
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadRequest(f"Unsupported type: '{_go_type_name(value)}'")
    if isinstance(value, (int, float)):
        if value < 0:
            return MAX_DURATION_NS
        return int(value * 1_000_000_000)  # Go: time.Duration(t * float64(time.Second)), truncated
    ns = parse_go_duration(value)
    return MAX_DURATION_NS if ns < 0 else ns


# --------------------------------------------------------------------------- scenario data


def normalize_name(name: str) -> str:
    """Ollama's short name with the default tag: 'qwen3' -> 'qwen3:latest'."""
    name = name.strip()
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


RUNNER_OPTIONS = ("num_ctx", "num_batch", "num_gpu", "use_mmap", "num_thread")


@dataclass
class FakeModel:
    """One model in the local store (/api/tags, /api/show) and how it behaves when loaded."""

    name: str
    size: int  # bytes on disk
    digest: str = ""  # manifest digest, 64 hex
    family: str = "llama"
    parameter_size: str = "8.0B"
    quantization_level: str = "Q4_K_M"
    capabilities: list[str] = field(default_factory=lambda: ["completion"])
    format: str = "gguf"
    parent_model: str = ""
    families: list[str] | None = None  # None -> [family]
    architecture: str | None = None  # GGUF general.architecture; None -> family
    block_count: int = 36
    context_length: int = 40960  # trained context (ARCH.context_length)
    embedding_length: int = 4096
    head_count: int = 32
    head_count_kv: int = 8
    parameter_count: int = 8_000_000_000
    file_type: int = 15  # GGUF file type id (15 = Q4_K_M)
    extra_model_info: dict[str, Any] = field(default_factory=dict)
    parameters: str = ""  # the Modelfile PARAMETER block /api/show returns
    template: str = "{{ .Prompt }}"
    # The Modelfile SYSTEM (/api/show `system`; /api/generate's `system` replaces it) and the
    # chat template family the fake renders prompts with (testkit/fakes/templates.py); None:
    # the older generic rendering, `FakeState.prompt_overhead_tokens` fixed tokens.
    system: str = ""
    chat_format: str | None = None
    draft: str = ""  # a DRAFT layer's blob path (speculative decoding), "" for none
    license: str = ""
    modified_at_ns: int = 0  # 0 -> when the state was built
    # When loaded:
    vram_fraction: float = 1.0  # < 1 places part of it on the CPU (size_vram < size)
    resident_size: int | None = None  # None -> `resident_bytes(num_ctx)`: weights + KV + graph (+ projector)
    # Real /api/ps `size` is what the runner actually allocated: weights + KV cache + the
    # compute-graph (scratch) buffers + a vision projector where there is one. Ollama's own
    # estimate of the graph (fs/ggml GraphSize, e.g. for llama: ~4*batch*(1+4*embedding +
    # ctx*(1+heads)) bytes fully offloaded, less with flash attention) grows with num_ctx and
    # has a constant part (the output/vocab graph), and llama.cpp reports its real "compute
    # buffer size" per device on top of the KV cache. None -> `compute_buffer_for(num_ctx)`,
    # an illustrative constant + per-context-token term; an int fixes it for any context.
    # Either way a test cannot recompute it with sparkctl's weights + KV formula.
    compute_buffer_bytes: int | None = None
    projector_bytes: int = 0  # a vision model's mmproj, resident beside the weights
    load_s: float = 0.02  # how long a cold load takes (shows as load_duration)
    load_error: tuple[int, str] | None = None  # e.g. (500, oom_message(...))
    evicts: list[str] = field(default_factory=list)  # residents unloaded to make room
    tokens_per_s: float | None = None  # overrides FakeState.tokens_per_s for this model

    def __post_init__(self) -> None:
        self.name = normalize_name(self.name)
        if not self.digest:
            self.digest = fake_digest("manifest:" + self.name)

    @property
    def arch(self) -> str:
        return self.architecture or self.family

    def model_info(self) -> GoMap:
        arch = self.arch
        info = GoMap(
            {
                "general.architecture": arch,
                "general.parameter_count": self.parameter_count,
                "general.file_type": self.file_type,
                "general.quantization_version": 2,
                f"{arch}.block_count": self.block_count,
                f"{arch}.context_length": self.context_length,
                f"{arch}.embedding_length": self.embedding_length,
                f"{arch}.attention.head_count": self.head_count,
                f"{arch}.attention.head_count_kv": self.head_count_kv,
                f"{arch}.attention.layer_norm_rms_epsilon": 1e-06,
                f"{arch}.rope.freq_base": 1000000.0,
                "tokenizer.ggml.model": "gpt2",
                "tokenizer.ggml.tokens": [],  # long arrays come back empty without verbose
            }
        )
        info.update(self.extra_model_info)
        return info

    def details(self) -> dict[str, Any]:
        return {
            "parent_model": self.parent_model,
            "format": self.format,
            "family": self.family,
            "families": self.families if self.families is not None else [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }

    def kv_cache_bytes(self, num_ctx: int) -> int:
        head_dim = self.embedding_length // max(1, self.head_count)
        return 2 * self.block_count * self.head_count_kv * head_dim * num_ctx * 2

    def compute_buffer_for(self, num_ctx: int) -> int:
        """Graph buffers for a runner at `num_ctx` (see `compute_buffer_bytes`).

        Constant part: a 512-token batch through the output layer (4 bytes x batch x
        (embedding + a 152k vocabulary)); context part: 4 bytes x num_ctx x (heads + 1) x 16,
        the attention-score scratch that makes real graph buffers grow with the context.
        """
        if self.compute_buffer_bytes is not None:
            return self.compute_buffer_bytes
        constant = 4 * 512 * (self.embedding_length + 152_064)
        per_ctx = 4 * (self.head_count + 1) * 16
        return constant + per_ctx * num_ctx

    def resident_bytes(self, num_ctx: int) -> int:
        """What /api/ps reports as `size` when `resident_size` is not scripted."""
        if self.resident_size is not None:
            return self.resident_size
        return self.size + self.kv_cache_bytes(num_ctx) + self.compute_buffer_for(num_ctx) + self.projector_bytes

    def modelfile_num_ctx(self) -> int | None:
        """`PARAMETER num_ctx N` in the Modelfile: model.Options, applied before the request's."""
        for line in self.parameters.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
                return int(parts[1])
        return None


@dataclass
class FakeResident:
    """A model in memory, as /api/ps lists it."""

    name: str
    size: int
    size_vram: int
    expires_at_ns: int
    context_length: int
    runner_options: dict[str, Any] = field(default_factory=dict)
    busy: int = 0  # requests in flight: a busy model does not expire
    # The runner's session duration (sched.go runnerRef.sessionDuration): set by the load
    # (request keep_alive, else OLLAMA_KEEP_ALIVE), replaced by every later request that
    # carries a keep_alive, kept by one that carries none; when the last request in flight
    # ends, expires_at = now + session_ns. None -> derived from expires_at at creation.
    session_ns: int | None = None
    # Loaded without any num_ctx (request, Modelfile, OLLAMA_CONTEXT_LENGTH): 0.30's
    # runnerRef.numCtxAuto, see FakeState.num_ctx_auto.
    num_ctx_auto: bool = False
    # The runner's single cache slot (OLLAMA_NUM_PARALLEL=1): the token sequence the KV
    # cache holds, i.e. the last request's prompt + what it generated. A new runner (load,
    # reload) starts empty. See FakeState.prompt_cache.
    cache_tokens: list[Any] = field(default_factory=list, repr=False)
    # OLLAMA_NUM_PARALLEL sequences run at once on this runner; the rest wait (the llama
    # runner's seqsSem); a test may raise it on a resident.
    num_parallel: int = 1
    slots: threading.Semaphore = field(init=False, repr=False)
    decoding: SharedDecode = field(default_factory=SharedDecode, repr=False)  # see serving.py

    def __post_init__(self) -> None:
        self.slots = threading.Semaphore(max(1, self.num_parallel))
        self.name = normalize_name(self.name)
        if self.session_ns is None:
            self.session_ns = max(0, min(MAX_DURATION_NS, self.expires_at_ns - time.time_ns()))


@dataclass
class PullLayer:
    digest: str  # 64 hex, no prefix
    total: int
    has_total: bool = True  # False: the progress lines carry no total/completed


@dataclass
class RegistryModel:
    """A model the fake registry can serve to /api/pull."""

    name: str
    layers: list[PullLayer]
    error: str | None = None  # sent in-band after `error_after_layer` layers
    error_after_layer: int = 0
    model: FakeModel | None = None  # what lands in the catalogue on success

    def __post_init__(self) -> None:
        self.name = normalize_name(self.name)


@dataclass
class Fault:
    """A scripted failure on one endpoint.

    kind "status": answer `status` with {"error": message} before anything is sent.
    kind "in_band": start the stream, send `after` lines, then a last {"error": message}.
    kind "drop": start the stream, send `after` lines, then close the socket mid-body.
    kind "stall": say nothing for `seconds`, then answer normally (a hung server).
    kind "stall_stream": start the stream, send `after` chunk lines, then say nothing for
    `seconds` (or until the client hangs up), then finish normally (a runner that stalls
    mid-generation; the connection stays open, so only a client's own deadline ends it).

    `match`: only requests whose prompt (generate's prompt and system, chat's messages)
    contains this text take the fault; "" for every request.
    """

    kind: str
    status: int = 500
    message: str = ""
    after: int = 0
    times: int | None = None  # None: every request until cleared
    seconds: float = 0.0
    match: str = ""


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any


@dataclass
class FakeState:
    """Every scenario knob. Mutate freely from the test thread; guarded by `lock`."""

    version: str = "0.12.6"
    models: dict[str, FakeModel] = field(default_factory=dict)
    resident: dict[str, FakeResident] = field(default_factory=dict)
    registry: dict[str, RegistryModel] = field(default_factory=dict)
    blobs: dict[str, int] = field(default_factory=dict)  # digest -> bytes already on disk
    faults: dict[str, Fault] = field(default_factory=dict)  # path -> fault
    default_keep_alive_s: float = 300.0
    default_num_ctx: int = 4096  # 262144 on a box with >= 47 GiB of VRAM
    unload_delay_s: float = 0.0  # how long an unloaded/expired model stays in /api/ps
    tokens_per_s: float | None = None  # None: as fast as possible
    prefill_tokens_per_s: float = 5000.0
    response_tokens: list[str] = field(
        default_factory=lambda: ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."]
    )
    thinking_tokens: list[str] = field(
        default_factory=lambda: ["Okay", ",", " the", " user", " asks", " about", " the", " sky", "."]
    )
    runaway: str | None = None  # "response" or "thinking": never stops until num_predict/disconnect
    # A real model's answer depends on the question: (model, the user's prompt) -> the answer
    # text, or None for `response_tokens`. Split into tokens at word boundaries.
    answers: Callable[[str, str], str | None] | None = None
    prompt_tokens: int | None = None  # None: words in the prompt + template overhead
    prompt_overhead_tokens: int = 9
    include_context: bool = True  # generate's final chunk carries `context`
    # -- prompt cache ------------------------------------------------------------------
    # Real runners keep, per loaded runner and cache slot (one slot with
    # OLLAMA_NUM_PARALLEL=1), the tokens of the previous request (prompt + generated) and
    # on the next request evaluate only what follows the longest common token prefix
    # (runner/ollamarunner/cache.go LoadCacheSlot + findLongestCacheSlot; llama-server's
    # cache_prompt, which Ollama turns on). A prompt that matches the cache entirely still
    # evaluates its last token, to get logits to sample from. A new runner (load, reload
    # for a changed num_ctx, unload) starts with an empty cache. The fake tokenizes the
    # templated prompt as `prompt_overhead_tokens` template tokens identical for every
    # request, then one token per whitespace-separated word (see `prompt_token_ids`).
    # Modes (what the final chunk reports; the prefill time always covers only the
    # evaluated tokens, as the real runner measures it around the batches it computes):
    # - "whole_count": prompt_eval_count = the whole prompt. The 0.12-era Go runner sets
    #   it to len(inputs) before the cache is consulted; 0.30.1+ llama-server path reports
    #   cache_n + prompt_n (llm/llama_server.go promptEvalCount, PR #16428).
    # - "uncached_count": prompt_eval_count = only the evaluated (uncached) tokens: 0.30.0,
    #   which passed llama-server's timings.prompt_n through alone (fixed in 0.30.1).
    # - "off": no cache at all (not a real server setting: there is no request option that
    #   turns the cache off; a test double for "every prompt cold").
    prompt_cache: str = "whole_count"
    # model name -> (cached, evaluated) tokens of the last prefill, for tests to read.
    last_prefill: dict[str, tuple[int, int]] = field(default_factory=dict)
    # -- measured durations -----------------------------------------------------------------
    # Real durations are clock readings, not configuration: prompt_eval_duration is the
    # time from the start of the first batch holding the prompt to the first sampled token
    # (ollamarunner processingDuration), eval_duration the time from that first token to
    # the last one (lastUpdatedAt - startedAt, startedAt reset at the first token), so it
    # spans eval_count - 1 decode steps. Per-token pacing varies by +/- jitter_pct percent
    # (uniform, from random.Random(seed)); the reported numbers are measured with the
    # monotonic clock around the sleeps.
    jitter_pct: float = 3.0
    seed: int = 0
    # -- chunking -----------------------------------------------------------------------------
    # Streamed chunks are not tokens. Tokens per chunk, cycled: n >= 1 -> one chunk whose
    # text joins n tokens (the runner holds text back while it could be a stop sequence or
    # a partial UTF-8 sequence and releases it joined; builtin parsers buffer too); 0 -> the
    # token's text is held back and an empty chunk ("response": "", no thinking) goes out
    # (the thinking parser in routes.go sends such chunks while it buffers a possible tag);
    # the held text leads the next chunk. eval_count counts tokens whatever the plan.
    # (1,) is one token per chunk; see REALISTIC_CHUNKS.
    chunk_plan: tuple[int, ...] = (1,)
    # The chunk where thinking ends also carries the first answer text ("thinking" and
    # "response"/message.content both set): the thinking parser splits one runner
    # response at the closing tag and returns both halves at once.
    thinking_and_content_in_one_chunk: bool = False
    # -- concurrency (testkit/fakes/serving.py) ---------------------------------------------
    # OLLAMA_NUM_PARALLEL for runners loaded from now on; sequences decoding at once share
    # the runner: aggregate = single rate x k ** batch_scaling. Every generate/chat request
    # is logged in `request_log` (RequestTiming) for tests to compare against.
    num_parallel: int = 1
    batch_scaling: float = 0.6
    request_log: list[RequestTiming] = field(default_factory=list)
    # On a natural stop the Go runner samples an end-of-sequence token: one more decode
    # step, counted in eval_count (numPredicted) and inside eval_duration, text never sent.
    # Off by default: eval_count then equals the tokens streamed.
    count_eos_token: bool = False
    # 0.30+ with OLLAMA_CONTEXT_LENGTH unset: a request naming no num_ctx (nor has the
    # Modelfile one) is "auto", and sched.go needsReload keeps a resident that was also
    # loaded "auto" whatever its context (optsNew.NumCtx = optsExisting.NumCtx). False
    # (0.12-era, and 0.30 once any num_ctx is named): a request without num_ctx asks for
    # the server default and reloads a resident loaded at another context.
    num_ctx_auto: bool = False
    pull_chunks: int = 4  # progress lines per missing layer
    pull_line_interval_s: float = 0.002
    local_tz: tzinfo = timezone.utc  # expires_at/modified_at are server-local times
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _rng: random.Random | None = field(default=None, init=False, repr=False)
    _vocab: dict[Any, int] = field(default_factory=dict, init=False, repr=False)

    def token_ids(self, tokens: list[Any]) -> list[int]:
        """Stable integer ids for fake tokens (a vocabulary grown on first sight): equal
        tokens get equal ids, as a real tokenizer's would."""
        with self.lock:
            return [self._vocab.setdefault(t, len(self._vocab) + 1) for t in tokens]

    def rng(self) -> random.Random:
        """The jitter source: random.Random(seed), made on first use (call under `lock`)."""
        if self._rng is None:
            self._rng = random.Random(self.seed)
        return self._rng

    def jitter(self) -> float:
        """A pacing factor in [1 - jitter_pct/100, 1 + jitter_pct/100]."""
        pct = max(0.0, self.jitter_pct)
        if not pct:
            return 1.0
        with self.lock:
            return 1.0 + self.rng().uniform(-pct, pct) / 100.0

    # -- catalogue and residents ------------------------------------------------------
    def add_model(self, model: FakeModel) -> FakeModel:
        if not model.modified_at_ns:
            model.modified_at_ns = time.time_ns()
        with self.lock:
            self.models[model.name] = model
        return model

    def find_model(self, name: str) -> FakeModel | None:
        wanted = normalize_name(name).casefold()
        with self.lock:
            for key, model in self.models.items():
                if key.casefold() == wanted:
                    return model
        return None

    def add_resident(
        self,
        name: str,
        *,
        size: int | None = None,
        size_vram: int | None = None,
        expires_in_s: float | None = 300.0,
        context_length: int | None = None,
        num_ctx_auto: bool = False,
    ) -> FakeResident:
        """Put a model in memory. expires_in_s=None means a negative keep_alive (forever);
        it is also the runner's session duration, which a later request without keep_alive
        keeps. num_ctx_auto: it was loaded without any num_ctx (see FakeState.num_ctx_auto)."""
        model = self.find_model(name)
        num_ctx = context_length or self.default_num_ctx
        if size is None:
            size = model.resident_bytes(num_ctx) if model else 0
        if size_vram is None:
            size_vram = int(size * (model.vram_fraction if model else 1.0))
        now = time.time_ns()
        expires = now + MAX_DURATION_NS if expires_in_s is None else now + int(expires_in_s * 1e9)
        resident = FakeResident(
            name=model.name if model else name,
            size=size,
            size_vram=size_vram,
            expires_at_ns=expires,
            context_length=num_ctx,
            runner_options={"num_ctx": num_ctx},
            session_ns=MAX_DURATION_NS if expires_in_s is None else int(expires_in_s * 1e9),
            num_ctx_auto=num_ctx_auto,
        )
        with self.lock:
            self.resident[resident.name] = resident
        return resident

    def resident_names(self) -> list[str]:
        with self.lock:
            self.prune()
            return list(self.resident)

    def prune(self, now_ns: int | None = None) -> None:
        """Drop residents whose keep-alive ran out (plus the unload delay)."""
        now_ns = now_ns or time.time_ns()
        delay = int(self.unload_delay_s * 1e9)
        with self.lock:
            for name, resident in list(self.resident.items()):
                if resident.busy:
                    continue
                if resident.expires_at_ns <= now_ns - delay:
                    del self.resident[name]

    # -- registry -----------------------------------------------------------------------
    def add_registry_model(
        self,
        name: str,
        layer_sizes: Iterable[int],
        *,
        present: Iterable[int] = (),
        partial: dict[int, int] | None = None,
        has_totals: bool = True,
        error: str | None = None,
        error_after_layer: int = 0,
        model: FakeModel | None = None,
    ) -> RegistryModel:
        """A pullable model. `present`: indexes of layers already on disk; `partial`:
        index -> bytes of that layer kept from an earlier, cancelled pull."""
        normalized = normalize_name(name)
        layers = [
            PullLayer(fake_digest(f"layer:{normalized}:{i}"), size, has_totals)
            for i, size in enumerate(layer_sizes)
        ]
        entry = RegistryModel(normalized, layers, error, error_after_layer, model)
        with self.lock:
            self.registry[normalized] = entry
            for index in present:
                self.blobs[layers[index].digest] = layers[index].total
            for index, kept in (partial or {}).items():
                self.blobs[layers[index].digest] = kept
        return entry

    # -- faults --------------------------------------------------------------------------
    def fail(self, path: str, status: int, message: str, *, times: int | None = None) -> None:
        """Answer `path` with an HTTP error status and {"error": message}."""
        self.faults[path] = Fault("status", status, message, 0, times)

    def fail_in_stream(self, path: str, message: str, *, after: int = 0, times: int | None = None) -> None:
        """Start the stream, send `after` lines, then an in-band {"error": message} (HTTP 200)."""
        self.faults[path] = Fault("in_band", 200, message, after, times)

    def drop_stream(self, path: str, *, after: int = 0, times: int | None = None) -> None:
        """Start the stream, send `after` lines, then close the socket mid-body."""
        self.faults[path] = Fault("drop", 200, "", after, times)

    def stall(self, path: str, seconds: float, *, times: int | None = None) -> None:
        """Hold the answer to `path` for `seconds` (to trip a client's read timeout)."""
        self.faults[path] = Fault("stall", 200, "", 0, times, seconds)

    def stall_in_stream(self, path: str, seconds: float, *, after: int = 1, match: str = "",
                        times: int | None = None) -> None:
        """Send `after` chunk lines of the answer to `path`, then hold it for `seconds`."""
        self.faults[path] = Fault("stall_stream", 200, "", after, times, seconds, match)

    def clear_faults(self) -> None:
        self.faults.clear()

    def take_fault(self, path: str, body: Any = None) -> Fault | None:
        with self.lock:
            fault = self.faults.get(path)
            if fault is None:
                return None
            if fault.match and fault.match not in _prompt_text(body):
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self.faults[path]
            return fault


# --------------------------------------------------------------------------- builders


def make_model(
    name: str,
    *,
    size_gib: float,
    family: str = "llama",
    parameter_size: str = "8.0B",
    quantization_level: str = "Q4_K_M",
    capabilities: Iterable[str] = ("completion",),
    **kwargs: Any,
) -> FakeModel:
    return FakeModel(
        name=name,
        size=int(size_gib * GIB),
        family=family,
        parameter_size=parameter_size,
        quantization_level=quantization_level,
        capabilities=list(capabilities),
        **kwargs,
    )


def _gpt_oss_120b() -> FakeModel:
    return make_model(
        "gpt-oss:120b",
        size_gib=60.9,
        family="gptoss",
        parameter_size="116.8B",
        quantization_level="MXFP4",
        capabilities=("completion", "tools", "thinking"),
        block_count=36,
        context_length=131072,
        embedding_length=2880,
        head_count=64,
        head_count_kv=8,
        parameter_count=116_829_156_672,
        file_type=4,
        load_s=0.03,
    )


def _qwen3_30b() -> FakeModel:
    return make_model(
        "qwen3:30b-a3b",
        size_gib=17.3,
        family="qwen3moe",
        parameter_size="30.5B",
        capabilities=("completion", "tools", "thinking"),
        block_count=48,
        context_length=262144,
        embedding_length=2048,
        head_count=32,
        head_count_kv=4,
        parameter_count=30_532_122_624,
    )


def _qwen3_8b() -> FakeModel:
    return make_model(
        "qwen3:8b",
        size_gib=4.87,
        family="qwen3",
        parameter_size="8.2B",
        capabilities=("completion", "tools", "thinking"),
        block_count=36,
        context_length=40960,
        embedding_length=4096,
        head_count=32,
        head_count_kv=8,
        parameter_count=8_190_735_360,
    )


def _llama32_3b() -> FakeModel:
    return make_model(
        "llama3.2:3b",
        size_gib=1.88,
        family="llama",
        parameter_size="3.2B",
        capabilities=("completion", "tools"),
        block_count=28,
        context_length=131072,
        embedding_length=3072,
        head_count=24,
        head_count_kv=8,
        parameter_count=3_212_749_888,
    )


def default_state() -> FakeState:
    """Two small models on disk, nothing in memory."""
    state = FakeState()
    state.add_model(_qwen3_8b())
    state.add_model(_llama32_3b())
    return state


def two_models_resident() -> FakeState:
    """A Spark-like box running two models.

    - gpt-oss:120b, loaded with a negative keep_alive (expires_at ~292 years ahead), all
      of it on the GPU;
    - qwen3:30b-a3b, split: 24 GiB resident, 20 GiB of it on the GPU, expiring in 4 min.
    expires_at is written in a +02:00 local zone, as a server outside UTC would.
    """
    state = FakeState(default_num_ctx=262144, local_tz=timezone(timedelta(hours=2)))
    state.add_model(_gpt_oss_120b())
    state.add_model(_qwen3_30b())
    state.add_model(_llama32_3b())
    state.add_resident("gpt-oss:120b", size=68 * GIB, size_vram=68 * GIB, expires_in_s=None, context_length=131072)
    state.add_resident("qwen3:30b-a3b", size=24 * GIB, size_vram=20 * GIB, expires_in_s=240, context_length=262144)
    return state


def pull_scenario() -> FakeState:
    """A registry to pull from.

    - qwen3:8b: a 5 GB weights layer (missing), its template layer already on disk,
      license and params layers missing;
    - nototals:latest: a registry that sends no sizes (lines without total/completed);
    - future:latest: the registry's 412 "requires a newer version of Ollama";
    - broken:latest: fails in-band after its first layer.
    Any other name: in-band "pull model manifest: file does not exist".
    """
    state = default_state()
    del state.models["qwen3:8b"]
    state.add_registry_model(
        "qwen3:8b", [5_225_374_688, 1_723, 11_338, 487], present=[1], model=_qwen3_8b()
    )
    state.add_registry_model(
        "nototals", [300_000, 120], has_totals=False, model=make_model("nototals", size_gib=0.0003)
    )
    state.add_registry_model("future", [1_000], error=NEWER_VERSION_ERROR)
    state.add_registry_model(
        "broken", [10_000, 20], error="max retries exceeded: unexpected EOF", error_after_layer=1
    )
    return state


def load_scenario(
    *,
    spill: bool = False,
    evict: str | None = None,
    out_of_memory: bool = False,
    runner_died: bool = False,
    load_s: float = 0.02,
) -> FakeState:
    """Production gpt-oss:120b resident forever; contender qwen3:8b on disk.

    spill: the contender loads with 30% on the CPU; evict: loading it unloads that
    resident; out_of_memory / runner_died: loading it fails with the matching 500.
    """
    state = FakeState(default_num_ctx=8192)
    state.add_model(_gpt_oss_120b())
    contender = state.add_model(_qwen3_8b())
    state.add_model(_llama32_3b())
    contender.load_s = load_s
    state.add_resident("gpt-oss:120b", size=68 * GIB, size_vram=68 * GIB, expires_in_s=None, context_length=131072)
    if spill:
        contender.vram_fraction = 0.7
    if evict:
        contender.evicts = [normalize_name(evict)]
    if out_of_memory:
        contender.load_error = (500, oom_message(int(70.3 * GIB), int(45.1 * GIB)))
    if runner_died:
        contender.load_error = (500, RUNNER_DIED_ERROR)
    return state


def bench_scenario(
    *,
    tokens_per_s: float | None = 400.0,
    response_tokens: list[str] | None = None,
    thinking_tokens: list[str] | None = None,
    runaway: str | None = None,
) -> FakeState:
    """qwen3:8b (thinking) and llama3.2:3b (no thinking) on disk, a paced token stream."""
    state = default_state()
    state.tokens_per_s = tokens_per_s
    if response_tokens is not None:
        state.response_tokens = response_tokens
    if thinking_tokens is not None:
        state.thinking_tokens = thinking_tokens
    state.runaway = runaway
    return state


# Tokens per streamed chunk, cycled: singles, a pair, an empty chunk (held-back text),
# a single, three joined, a single. Not the default (chunk_plan=(1,)): opt in per test.
REALISTIC_CHUNKS: tuple[int, ...] = (1, 2, 0, 1, 3, 1)
PROMPT_CACHE_MODES = ("off", "whole_count", "uncached_count")


def realistic_streaming(state: FakeState, *, jitter_pct: float = 3.0, seed: int = 0) -> FakeState:
    """Turn on what a real stream looks like: several or no tokens per chunk, thinking and
    answer sharing the chunk where thinking ends, jittered pacing, and the end-of-sequence
    token counted in eval_count (so eval_count != chunks != visible tokens). Returns `state`."""
    state.chunk_plan = REALISTIC_CHUNKS
    state.thinking_and_content_in_one_chunk = True
    state.jitter_pct = jitter_pct
    state.seed = seed
    state._rng = None
    state.count_eos_token = True
    return state


# --------------------------------------------------------------------------- HTTP


class _ClientGone(Exception):
    """The client closed its end: stop producing (Ollama cancels the request context)."""


class _Stream:
    """Writes NDJSON lines as HTTP/1.1 chunks, as gin's c.Stream does."""

    def __init__(self, handler: "_Handler") -> None:
        self.handler = handler
        self.started = False
        self.lines = 0

    def start(self) -> None:
        if self.started:
            return
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        self.started = True

    def line(self, obj: Any) -> None:
        self.start()
        data = (go_json(obj) + "\n").encode()
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        except OSError as exc:
            raise _ClientGone() from exc
        self.lines += 1

    def end(self) -> None:
        self.start()
        try:
            self.handler.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            raise _ClientGone() from exc

    def drop(self) -> None:
        """Close the socket without the terminating chunk: a torn body on the client."""
        self.start()
        self.handler.close_connection = True
        try:
            self.handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    # quiet, and no "Server:" header (Go's net/http does not send one)
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def send_response(self, code: int, message: str | None = None) -> None:
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def setup(self) -> None:
        super().setup()
        # Go's net/http (Ollama) disables Nagle on every TCP connection; without this, small
        # NDJSON lines wait for delayed ACKs and a paced stream arrives in bunches.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, False)

    @property
    def state(self) -> FakeState:
        return self.server.fake.state

    # -- plumbing ---------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, content_type: str | None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            try:
                self.wfile.write(body)
            except OSError:
                self.close_connection = True

    def _json(self, status: int, obj: Any, content_type: str = "application/json; charset=utf-8") -> None:
        self._send(status, go_json(obj).encode(), content_type)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _client_gone(self) -> bool:
        """Whether the client hung up (readable with nothing to read), without writing."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        routes: dict[str, dict[str, Callable[[Any], None]]] = {
            "/": {"GET": self._root, "HEAD": self._root},
            "/api/version": {"GET": self._version, "HEAD": self._version},
            "/api/tags": {"GET": self._tags, "HEAD": self._tags},
            "/api/ps": {"GET": self._ps},
            "/api/show": {"POST": self._show},
            "/api/pull": {"POST": self._pull},
            "/api/generate": {"POST": self._generate},
            "/api/chat": {"POST": self._chat},
            "/api/delete": {"DELETE": self._delete},
        }
        raw = self._read_body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        self.server.fake.requests.append(RecordedRequest(method, path, body))
        handlers = routes.get(path)
        if handlers is None:
            self._send(404, b"404 page not found", "text/plain")
            return
        handler = handlers.get(method)
        if handler is None:
            self._send(405, b"405 method not allowed", "text/plain")
            return
        fault = self.state.take_fault(path, body)
        if fault is not None and fault.kind == "stall":
            time.sleep(fault.seconds)
            fault = None
        if fault is not None and fault.kind == "status":
            self._error(fault.status, fault.message)
            return
        if method == "POST" or method == "DELETE":
            if not raw:
                self._error(400, "missing request body")
                return
            if not isinstance(body, dict):
                self._error(400, "invalid character looking for beginning of value")
                return
        try:
            handler(body if isinstance(body, dict) else {}, fault)  # type: ignore[call-arg]
        except BadRequest as exc:
            self._error(400, str(exc))
        except _ClientGone:
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    # -- endpoints ----------------------------------------------------------------------------
    def _root(self, body: dict, fault: Fault | None) -> None:
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _version(self, body: dict, fault: Fault | None) -> None:
        self._json(200, {"version": self.state.version})

    def _tags(self, body: dict, fault: Fault | None) -> None:
        state = self.state
        with state.lock:
            models = sorted(state.models.values(), key=lambda m: m.modified_at_ns // 1_000_000_000, reverse=True)
            entries = [
                {
                    "name": _short(m.name),
                    "model": _short(m.name),
                    "modified_at": go_time(m.modified_at_ns, state.local_tz),
                    "size": m.size,
                    "digest": m.digest,
                    "details": m.details(),
                }
                for m in models
            ]
        self._json(200, {"models": entries})

    def _ps(self, body: dict, fault: Fault | None) -> None:
        state = self.state
        with state.lock:
            state.prune()
            residents = sorted(state.resident.values(), key=lambda r: r.expires_at_ns // 1_000_000_000, reverse=True)
            entries = []
            for resident in residents:
                model = state.find_model(resident.name)
                entries.append(
                    {
                        "name": _short(resident.name),
                        "model": _short(resident.name),
                        "size": resident.size,
                        "digest": model.digest if model else fake_digest("manifest:" + resident.name),
                        "details": model.details() if model else FakeModel(resident.name, 0).details(),
                        "expires_at": go_time(resident.expires_at_ns, state.local_tz),
                        "size_vram": resident.size_vram,
                        "context_length": resident.context_length,
                    }
                )
        self._json(200, {"models": entries})

    def _show(self, body: dict, fault: Fault | None) -> None:
        name = body.get("model") or body.get("name") or ""
        if not name:
            self._error(400, "model is required")
            return
        model = self.state.find_model(name)
        if model is None:
            self._error(404, f"model '{normalize_name(name)}' not found")
            return
        response: dict[str, Any] = {}
        if model.license:
            response["license"] = model.license
        response["modelfile"] = (
            '# Modelfile generated by "ollama show"\n'
            "# To build a new Modelfile based on this, replace FROM with:\n"
            f"# FROM {_short(model.name)}\n\n"
            f"FROM /usr/share/ollama/.ollama/models/blobs/sha256-{model.digest}\n"
            f'TEMPLATE """{model.template}"""\n'
        )
        if model.system:
            response["modelfile"] += f"SYSTEM {_go_modelfile_quote(model.system)}\n"
        if model.draft:
            response["modelfile"] += f"DRAFT {_go_modelfile_quote(model.draft)}\n"
        if model.parameters:
            response["parameters"] = model.parameters
        if model.template:
            response["template"] = model.template
        if model.system:
            response["system"] = model.system
        response["details"] = model.details()
        response["model_info"] = model.model_info()
        response["capabilities"] = list(model.capabilities)
        response["modified_at"] = go_time(model.modified_at_ns, self.state.local_tz)
        self._json(200, response)

    def _delete(self, body: dict, fault: Fault | None) -> None:
        name = body.get("model") or body.get("name") or ""
        state = self.state
        model = state.find_model(name)
        if model is None:
            self._error(404, f"model '{name}' not found")
            return
        with state.lock:
            state.models.pop(model.name, None)
        self._send(200, b"", None)

    # -- pull ---------------------------------------------------------------------------------------
    def _pull(self, body: dict, fault: Fault | None) -> None:
        name = body.get("model") or body.get("name") or ""
        if not name:
            self._error(400, "invalid model name")
            return
        streaming = body.get("stream", True) is not False
        state = self.state
        entry = state.registry.get(normalize_name(name))
        emitted: list[dict[str, Any]] = []
        stream = _Stream(self) if streaming else None

        def emit(obj: dict[str, Any]) -> None:
            if fault is not None and fault.kind in ("in_band", "drop") and len(emitted) >= fault.after:
                raise _FaultNow(fault)
            emitted.append(obj)
            if stream is not None:
                stream.line(obj)

        try:
            emit({"status": "pulling manifest"})
            if entry is None:
                raise _PullFailed(MANIFEST_MISSING_ERROR)
            for index, layer in enumerate(entry.layers):
                if entry.error is not None and index == entry.error_after_layer:
                    raise _PullFailed(entry.error)
                self._pull_layer(layer, emit, stream)
            if entry.error is not None and entry.error_after_layer >= len(entry.layers):
                raise _PullFailed(entry.error)
            emit({"status": "verifying sha256 digest"})
            emit({"status": "writing manifest"})
            existing = state.find_model(entry.name)
            model = entry.model or FakeModel(entry.name, sum(layer.total for layer in entry.layers))
            model.modified_at_ns = time.time_ns()
            if existing is not None and existing.digest != model.digest:
                emit({"status": "removing unused layers"})
            state.add_model(model)
            emit({"status": "success"})
        except _FaultNow as now:
            if now.fault.kind == "drop":
                self._drop_now(stream)
                return
            self._stream_error(stream, now.fault.message)
            return
        except _PullFailed as failed:
            self._stream_error(stream, failed.message)
            return
        if stream is not None:
            stream.end()
        else:
            self._json(200, emitted[-1], "application/json")

    def _pull_layer(self, layer: PullLayer, emit: Callable[[dict[str, Any]], None], stream: _Stream | None) -> None:
        state = self.state
        status = f"pulling {layer.digest[:12]}"
        digest = f"sha256:{layer.digest}"

        def progress(done: int) -> dict[str, Any]:
            line: dict[str, Any] = {"status": status, "digest": digest}
            if layer.has_total:
                if layer.total:
                    line["total"] = layer.total
                if done:
                    line["completed"] = done
            return line

        with state.lock:
            kept = min(state.blobs.get(layer.digest, 0), layer.total)
        if kept >= layer.total:
            emit(progress(layer.total))  # already on disk: one line, completed == total
            return
        remaining = layer.total - kept
        steps = max(1, state.pull_chunks)
        emit(progress(kept))
        for step in range(1, steps + 1):
            time.sleep(state.pull_line_interval_s)
            if stream is None and self._client_gone():
                raise _ClientGone()
            done = kept + remaining * step // steps
            with state.lock:
                state.blobs[layer.digest] = done  # partial downloads are kept on disk
            emit(progress(done))

    def _drop_now(self, stream: _Stream | None) -> None:
        """Cut the connection mid-response (a crashed server, a proxy timeout)."""
        if stream is not None:
            stream.drop()
            return
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stream_error(self, stream: _Stream | None, message: str) -> None:
        if stream is not None and stream.started:
            stream.line({"error": message})
            stream.end()
        else:
            # nothing sent yet (or stream:false): a plain JSON error with a status
            self._json(500, {"error": message}, "application/json")

    # -- generate / chat ---------------------------------------------------------------------------
    def _generate(self, body: dict, fault: Fault | None) -> None:
        prompt = body.get("prompt") or ""
        self._inference(body, fault, chat=False, empty=prompt == "", prompt_text=prompt)

    def _chat(self, body: dict, fault: Fault | None) -> None:
        messages = body.get("messages") or []
        # system messages are rendered apart (see _system_of), the rest as the conversation
        text = " ".join(str(m.get("content") or "") for m in messages
                        if isinstance(m, dict) and m.get("role") != "system")
        self._inference(body, fault, chat=True, empty=len(messages) == 0, prompt_text=text)

    def _inference(self, body: dict, fault: Fault | None, *, chat: bool, empty: bool, prompt_text: str) -> None:
        state = self.state
        checkpoint_start = time.monotonic_ns()
        # keep_alive is decoded with the rest of the body (c.ShouldBindJSON), so a bad one is
        # a 400 before the model is even looked up.
        keep_given = body.get("keep_alive") is not None
        keep_ns = keep_alive_ns(body.get("keep_alive"), int(state.default_keep_alive_s * 1e9))
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise BadRequest("json: cannot unmarshal into options")
        requested = body.get("model") or ""
        if not requested:
            self._error(400 if chat else 404, "model is required" if chat else "model '' not found")
            return
        model = state.find_model(requested)
        if model is None:
            self._error(404, f"model '{requested}' not found")
            return

        # Unload (empty prompt/messages and keep_alive 0) comes before any capability check.
        if empty and keep_given and keep_ns == 0:
            with state.lock:
                resident = state.resident.get(model.name)
                if resident is not None:
                    resident.session_ns = 0
                    resident.expires_at_ns = time.time_ns()
            self._json(200, self._final_shape(requested, chat, done_reason="unload"))
            return

        if "completion" not in model.capabilities:
            self._error(400, f"{_go_quote(requested)} does not support {'chat' if chat else 'generate'}")
            return
        think = body.get("think")
        thinks = "thinking" in model.capabilities
        if not thinks and _truthy_think(think):
            self._error(400, f"{_go_quote(requested)} does not support thinking")
            return
        thinking_on = thinks and (think is None or _truthy_think(think))

        for key in ("num_ctx", "num_predict", "num_batch", "num_gpu", "num_thread"):
            value = options.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                self._error(500, f'option "{key}" must be of type integer')
                return

        error, resident = self._schedule(model, options, keep_ns if keep_given else None)
        if error is not None:
            self._error(*error)
            return
        assert resident is not None
        checkpoint_loaded = time.monotonic_ns()
        load_ns = checkpoint_loaded - checkpoint_start
        try:
            if empty:
                self._json(200, self._final_shape(requested, chat, done_reason="load"))
                return
            # One sequence at a time per runner (OLLAMA_NUM_PARALLEL=1): a second request waits
            # for the slot inside the runner's completion call, so the wait shows in
            # total_duration but in none of load, prompt_eval or eval duration.
            timing = RequestTiming(model.name, received=_now() - (time.monotonic_ns() - checkpoint_start) / 1e9,
                                   prompt_text=prompt_text)
            with state.lock:
                state.request_log.append(timing)
            with resident.slots:
                timing.slot_acquired = _now()
                self._produce(
                    body, fault, model, resident, chat=chat, requested=requested, prompt_text=prompt_text,
                    thinking_on=thinking_on, options=options, checkpoint_start=checkpoint_start, load_ns=load_ns,
                    timing=timing,
                )
        finally:
            self._release(resident)

    def _schedule(
        self, model: FakeModel, options: dict, keep_ns: int | None
    ) -> tuple[tuple[int, str] | None, FakeResident | None]:
        """Load the model unless it is resident with the same runner options; the resident
        comes back marked busy (refCount++), its session duration updated.

        num_ctx, as server/routes.go modelOptions + sched.go build it: the request's, else
        the Modelfile's PARAMETER, else the server default (OLLAMA_CONTEXT_LENGTH, or the
        VRAM-tier default); at least 4; capped at the trained context (0.30's
        effectiveContext). needsReload then compares the runner options of the resident with
        the request's with reflect.DeepEqual, so a request that names no num_ctx, on a model
        resident at another context, reloads it at the default: it does not inherit the
        resident's context (except 0.30's auto/auto case, FakeState.num_ctx_auto).
        keep_ns None: the request had no keep_alive: a new runner gets OLLAMA_KEEP_ALIVE
        (default_keep_alive_s), a reused one keeps its session (sched.go useLoadedRunner
        only overwrites sessionDuration when the request has one).
        """
        state = self.state
        state.prune()
        requested_ctx = options.get("num_ctx")
        modelfile_ctx = model.modelfile_num_ctx()
        auto = state.num_ctx_auto and requested_ctx is None and modelfile_ctx is None
        if requested_ctx is not None:
            num_ctx = int(requested_ctx)
        else:
            num_ctx = modelfile_ctx or state.default_num_ctx
        num_ctx = max(4, num_ctx)
        num_ctx = min(num_ctx, model.context_length) if model.context_length else num_ctx
        wanted = {key: options.get(key) for key in RUNNER_OPTIONS}
        wanted["num_ctx"] = num_ctx
        with state.lock:
            resident = state.resident.get(model.name)
            if resident is not None:
                compare = dict(wanted)
                if auto and resident.num_ctx_auto:
                    compare["num_ctx"] = resident.runner_options.get("num_ctx")
                if _same_runner(resident.runner_options, compare):
                    resident.busy += 1
                    if keep_ns is not None:
                        resident.session_ns = keep_ns
                    return None, resident
        if model.load_error is not None:
            return model.load_error, None
        with state.lock:
            for victim in model.evicts:
                state.resident.pop(normalize_name(victim), None)
            state.resident.pop(model.name, None)  # a reload replaces the old runner (and its cache)
        time.sleep(model.load_s)
        size = model.resident_bytes(num_ctx)
        session_ns = keep_ns if keep_ns is not None else int(state.default_keep_alive_s * 1e9)
        resident = FakeResident(
            name=model.name,
            size=size,
            size_vram=int(size * model.vram_fraction),
            expires_at_ns=_expiry(session_ns),
            context_length=num_ctx,
            runner_options=wanted,
            busy=1,
            session_ns=session_ns,
            num_ctx_auto=auto,
            num_parallel=state.num_parallel,
        )
        with state.lock:
            state.resident[model.name] = resident
        return None, resident

    def _release(self, resident: FakeResident) -> None:
        """The request is over (refCount--): when nothing else uses the runner, its expiry
        restarts from now with the session duration (sched.go, finishedReqCh); a zero session
        unloads it at once. While a request is in flight the timer is stopped: it never
        expires busy, and /api/ps shows the expires_at set when it last went idle."""
        with self.state.lock:
            resident.busy = max(0, resident.busy - 1)
            if not resident.busy:
                resident.expires_at_ns = _expiry(resident.session_ns or 0)

    def _final_shape(self, requested: str, chat: bool, *, done_reason: str, **metrics: int) -> dict[str, Any]:
        out: dict[str, Any] = {"model": requested, "created_at": go_time(time.time_ns())}
        if chat:
            out["message"] = {"role": "assistant", "content": ""}
        else:
            out["response"] = ""
        out["done"] = True
        out["done_reason"] = done_reason
        if not chat and metrics.get("context") is not None:
            out["context"] = metrics.pop("context")
        metrics.pop("context", None)
        for key in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"):
            value = metrics.get(key, 0)
            if value:  # omitempty
                out[key] = value
        return out

    def _chunk(self, requested: str, chat: bool, content: str, thinking: str) -> dict[str, Any]:
        """One streamed chunk; `thinking` is omitempty, the content/response field is not."""
        out: dict[str, Any] = {"model": requested, "created_at": go_time(time.time_ns())}
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking:
                message["thinking"] = thinking
            out["message"] = message
        else:
            out["response"] = content
            if thinking:
                out["thinking"] = thinking
        out["done"] = False
        return out

    def _prefill(self, model: FakeModel, resident: FakeResident, prompt_text: str,
                 body: dict | None = None, chat: bool = False) -> tuple[list[Any], int, int]:
        """Evaluate the prompt against the runner's cache: (tokens, evaluated, measured ns)."""
        state = self.state
        tokens = prompt_token_ids(state, prompt_text, resident.context_length, model=model,
                                  system=_system_of(body or {}, model, chat), raw=bool((body or {}).get("raw")))
        with state.lock:
            cached = 0 if state.prompt_cache == "off" else common_prefix(resident.cache_tokens, tokens)
            if cached >= len(tokens):
                cached = len(tokens) - 1  # leave one token to evaluate, for logits to sample from
            evaluated = len(tokens) - cached
            state.last_prefill[model.name] = (cached, evaluated)
            resident.cache_tokens = []  # the slot is being overwritten
        target_s = evaluated / state.prefill_tokens_per_s * state.jitter()
        started = time.monotonic_ns()
        _sleep_until(started + int(target_s * 1e9))
        prefill_ns = time.monotonic_ns() - started
        with state.lock:
            if state.prompt_cache != "off":
                resident.cache_tokens = list(tokens)
        return tokens, evaluated, max(prefill_ns, 1)

    def _produce(
        self, body: dict, fault: Fault | None, model: FakeModel, resident: FakeResident, *, chat: bool,
        requested: str, prompt_text: str, thinking_on: bool, options: dict, checkpoint_start: int, load_ns: int,
        timing: RequestTiming | None = None,
    ) -> None:
        state = self.state
        streaming = body.get("stream", True) is not False
        stream = _Stream(self) if streaming else None

        prompt_ids, evaluated, prefill_ns = self._prefill(model, resident, prompt_text, body, chat)
        prompt_eval_count = evaluated if state.prompt_cache == "uncached_count" else len(prompt_ids)

        num_predict = options.get("num_predict")
        limit = int(num_predict) if num_predict is not None and int(num_predict) >= 0 else None
        rate = model.tokens_per_s if model.tokens_per_s is not None else state.tokens_per_s
        step_s = 1.0 / rate if rate else 0.0
        plan = _lookahead(_token_plan(state, thinking_on, _answer_for(state, requested, body, chat)))
        sizes = [max(0, int(n)) for n in state.chunk_plan] or [1]
        chunk_sizes = itertools.cycle(sizes if any(sizes) else [1])
        together = state.thinking_and_content_in_one_chunk

        produced = 0
        chunks = 0  # chunk lines produced (sent when streaming), for Fault.after
        generated: list[Any] = []
        thinking_text: list[str] = []
        response_text: list[str] = []
        held_thinking: list[str] = []  # text of the chunk being built
        held_content: list[str] = []
        target = next(chunk_sizes)
        in_chunk = 0  # tokens counted toward `target`
        first_ns: int | None = None
        last_ns = 0
        deadline = 0
        done_reason = "stop"

        def emit(content: str, thinking: str) -> None:
            nonlocal chunks
            chunks += 1
            if timing is not None and (content or thinking):
                timing.chunks.append(_now())
                if timing.first_chunk is None:
                    timing.first_chunk = timing.chunks[-1]
            if stream is not None:
                stream.line(self._chunk(requested, chat, content, thinking))
            elif chunks % 64 == 0 and self._client_gone():
                raise _ClientGone()

        def flush() -> None:
            if held_thinking or held_content:
                emit("".join(held_content), "".join(held_thinking))
                held_thinking.clear()
                held_content.clear()

        def step() -> None:
            """One decode step's time: the first token comes out of the prefill itself."""
            nonlocal first_ns, last_ns, deadline
            now = time.monotonic_ns()
            if first_ns is None:
                deadline = now
            elif step_s:
                # sequences decoding at once share the runner (serving.SharedDecode)
                deadline += int(resident.decoding.step_s(step_s, state.batch_scaling) * state.jitter() * 1e9)
                _sleep_until(deadline)
                now = time.monotonic_ns()
            if first_ns is None:
                first_ns = now
            last_ns = now

        stalled = False

        def stall_here() -> None:
            """A "stall_stream" fault: once `after` lines are out, hold the stream."""
            nonlocal stalled
            if stalled or fault is None or fault.kind != "stall_stream" or chunks < fault.after:
                return
            stalled = True
            until = time.monotonic() + fault.seconds
            while time.monotonic() < until and not self._client_gone():
                time.sleep(0.05)

        resident.decoding.enter()
        try:
            for (text, is_thinking), upcoming in plan:
                stall_here()
                if limit is not None and produced >= limit:
                    done_reason = "length"
                    break
                if fault is not None and fault.kind in ("in_band", "drop") and chunks >= fault.after:
                    if fault.kind == "drop":
                        self._drop_now(stream)
                    elif stream is not None and stream.started:
                        stream.line({"error": fault.message})
                        stream.end()
                    else:
                        self._json(500, {"error": fault.message}, "application/json")
                    return
                step()
                produced += 1
                generated.append(("gen", text))
                (thinking_text if is_thinking else response_text).append(text)
                (held_thinking if is_thinking else held_content).append(text)
                in_chunk += 1
                ends_thinking = is_thinking and upcoming is not None and not upcoming[1]
                if target == 0:
                    emit("", "")  # this token's text is held back; it leads the next chunk
                    target, in_chunk = next(chunk_sizes), 0
                    if ends_thinking and not together:
                        flush()
                elif in_chunk >= target and not (together and ends_thinking):
                    flush()
                    target, in_chunk = next(chunk_sizes), 0
                elif ends_thinking and not together:
                    flush()  # a chunk never spans the end of thinking unless asked to
                    target, in_chunk = next(chunk_sizes), 0
            else:
                if state.count_eos_token and produced:
                    if limit is not None and produced >= limit:
                        done_reason = "length"  # no step left to sample the end token in
                    else:
                        step()  # the end-of-sequence token: sampled, counted, never shown
                        produced += 1
            flush()  # what was still held back goes out before the final chunk
            stall_here()
        finally:
            resident.decoding.leave()
            # What the slot holds now: the prompt + every generated token that was fed back.
            # The last sampled token is not (nothing asked for its successor), except on a
            # natural stop, where feeding it produced the end-of-sequence token.
            fed = generated if done_reason == "stop" else generated[:-1]
            with state.lock:
                if state.prompt_cache != "off" and resident.cache_tokens == prompt_ids:
                    resident.cache_tokens = prompt_ids + fed

        eval_ns = (last_ns - first_ns) if first_ns is not None else 0
        if timing is not None:
            timing.eval_count, timing.prompt_eval_count, timing.done = produced, prompt_eval_count, _now()
        # `context`: the ids of the prompt's tokens and of what was generated (routes.go
        # tokenizes prompt + output when the request was not raw)
        context = (state.token_ids(prompt_ids + generated[:produced])
                   if state.include_context and not chat and not body.get("raw") else None)
        final = self._final_shape(
            requested, chat, done_reason=done_reason,
            total_duration=time.monotonic_ns() - checkpoint_start,
            load_duration=load_ns,
            prompt_eval_count=prompt_eval_count,
            prompt_eval_duration=prefill_ns,
            eval_count=produced,
            eval_duration=eval_ns,
            context=context,  # type: ignore[arg-type]
        )
        if stream is not None:
            stream.line(final)
            stream.end()
            return
        # "stream": false: one object with the text gathered and the last chunk's metrics
        if chat:
            final["message"] = {"role": "assistant", "content": "".join(response_text)}
            if thinking_text:
                final["message"]["thinking"] = "".join(thinking_text)
        else:
            merged: dict[str, Any] = {"model": final["model"], "created_at": final["created_at"]}
            merged["response"] = "".join(response_text)
            if thinking_text:
                merged["thinking"] = "".join(thinking_text)
            merged.update({k: v for k, v in final.items() if k not in merged})
            final = merged
        self._json(200, final)


def prompt_token_ids(state: FakeState, prompt_text: str, num_ctx: int, *, model: FakeModel | None = None,
                     system: str = "", raw: bool = False) -> list[Any]:
    """The fake tokenizer: the templated prompt as the runner would see it.

    A model with a `chat_format` is rendered by its family's template (testkit/fakes/templates.py):
    fixed markers, its system prompt, the user's words, the assistant's marker. Otherwise
    `prompt_overhead_tokens` template tokens, identical for every request, then one token
    per whitespace-separated word. raw: the prompt's words only (no template).
    `state.prompt_tokens` (when set) pads or cuts that to a fixed length. Longer than
    num_ctx: truncated as the Go runner does it, keeping the first num_keep (4, Ollama's
    default) tokens and the tail. Two prompts that differ in their first word share exactly
    the template tokens before it as a prefix.
    """
    fmt = FORMATS.get(model.chat_format or "") if model is not None else None
    if raw:
        ids: list[Any] = [("word", word) for word in prompt_text.split()]
    elif fmt is not None:
        ids = list(render_template(fmt, system, prompt_text)[0])
    else:
        ids = [("template", i) for i in range(max(0, state.prompt_overhead_tokens))]
        ids += [("sys", word) for word in system.split()]
        ids += [("word", word) for word in prompt_text.split()]
    if state.prompt_tokens is not None:
        wanted = max(1, state.prompt_tokens)
        ids = ids[:wanted] + [("filler", i) for i in range(wanted - len(ids))]
    if not ids:
        ids = [("template", 0)]
    num_ctx = max(1, num_ctx)
    if len(ids) > num_ctx:
        keep = min(4, num_ctx - 1)
        ids = ids[:keep] + ids[len(ids) - (num_ctx - keep):]
    return ids


def _system_of(body: dict, model: FakeModel, chat: bool) -> str:
    """The system prompt a request renders with (routes.go): generate's `system`, else the
    Modelfile's; chat's system messages, else the Modelfile's. Only templated families
    render it; the generic rendering ignores it, as before."""
    if chat:
        own = " ".join(str(m.get("content") or "") for m in body.get("messages") or ()
                       if isinstance(m, dict) and m.get("role") == "system")
        return own or model.system
    return str(body.get("system") or "") or model.system


def _go_modelfile_quote(text: str) -> str:
    """parser.quote: quoted when the text spans lines or starts/ends with a space."""
    if "\n" in text or text.startswith(" ") or text.endswith(" "):
        return f'"""{text}"""' if '"' in text else f'"{text}"'
    return text


def common_prefix(cached: list[Any], tokens: list[Any]) -> int:
    """Length of the longest common token prefix (cache.go countCommonPrefix)."""
    count = 0
    for a, b in zip(cached, tokens):
        if a != b:
            break
        count += 1
    return count


def _sleep_until(deadline_ns: int) -> None:
    remaining = (deadline_ns - time.monotonic_ns()) / 1e9
    if remaining > 0:
        time.sleep(remaining)


def _lookahead(items: Iterable[Any]) -> Iterable[tuple[Any, Any]]:
    """(item, next item or None) pairs: the producer needs to know where thinking ends."""
    iterator = iter(items)
    try:
        current = next(iterator)
    except StopIteration:
        return
    for upcoming in iterator:
        yield current, upcoming
        current = upcoming
    yield current, None


class _FaultNow(Exception):
    def __init__(self, fault: Fault) -> None:
        self.fault = fault


class _PullFailed(Exception):
    def __init__(self, message: str) -> None:
        self.message = message


def _answer_for(state: FakeState, model: str, body: dict, chat: bool) -> list[str] | None:
    if state.answers is None:
        return None
    if chat:
        users = [m.get("content", "") for m in body.get("messages") or [] if m.get("role") == "user"]
        asked = users[-1] if users else ""
    else:
        asked = body.get("prompt", "")
    text = state.answers(model, asked)
    return None if text is None else (re.findall(r"\s*\S+", text) or [" "])


def _token_plan(state: FakeState, thinking_on: bool, answer: list[str] | None = None) -> Iterable[tuple[str, bool]]:
    thinking = list(state.thinking_tokens) if thinking_on else []
    response = answer if answer is not None else (list(state.response_tokens) or [" "])
    if state.runaway == "thinking" and thinking_on:
        while True:
            for text in thinking:
                yield text, True
    for text in thinking:
        yield text, True
    if state.runaway:
        while True:
            for text in response:
                yield text, False
    for text in response:
        yield text, False


def _truthy_think(value: Any) -> bool:
    if isinstance(value, str):
        return value in ("low", "medium", "high") or value == "true"
    return bool(value)


def _same_runner(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for key in RUNNER_OPTIONS:
        if key == "num_ctx":
            if current.get(key) != wanted.get(key):
                return False
        elif wanted.get(key) is not None and current.get(key) != wanted.get(key):
            return False
    return True


def _expiry(keep_ns: int) -> int:
    return time.time_ns() + keep_ns


def _short(name: str) -> str:
    """name.DisplayShortest(): the default registry and namespace are not shown."""
    for prefix in ("registry.ollama.ai/library/", "library/"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _go_quote(text: str) -> str:
    return json.dumps(text)


# --------------------------------------------------------------------------- server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeOllama"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up on a kept-alive connection (a closed stream, a cancelled
        # pull) is routine; Go's net/http says nothing, while socketserver would print a
        # traceback into whatever stderr a test is capturing.
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class FakeOllama:
    """The fake server. `start()` binds a free port on 127.0.0.1 (or `port`).

    `down()` stops listening and cuts open connections, so clients get "connection
    refused"; `up()` listens again on the same port. `requests` records every call.
    """

    def __init__(self, state: FakeState | None = None, *, port: int = 0) -> None:
        self.state = state if state is not None else default_state()
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_up(self) -> bool:
        return self._httpd is not None

    def start(self) -> "FakeOllama":
        if self._httpd is None:
            self._listen()
        return self

    def up(self) -> "FakeOllama":
        return self.start()

    def down(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._conn_lock:
            open_connections = list(self._connections)
        for connection in open_connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self.down()

    def __enter__(self) -> "FakeOllama":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _listen(self) -> None:
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fake-ollama:{self.port}", daemon=True
        )
        self._thread.start()

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._conn_lock:
            if opened:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    # -- conveniences for tests -------------------------------------------------------------
    def calls(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]


def _prompt_text(body: Any) -> str:
    """The text a request asks about: generate's prompt and system, chat's message contents."""
    if not isinstance(body, dict):
        return ""
    parts = [body.get("system"), body.get("prompt")]
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            parts.append(m.get("content"))
    return "\n".join(p for p in parts if isinstance(p, str))
