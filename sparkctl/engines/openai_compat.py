"""OpenAI-compatible servers (llama.cpp's llama-server, vLLM, SGLang) as a bench engine.

The bench needs the same things from these servers as from Ollama: who they are, what
model they serve, and a token stream with the server's own figures at the end. They
share the OpenAI wire format for chat (`POST /v1/chat/completions`, server-sent events,
`data: {...}` lines closed by `data: [DONE]`, and with `stream_options.include_usage` a
last chunk whose `choices` is empty and whose `usage` holds prompt_tokens and
completion_tokens), and differ in everything else. What each one tells, as this adapter
reads it (llama.cpp from its `tools/server` sources, vLLM and SGLang from their docs):

llama.cpp (llama-server)
    Detected by its `Server: llama.cpp` header or `owned_by: "llamacpp"` in /v1/models.
    `GET /props`: `build_info` ("b<build number>-<commit>", e.g. "b6500-3f4b3c2"; a build
    from a source tree without git reports "b0-unknown"), `model_path`, `model_alias`,
    `default_generation_settings.n_ctx` (the context of one slot), `total_slots`,
    `chat_template_caps` (the template's jinja caps: supports_tools, supports_system_role,
    supports_preserve_reasoning...), `chat_template` (the model's Jinja template).
    `GET /v1/models`: `meta` with n_params, size (bytes), n_ctx,
    n_ctx_train, n_vocab, ftype (e.g. "Q4_1"). Every stream chunk repeats the build as
    `system_fingerprint`, and the last one carries `timings`: prompt_n, prompt_ms,
    predicted_n, predicted_ms, predicted_per_second (the server's own clock), which this
    adapter turns into the DoneEvent's counts and durations.
vLLM
    Detected by `owned_by: "vllm"`. `GET /version` gives {"version": "0.x.y"};
    /v1/models gives `max_model_len`. No per-request timings in the stream (its
    Prometheus `/metrics` has histograms, not per-request figures), so the DoneEvent has
    usage counts and zero durations, and the bench relies on the client's clock.
SGLang
    Detected by `owned_by: "sglang"`. `GET /get_server_info` carries `version`;
    `GET /get_model_info` the model path. No per-request timings in the stream either.
Anything else
    kind "openai": the `Server` header, if any, stands in for a version.

Thinking (`show().capabilities` gets "thinking" only where the server shows it):
- llama.cpp: /props has no "thinking" flag; its `chat_template` does show it (Qwen3's
  `enable_thinking`, DeepSeek-R1's `<think>`/`</think>`, gpt-oss's analysis channel), as
  does `chat_template_caps.supports_preserve_reasoning` or an older build's
  `thinking_forced_open`. `reasoning_format` is not evidence: every build reports one
  ("auto" by default), thinking model or not.
- vLLM: nothing by default. `GET /tokenizer_info` (only with
  `--enable-tokenizer-info-endpoint`) carries the `chat_template`; read like llama.cpp's.
- SGLang: `/get_server_info` repeats the server's arguments; `reasoning_parser` set
  (e.g. "qwen3") means the model thinks.
With think=False the request carries `chat_template_kwargs.enable_thinking = false`, which
all three pass to the template (Qwen3-style templates then pre-close the think block);
llama.cpp also gets `reasoning_budget_tokens: 0` (its per-request reasoning budget, read in
`server-common.cpp`; 0 ends thinking at once), which also stops a template that always
opens a think block (DeepSeek-R1). vLLM would only warn about that unknown field, so it is
sent to llama.cpp alone. think=True sends `enable_thinking = true`; None sends neither.

What these servers cannot do over their API, and how this adapter answers honestly:
- placement: none of them says whether the weights sit on the GPU. `ps()` reports the
  served model as resident with `size_vram` 0 and the engine sets
  `reports_placement = False`, so the bench records placement as unverified instead of
  refusing the run (a CPU-only llama-server in CI) or claiming "100% GPU" it cannot see.
- load/unload: the model is fixed when the server starts. `load()` only checks that the
  model is served; `unload()` does nothing. Both say so in their results/docstrings.
- context length: fixed when the server starts (`-c` / `--max-model-len`); a request
  cannot change it, so `num_ctx` in the options is not sent and `show()` reports the
  server's own value.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from sparkctl.core.loopback import proxies_apply
from sparkctl.core.names import ModelName
from sparkctl.core.snapshots import EngineStatus, LocalModel, ModelDetails, ResidentModel
from sparkctl.core.termtext import safe_line
from sparkctl.engines.base import (
    DoneEvent,
    EngineError,
    EngineStalled,
    EngineUnreachable,
    ModelNotFound,
    ShowInfo,
    StreamEvent,
    TokenEvent,
)

KINDS = ("llama.cpp", "vllm", "sglang", "openai")
_OWNED_BY = {"llamacpp": "llama.cpp", "llama.cpp": "llama.cpp", "vllm": "vllm", "sglang": "sglang"}


def normalize_url(url: str) -> str:
    """The server's root URL: scheme required to be http(s), a trailing /v1 dropped.

    "127.0.0.1:8080" -> "http://127.0.0.1:8080"; "http://box:8000/v1/" -> "http://box:8000".
    Raises ValueError with a one-line message for anything else.
    """
    raw = (url or "").strip()
    if not raw:
        raise ValueError("an OpenAI-compatible engine needs a URL, e.g. http://127.0.0.1:8080")
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"unsupported scheme in engine URL {url!r} (expected http or https)")
    if not parts.hostname:
        raise ValueError(f"no host in engine URL {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in engine URL {url!r}") from None
    if parts.query or parts.fragment:
        raise ValueError(f"engine URL {url!r} must not carry a query or fragment")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{port}" if port is not None else "")
    return f"{parts.scheme}://{netloc}{path}"


@dataclass
class _Identity:
    """What the server said about itself, gathered once per engine object."""

    kind: str = "openai"
    version: str = "unknown"
    build: str = ""
    server_header: str = ""
    models: list[dict[str, Any]] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)  # SGLang's /get_server_info


class OpenAICompatEngine:
    """One OpenAI-compatible server. Create it once, use it from async code, `close()` it.

    `model` is the configured served-model name (the dashboard shows it; the bench uses
    the model named on its command line). `kind_hint` pins the kind instead of detecting it.
    """

    reports_placement = False  # see the module docstring: placement is unknown here
    fixed_context = True  # the context length is the server's, not a request option

    def __init__(
        self,
        url: str,
        model: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 3.0,
        *,
        load_timeout: float = 600.0,
        kind_hint: str | None = None,
        api_key: str | None = None,
    ) -> None:
        if kind_hint is not None and kind_hint not in KINDS:
            raise ValueError(f"unknown OpenAI-compatible kind {kind_hint!r}; expected one of {', '.join(KINDS)}")
        self.host = normalize_url(url)
        self.model = model or None
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.load_timeout = load_timeout
        self.kind = kind_hint or "openai"
        self._kind_hint = kind_hint
        self._ident: _Identity | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        tls = _tls_context(self.host)
        direct = proxies_apply(self.host)  # a loopback server is never asked through a proxy
        # Quick calls fail after `timeout`; a stream may wait `load_timeout` between two
        # bytes (a long prompt on a slow box); both fail fast when nobody accepts.
        self._quick = httpx.AsyncClient(
            base_url=self.host, timeout=httpx.Timeout(timeout, connect=connect_timeout), verify=tls, headers=headers,
            trust_env=direct,
        )
        self._slow = httpx.AsyncClient(
            base_url=self.host, timeout=httpx.Timeout(load_timeout, connect=connect_timeout), verify=tls, headers=headers,
            trust_env=direct,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatEngine({self.host!r}, kind={self.kind!r})"

    async def __aenter__(self) -> "OpenAICompatEngine":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for client in (self._quick, self._slow):
            try:
                await client.aclose()
            except Exception:  # closing must not mask what the caller is handling
                pass

    # ------------------------------------------------------------------ identity
    async def _identify(self, refresh: bool = False) -> _Identity:
        if self._ident is not None and not refresh:
            return self._ident
        ident = _Identity(kind=self._kind_hint or "openai")
        response = await self._get("/v1/models", "list models")
        ident.server_header = response.headers.get("server", "")
        body = _json(response, self.host, "list models")
        data = body.get("data") if isinstance(body, dict) else None
        ident.models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        if self._kind_hint is None:
            ident.kind = _detect_kind(ident.server_header, ident.models)
        if ident.kind == "llama.cpp":
            props = await self._optional_json("/props")
            ident.props = props if isinstance(props, dict) else {}
            ident.build = str(ident.props.get("build_info") or "")
            ident.version = ident.build or "unknown"
        elif ident.kind == "vllm":
            body = await self._optional_json("/version")
            ident.version = str(body.get("version")) if isinstance(body, dict) and body.get("version") else "unknown"
            ident.build = ident.version if ident.version != "unknown" else ""
        elif ident.kind == "sglang":
            body = await self._optional_json("/get_server_info")
            ident.server_info = body if isinstance(body, dict) else {}
            if not (isinstance(body, dict) and body.get("version")):
                body = await self._optional_json("/version")
            ident.version = str(body.get("version")) if isinstance(body, dict) and body.get("version") else "unknown"
            ident.build = ident.version if ident.version != "unknown" else ""
        else:
            ident.version = ident.server_header or "unknown"
        # recorded with every run and shown: the server's words without escape sequences
        ident.version, ident.build = safe_line(ident.version), safe_line(ident.build)
        ident.server_header = safe_line(ident.server_header)
        self.kind = ident.kind
        self._ident = ident
        return ident

    async def version(self) -> str:
        """The engine's version or build ("b6500-3f4b3c2" for llama.cpp); also sets `kind`."""
        return (await self._identify(refresh=True)).version

    def identity(self) -> dict[str, str]:
        """Tags that pin down what ran (after version()): the build, what the server said."""
        ident = self._ident
        if ident is None:
            return {}
        tags = {"engine.build": ident.build or ident.version, "engine.api": "openai-chat"}
        if ident.server_header:
            tags["engine.server_header"] = ident.server_header
        props = ident.props
        if props.get("model_path"):
            tags["engine.model_path"] = str(props["model_path"])
        if props.get("total_slots") is not None:
            tags["engine.total_slots"] = str(props["total_slots"])
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        if n_ctx:
            tags["engine.n_ctx"] = str(n_ctx)
        return tags

    async def status(self) -> EngineStatus:
        """Version and served models in one answer that never raises."""
        try:
            version = await self.version()
            resident = await self.ps()
        except EngineError as exc:
            return EngineStatus(self.kind, self.host, not isinstance(exc, EngineUnreachable), error=exc.message)
        return EngineStatus(self.kind, self.host, True, version=version, resident=tuple(resident))

    # ------------------------------------------------------------------ models
    async def served_models(self) -> list[str]:
        ident = await self._identify(refresh=True)
        return [str(m.get("id", "")) for m in ident.models if m.get("id")]

    async def _entry(self, model: str) -> dict[str, Any]:
        ident = await self._identify(refresh=True)
        for entry in ident.models:
            if _matches(entry, model):
                return entry
        served = ", ".join(str(m.get("id")) for m in ident.models) or "none"
        raise ModelNotFound(f"{self.kind} at {self.host} does not serve {model!r} (it serves: {served})", 404)

    async def tags(self) -> list[LocalModel]:
        ident = await self._identify(refresh=True)
        return [LocalModel(name=ModelName.served(str(m.get("id", ""))), size=_size(m), digest="", details=_details(m, ident))
                for m in ident.models if m.get("id")]

    async def ps(self) -> list[ResidentModel]:
        """The served models, resident by definition; size_vram 0 because placement is unknown
        (`reports_placement` is False, so no caller should read 0 as "on the CPU")."""
        ident = await self._identify(refresh=True)
        return [
            ResidentModel(
                name=ModelName.served(str(m.get("id", ""))), size=_size(m), size_vram=0, digest="",
                context_length=_context(m, ident), details=_details(m, ident),
            )
            for m in ident.models if m.get("id")
        ]

    async def show(self, model: str) -> ShowInfo:
        entry = await self._entry(model)
        ident = self._ident or _Identity()
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        info: dict[str, Any] = {}
        if isinstance(meta.get("n_params"), int) and meta["n_params"] > 0:
            info["general.parameter_count"] = meta["n_params"]
        for src, dst in (("n_ctx_train", "context_length_train"), ("n_vocab", "vocab_size"), ("n_embd", "embedding_length")):
            if meta.get(src) is not None:
                info[f"server.{dst}"] = meta[src]
        ctx = _context(entry, ident)
        if ctx:
            info["server.n_ctx"] = ctx
        caps = ["completion"]
        template_caps = ident.props.get("chat_template_caps") if isinstance(ident.props, dict) else None
        if isinstance(template_caps, dict) and template_caps.get("supports_tools"):
            caps.append("tools")
        if await self._thinking_evidence(ident):
            caps.append("thinking")
        return ShowInfo(
            name=model,
            details={k: v for k, v in vars(_details(entry, ident)).items() if v},
            model_info=info,
            capabilities=tuple(caps),
            parameters=f"num_ctx {ctx}" if ctx else "",
            model_path=str(ident.props.get("model_path") or ""),
        )

    async def _thinking_evidence(self, ident: _Identity) -> str | None:
        """Where the server shows that its model thinks (see the module docstring), or None."""
        if ident.kind == "llama.cpp":
            props = ident.props
            caps = props.get("chat_template_caps")
            if isinstance(caps, dict) and caps.get("supports_preserve_reasoning") is True:
                return "chat_template_caps.supports_preserve_reasoning"
            params = (props.get("default_generation_settings") or {}).get("params") or {}
            if isinstance(params, dict) and params.get("thinking_forced_open") is True:
                return "thinking_forced_open"
            return _template_thinks(props.get("chat_template"))
        if ident.kind == "vllm":
            body = await self._optional_json("/tokenizer_info")
            return _template_thinks(body.get("chat_template")) if isinstance(body, dict) else None
        if ident.kind == "sglang":
            parser = ident.server_info.get("reasoning_parser")
            return f"reasoning_parser {parser}" if isinstance(parser, str) and parser else None
        return None

    async def load(self, model: str, keep_alive: Any = None, options: Mapping[str, Any] | None = None) -> DoneEvent:
        """No-op: an OpenAI-compatible server loads its model at start. Checks it is served."""
        await self._entry(model)
        return DoneEvent(done_reason="load: served since the server started (nothing to load)")

    async def unload(self, model: str, *args: Any, **kwargs: Any) -> str:
        """No-op: these servers cannot unload their model over the API; says so."""
        return f"{self.kind} at {self.host} cannot unload {model} over its API; nothing was done"

    # ------------------------------------------------------------------ generate
    def request_body(
        self, model: str, prompt: str, options: Mapping[str, Any] | None, think: bool | None,
        system: str | None = None,
    ) -> dict[str, Any]:
        """The chat request: the bench's sampling options in OpenAI's names; `system` (when
        given) as a system message before the prompt."""
        opts = dict(options or {})
        body: dict[str, Any] = {
            "model": model,
            "messages": _messages(prompt, system),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if opts.get("temperature") is not None:
            body["temperature"] = opts["temperature"]
        if opts.get("seed") is not None:
            body["seed"] = opts["seed"]
        if opts.get("num_predict") is not None and opts["num_predict"] > 0:
            body["max_tokens"] = opts["num_predict"]
        if opts.get("stop"):
            body["stop"] = list(opts["stop"])  # Ollama's option of the same name
        if think is not None:
            # passed to the chat template by all three servers: Qwen3-style templates
            # pre-close the think block with False; templates without the switch ignore it
            body["chat_template_kwargs"] = {"enable_thinking": bool(think)}
        if think is False and self.kind == "llama.cpp":
            # the per-request reasoning budget: 0 ends a think block as soon as it opens,
            # also where the template has no switch (DeepSeek-R1 always opens one)
            body["reasoning_budget_tokens"] = 0
        if self.kind == "llama.cpp":
            # Re-evaluate the prompt every time: with the prompt cache a repetition would
            # prefill nothing, and its prefill rate and TTFT would not be comparable. A warm
            # bench (options cache_prompt=True) measures the cached follow-up on purpose.
            body["cache_prompt"] = bool(opts.get("cache_prompt", False))
        return body

    async def generate(
        self,
        model: str,
        prompt: str,
        *,
        options: Mapping[str, Any] | None = None,
        keep_alive: Any = None,
        think: bool | None = None,
        format: str | dict | None = None,
        system: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream a chat completion: TokenEvents (reasoning text with thinking=True), then one
        DoneEvent from the usage chunk and, where the server sends them, its timings.
        `format`: "json" (response_format json_object) or a JSON schema (json_schema)."""
        if self._ident is None:
            await self._identify()
        body = self.request_body(model, prompt, options, think, system)
        if format == "json":
            body["response_format"] = {"type": "json_object"}
        elif isinstance(format, dict):
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "profile", "schema": format}}
        finish: str | None = None
        usage: dict[str, Any] | None = None
        timings: dict[str, Any] | None = None
        tail: dict[str, Any] = {}
        saw_done = False
        try:
            async with self._slow.stream("POST", "/v1/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response, "generate", model)
                async for data in _sse_data(response):
                    if data == "[DONE]":
                        saw_done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError:
                        raise EngineError(f"unexpected stream data from {self.host}: {data[:80]!r}") from None
                    if not isinstance(chunk, dict):
                        continue
                    if "error" in chunk:
                        message, status = _error_text(chunk)
                        raise EngineError(f"{self.kind} at {self.host}: {message}", status)
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            yield TokenEvent(str(reasoning), thinking=True)
                        if delta.get("content"):
                            yield TokenEvent(str(delta["content"]))
                        if choice.get("finish_reason"):
                            finish = str(choice["finish_reason"])
                            tail.update(_keep(chunk))
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                        tail.update(_keep(chunk))
                    if chunk.get("timings") and (finish is not None or usage is not None):
                        timings = chunk["timings"]
                        tail["timings"] = timings
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise self._translate(exc, "generate", model) from exc
        if finish is None and not saw_done:
            raise EngineUnreachable(f"{self.kind} at {self.host} ended the {model} stream without its final chunk")
        if finish is None:
            raise EngineError(f"{self.kind} at {self.host} closed the {model} stream without a finish_reason")
        tail["finish_reason"] = finish
        yield _done(finish, usage, timings, tail)

    async def spec_counters(self, model: str):
        """The server's cumulative speculative-decoding figures (engines/specdec.py): vLLM's
        /metrics counters, SGLang's accept length; None where it has none (llama-server
        reports them per response instead, in `timings`)."""
        from sparkctl.engines import specdec

        if self._ident is None:
            await self._identify()
        if self.kind == "vllm":
            try:
                response = await self._quick.get("/metrics")
            except Exception as exc:
                raise self._translate(exc, "GET /metrics") from exc
            if response.status_code >= 400:
                return None
            try:
                return specdec.parse_vllm_metrics(response.text, model)
            except ValueError:  # not a Prometheus page
                return None
        if self.kind == "sglang":
            return specdec.parse_sglang_server_info(await self._optional_json("/get_server_info"))
        return None

    async def serving_settings(self) -> dict[str, str]:
        """Attention and KV cache settings the server's API reveals: vLLM's /metrics
        `vllm:cache_config_info` (an info gauge whose labels include cache_dtype); SGLang's
        /get_server_info (its arguments: attention_backend, kv_cache_dtype). llama-server's
        /props has neither (its command line does: probes/engine_process.py)."""
        from sparkctl.core import engine_identity as ei

        if self._ident is None:
            await self._identify()
        out: dict[str, str] = {}
        if self.kind == "vllm":
            try:
                response = await self._quick.get("/metrics")
            except Exception as exc:
                raise self._translate(exc, "GET /metrics") from exc
            if response.status_code < 400:
                from prometheus_client.parser import text_string_to_metric_families

                try:
                    for family in text_string_to_metric_families(response.text):
                        for sample in family.samples:
                            if sample.name == "vllm:cache_config_info" and sample.labels.get("cache_dtype"):
                                out[ei.KV_CACHE_TYPE] = sample.labels["cache_dtype"]
                                out[ei.KV_CACHE_TYPE + "_source"] = "vLLM /metrics cache_config_info"
                except ValueError:
                    pass
        elif self.kind == "sglang":
            info = self._ident.server_info if self._ident else {}
            if info.get("attention_backend"):
                # the backend's name (fa3, flashinfer, triton...): which attention kernels ran
                out[ei.FLASH_ATTN] = str(info["attention_backend"])
                out[ei.FLASH_ATTN + "_source"] = "SGLang /get_server_info attention_backend"
            if info.get("kv_cache_dtype"):
                out[ei.KV_CACHE_TYPE] = str(info["kv_cache_dtype"])
                out[ei.KV_CACHE_TYPE + "_source"] = "SGLang /get_server_info kv_cache_dtype"
        return out

    @property
    def spec_source(self) -> str:
        from sparkctl.engines import specdec

        return {"llama.cpp": specdec.SOURCE_LLAMA, "vllm": specdec.SOURCE_VLLM,
                "sglang": specdec.SOURCE_SGLANG}.get(self.kind, "")

    async def prompt_token_ids(self, model: str, prompt: str, system: str | None = None) -> list[int] | None:
        """The token ids the server evaluates for this chat request, from its own template and
        tokenizer: llama-server's POST /apply-template, then POST /tokenize (the same two
        calls Ollama's llama-server runner makes to fill /api/generate's `context`). None
        where the server has no such endpoints (vLLM, SGLang, older llama-server builds)."""
        if self._ident is None:
            await self._identify()
        if self.kind != "llama.cpp":
            return None
        try:
            rendered = await self._quick.post("/apply-template", json={"messages": _messages(prompt, system)})
            text = rendered.json().get("prompt") if rendered.status_code < 400 else None
            if not isinstance(text, str):
                return None
            tokens = await self._quick.post("/tokenize", json={"content": text, "add_special": True,
                                                               "parse_special": True})
            ids = tokens.json().get("tokens") if tokens.status_code < 400 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return [int(t) for t in ids] if isinstance(ids, list) and all(isinstance(t, int) for t in ids) else None

    # ------------------------------------------------------------------ HTTP helpers
    async def _get(self, path: str, action: str) -> httpx.Response:
        try:
            response = await self._quick.get(path)
        except Exception as exc:
            raise self._translate(exc, action) from exc
        if response.status_code >= 400:
            raise self._http_error(response, action)
        return response

    async def _optional_json(self, path: str) -> Any:
        """An endpoint some servers lack: None on 404/405 or a body that is not JSON."""
        try:
            response = await self._quick.get(path)
        except Exception as exc:
            raise self._translate(exc, f"GET {path}") from exc
        if response.status_code >= 400:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def _http_error(self, response: httpx.Response, action: str, model: str | None = None) -> EngineError:
        try:
            body = response.json()
        except ValueError:
            body = None
        message, _ = _error_text(body) if body is not None else (_clean(response.text)[:200], response.status_code)
        message = message or response.reason_phrase or f"HTTP {response.status_code}"
        status = response.status_code
        text = f"{self.kind} at {self.host} answered {status} to {action}: {message}"
        if status == 404 and model is not None:
            return ModelNotFound(text, status)
        if status == 404:
            # no /v1/models at all: not an OpenAI-compatible server (or a wrong path)
            return EngineError(f"{self.host} has no OpenAI-compatible API here ({action}: HTTP 404)", status)
        return EngineError(text, status)

    def _translate(self, exc: BaseException, action: str, model: str | None = None) -> EngineError:
        if isinstance(exc, EngineError):
            return exc
        if isinstance(exc, httpx.ConnectTimeout):
            return EngineUnreachable(f"{self.host} did not accept a connection within {self.connect_timeout:g}s")
        if isinstance(exc, httpx.ReadTimeout) and action == "generate":
            return EngineStalled(f"{self.kind} at {self.host} sent nothing for {self.load_timeout:g}s during generate")
        if isinstance(exc, httpx.TimeoutException):
            limit = self.load_timeout if action == "generate" else self.timeout
            return EngineUnreachable(f"{self.kind} at {self.host} did not answer {action} within {limit:g}s")
        if isinstance(exc, httpx.ConnectError):
            return EngineUnreachable(f"cannot connect to {self.host} (is the server running?)")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return EngineUnreachable(f"connection to {self.kind} at {self.host} dropped during {action}")
        if isinstance(exc, httpx.TransportError):
            return EngineUnreachable(f"cannot talk to {self.host}: {type(exc).__name__}")
        if isinstance(exc, (json.JSONDecodeError, KeyError, TypeError, ValueError)):
            return EngineError(f"unexpected {action} response from {self.host}: {type(exc).__name__}")
        return EngineError(f"{action} failed on {self.host}: {exc}")


# ---------------------------------------------------------------------- helpers


_TLS_CONTEXT: ssl.SSLContext | None = None


def _tls_context(host: str) -> ssl.SSLContext | bool:
    """One verified TLS context per process for https; none for plain http (saves ~0.1 s a client)."""
    global _TLS_CONTEXT
    if not host.startswith("https://"):
        return False
    if _TLS_CONTEXT is None:
        _TLS_CONTEXT = httpx.create_ssl_context()
    return _TLS_CONTEXT


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The `data:` payloads of a server-sent event stream (comments and pings skipped).

    Lines of one event are joined with newlines as the SSE spec says; servers here send one
    line per event, so each payload is one JSON object or "[DONE]".
    """
    buffer: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if buffer:
                yield "\n".join(buffer)
                buffer = []
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive ping
        name, _, value = line.partition(":")
        if name == "data":
            buffer.append(value[1:] if value.startswith(" ") else value)
    if buffer:
        yield "\n".join(buffer)


