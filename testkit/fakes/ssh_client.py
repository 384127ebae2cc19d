"""A FAKE `ssh` client for tests that need to see what sparkctl hands to ssh: its argv (which
every user of the machine can read in `ps`) and what it writes on ssh's stdin.

It behaves as ssh does for `ssh [options] -- DESTINATION COMMAND`: the remote user's login
shell runs COMMAND (`sh -c COMMAND`; here on this machine, as this user) with the session's
stdin, and ssh exits with the command's exit code. Each call appends one JSON line to
$FAKE_SSH_LOG: {"argv": [...], "stdin": "..."}. The real client over a real sshd is
tests/integration/sshd.py.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

SCRIPT = '''#!{python}
import json, os, subprocess, sys
argv = sys.argv[1:]
data = sys.stdin.buffer.read()
with open(os.environ["FAKE_SSH_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({{"argv": argv, "stdin": data.decode("utf-8", "replace")}}) + "\\n")
rest = argv[argv.index("--") + 1:]
if len(rest) < 2:
    sys.exit(255)
done = subprocess.run(["sh", "-c", rest[1]], input=data)
sys.exit(done.returncode)
'''


def install_fake_ssh(bin_dir: Path) -> Path:
    """Write the fake `ssh` into `bin_dir` (put it first on PATH); returns its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "ssh"
    path.write_text(SCRIPT.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def read_log(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def env_with_fake_ssh(bin_dir: Path, log: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_SSH_LOG": str(log)}
