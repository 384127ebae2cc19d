"""Quality suites on disk: which copy is read, what it holds, and checking it.

The package ships each suite as published (``sparkctl/suites_data``, with its licence and a
SHA256SUMS manifest), so an eval needs no network. A copy is chosen per suite, first match wins:
``[eval] suites_dir`` in the config; a directory remembered by `sparkctl suites path DIR`
(``<data dir>/suites/location``, written atomically); a file `sparkctl suites pull` put in
``<data dir>/suites``; else the shipped copy. A chosen directory that lacks the file is an
error, not a silent fallback: a run must say which file it read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sparkctl import paths
from sparkctl.config import Config


class SuiteError(Exception):
    """A suite that is missing, unreadable or not what it should be; the message is one line."""


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    title: str
    file: str
    url: str
    licence: str
    licence_url: str

    @property
    def licence_file(self) -> str:
        return f"LICENSE-{self.name}.txt"

    @property
    def sha256(self) -> str:
        """Of the published file this sparkctl knows: the one it ships (SHA256SUMS)."""
        return shipped_sums()[self.file]


SUITES: dict[str, SuiteSpec] = {
    "gsm8k": SuiteSpec(
        name="gsm8k", title="GSM8K (test split)", file="gsm8k-test.jsonl",
        url="https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl",
        licence="MIT",
        licence_url="https://raw.githubusercontent.com/openai/grade-school-math/master/LICENSE",
    ),
    "ifeval": SuiteSpec(
        name="ifeval", title="IFEval (input prompts)", file="ifeval-input.jsonl",
        url=("https://raw.githubusercontent.com/google-research/google-research/master/"
             "instruction_following_eval/data/input_data.jsonl"),
        licence="Apache-2.0",
        licence_url="https://raw.githubusercontent.com/google-research/google-research/master/LICENSE",
    ),
}

SUITE_NAMES = tuple(SUITES)


def shipped_dir() -> Path:
    """The package's own copies (a plain directory: sparkctl is never installed zipped)."""
    from importlib.resources import files

    return Path(str(files("sparkctl.suites_data")))


@lru_cache(maxsize=1)
def shipped_sums() -> dict[str, str]:
    """File name -> sha256, from the package's SHA256SUMS (`sha256sum` format)."""
    sums: dict[str, str] = {}
    for line in (shipped_dir() / "SHA256SUMS").read_text(encoding="ascii").splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


# Where a copy came from, as `sparkctl suites` and the Eval screen name it.
COPY_LABELS = {"config": "[eval] suites_dir", "path": "suites path", "pulled": "pulled", "shipped": "shipped"}


@dataclass(frozen=True)
class SuiteCopy:
    """The file a suite is read from and why that one."""

    kind: str  # "config", "path", "pulled" or "shipped" (the order they are tried in)
    path: Path
    how: str  # for messages: what chose it

    @property
    def label(self) -> str:
        return f"{COPY_LABELS[self.kind]} copy"

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
    copy: str = ""  # SuiteCopy.kind: which copy was read ("" for a file read by other means)

    @property
    def spec(self) -> SuiteSpec:
        return SUITES[self.name]

    @property
    def modified(self) -> bool:
        """A copy that is not the published file: its scores do not compare with others'."""
        return self.sha256 != self.spec.sha256

    def describe(self) -> str:
        """Which file an eval reads, in one line: ``gsm8k: shipped copy · sha256 3730d312f6e3 · 1319 items``."""
        label = f"{COPY_LABELS[self.copy]} copy" if self.copy else str(self.path)
        differs = " · differs from the published file" if self.modified else ""
        return f"{self.name}: {label} · sha256 {self.sha256[:12]} · {len(self.items)} items{differs}"

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


def pulled_dir() -> Path:
    return paths.data_dir() / "suites"


def chosen_dir(cfg: Config) -> tuple[str, Path, str] | None:
    """(kind, directory, what chose it) when the user chose a directory; None otherwise."""
    if cfg.eval.suites_dir:
        return "config", Path(cfg.eval.suites_dir).expanduser(), f"[eval] suites_dir in {cfg.source}"
    loc = _location_file()
    try:
        text = loc.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return "path", Path(text), f"`sparkctl suites path` ({loc})"
    return None


def pull_dir(cfg: Config) -> tuple[Path, str]:
    """(where `sparkctl suites pull` writes, why): a directory the user chose, else the data dir."""
    chosen = chosen_dir(cfg)
    if chosen is not None:
        return chosen[1], chosen[2]
    return pulled_dir(), "the data dir"


