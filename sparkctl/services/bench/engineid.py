"""The engine's identity for one benched model (core/engine_identity.py says what it is):
read after the model is loaded, since Ollama starts a runner process per model.

Where each fact comes from, best first:
- Ollama: the runner serving the model, from the local process table (a llama-server
  child whose --model is the model's blob, the MLX runner, or Ollama's own runner); its
  llama.cpp build from that llama-server's own /props (it listens on 127.0.0.1:<--port>);
  flash attention and the KV cache type from its command line, else from the Ollama
  server's settings (OLLAMA_FLASH_ATTENTION, OLLAMA_KV_CACHE_TYPE) as the one reader of them
  finds them: its process environment, else its systemd unit (services/engine_settings.py). A remote Ollama
  shows none of this: the runner is then inferred from the model's format and the
  version (GGUF runs on llama-server since 0.30, safetensors on MLX) and said to be
  inferred, and the build is unknown (Ollama's logs are not an API).
- llama-server: its /props build_info; flash attention and KV cache type from its command
  line and LLAMA_ARG_* environment when it runs here.
- vLLM / SGLang: their version; the KV cache dtype and attention backend their APIs report.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sparkctl.core import engine_identity as ei
from sparkctl.core.engine_settings import EngineSettings, Layer, identity_tags, resolve
from sparkctl.engines.base import ShowInfo


async def read_identity(engine: Any, model: str, show: ShowInfo | None, version: str,
                        cfg: Any = None) -> dict[str, str]:
    from sparkctl.probes.engine_process import engine_process

    kind = getattr(engine, "kind", "")
    view = await asyncio.to_thread(engine_process, engine.host)
    tags: dict[str, str] = {}
    if kind == "ollama":
        if view is not None and not (view.cmdline and view.cmdline[0].rsplit("/", 1)[-1].startswith("ollama")):
            view = None  # a proxy or a container's port forward listens, not Ollama itself
        from sparkctl.services.engine_settings import engine_settings

        tags.update(await _ollama(view, show, version, await engine_settings(cfg, engine, version)))
    elif kind == "llama.cpp":
        ident = getattr(engine, "identity", None)
        build = ident().get("engine.build") if callable(ident) else None
        tags[ei.RUNNER] = "llama-server"
        tags[ei.RUNNER_BUILD] = build or ei.UNKNOWN
        tags[ei.RUNNER_BUILD + "_source"] = "llama-server /props build_info"
        if view is not None and view.cmdline and "llama-server" in view.cmdline[0].rsplit("/", 1)[-1]:
            tags.update(ei.llama_server_settings(view.cmdline, view.environ))
        elif view is not None:  # a proxy or a container's port forward listens, not the server
            view = None
    else:
        tags[ei.RUNNER] = kind or ei.UNKNOWN
        tags[ei.RUNNER_BUILD] = version or ei.UNKNOWN
        tags[ei.RUNNER_BUILD + "_source"] = f"{kind} version"
        settings = getattr(engine, "serving_settings", None)
        if callable(settings):
            tags.update(await settings())
        if view is not None and view.environ.get("VLLM_ATTENTION_BACKEND") and ei.FLASH_ATTN not in tags:
            tags[ei.FLASH_ATTN] = view.environ["VLLM_ATTENTION_BACKEND"]
            tags[ei.FLASH_ATTN + "_source"] = "VLLM_ATTENTION_BACKEND"
    for key in (ei.FLASH_ATTN, ei.KV_CACHE_TYPE):
        if key not in tags:
            tags[key] = ei.UNKNOWN
            tags[key + "_source"] = ("not revealed by the engine's API" if view is None
                                     else "not revealed by the engine's API or process")
    return tags


async def _ollama(view, show: ShowInfo | None, version: str, settings: EngineSettings | None = None
                  ) -> dict[str, str]:
    """`settings`: the server's, as services/engine_settings.py reads them; without them,
    what `view` (the server's process) shows of its environment."""
    tags: dict[str, str] = {}
    runner, cmd = ei.ollama_runner(view.children, show.model_path if show else "") if view else ("", None)
    if runner:
        tags[ei.RUNNER] = runner
        tags[ei.RUNNER + "_source"] = "the runner process serving the model (local process table)"
    else:
        fmt = str((show.details if show else {}).get("format", "")).lower()
        if fmt == "gguf" and ei.version_at_least(version, (0, 30)):
            tags[ei.RUNNER] = "llama-server"
            tags[ei.RUNNER + "_source"] = "inferred: Ollama >= 0.30 runs GGUF models on llama-server"
        elif fmt == "safetensors":
            tags[ei.RUNNER] = "mlx"
            tags[ei.RUNNER + "_source"] = "inferred: Ollama runs safetensors models on its MLX runner"
        else:
            tags[ei.RUNNER] = ei.UNKNOWN
            tags[ei.RUNNER + "_source"] = "no runner process visible here and no format to infer it from"
    build = None
    if runner == "llama-server" and cmd is not None:
        port = ei.runner_port(cmd)
        build = await _runner_build(port) if port else None
        tags.update({k: v for k, v in ei.llama_server_settings(cmd, {}).items() if not k.startswith("engine.spec")})
        for key in (ei.FLASH_ATTN, ei.KV_CACHE_TYPE):
            tags[key + "_source"] = tags[key + "_source"].replace("llama-server", "Ollama's llama-server runner")
    elif settings is not None or view is not None:
        if settings is None:
            layers = [Layer(f"the server's environment (PID {view.pid})", view.environ, complete=True)
                      ] if view.environ_readable else []
            settings = resolve(layers, version, "read from the server's environment" if layers
                               else "not read: the Ollama process's environment is not readable")
        tags.update(identity_tags(settings))
    tags[ei.RUNNER_BUILD] = build or ei.UNKNOWN
    tags[ei.RUNNER_BUILD + "_source"] = (
        "the llama-server runner's /props build_info" if build else
        "not revealed: Ollama's API does not report its runner's llama.cpp build" if view is None else
        "not revealed: no llama-server runner with a readable /props")
    return tags


async def _runner_build(port: int) -> str | None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:  # loopback: never a proxy
            response = await client.get(f"http://127.0.0.1:{port}/props")
        body = response.json() if response.status_code < 400 else None
    except (httpx.HTTPError, ValueError):
        return None
    build = body.get("build_info") if isinstance(body, dict) else None
    return str(build) if build else None
