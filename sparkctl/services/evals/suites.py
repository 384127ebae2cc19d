"""Quality suites on disk: where they are, what they hold, and getting them.

The product ships no suite data. `sparkctl suites pull` downloads each file from its public
source into ``<data dir>/suites`` and checks its sha256; `sparkctl suites path DIR` points at a
copy the user already has (kept in ``<data dir>/suites/location``, written atomically);
``[eval] suites_dir`` in the config wins over both.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sparkctl import paths
from sparkctl.config import Config


class SuiteError(Exception):
    """A suite that is missing, unreadable or not what it should be; the message is one line."""


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    title: str
    file: str
    sha256: str  # of the published file; a local copy that differs is used but flagged
    url: str
    licence: str
    licence_url: str
    items: int


SUITES: dict[str, SuiteSpec] = {
    "gsm8k": SuiteSpec(
        name="gsm8k", title="GSM8K (test split)", file="gsm8k-test.jsonl",
        sha256="3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        url="https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl",
        licence="MIT",
        licence_url="https://raw.githubusercontent.com/openai/grade-school-math/master/LICENSE",
        items=1319,
    ),
    "ifeval": SuiteSpec(
        name="ifeval", title="IFEval (input prompts)", file="ifeval-input.jsonl",
        sha256="67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49",
        url=("https://raw.githubusercontent.com/google-research/google-research/master/"
             "instruction_following_eval/data/input_data.jsonl"),
        licence="Apache-2.0",
        licence_url="https://raw.githubusercontent.com/google-research/google-research/master/LICENSE",
        items=541,
    ),
}

SUITE_NAMES = tuple(SUITES)


@dataclass(frozen=True)
class SuiteItem:
    """One question. ``prompt`` is what the model is sent; ``text`` is the suite's own prompt
    (the GSM8K question, the IFEval prompt), which saved responses are matched by."""

    id: str
    prompt: str
    text: str
    gold: str | None = None  # GSM8K: the answer after '####'
    instruction_ids: tuple[str, ...] = ()  # IFEval
    kwargs: tuple[dict[str, Any], ...] = ()  # IFEval, one per instruction

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    sha256: str
    items: tuple[SuiteItem, ...] = field(repr=False)

    @property
    def spec(self) -> SuiteSpec:
        return SUITES[self.name]

    @property
    def modified(self) -> bool:
        """A copy that is not the published file: its scores do not compare with others'."""
        return self.sha256 != self.spec.sha256

    def by_id(self) -> dict[str, SuiteItem]:
        return {it.id: it for it in self.items}

    def by_text(self) -> dict[str, SuiteItem]:
        out: dict[str, SuiteItem] = {}
        for it in self.items:
            out.setdefault(it.text, it)
            out.setdefault(it.prompt, it)
        return out


def _location_file() -> Path:
    return paths.data_dir() / "suites" / "location"


def suites_dir(cfg: Config) -> tuple[Path, str]:
    """(the directory suites are read from, how it was chosen)."""
    if cfg.eval.suites_dir:
        return Path(cfg.eval.suites_dir).expanduser(), f"[eval] suites_dir in {cfg.source}"
    loc = _location_file()
    try:
        text = loc.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return Path(text), f"`sparkctl suites path` ({loc})"
    return paths.data_dir() / "suites", "the data dir (`sparkctl suites pull`)"


def how_to_get(name: str) -> str:
    return (f"run `sparkctl suites pull` on a networked machine (downloads {SUITES[name].url}), "
            "or `sparkctl suites path DIR` for a copy you have")


def check_name(name: str) -> SuiteSpec:
    spec = SUITES.get(name.strip().lower())
    if spec is None:
        raise SuiteError(f"unknown suite {name!r}; expected one of {', '.join(SUITE_NAMES)}")
    return spec


def load_suite(cfg: Config, name: str) -> Suite:
    """Read and validate a suite file. Blocking (file I/O): call from a worker thread."""
    spec = check_name(name)
    folder, how = suites_dir(cfg)
    path = folder / spec.file
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{spec.title} not found at {path} (suites dir from {how}): {how_to_get(spec.name)}") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read ({exc.strerror})") from None
    sha = hashlib.sha256(raw).hexdigest()
    items = parse_items(spec.name, raw, path)
    return Suite(spec.name, path, sha, tuple(items))


def parse_items(name: str, raw: bytes, origin: Path | str) -> list[SuiteItem]:
    """Suite items from the file's bytes; a malformed line is an error naming it."""
    items: list[SuiteItem] = []
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise SuiteError(f"{origin}: not UTF-8 text") from None
    if name == "gsm8k":
        from sparkctl.core.suites.gsm8k import build_prompt, gold_answer
    seen: dict[str, int] = {}  # item id -> line
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SuiteError(f"{origin}:{no}: not JSON ({exc.msg})") from None
        try:
            if name == "gsm8k":
                q = row["question"]
                # the row's position in the published file is its id (GSM8K has no keys)
                items.append(SuiteItem(id=str(len(items)), prompt=build_prompt(q), text=q,
                                       gold=gold_answer(row["answer"])))
            else:
                ids = tuple(row["instruction_id_list"])
                kwargs = tuple(row.get("kwargs") or [{}] * len(ids))
                if not ids:
                    raise SuiteError(f"{origin}:{no}: no instructions (instruction_id_list is empty)")
                if len(kwargs) != len(ids):
                    raise SuiteError(f"{origin}:{no}: {len(ids)} instructions but {len(kwargs)} kwargs")
                _check_instructions(ids, kwargs, f"{origin}:{no}")
                items.append(SuiteItem(id=str(row["key"]), prompt=row["prompt"], text=row["prompt"],
                                       instruction_ids=ids, kwargs=kwargs))
        except (KeyError, TypeError) as exc:
            raise SuiteError(f"{origin}:{no}: not a {SUITES[name].title} row (missing {exc})") from None
        if items[-1].id in seen:
            raise SuiteError(f"{origin}:{no}: item {items[-1].id} appears twice (first on line {seen[items[-1].id]})")
        seen[items[-1].id] = no
    if not items:
        raise SuiteError(f"{origin}: no items")
    return items


