"""Ollama's runner processes on this machine, and their own loopback endpoints.

Since Ollama 0.30 a GGUF model runs in an upstream llama-server child of the Ollama server,
listening on 127.0.0.1:<--port> (core/runner_facts.py says what its command line and
endpoints tell). This module finds those children and reads /props, /slots and /metrics from
them: GET only, short timeouts, never through a proxy (http.client does not read the
environment's proxy settings). Blocking: call from a thread.

How the runners are found, best first:
- the process listening on the engine's port is Ollama's (`ollama serve`): its descendants;
- no process is visible on that port (Ollama runs as another user, whose sockets this user
  may not map to a PID): every llama-server whose parent process is an Ollama. Command lines
  are readable across users unless /proc is mounted with hidepid;
- the listener is something else (a proxy, a container's port forward): none, said so.
A remote engine's runners are not on this machine: none, said so.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sparkctl.core.runner_facts import RunnerLaunch, parse_launch, runner_kind
from sparkctl.probes.listeners import LOOPBACK, listener_pid

CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 1.5


@dataclass(frozen=True)
class RunnerScan:
    """The llama-server runners of one Ollama server, and why there are none when so."""

    launches: tuple[RunnerLaunch, ...] = ()
    others: tuple[str, ...] = ()  # other runner kinds seen ("mlx", "ollama runner")
    note: str = ""  # why no runner could be looked at ("" when the scan could look)
    local: bool = False  # an Ollama process was seen on this machine (a note about it is worth saying)


def _is_ollama(cmdline: list[str] | tuple[str, ...]) -> bool:
    return bool(cmdline) and cmdline[0].rsplit("/", 1)[-1].startswith("ollama")


def scan(url: str) -> RunnerScan:
    """The runners of the Ollama server at `url` (see the module's docstring)."""
    parts = urlsplit(url)
    if parts.hostname not in LOOPBACK:
        return RunnerScan(note=f"the engine is not on this machine ({parts.hostname}): its runners are not visible")
    try:
        import psutil
    except ImportError:  # a dependency; only a broken install lacks it
        return RunnerScan(note="psutil is not importable: runners not looked for")
    pid = listener_pid(url)
    kids: list[tuple[int, list[str]]] = []
    if pid is not None:
        try:
            server = psutil.Process(pid)
            cmd = server.cmdline()
            if not _is_ollama(cmd):
                name = (cmd[0].rsplit("/", 1)[-1] if cmd else server.name()) or "?"
                return RunnerScan(note=f"the process listening on port {parts.port} is not Ollama ({name}): "
                                       "its runners are not visible")
            for child in server.children(recursive=True):
                try:
                    kids.append((child.pid, child.cmdline()))
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
        except (psutil.NoSuchProcess, psutil.AccessDenied) as exc:
            return RunnerScan(note=f"the Ollama process is not readable ({type(exc).__name__})", local=True)
    else:
        seen = _children_of_any_ollama(psutil)
        if seen is None:
            return RunnerScan(note="the process table is not readable: runners not visible")
        if not seen[0]:
            return RunnerScan(note=f"no Ollama process visible on this machine (port {parts.port})")
        kids = seen[1]
    launches, others = [], []
    for child_pid, cmd in kids:
        launch = parse_launch(cmd, child_pid)
        if launch is not None:
            launches.append(launch)
        elif runner_kind(cmd):
            others.append(runner_kind(cmd))
    note = ""
    if not launches:
        if others:
            note = (f"Ollama serves its models on {', '.join(sorted(set(others)))}: no llama-server runner "
                    "to read (Ollama before 0.30, or a safetensors model on MLX)")
        else:
            note = "no llama-server runner process found beside Ollama"
    return RunnerScan(tuple(launches), tuple(others), note, local=True)


def _children_of_any_ollama(psutil: Any) -> tuple[bool, list[tuple[int, list[str]]]] | None:
    """(an Ollama server is visible, every process whose parent is one, with its command line);
    None when the process table cannot be listed."""
    try:
        procs = list(psutil.process_iter(["pid", "ppid", "cmdline"]))
    except Exception:
        return None
    by_pid = {p.info["pid"]: p.info for p in procs}
    seen = any(_is_ollama(info.get("cmdline") or []) for info in by_pid.values())
    out = []
    for info in by_pid.values():
        parent = by_pid.get(info.get("ppid"))
        if parent is not None and _is_ollama(parent.get("cmdline") or []) and info.get("cmdline"):
            out.append((info["pid"], list(info["cmdline"])))
    return seen, out


class RunnerReadError(Exception):
    """A runner endpoint did not answer usefully; the message says why, in a few words."""


def get(port: int, path: str, timeout: float = READ_TIMEOUT_S) -> tuple[int, str]:
    """(status, body) of GET http://127.0.0.1:<port><path>."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CONNECT_TIMEOUT_S)
    try:
        conn.connect()
        conn.sock.settimeout(timeout)
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", errors="replace")
    except TimeoutError as exc:
        raise RunnerReadError(f"127.0.0.1:{port}{path} did not answer within {timeout:g} s") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise RunnerReadError(f"127.0.0.1:{port}{path}: {type(exc).__name__}") from exc
    finally:
        conn.close()


def get_json(port: int, path: str, timeout: float = READ_TIMEOUT_S) -> Any:
    status, body = get(port, path, timeout)
    if status >= 400:
        raise RunnerReadError(f"127.0.0.1:{port}{path} answered HTTP {status}")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise RunnerReadError(f"127.0.0.1:{port}{path} answered something other than JSON") from exc


def read_metrics(port: int, timeout: float = READ_TIMEOUT_S) -> str | None:
    """The /metrics page, or None when the runner was started without it (HTTP 501: llama-server
    answers so when --metrics is off)."""
    status, body = get(port, "/metrics", timeout)
    if status == 501:
        return None
    if status >= 400:
        raise RunnerReadError(f"127.0.0.1:{port}/metrics answered HTTP {status}")
    return body
