"""Asking one host for its status: the system's `ssh`, running `sparkctl status --json` there.

The system's ssh, not a library: the user's keys, agent, ~/.ssh/config, jump hosts and
ControlMaster sessions all apply as they do at the shell, and nothing new listens on any
host. BatchMode: a host that would ask for a password or a host key confirmation fails at
once with ssh's own message instead of waiting for a prompt nobody sees.

An answer is classified by what went wrong, because each is fixed differently: ssh itself
failed (exit 255: host down, key refused, name unknown), sparkctl is not installed there
(127), it is too old to have `status --json` (argparse's complaint), its engine is down
(sparkctl answered, with exit 3 and a status saying so), or nothing came back in time.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shlex
import signal
import time
from dataclasses import dataclass
from typing import Any

from sparkctl.config import Config, HostConfig
from sparkctl.core.host_status import HostStatus, StatusFormatError, parse_status
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.safeload import Unparsable, load_json
from sparkctl.core.termtext import safe_line, safe_tree

# why a host gave no status
SSH_ERROR = "ssh"
MISSING = "sparkctl-missing"
TOO_OLD = "sparkctl-too-old"
TIMEOUT = "timeout"
BAD_ANSWER = "bad-answer"
REMOTE_ERROR = "sparkctl-error"

MAX_OUTPUT = 4 * 1024 * 1024  # a status is a few kB; anything past this is not one
READ_GRACE_S = 1.0  # after ssh exits: a ControlPersist master may hold a pipe open

# ssh's chatter on stderr that is not the reason for anything
_NOISE = re.compile(r"^(Warning: Permanently added|\*\*|Pseudo-terminal|Connection to .* closed\.)")
# argparse on a sparkctl without `status --json` (or without `status` at all), or without
# `status --no-repair` (which would put back a dead bench's models while being looked at)
_TOO_OLD = re.compile(r"unrecognized arguments: (--json|--no-repair)|invalid choice: 'status'")
_NO_READ_ONLY = re.compile(r"unrecognized arguments: --no-repair")


@dataclass(frozen=True)
class Answer:
    """One ask: a status (``status`` set, maybe with an engine that is down), or why not."""

    status: HostStatus | None
    failure: str | None = None  # SSH_ERROR, MISSING, TOO_OLD, TIMEOUT, BAD_ANSWER, REMOTE_ERROR
    reason: str = ""  # one line for the user, redacted
    exit_code: int | None = None
    seconds: float = 0.0


def _command_word(cmd: str) -> str:
    """The sparkctl command for the remote shell: quoted, except a leading ~/ which the
    remote shell expands to that user's home."""
    if cmd.startswith("~/"):
        return "~/" + shlex.quote(cmd[2:])
    return shlex.quote(cmd)


def _engine_is_secret(host: HostConfig) -> bool:
    """Whether [hosts.NAME] engine carries a credential (user:token@, ?api_key=...): what
    sparkctl redacts everywhere else must not stand in ssh's argv, which `ps` shows to
    every user of the machine."""
    return bool(host.engine) and redact_uri(host.engine) != host.engine


def remote_command(host: HostConfig, cfg: Config) -> str:
    """What the remote user's shell runs. The engine URL, when the fleet config names one,
    goes as OLLAMA_HOST, which sparkctl there takes over its own config. A URL with a
    credential in it is not written into the command: the remote shell reads it from the
    session's stdin (``remote_stdin``) into its environment. `--no-repair`: the fleet only
    reads; a dead bench's models are left as they are and come back as a warning (a sparkctl
    there too old for it is refused, never asked without it)."""
    words = [_command_word(host.sparkctl or cfg.fleet.sparkctl), "status", "--json", "--no-repair"]
    if _engine_is_secret(host):
        return "IFS= read -r OLLAMA_HOST && export OLLAMA_HOST && " + " ".join(words)
    if host.engine:
        words.insert(0, "OLLAMA_HOST=" + shlex.quote(host.engine))
    return " ".join(words)


def remote_stdin(host: HostConfig) -> bytes:
    """What ssh sends on the session's stdin: the secret engine URL for ``remote_command``'s
    `read`, or nothing."""
    return (host.engine + "\n").encode("utf-8") if _engine_is_secret(host) else b""


def ssh_argv(host: HostConfig, cfg: Config, ssh: str = "ssh") -> list[str]:
    """ssh's arguments: no prompts, a connect timeout, no terminal, the user's own config
    (or [fleet] ssh_config), and `--` so a destination can never be read as an option."""
    argv = [ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, math.ceil(cfg.fleet.timeout_s))}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2", "-T", "-x"]
    if cfg.fleet.ssh_config:
        argv += ["-F", os.path.expanduser(cfg.fleet.ssh_config)]
    return argv + ["--", host.destination, remote_command(host, cfg)]


def _last_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not _NOISE.match(ln.strip())]
    return lines[-1] if lines else ""