def _messages(prompt: str, system: str | None) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return head + [{"role": "user", "content": prompt}]


def _clean(text: str) -> str:
    return " ".join(text.split())


def _error_text(body: Any) -> tuple[str, int]:
    """llama.cpp/OpenAI {"error": {"message", "code"}}, vLLM {"message", "code"}, FastAPI {"detail"}."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message") or err.get("detail") or ""
            code = err.get("code")
            return _clean(str(message)), code if isinstance(code, int) else -1
        if isinstance(err, str):
            return _clean(err), -1
    return _clean(str(body))[:200], -1


def _json(response: httpx.Response, host: str, action: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise EngineError(f"{host} answered {action} with something that is not JSON") from None


def _detect_kind(server_header: str, models: list[dict[str, Any]]) -> str:
    if server_header.lower().startswith("llama.cpp"):
        return "llama.cpp"
    for m in models:
        kind = _OWNED_BY.get(str(m.get("owned_by", "")).lower())
        if kind:
            return kind
    return "openai"


# What a chat template that can think contains: Qwen3's switch, a think block (Qwen3,
# DeepSeek-R1, GLM), reasoning kept in history, gpt-oss's analysis channel.
_THINKING_TEMPLATE = re.compile(
    r"enable_thinking|</?think>|reasoning_content|<\|channel\|>analysis|\bthinking\b")


def _template_thinks(template: Any) -> str | None:
    if not isinstance(template, str):
        return None
    found = _THINKING_TEMPLATE.search(template)
    return f"chat_template mentions {found.group(0)!r}" if found else None


def _matches(entry: dict[str, Any], model: str) -> bool:
    names = {str(entry.get("id", ""))}
    aliases = entry.get("aliases")
    if isinstance(aliases, list):
        names.update(str(a) for a in aliases)
    if entry.get("root"):
        names.add(str(entry["root"]))
    return model in names


def _size(entry: dict[str, Any]) -> int:
    meta = entry.get("meta")
    size = meta.get("size") if isinstance(meta, dict) else None
    return int(size) if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0 else 0


def _context(entry: dict[str, Any], ident: _Identity) -> int | None:
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for value in (meta.get("n_ctx"), entry.get("max_model_len"),
                  (ident.props.get("default_generation_settings") or {}).get("n_ctx") if ident.props else None):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _details(entry: dict[str, Any], ident: _Identity) -> ModelDetails:
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    ftype = str(meta.get("ftype") or "").replace("(guessed)", "").strip()
    n_params = meta.get("n_params")
    return ModelDetails(
        parameter_size=_param_label(n_params) if isinstance(n_params, int) else "",
        quantization_level=ftype,
        format="gguf" if ident.kind == "llama.cpp" else "",
    )


def _param_label(n: int) -> str:
    """Ollama's style of parameter size: 135M, 7.6B."""
    if n <= 0:
        return ""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            value = n / div
            return f"{value:.0f}{unit}" if value >= 100 else f"{value:.3g}{unit}"
    return str(n)


