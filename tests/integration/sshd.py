"""A REAL OpenSSH server (Debian's openssh-server) on a loopback port, for the fleet tests.

Each `Sshd` has its own generated host key; the client side has one generated user key and
an ssh config file (passed to ssh with -F) naming each host alias, its port, that key and a
known_hosts file holding the host keys, so ssh checks them strictly and never prompts.
It logs in as the user running the tests: root here and in CI (a key-only root login,
which sshd allows by default), or any other user (an sshd run by a non-root user can only
log that same user in, which is all this needs).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.system_tools import free_port, missing

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def find_sshd() -> str:
    """The sshd binary, or a skip (a failure in CI, where `make test` installs it)."""
    for path in SSHD_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("sshd")
    if found:
        return found
    missing("sshd", "openssh-server")


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sparkctl-test", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


class Sshd:
    """One sshd listening on 127.0.0.1:port until stopped (and again when started)."""

    def __init__(self, root: Path, name: str, authorized_keys: Path) -> None:
        self.dir = root / f"sshd-{name}"
        self.dir.mkdir(parents=True)
        self.name = name
        self.port = free_port()
        self.host_key = self.dir / "host_key"
        keygen(self.host_key)
        self.log = self.dir / "sshd.log"
        self.config = self.dir / "sshd_config"
        user = getpass.getuser()
        self.config.write_text("\n".join([
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized_keys}",
            "StrictModes no",  # the key files live in a pytest tmp dir, not ~/.ssh
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {user}",
            "MaxStartups 50",
            "LogLevel VERBOSE",
        ]) + "\n")
        self.proc: subprocess.Popen | None = None

    def start(self, sshd: str) -> "Sshd":
        if os.geteuid() == 0:
            # sshd run as root wants its privilege separation directory, which the
            # package's service unit would create at boot
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        out = open(self.log, "ab")
        try:
            # -D: stay in the foreground (our child); -e: log to stderr, i.e. the log file
            self.proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(self.config)], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-2.0"):
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"sshd did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the listener and every session it started (the host goes away)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.proc = None


class SshLab:
    """sshd servers plus the client's key, known_hosts and ssh config file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sshd_bin = find_sshd()
        self.user_key = root / "user_key"
        keygen(self.user_key)
        self.authorized_keys = root / "authorized_keys"
        self.authorized_keys.write_text((root / "user_key.pub").read_text())
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text("")
        self.ssh_config = root / "ssh_config"
        self.aliases: dict[str, Sshd] = {}
        self.servers: list[Sshd] = []

    def server(self, name: str) -> Sshd:
        server = Sshd(self.root, name, self.authorized_keys).start(self.sshd_bin)
        self.servers.append(server)
        key = (server.host_key.with_suffix(".pub")).read_text().split()
        with open(self.known_hosts, "a") as fh:
            fh.write(f"[127.0.0.1]:{server.port} {key[0]} {key[1]}\n")
        return server

    def alias(self, alias: str, server: Sshd) -> str:
        """An ssh Host alias for `server` in the client config; returns the alias."""
        self.aliases[alias] = server
        self._write_config()
        return alias

    def _write_config(self) -> None:
        user = getpass.getuser()
        blocks = [f"Host {a}\n  HostName 127.0.0.1\n  Port {s.port}\n" for a, s in self.aliases.items()]
        blocks.append("\n".join([
            "Host *",
            f"  User {user}",
            f"  IdentityFile {self.user_key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {self.known_hosts}",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
            "  LogLevel ERROR",
        ]) + "\n")
        self.ssh_config.write_text("\n".join(blocks))
        self.ssh_config.chmod(0o600)

    def close(self) -> None:
        for s in self.servers:
            s.stop()


@pytest.fixture
def lab(tmp_path):
    """An SshLab in the test's tmp dir; every sshd it started is stopped after the test."""
    root = tmp_path / "ssh"
    root.mkdir()
    lab = SshLab(root)
    try:
        yield lab
    finally:
        lab.close()
