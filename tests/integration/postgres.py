"""A REAL private PostgreSQL cluster (Debian's postgresql) for the team-server test.

initdb in a fresh directory under /tmp, password (SCRAM) authentication, a unix socket in
that directory and a loopback port. PostgreSQL refuses to run as root, so as root the
cluster belongs to the unprivileged `nobody` account (runuser); any other user runs it as
themselves. The superuser's password is written to a 0600 pgpass file for clients
(PGPASSFILE), never put on a command line.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.integration.system_tools import free_port, missing

USER = "sparkctl"
DATABASE = "mlflow"


def find_pg_bin() -> Path:
    """Debian's versioned bin directory (newest), else initdb on PATH; a skip outside CI
    (a failure in CI, where `make test` installs postgresql)."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return Path(d)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    missing("PostgreSQL", "postgresql")


class PostgresCluster:
    def __init__(self) -> None:
        self.bin = find_pg_bin()
        self.owner = "nobody" if os.geteuid() == 0 else None
        self.dir = Path(tempfile.mkdtemp(prefix="sparkctl-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        self.password = secrets.token_urlsafe(18)
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.owner is not None:
            # the cluster's files belong to the account that runs it; tmp dirs are 0700
            pw = pwd.getpwnam(self.owner)
            for p in (self.dir, pwfile):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        self.run("initdb", "-D", str(self.data), "-U", USER, "--auth=scram-sha-256", f"--pwfile={pwfile}",
                 "-E", "UTF8", "--no-sync", "--no-instructions")
        pwfile.unlink()
        # for clients (the mlflow server, the test): libpq reads it, ps never shows it
        self.pgpass = self.dir / "pgpass"
        fd = os.open(self.pgpass, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"127.0.0.1:{self.port}:*:{USER}:{self.password}\n")

    def run(self, tool: str, *args: str) -> None:
        argv = [str(self.bin / tool), *args]
        if self.owner is not None:
            argv = ["runuser", "-u", self.owner, "--", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"{tool} failed ({p.returncode}): {p.stderr.strip()[-1500:]}\n"
                                 f"{self.log.read_text(errors='replace')[-1500:] if self.log.exists() else ''}")

    def start(self) -> "PostgresCluster":
        # fsync off: a test cluster; a crash of this machine is not what is tested
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o",
                 f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        return self

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", "fast", "stop")

    def create_database(self, name: str = DATABASE) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=USER, dbname="postgres",
                             passfile=str(self.pgpass), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    @property
    def uri(self) -> str:
        """The backend store URI: no password in it (libpq finds it in PGPASSFILE)."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def destroy(self) -> None:
        try:
            self.stop()
        except AssertionError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
