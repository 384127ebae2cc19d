"""Starting the stand-in Ollama (testkit/fakes/ollama_standin.py) with a REAL llama-server
runner child serving SmolLM2-135M, for the runner tests. The stand-in's own process carries
Ollama's command line (`.../ollama serve`), so sparkctl finds it, and its runner, as it finds
a real Ollama's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.fakes.ollama_standin import install
from tests.integration.llama_proc import binary_and_model, free_port

REPO = Path(__file__).resolve().parents[2]
MODEL = "smollm2:135m"
_SHA: dict[Path, str] = {}


def _sha256(path: Path) -> str:
    if path not in _SHA:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _SHA[path] = h.hexdigest()
    return _SHA[path]


@dataclass
class StandIn:
    url: str
    pid: int
    blob: str
    digest: str  # the manifest's, as /api/ps reports it
    runner_port: int
    log: Path
    runner_log: Path
    cfg: dict

    def requests(self) -> list[dict]:
        """What the runner answered, request by request (its own `timings`)."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@contextlib.contextmanager
def running_standin(tmp: Path, *, version: str = "0.32.10", parallel: int = 1, num_ctx: int = 512,
                    draft: bool = False, metrics: bool = False, kv_type: str | None = None,
                    flash_attn: str = "auto", model_params: dict | None = None,
                    claim_gpu: bool = False) -> Iterator[StandIn]:
    binary, gguf = binary_and_model()
    tmp.mkdir(parents=True, exist_ok=True)
    blobs = tmp / "models" / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / f"sha256-{_sha256(gguf)}"  # Ollama names a blob by its content's digest
    if not blob.exists():
        blob.symlink_to(gguf)
    manifest = json.dumps({"schemaVersion": 2, "layers": [{"digest": f"sha256:{_sha256(gguf)}"}]})
    port, runner_port = free_port(), free_port()
    cfg = {"port": port, "runner_port": runner_port, "version": version, "model": MODEL, "blob": str(blob),
           "digest": hashlib.sha256(manifest.encode()).hexdigest(), "size": 2 * gguf.stat().st_size,
           "file_size": gguf.stat().st_size, "llama_server": str(binary), "num_ctx": num_ctx,
           "parallel": parallel, "draft": draft, "kv_type": kv_type, "flash_attn": flash_attn, "num_thread": 1,
           "model_params": model_params or {}, "claim_gpu": claim_gpu, "log": str(tmp / "runner-requests.jsonl"),
           "runner_log": str(tmp / "runner.log"), "ready": str(tmp / "ready")}
    folder = install(tmp / "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env.update(PYTHONPATH=str(REPO), SPARKCTL_STANDIN=json.dumps(cfg))
    if metrics:  # what a user sets in the Ollama service's environment; the runner inherits it
        env["LLAMA_ARG_ENDPOINT_METRICS"] = "1"
    out = open(tmp / "standin.log", "wb")
    proc = subprocess.Popen([str(folder), "serve"], cwd=folder.parent, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (tmp / "ready").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                text = (tmp / "standin.log").read_text(errors="replace")[-3000:]
                runner = (tmp / "runner.log").read_text(errors="replace")[-2000:] if (tmp / "runner.log").exists() else ""
                pytest.fail(f"the stand-in Ollama did not start:\n{text}\n{runner}")
            time.sleep(0.2)
        yield StandIn(f"http://127.0.0.1:{port}", proc.pid, str(blob), cfg["digest"], runner_port,
                      Path(cfg["log"]), Path(cfg["runner_log"]), cfg)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        (tmp / "ready").unlink(missing_ok=True)
