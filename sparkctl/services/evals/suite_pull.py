"""`sparkctl suites pull`: check the suites' source for a file other than the one shipped, and
fetch it.

The source is each suite's published URL, or ``$SPARKCTL_SUITES_MIRROR``: an ``https://``
(or ``http://``) URL, a ``file://`` URL or a plain directory holding the files under their
shipped names (an air-gapped site's copy). A file equal to the shipped one needs nothing
written. A different file is a newer publication or a tampered mirror, which sparkctl cannot
tell apart: it is kept only when the user says so (``--accept-new``); its runs record its
sha256, so they never pass for runs on the shipped file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

from sparkctl import paths
from sparkctl.config import Config
from sparkctl.services.evals.suites import (
    SUITES,
    SuiteError,
    SuiteSpec,
    check_name,
    locate,
    parse_items,
    pull_dir,
    pulled_dir,
    shipped_dir,
)

MIRROR_ENV = "SPARKCTL_SUITES_MIRROR"

Progress = Callable[[int, int | None], None]
Fetch = Callable[[str, Progress], bytes]


def offline_hint(spec: SuiteSpec) -> str:
    """What to do when the source cannot be reached (one clause of a one-line error)."""
    where = (f"check ${MIRROR_ENV}" if os.environ.get(MIRROR_ENV, "").strip()
             else f"without internet, set ${MIRROR_ENV}")
    return (f"{where} (a directory, file:// or https:// URL holding {spec.file}), "
            "or use a copy you have with `sparkctl suites path DIR`")


def _http_fetch(url: str, progress: Progress) -> bytes:
    import httpx

    from sparkctl.core.loopback import LOOPBACK_MOUNTS

    # a mirror elsewhere goes through http(s)_proxy as the user set it; one on this machine never
    with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(30.0), mounts=dict(LOOPBACK_MOUNTS)) as client, \
            client.stream("GET", url) as resp:
        if resp.status_code != 200:
            from sparkctl.core.redact import redact_uri

            raise SuiteError(f"{redact_uri(url)}: HTTP {resp.status_code}")
        total = int(resp.headers.get("content-length") or 0) or None
        chunks, got = [], 0
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            got += len(chunk)
            progress(got, total)
        return b"".join(chunks)


def _local_path(source: str) -> Path | None:
    """The file a file:// URL or a plain path names; None for a network URL."""
    parts = urlsplit(source)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise SuiteError(f"{source}: a file:// URL names a file on this machine (file:///path), "
                             f"not on host {parts.netloc!r}")
        return Path(url2pathname(parts.path))
    if parts.scheme in ("http", "https"):
        return None
    return Path(source).expanduser()


def _mirror() -> str:
    """$SPARKCTL_SUITES_MIRROR, checked: an http(s):// or file:// URL or a directory ("" if unset)."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    scheme = urlsplit(mirror).scheme
    if mirror and scheme not in ("http", "https", "file", "") and "://" in mirror:
        from sparkctl.core.redact import redact_uri

        raise SuiteError(f"${MIRROR_ENV}={redact_uri(mirror)}: not a source sparkctl reads; "
                         "use an https:// or file:// URL, or a directory")
    return mirror


def fetch_any(source: str, progress: Progress) -> bytes:
    """Bytes of a source: read from disk for file:// and plain paths, else downloaded."""
    local = _local_path(source)
    if local is None:
        return _http_fetch(source, progress)
    try:
        data = local.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{local}: not found (${MIRROR_ENV} names the directory holding the suite files)") from None
    except IsADirectoryError:
        raise SuiteError(f"{local}: a directory, not a suite file") from None
    except OSError as exc:
        raise SuiteError(f"{local}: cannot read ({exc.strerror})") from None
    progress(len(data), len(data))
    return data


def source_url(spec: SuiteSpec, which: str = "data") -> str:
    """The published file, or the mirror's copy: $SPARKCTL_SUITES_MIRROR/<shipped file name>."""
    mirror = _mirror()
    name = spec.licence_file if which == "licence" else spec.file
    if not mirror:
        return spec.licence_url if which == "licence" else spec.url
    parts = urlsplit(mirror)
    if parts.scheme in ("http", "https", "file"):
        # the file name goes on the path, before any ?query
        return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + name))
    return str(Path(mirror).expanduser() / name)