def classify(code: int | None, stdout: bytes, stderr: bytes, host: HostConfig, cfg: Config) -> Answer:
    """What a finished ssh's exit code and output mean (see the module's doc)."""
    err = stderr.decode("utf-8", errors="replace")
    line = safe_line(redact_text(_last_line(err)))
    command = host.sparkctl or cfg.fleet.sparkctl
    if code == 255:
        return Answer(None, SSH_ERROR, line or "ssh failed (exit 255)", code)
    if code in (126, 127):
        return Answer(None, MISSING, f"sparkctl not found there ({command!r}: {line or f'exit {code}'}); "
                      f"install it or set [hosts.{host.name}] sparkctl", code)
    if _NO_READ_ONLY.search(err):
        return Answer(None, TOO_OLD, f"sparkctl there is too old to be read without repairing what a dead bench "
                      f"changed (no `status --no-repair`; {line}): upgrade it", code)
    if _TOO_OLD.search(err):
        return Answer(None, TOO_OLD, f"sparkctl there is too old for `status --json` ({line}): upgrade it", code)
    if len(stdout) > MAX_OUTPUT:
        return Answer(None, BAD_ANSWER, f"it answered more than {MAX_OUTPUT // (1024 * 1024)} MiB: not a status", code)
    text = stdout.decode("utf-8", errors="replace").strip()
    if text:
        try:
            obj = load_json(text)
        except Unparsable as exc:
            return Answer(None, BAD_ANSWER, f"its status cannot be read: {exc}", code)
        except ValueError:
            obj = None
        if obj is not None:
            obj = safe_tree(obj)  # the host's text is shown here: no escape sequences reach a terminal
            try:
                return Answer(parse_status(obj), exit_code=code)
            except StatusFormatError as exc:
                kind = TOO_OLD if "too old" in str(exc) else BAD_ANSWER
                return Answer(None, kind, redact_text(str(exc)), code)
    if code == 0 or not line:
        return Answer(None, BAD_ANSWER, f"sparkctl answered no status (exit {code})", code)
    return Answer(None, REMOTE_ERROR, f"sparkctl there failed: {line}", code)


async def _read(stream: asyncio.StreamReader | None, out: bytearray) -> bytes:
    """Everything up to the end into `out`, keeping at most MAX_OUTPUT + 1 bytes: the rest is
    read and dropped, so a host that says too much still finishes (a reader that stopped
    would leave it blocked on a full pipe until the timeout, "no answer" from a host that
    did answer)."""
    if stream is None:
        return b""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        if len(out) <= MAX_OUTPUT:
            out += chunk[:MAX_OUTPUT + 1 - len(out)]
    return bytes(out)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End ssh (its whole process group) and reap it: the next ask of this host must not
    find the last one still running."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        if proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(proc.wait(), wait)
        except asyncio.TimeoutError:
            continue


async def ask_status(host: HostConfig, cfg: Config, ssh: str = "ssh") -> Answer:
    """Run ssh once, at most [fleet] timeout_s; never raises for anything the host does."""
    started = time.monotonic()
    timeout = cfg.fleet.timeout_s
    feed = remote_stdin(host)
    try:
        proc = await asyncio.create_subprocess_exec(
            *ssh_argv(host, cfg, ssh), stdin=asyncio.subprocess.PIPE if feed else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return Answer(None, SSH_ERROR, f"cannot run {ssh}: {exc.strerror or exc}")
    if feed and proc.stdin is not None:
        # one short line: it fits the pipe's buffer, so this never waits on the host
        try:
            proc.stdin.write(feed)
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # ssh already exited: its exit code says why
    got = [bytearray(), bytearray()]
    readers = [asyncio.ensure_future(_read(proc.stdout, got[0])), asyncio.ensure_future(_read(proc.stderr, got[1]))]
    try:
        try:
            code = await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            await _stop(proc)
            for r in readers:
                r.cancel()
            if len(got[0]) > MAX_OUTPUT:  # it was answering: more than any status, without end
                return Answer(None, BAD_ANSWER, f"it sent more than {MAX_OUTPUT // (1024 * 1024)} MiB without "
                              f"finishing: not a status", None, time.monotonic() - started)
            return Answer(None, TIMEOUT, f"no answer within {timeout:g} s", None, time.monotonic() - started)
        # ssh has exited; its pipes close with it unless a background master holds one
        done, pending = await asyncio.wait(readers, timeout=READ_GRACE_S)
        for r in pending:
            r.cancel()
        out = readers[0].result() if readers[0] in done else b""
        err = readers[1].result() if readers[1] in done else b""
    except asyncio.CancelledError:
        await asyncio.shield(_stop(proc))
        for r in readers:
            r.cancel()
        raise
    answer = classify(code, out, err, host, cfg)
    return Answer(answer.status, answer.failure, answer.reason, answer.exit_code, time.monotonic() - started)


def answer_to_dict(a: Answer) -> dict[str, Any]:
    return {"failure": a.failure, "reason": a.reason, "exit_code": a.exit_code, "seconds": round(a.seconds, 3)}