def _keep(chunk: dict[str, Any]) -> dict[str, Any]:
    """The parts of a final chunk worth keeping as the raw record (no text deltas)."""
    return {k: v for k, v in chunk.items() if k not in ("choices",)}


def _done(finish: str, usage: dict[str, Any] | None, timings: dict[str, Any] | None, raw: dict[str, Any]) -> DoneEvent:
    usage = usage or {}
    timings = timings or {}

    def num(d: dict[str, Any], key: str) -> float:
        v = d.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0.0

    prompt_ms, predicted_ms = num(timings, "prompt_ms"), num(timings, "predicted_ms")
    # The server's own counts where it gives them. llama-server's timings.prompt_n are the
    # tokens it evaluated and cache_n those it reused; reported like Ollama does (the whole
    # prompt, with the cached part said apart) so a cache hit is never read as truncation.
    cached: int | None = None
    if "prompt_n" in timings:
        # builds before cache_n was reported say nothing about the cache: None, not 0
        cached = int(num(timings, "cache_n")) if "cache_n" in timings else None
        prompt_n = int(num(timings, "prompt_n")) + (cached or 0)
    else:
        prompt_n = int(num(usage, "prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            cached = int(details["cached_tokens"])
    predicted_n = int(num(timings, "predicted_n")) if "predicted_n" in timings else int(num(usage, "completion_tokens"))
    # a server without a draft model leaves both keys out: None, not 0
    drafted = int(num(timings, "draft_n")) if "draft_n" in timings else None
    accepted = int(num(timings, "draft_n_accepted")) if "draft_n_accepted" in timings else None
    return DoneEvent(
        done_reason=finish,
        total_duration_ns=int((prompt_ms + predicted_ms) * 1e6),
        load_duration_ns=0,
        prompt_eval_count=prompt_n,
        prompt_eval_duration_ns=int(prompt_ms * 1e6),
        eval_count=predicted_n,
        eval_duration_ns=int(predicted_ms * 1e6),
        raw=raw,
        prompt_cached_count=cached,
        draft_tokens=drafted,
        draft_accepted=accepted,
    )
