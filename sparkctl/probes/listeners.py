"""Which local process listens on a TCP port: ties a loopback engine URL to a PID, so that
NVML's per-process GPU memory can be attributed to an engine that does not report its own
placement (llama-server, vLLM, SGLang). Blocking; call from a thread."""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"}


def listener_pid(url: str) -> int | None:
    """The PID listening on the URL's port when the URL is on this machine, else None.

    None also when the OS will not say (another user's process without privileges)."""
    parts = urlsplit(url)
    if parts.hostname not in LOOPBACK:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return int(conn.pid)
    except Exception:  # AccessDenied, no /proc: the cross-check simply does not happen
        return None
    return None


def process_tree(pid: int) -> set[int]:
    """The PID and all its descendants (Ollama runs each model in a runner child process).
    Empty when the process is gone or cannot be read."""
    try:
        import psutil

        proc = psutil.Process(pid)
        return {pid} | {c.pid for c in proc.children(recursive=True)}
    except Exception:
        return set()
