"""Read a local Ollama server's settings where it keeps them, best first:

1. the environment of the process listening on the engine's port (`/proc/PID/environ`,
   which holds whatever a systemd unit, a drop-in or a shell gave it);
2. when that is not ours to read (on a Spark the server belongs to user `ollama`), its
   systemd unit's `Environment=` as `systemctl show` reports it to any user, drop-ins
   included, with any `EnvironmentFile=` this user can read. When even the listener's PID
   is hidden (another user's socket), the unit is Ollama's own, `ollama.service`, taken only
   when it runs and its OLLAMA_HOST names the engine's port;
3. the command line of a runner it started (`-np`, `--cache-type-k`; command lines are
   readable by every user).

The settings themselves are parsed in core/engine_settings.py. Blocking (psutil, /proc,
a `systemctl` child): call from a thread.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sparkctl.core.engine_settings import ENV_VARS, Layer, runner_layer
from sparkctl.core.loopback import is_loopback_url

OLLAMA_UNIT = "ollama.service"  # what Ollama's install script creates
SYSTEMCTL_TIMEOUT_S = 3.0
# the settings, where it listens, and where it keeps models (pull's disk check)
_WANTED = set(ENV_VARS.values()) | {"OLLAMA_HOST", "OLLAMA_MODELS"}


@dataclass(frozen=True)
class ServerReading:
    layers: tuple[Layer, ...] = ()
    where: str = ""  # one line: what was read, or why nothing could be
    pid: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _port(url: str) -> int:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.port or (443 if parts.scheme == "https" else 80)


def _looks_like_ollama(cmdline: list[str]) -> bool:
    """The process is Ollama itself, not a proxy or a container's port forward (whose
    environment says nothing about the server's)."""
    return bool(cmdline) and os.path.basename(cmdline[0]).lower().startswith("ollama")


