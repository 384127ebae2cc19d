"""Which hosts the fleet shows: the [hosts.NAME] entries, then the ssh config's Host names
that match [fleet] ssh_hosts (a glob such as "spark-*"), in that order, each once."""

from __future__ import annotations

import fnmatch
import glob
import os
import shlex
from pathlib import Path

from sparkctl.config import Config, HostConfig

MAX_INCLUDE_DEPTH = 8  # ssh's own limit on nested Include


def ssh_config_file(cfg: Config) -> Path:
    """The ssh config ssh reads: [fleet] ssh_config, else the user's ~/.ssh/config."""
    if cfg.fleet.ssh_config:
        return Path(os.path.expanduser(cfg.fleet.ssh_config))
    return Path.home() / ".ssh" / "config"


def _words(line: str) -> tuple[str, list[str]]:
    """A config line as (keyword in lower case, its arguments): `Host a b`, `Host=a`,
    quoted arguments and trailing comments as ssh_config(5) reads them."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unclosed quote: ssh would refuse the file; so does this reader
        return "", []
    if not words:
        return "", []
    key, eq, value = words[0].partition("=")
    rest = ([value] if value else []) + words[1:]
    if not eq and rest and rest[0] == "=":
        rest = rest[1:]
    return key.lower(), rest


def ssh_config_names(path: Path, _depth: int = 0) -> list[str]:
    """Host aliases named in an ssh config and the files it Includes, patterns and
    negations left out: the names a user types after `ssh`."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    names: list[str] = []
    for line in text.splitlines():
        key, words = _words(line)
        if key == "host":
            # patterns are not names; nor is a word with control characters (no host has one,
            # and it would reach the terminal as an escape sequence)
            names += [w for w in words if not any(c in w for c in "*?!") and w.isprintable()]
        elif key == "include" and _depth < MAX_INCLUDE_DEPTH:
            for pattern in words:
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):  # relative to ~/.ssh, as ssh resolves a user config
                    pattern = str(Path.home() / ".ssh" / pattern)
                for included in sorted(glob.glob(pattern)):
                    names += ssh_config_names(Path(included), _depth + 1)
    return list(dict.fromkeys(names))


def fleet_hosts(cfg: Config, only: list[str] | None = None) -> list[HostConfig]:
    """The hosts to ask, configured ones first. ``only`` keeps those names (or ssh
    destinations), in the order given; a name that is no host becomes an ad-hoc one whose
    ssh destination is that name."""
    hosts = dict(cfg.hosts)
    if cfg.fleet.ssh_hosts:
        for name in ssh_config_names(ssh_config_file(cfg)):
            if fnmatch.fnmatchcase(name, cfg.fleet.ssh_hosts) and name not in hosts:
                hosts[name] = HostConfig(name=name)
    if not only:
        return list(hosts.values())
    out = []
    for name in dict.fromkeys(only):
        match = hosts.get(name) or next((h for h in hosts.values() if h.destination == name), None)
        out.append(match or HostConfig(name=name))
    return out