def locate(cfg: Config, name: str) -> SuiteCopy:
    """Which copy of a suite an eval reads (no file is opened beyond a stat)."""
    spec = check_name(name)
    chosen = chosen_dir(cfg)
    if chosen is not None:
        kind, folder, how = chosen
        return SuiteCopy(kind, folder / spec.file, how)
    pulled = pulled_dir() / spec.file
    if pulled.is_file():
        return SuiteCopy("pulled", pulled, f"`sparkctl suites pull` ({pulled_dir()})")
    return SuiteCopy("shipped", shipped_dir() / spec.file, "the copy shipped with sparkctl")


def check_name(name: str) -> SuiteSpec:
    spec = SUITES.get(name.strip().lower())
    if spec is None:
        raise SuiteError(f"unknown suite {name!r}; expected one of {', '.join(SUITE_NAMES)}")
    return spec


def _read(copy: SuiteCopy, spec: SuiteSpec) -> bytes:
    try:
        return copy.path.read_bytes()
    except FileNotFoundError:
        if copy.kind == "shipped":
            raise SuiteError(f"{spec.title}: the shipped copy is missing ({copy.path}): reinstall sparkctl, "
                             "or `sparkctl suites path DIR` for a copy you have") from None
        if copy.kind == "pulled":  # gone between the stat and the read
            raise SuiteError(f"{copy.path}: removed while being read; run the eval again") from None
        raise SuiteError(f"{spec.title} not found at {copy.path} (suites dir from {copy.how}): put "
                         f"{spec.file} there, or {forget_hint(copy.kind)} to read the shipped copy") from None
    except OSError as exc:
        raise SuiteError(f"{copy.path}: cannot read ({exc.strerror})") from None


def forget_hint(kind: str) -> str:
    return "remove [eval] suites_dir from the config" if kind == "config" else "`sparkctl suites path --reset`"


def load_suite(cfg: Config, name: str) -> Suite:
    """Read and validate a suite file. Blocking (file I/O): call from a worker thread."""
    spec = check_name(name)
    copy = locate(cfg, name)
    raw = _read(copy, spec)
    sha = hashlib.sha256(raw).hexdigest()
    if copy.kind == "shipped" and sha != spec.sha256:
        raise SuiteError(f"the shipped copy {copy.path} is damaged (sha256 {sha[:12]}… is not the "
                         f"{spec.sha256[:12]}… of SHA256SUMS): reinstall sparkctl")
    items = parse_items(spec.name, raw, copy.path)
    return Suite(spec.name, copy.path, sha, tuple(items), copy=copy.kind)


@dataclass(frozen=True)
class CopyState:
    """What `sparkctl suites` and the Eval screen show about the copy an eval would read."""

    suite: str
    copy: SuiteCopy
    sha256: str | None  # None: missing or unreadable
    state: str  # "ok", "differs" (not the published file), "missing", "unreadable"

    @property
    def summary(self) -> str:
        """One short line without the path (a path is long and differs per machine)."""
        if self.sha256 is None:
            return f"{self.suite}: {self.copy.label} {self.state} · {forget_hint(self.copy.kind)} to read the shipped one"
        differs = " · differs from the published file" if self.state == "differs" else ""
        return f"{self.suite}: {self.copy.label} · sha256 {self.sha256[:12]}{differs}"


def copy_state(cfg: Config, name: str) -> CopyState:
    """The copy an eval of ``name`` would read, hashed. Blocking (reads the file)."""
    spec = check_name(name)
    copy = locate(cfg, name)
    try:
        sha = hashlib.sha256(copy.path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return CopyState(spec.name, copy, None, "missing")
    except OSError:
        return CopyState(spec.name, copy, None, "unreadable")
    return CopyState(spec.name, copy, sha, "ok" if sha == spec.sha256 else "differs")


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




# ---- choosing a directory (`sparkctl suites path`, the Eval screen's "Suites dir") ------------


def set_location(folder: Path) -> Path:
    """Check FOLDER holds at least one suite file, then remember it; returns the file that
    remembers it. Blocking (stats and a write)."""
    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        raise SuiteError(f"{folder}: not a directory")
    found = [s for s in SUITES.values() if (folder / s.file).is_file()]
    if not found:
        raise SuiteError(f"{folder}: holds none of " + ", ".join(s.file for s in SUITES.values()))
    loc = _location_file()
    try:
        paths.atomic_write_text(loc, f"{folder}\n")
    except OSError as exc:  # a read-only or full data dir
        raise SuiteError(f"{loc}: cannot remember the directory ({exc.strerror or exc})") from None
    return loc


def clear_location() -> bool:
    """Forget the remembered directory (evals go back to the pulled or shipped copy); False
    when none was remembered."""
    loc = _location_file()
    try:
        loc.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise SuiteError(f"{loc}: cannot forget the directory ({exc.strerror or exc})") from None
    return True
