"""What a local engine's processes show about how it serves: the server's command line and
the few environment variables that decide flash attention and the KV cache type of an
OpenAI-compatible server (an Ollama server's own settings have one reader of their own,
services/engine_settings.py), and its runner children (Ollama starts one runner process per loaded model: an upstream
llama-server since 0.30, the MLX runner for safetensors models, Ollama's own runner before).

Only for an engine on this machine (a loopback URL whose port a local process listens on);
None otherwise, or when the OS will not say (another user's process). Blocking: call from a
thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkctl.probes.listeners import listener_pid

# The settings that change what an engine computes, as environment variables.
WATCHED_ENV = (
    "LLAMA_ARG_FLASH_ATTN", "LLAMA_ARG_CACHE_TYPE_K", "LLAMA_ARG_CACHE_TYPE_V",
    "VLLM_ATTENTION_BACKEND",
)


@dataclass(frozen=True)
class ProcessView:
    pid: int
    cmdline: tuple[str, ...]
    environ: dict[str, str] = field(default_factory=dict)  # only WATCHED_ENV keys that are set
    environ_readable: bool = True
    children: tuple[tuple[str, ...], ...] = ()  # the command lines of its descendants


def engine_process(url: str) -> ProcessView | None:
    pid = listener_pid(url)
    if pid is None:
        return None
    try:
        import psutil

        proc = psutil.Process(pid)
        cmdline = tuple(proc.cmdline())
        try:
            env = proc.environ()
            readable = True
        except (psutil.AccessDenied, OSError):
            env, readable = {}, False
        kids = []
        for child in proc.children(recursive=True):
            try:
                kids.append(tuple(child.cmdline()))
            except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                continue
    except Exception:  # gone, or not ours to read
        return None
    return ProcessView(pid, cmdline, {k: v for k, v in env.items() if k in WATCHED_ENV}, readable, tuple(kids))