def _unit_of(pid: int) -> str | None:
    """The systemd service a process runs in, from its cgroup (readable by every user)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.rsplit(":", 1)[-1]
        for part in reversed(path.split("/")):
            if part.endswith(".service"):
                return part
    return None


def _env_assignments(text: str) -> dict[str, str]:
    """`A=1 "B=two words"`: systemctl's Environment= value, or an EnvironmentFile's lines."""
    out: dict[str, str] = {}
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key.startswith("export "):
            key = key[len("export "):]
        if eq and key in _WANTED:
            out[key] = value
    return out


def systemctl_show(unit: str, systemctl: str | None = None) -> dict[str, str] | None:
    """`systemctl show UNIT` as key -> value; None when systemd cannot be asked."""
    exe = systemctl or shutil.which("systemctl")
    if not exe:
        return None
    try:
        done = subprocess.run(
            [exe, "show", unit, "--property=ActiveState,MainPID,Environment,EnvironmentFiles"],
            capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT_S, stdin=subprocess.DEVNULL,
            env={**os.environ, "SYSTEMD_PAGER": "", "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            # EnvironmentFiles= comes once per file
            out[key] = f"{out[key]}\n{value}" if key in out and key == "EnvironmentFiles" else value
    return out


def unit_layer(unit: str, shown: dict[str, str]) -> tuple[Layer, list[str]]:
    """The unit's environment: Environment= (drop-ins merged by systemd) over its
    EnvironmentFile=s, which systemd reads first; complete only when every file was read."""
    env: dict[str, str] = {}
    notes: list[str] = []
    complete = True
    for line in (shown.get("EnvironmentFiles") or "").splitlines():
        path = line.split(" (", 1)[0].strip()
        optional = "ignore_errors=yes" in line
        if not path:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                env.update(_env_assignments(fh.read()))
        except FileNotFoundError:
            if not optional:
                complete = False
        except OSError as exc:
            complete = False
            notes.append(f"{unit}'s EnvironmentFile {path} is not readable here ({exc.strerror or exc})")
    env.update(_env_assignments(shown.get("Environment") or ""))
    return Layer(f"{unit}'s Environment= (systemctl show)", env, complete=complete), notes


def _unit_port(env: dict[str, str]) -> int:
    """The port a server started with this environment listens on (OLLAMA_HOST's rules)."""
    raw = env.get("OLLAMA_HOST", "").strip().strip("\"'")
    scheme, sep, rest = raw.partition("://")
    default = (443 if scheme.lower() == "https" else 80) if sep else 11434
    hostport = (rest if sep else raw).split("/", 1)[0]
    port = hostport.rsplit("]", 1)[-1] if hostport.startswith("[") else hostport
    _, colon, digits = port.rpartition(":")
    return int(digits) if colon and digits.isdigit() and 0 < int(digits) < 65536 else default


def read_server(url: str, *, systemctl: str | None = None) -> ServerReading:
    """What this machine shows of the Ollama server at `url` (see the module's doc)."""
    if not is_loopback_url(url):
        return ServerReading(where=f"not read: the engine at {url} is on another machine")
    from sparkctl.probes.listeners import listener_pid

    try:
        import psutil
    except ImportError:  # pragma: no cover - a dependency
        return ServerReading(where="not read: psutil is missing")

    notes: list[str] = []
    pid = listener_pid(url)
    proc = None
    if pid is not None:
        try:
            proc = psutil.Process(pid)
            cmdline = proc.cmdline()
        except psutil.Error:
            proc, cmdline = None, []
        if proc is not None and not _looks_like_ollama(cmdline):
            return ServerReading(where="not read: the process on the engine's port is not Ollama itself "
                                       "(a proxy or a container's port forward)", pid=pid)
    unit = _unit_of(pid) if pid is not None else None
    if proc is not None:
        try:
            env = proc.environ()
        except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
            env = None
            notes.append(f"the server's environment (PID {pid}) is not readable by this user")
        except psutil.NoSuchProcess:
            env = None
        if env is not None:
            layer = Layer(f"the server's environment (PID {pid})", {k: v for k, v in env.items() if k in _WANTED},
                          complete=True)
            return ServerReading((layer,), f"read from the server's environment (PID {pid})", pid, tuple(notes))

    layers: list[Layer] = []
    shown = None
    if unit is None and pid is None:
        # another user's socket: its PID is hidden, but Ollama's own unit can be asked
        shown = systemctl_show(OLLAMA_UNIT, systemctl)
        if shown and shown.get("ActiveState") == "active" and shown.get("MainPID", "0") not in ("", "0"):
            layer, more = unit_layer(OLLAMA_UNIT, shown)
            if _unit_port(dict(layer.env)) == _port(url):
                unit, pid = OLLAMA_UNIT, int(shown["MainPID"])
                notes.append(f"the process listening on port {_port(url)} is not visible to this user; "
                             f"{OLLAMA_UNIT} (PID {pid}) listens there")
            else:
                notes.append(f"{OLLAMA_UNIT} listens on port {_unit_port(dict(layer.env))}, not {_port(url)}")
                shown = None
        else:
            shown = None
    elif unit is not None:
        shown = systemctl_show(unit, systemctl)
        if shown is not None and shown.get("MainPID") != str(pid):
            # not the system manager's unit of that process (a user unit of the same name, a
            # helper in the unit's cgroup): its Environment= is not the server's
            notes.append(f"{unit} as the system's systemd shows it is not the process on the engine's port")
            shown = None
    if unit is not None and shown is not None:
        layer, more = unit_layer(unit, shown)
        notes.extend(more)
        layers.append(layer)
    if pid is not None:
        runner = _runner(pid)
        if runner is not None:
            layers.append(runner)
    if layers:
        where = "read from " + " and ".join(layer.source for layer in layers)
    elif pid is None:
        where = (f"not read: no process this user can see listens on port {_port(url)}, "
                 f"and no running {OLLAMA_UNIT} does")
    else:
        where = (f"not read: the server (PID {pid}) belongs to another user"
                 + (f" and {unit} could not be asked" if unit else ", and no systemd unit names it"))
    return ServerReading(tuple(layers), where, pid, tuple(notes))


def _runner(pid: int) -> Layer | None:
    """The first runner child whose command line shows a setting."""
    try:
        import psutil

        children = psutil.Process(pid).children(recursive=True)
    except Exception:  # gone, or not ours to list
        return None
    for child in children:
        try:
            layer = runner_layer(child.cmdline(), child.pid)
        except Exception:
            continue
        if layer is not None:
            return layer
    return None