def _check_instructions(ids: tuple[str, ...], kwargs: tuple[dict, ...], where: str) -> None:
    """Every instruction known and its arguments usable, before any model is asked: a bad
    row found after an hour of answers would lose them."""
    from sparkctl.core.suites.ifeval.checkers import build_check

    for iid, kw in zip(ids, kwargs):
        try:
            build_check(iid, {k: v for k, v in (kw or {}).items() if v is not None})
        except (ValueError, TypeError, KeyError) as exc:
            raise SuiteError(f"{where}: instruction {iid}: {exc}") from None


# ---- getting the data ------------------------------------------------------------------------


def set_location(folder: Path) -> Path:
    """`sparkctl suites path DIR`: check DIR holds at least one suite, then remember it."""
    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        raise SuiteError(f"{folder}: not a directory")
    found = [s for s in SUITES.values() if (folder / s.file).is_file()]
    if not found:
        raise SuiteError(f"{folder}: holds none of " + ", ".join(s.file for s in SUITES.values()))
    loc = _location_file()
    paths.atomic_write_text(loc, f"{folder}\n")
    return loc


Fetch = Callable[[str, Callable[[int, int | None], None]], bytes]


def _http_fetch(url: str, progress: Callable[[int, int | None], None]) -> bytes:
    import httpx

    with httpx.stream("GET", url, follow_redirects=True, timeout=httpx.Timeout(30.0)) as resp:
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


def source_url(spec: SuiteSpec, which: str = "data") -> str:
    """The published file, or a mirror: $SPARKCTL_SUITES_MIRROR/<file> (an offline site's copy)."""
    mirror = os.environ.get("SPARKCTL_SUITES_MIRROR", "").strip()
    if not mirror:
        return spec.licence_url if which == "licence" else spec.url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(mirror)  # the file name goes on the path, before any ?query
    name = f"LICENSE-{spec.name}.txt" if which == "licence" else spec.file
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + name))


@dataclass(frozen=True)
class Pulled:
    name: str
    path: Path
    bytes: int
    sha256: str
    already: bool  # the file was there with the right sha256: nothing downloaded


def pull_suite(name: str, dest: Path | None = None, fetch: Fetch | None = None,
               progress: Callable[[str, int, int | None], None] | None = None) -> Pulled:
    """Download one suite (and its licence) into the data dir, verify sha256, write atomically.

    A file already there with the published sha256 is kept. A download whose sha256 differs
    is refused and nothing is written. Blocking: call from a worker thread."""
    spec = check_name(name)
    dest = dest or paths.data_dir() / "suites"
    path = dest / spec.file
    try:
        return _pull(spec, dest, path, fetch, progress)
    except OSError as exc:  # a full disk, a read-only dir, a file where the dir should be
        raise SuiteError(f"{dest}: cannot write the suite ({exc.strerror or exc})") from None


def _pull(spec: SuiteSpec, dest: Path, path: Path, fetch: Fetch | None,
          progress: Callable[[str, int, int | None], None] | None) -> Pulled:
    from sparkctl.core.redact import redact_uri

    if path.is_file():
        have = hashlib.sha256(path.read_bytes()).hexdigest()
        if have == spec.sha256:
            return Pulled(spec.name, path, path.stat().st_size, have, True)
    fetch = fetch or _http_fetch
    say = progress or (lambda *_: None)
    url = source_url(spec)
    try:
        data = fetch(url, lambda got, total: say(spec.name, got, total))
    except SuiteError:
        raise
    except Exception as exc:  # httpx's many errors: one line naming the URL
        raise SuiteError(f"{redact_uri(url)}: download failed ({type(exc).__name__})") from None
    sha = hashlib.sha256(data).hexdigest()
    if sha != spec.sha256:
        raise SuiteError(f"{redact_uri(url)}: sha256 {sha[:16]}… does not match the published "
                         f"{spec.sha256[:16]}…; nothing was written")
    parse_items(spec.name, data, redact_uri(url))  # a file that cannot be read as the suite is not kept
    try:
        licence = fetch(source_url(spec, "licence"), lambda *_: None)
    except Exception:
        licence = f"{spec.title}: {spec.licence} licence, {spec.licence_url}\n".encode()
    paths.atomic_write_bytes(dest / f"LICENSE-{spec.name}.txt", licence)
    paths.atomic_write_bytes(path, data)
    return Pulled(spec.name, path, len(data), sha, False)