@dataclass(frozen=True)
class Pulled:
    name: str
    path: Path  # the copy evals read after the pull
    bytes: int
    sha256: str
    outcome: str  # "shipped": the source's file is the shipped one; "already": that copy was there;
    #               "written": a copy was written; "new": a file other than the shipped one was kept

    @property
    def already(self) -> bool:
        """Nothing was written: the copy evals read is the source's file."""
        return self.outcome in ("shipped", "already")

    def describe(self) -> str:
        mb = f"{self.bytes / 1e6:.1f} MB"
        return {
            "shipped": f"up to date: the source's file is the shipped copy (sha256 {self.sha256[:12]}…)",
            "already": f"already there (sha256 {self.sha256[:12]}…): {self.path}",
            "written": f"downloaded {mb}, sha256 verified: {self.path}",
            "new": (f"kept a file other than the shipped one ({mb}, sha256 {self.sha256[:12]}…): {self.path}; "
                    "its runs do not compare with runs on the shipped copy"),
        }[self.outcome]


def pull_suite(name: str, dest: Path | None = None, fetch: Fetch | None = None,
               progress: Callable[[str, int, int | None], None] | None = None,
               accept_new: bool = False) -> Pulled:
    """Fetch one suite from its source and compare it with the shipped file; write it (and its
    licence) atomically into DEST only when evals would not otherwise read that file.

    A file other than the shipped one is refused (nothing written) unless ``accept_new``.
    Blocking: call from a worker thread."""
    spec = check_name(name)
    dest = dest or pulled_dir()
    try:
        return _pull(spec, dest, fetch or fetch_any, progress, accept_new)
    except OSError as exc:  # a full disk, a read-only dir, a file where the dir should be
        raise SuiteError(f"{dest}: cannot write the suite ({exc.strerror or exc})") from None


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _pull(spec: SuiteSpec, dest: Path, fetch: Fetch, progress: Callable[[str, int, int | None], None] | None,
          accept_new: bool) -> Pulled:
    from sparkctl.core.redact import redact_uri

    say = progress or (lambda *_: None)
    url = source_url(spec)  # a mirror sparkctl cannot read is an error here, before anything is fetched
    shown = redact_uri(url)
    try:
        data = fetch(url, lambda got, total: say(spec.name, got, total))
    except SuiteError:
        raise
    except Exception as exc:  # httpx's many errors: one line naming the URL and what to do
        raise SuiteError(f"{shown}: download failed ({type(exc).__name__}); {offline_hint(spec)}") from None
    sha = hashlib.sha256(data).hexdigest()
    path = dest / spec.file
    have = _sha(path)
    if have == sha:
        return Pulled(spec.name, path, len(data), sha, "already")
    if sha == spec.sha256 and have is None and dest.resolve() == pulled_dir().resolve():
        # the data dir needs no second copy of the shipped file: with none there, evals read the shipped one
        return Pulled(spec.name, shipped_dir() / spec.file, len(data), sha, "shipped")
    if sha != spec.sha256 and not accept_new:
        raise SuiteError(f"{shown}: sha256 {sha[:12]}… is not the shipped file's {spec.sha256[:12]}… "
                         "(a newer publication, or a changed mirror); nothing was written. "
                         "`sparkctl suites pull --accept-new` keeps it")
    parse_items(spec.name, data, shown)  # a file that cannot be read as the suite is not kept
    paths.atomic_write_bytes(dest / spec.licence_file, _licence(spec, fetch))
    paths.atomic_write_bytes(path, data)
    return Pulled(spec.name, path, len(data), sha, "written" if sha == spec.sha256 else "new")


def _licence(spec: SuiteSpec, fetch: Fetch) -> bytes:
    """The source's licence file; the shipped one when the source has none to give."""
    try:
        return fetch(source_url(spec, "licence"), lambda *_: None)
    except Exception:
        return (shipped_dir() / spec.licence_file).read_bytes()


@dataclass(frozen=True)
class PullReport:
    """One suite's pull: what happened, or why not and which copy evals read meanwhile."""

    name: str
    pulled: Pulled | None
    error: str | None = None


def pull_all(cfg: Config, accept_new: bool = False,
             progress: Callable[[str, int, int | None], None] | None = None,
             fetch: Fetch | None = None) -> tuple[Path, str, list[PullReport]]:
    """`sparkctl suites pull` for every suite, into the directory evals read (a chosen one, else
    the data dir). A failure says which copy evals keep reading. Blocking."""
    dest, how = pull_dir(cfg)
    reports = []
    for name in SUITES:
        try:
            reports.append(PullReport(name, pull_suite(name, dest=dest, fetch=fetch, progress=progress,
                                                       accept_new=accept_new)))
        except SuiteError as exc:
            copy = locate(cfg, name)
            meanwhile = (f"evals keep reading the {copy.label}" if copy.path.is_file()
                         else f"and no copy is at {copy.path}")
            reports.append(PullReport(name, None, f"{exc}; {meanwhile}"))
    return dest, how, reports
