"""What the tests that start system services (sshd, PostgreSQL) share: a free loopback
port, and one rule for a missing Debian package: a skip that says how to get it, except in
CI, where `make test` installs it and its absence is a failure."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing(what: str, package: str) -> NoReturn:
    message = f"{what} not found: apt-get install {package} (`make test` installs it where it can)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
