"""A STAND-IN for an Ollama >= 0.30 server, with a REAL llama-server as its runner child.

Ollama cannot run here; what sparkctl reads beside it can. This process carries Ollama's
command line (`<dir>/ollama serve`: a symlink named `ollama` to this Python, and this file
copied in as `serve`), listens on the engine's port, answers the parts of Ollama's API a
bench, an eval and the dashboard use, and does what Ollama 0.30+ does for a GGUF model
(llm/llama_server.go at v0.30.0 .. v0.33.0-rc2, read from its sources):

- starts the upstream llama-server as its child with Ollama's flags: `--model <blob>
  --port N --host 127.0.0.1 --no-webui --offline -c <num_ctx x parallel> -np <parallel>
  --log-verbosity 4 --no-log-prefix --no-log-timestamps [--spec-type T --spec-draft-n-max N
  --spec-draft-model <blob>] [--cache-type-k T --cache-type-v T] --flash-attn on|off|auto
  [-t N]`, with the server's environment (SetupLlamaServerCommandEnv starts from
  os.Environ(), so LLAMA_ARG_* variables reach the runner). One difference: Ollama drafts
  with `draft-mtp` or `draft-dflash`, which need an MTP head or a DFlash model; SmolLM2 has
  neither, so the stand-in drafts with the same GGUF as `draft-simple`;
- /api/generate renders the prompt through the model's template (ChatML for SmolLM2) and
  streams llama-server's POST /completion with `cache_prompt: true` and the sampling options
  layered as Ollama layers them: its DefaultOptions (repeat_penalty 1.1 before 0.32.10,
  1.0 from it), under the model's PARAMETERs, under the request's options;
- the final chunk's counts come from the runner's `timings`: prompt_eval_count =
  cache_n + prompt_n from 0.30.1 (prompt_n alone in 0.30.0), eval_count = predicted_n, the
  durations from prompt_ms / predicted_ms;
- /api/ps names the model with its manifest digest (not the weights blob's), size_vram 0
  (this runner computes on the CPU; `claim_gpu` says size_vram = size instead, for tests
  whose runs must count as valid and which test something else), context_length = num_ctx; /api/show's Modelfile names
  the weights blob on its FROM line.

Every runner answer's `timings` is appended to a JSONL log (the truth the tests compare
sparkctl's figures with). The configuration comes as JSON in $SPARKCTL_STANDIN.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# started as `ollama serve`, this file runs as a script: the repository root is on PYTHONPATH
from testkit.fakes.ollama_server import go_json, go_time

CHATML = "<|im_start|>{role}\n{content}<|im_end|>\n"


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for piece in v.split("-")[0].split("."):
        out.append(int("".join(c for c in piece if c.isdigit()) or 0))
    return tuple(out)


def default_options(version: str) -> dict[str, Any]:
    """api.DefaultOptions() of that Ollama version: the sampling a request gets for any option
    neither it nor the model's PARAMETERs set (api/types.go; repeat_penalty 1.1 until
    0.32.9, 1.0 from 0.32.10: commit 6a261db7d)."""
    return {"num_predict": -1, "num_keep": 4, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0,
            "typical_p": 1.0, "repeat_last_n": 64,
            "repeat_penalty": 1.0 if _version_tuple(version) >= (0, 32, 10) else 1.1,
            "presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": -1, "stop": []}


class StandIn:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.version = cfg["version"]
        self.runner: subprocess.Popen | None = None
        self.runner_port = cfg["runner_port"]
        self.log_lock = threading.Lock()
        self.loaded_at = time.time_ns()

    # ---- the runner --------------------------------------------------------------------

    def runner_args(self) -> list[str]:
        c = self.cfg
        args = ["--model", c["blob"], "--port", str(self.runner_port), "--host", "127.0.0.1", "--no-webui",
                "--offline", "-c", str(c["num_ctx"] * c["parallel"]), "-np", str(c["parallel"]),
                "--log-verbosity", "4", "--no-log-prefix", "--no-log-timestamps"]
        if c.get("draft"):
            args += ["--spec-type", "draft-simple", "--spec-draft-n-max", str(c.get("draft_n_max", 4)),
                     "--spec-draft-model", c["blob"]]
        if c.get("kv_type"):
            args += ["--cache-type-k", c["kv_type"], "--cache-type-v", c["kv_type"]]
        args += ["--flash-attn", c.get("flash_attn", "auto")]
        if c.get("num_thread"):
            args += ["-t", str(c["num_thread"])]
        return args

    def start_runner(self) -> None:
        env = dict(os.environ)
        env.pop("SPARKCTL_STANDIN", None)
        log = open(self.cfg["runner_log"], "wb")
        self.runner = subprocess.Popen([self.cfg["llama_server"], *self.runner_args()], stdout=log,
                                       stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.runner.poll() is not None:
                raise SystemExit(f"llama-server exited with {self.runner.returncode}")
            try:
                status, _ = self._get("/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit("llama-server did not become healthy")

    def stop_runner(self) -> None:
        if self.runner is not None and self.runner.poll() is None:
            self.runner.terminate()
            try:
                self.runner.wait(10)
            except subprocess.TimeoutExpired:
                self.runner.kill()

    def _get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.runner_port, timeout=5)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    # ---- Ollama's answers --------------------------------------------------------------

    def details(self) -> dict[str, Any]:
        return {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                "parameter_size": "134.52M", "quantization_level": "Q4_1"}

    def ps(self) -> dict[str, Any]:
        c = self.cfg
        return {"models": [{"name": c["model"], "model": c["model"], "size": c["size"], "digest": c["digest"],
                            "details": self.details(),
                            "expires_at": go_time(time.time_ns() + 3600 * 10**9),
                            "size_vram": c["size"] if c.get("claim_gpu") else 0,
                            "context_length": c["num_ctx"]}]}

    def tags(self) -> dict[str, Any]:
        c = self.cfg
        return {"models": [{"name": c["model"], "model": c["model"], "modified_at": go_time(self.loaded_at),
                            "size": c["file_size"], "digest": c["digest"], "details": self.details()}]}

    def parameters(self) -> dict[str, Any]:
        return dict(self.cfg.get("model_params") or {})

    def show(self) -> dict[str, Any]:
        c = self.cfg
        params = self.parameters()
        lines = [f"{k:<15} {v}" for k, v in params.items()]
        modelfile = ('# Modelfile generated by "ollama show"\n'
                     "# To build a new Modelfile based on this, replace FROM with:\n"
                     f"# FROM {c['model']}\n\nFROM {c['blob']}\n"
                     'TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n'
                     '{{ end }}<|im_start|>assistant\n"""\n'
                     + "".join(f"PARAMETER {k} {v}\n" for k, v in params.items()))
        out = {"modelfile": modelfile}
        if lines:
            out["parameters"] = "\n".join(lines)
        out.update({"template": "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
                                "<|im_start|>assistant\n",
                    "details": self.details(),
                    "model_info": {"general.architecture": "llama", "general.file_type": 3,
                                   "general.parameter_count": 134515008, "llama.attention.head_count": 9,
                                   "llama.attention.head_count_kv": 3, "llama.block_count": 30,
                                   "llama.context_length": 8192, "llama.embedding_length": 576},
                    "capabilities": ["completion"], "modified_at": go_time(self.loaded_at)})
        return out

    def completion_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """llamaServerCompletionRequest as Ollama fills it (llm/llama_server.go)."""
        opts = default_options(self.version)
        opts.update(self.parameters())
        opts.update(body.get("options") or {})
        messages = ""
        system = body.get("system")
        if system:
            messages += CHATML.format(role="system", content=system)
        messages += CHATML.format(role="user", content=body.get("prompt", ""))
        prompt = messages + "<|im_start|>assistant\n"
        out = {"prompt": prompt, "stream": True, "cache_prompt": True, "n_predict": opts["num_predict"],
               "n_keep": opts["num_keep"], "temperature": opts["temperature"], "top_k": opts["top_k"],
               "top_p": opts["top_p"], "min_p": opts["min_p"], "repeat_penalty": opts["repeat_penalty"],
               "repeat_last_n": opts["repeat_last_n"], "frequency_penalty": opts["frequency_penalty"],
               "presence_penalty": opts["presence_penalty"], "typical_p": opts["typical_p"], "seed": opts["seed"]}
        if opts.get("stop"):
            out["stop"] = list(opts["stop"])
        return out

    def log(self, entry: dict[str, Any]) -> None:
        with self.log_lock, open(self.cfg["log"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def _json(self, status: int, obj: Any) -> None:
        data = go_json(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def do_GET(self) -> None:  # noqa: N802
        s = self.server.standin
        if self.path == "/api/version":
            self._json(200, {"version": s.version})
        elif self.path == "/api/ps":
            self._json(200, s.ps())
        elif self.path == "/api/tags":
            self._json(200, s.tags())
        elif self.path == "/":
            data = b"Ollama is running"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"error": "404 page not found"})

    def do_POST(self) -> None:  # noqa: N802
        s = self.server.standin
        body = self._body()
        name = body.get("model") or body.get("name") or ""
        if self.path in ("/api/show", "/api/generate") and name.split(":")[0] != s.cfg["model"].split(":")[0]:
            self._json(404, {"error": f"model '{name}' not found"})
            return
        if self.path == "/api/show":
            self._json(200, s.show())
        elif self.path == "/api/generate":
            self._generate(body)
        else:
            self._json(404, {"error": "404 page not found"})

    def _generate(self, body: dict[str, Any]) -> None:
        s = self.server.standin
        now = go_time(time.time_ns())
        if not body.get("prompt"):  # a load (or, with keep_alive 0, an unload): the runner stays
            reason = "unload" if body.get("keep_alive") == 0 else "load"
            self._json(200, {"model": body["model"], "created_at": now, "response": "", "done": True,
                             "done_reason": reason})
            return
        t0 = time.monotonic_ns()
        request = s.completion_request(body)
        conn = http.client.HTTPConnection("127.0.0.1", s.runner_port, timeout=600)
        conn.request("POST", "/completion", json.dumps(request).encode(), {"Content-Type": "application/json"})
        answer = conn.getresponse()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def line(obj: dict[str, Any]) -> None:
            data = (go_json(obj) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        final = None
        try:
            for raw in answer:
                raw = raw.strip()
                if not raw.startswith(b"data: "):
                    continue
                chunk = json.loads(raw[6:])
                if chunk.get("content") and not chunk.get("stop"):
                    line({"model": body["model"], "created_at": go_time(time.time_ns()),
                          "response": chunk["content"], "done": False})
                if chunk.get("stop"):
                    final = chunk
                    break
        finally:
            conn.close()
        timings = (final or {}).get("timings") or {}
        s.log({"request": request, "timings": timings, "stop_type": (final or {}).get("stop_type")})
        prompt_n, cache_n = int(timings.get("prompt_n", 0)), int(timings.get("cache_n", 0))
        counted = prompt_n + cache_n if _version_tuple(s.version) >= (0, 30, 1) else prompt_n
        out = {"model": body["model"], "created_at": go_time(time.time_ns()), "response": "", "done": True,
               "done_reason": "length" if (final or {}).get("stop_type") == "limit" else "stop",
               "total_duration": time.monotonic_ns() - t0}
        for key, value in (("prompt_eval_count", counted),
                           ("prompt_eval_duration", int(float(timings.get("prompt_ms", 0)) * 1e6)),
                           ("eval_count", int(timings.get("predicted_n", 0))),
                           ("eval_duration", int(float(timings.get("predicted_ms", 0)) * 1e6))):
            if value:  # omitempty
                out[key] = value
        line(out)
        self.wfile.write(b"0\r\n\r\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    standin: StandIn


def main() -> None:
    cfg = json.loads(os.environ["SPARKCTL_STANDIN"])
    standin = StandIn(cfg)
    standin.start_runner()
    server = Server(("127.0.0.1", cfg["port"]), Handler)
    server.standin = standin

    def stop(*_: Any) -> None:
        standin.stop_runner()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    Path(cfg["ready"]).write_text("ready")
    try:
        server.serve_forever()
    finally:
        standin.stop_runner()


def install(folder: Path) -> Path:
    """`folder/ollama` (a symlink to this Python) and `folder/serve` (this file): started as
    `folder/ollama serve` with `folder` as its working directory, the process's command line
    is Ollama's own."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "ollama"
    if not exe.exists():
        exe.symlink_to(os.path.realpath(sys.executable))
    shutil.copyfile(__file__, folder / "serve")
    return exe


if __name__ == "__main__":
    main()
