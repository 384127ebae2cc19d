"""Check that sparkctl's runtime dependencies install on a DGX Spark without a compiler.

A Spark is Linux aarch64 with Python 3.12 (DGX OS 7, Ubuntu 24.04, glibc 2.39). `make run`
there installs pyproject's dependencies with pip; a dependency that has no wheel for that
platform is built from its source distribution, and one with C code then stops on a
missing compiler (or takes minutes). This script asks pip, from any machine, to resolve the
dependencies as a Spark would see them, wheels only:

    python scripts/check_aarch64_wheels.py .venv/bin/python

(`make wheels-aarch64` does this). It runs the given interpreter's pip with
``install --dry-run --only-binary=:all: --platform manylinux_2_17_aarch64 ...
--python-version 3.12``, which reads each wheel's metadata from the index and downloads
no wheel where the index serves metadata on its own (PyPI does).

A dependency published only as a source distribution is not a failure by itself: pure
Python installs without a compiler (pip builds a wheel with setuptools alone). Such an
sdist is built here, once, into a wheel; the wheel's tag says what it is: ``py3-none-any``
is pure Python and is offered to the resolver beside the index (cached under
``$XDG_CACHE_HOME/sparkctl/aarch64-wheels``, outside the repository); any other tag means
compiled code and fails the check, naming the package. So does a dependency whose sdist
does not build here.

The venv's interpreter also says which versions this checkout runs: a package that the
Spark resolution could only take at an older version than the venv's fails too (pip on a
Spark takes the newest release, wheel or not, so that newer release would be compiled).

Limits: environment markers on ``platform_machine`` are evaluated by pip for this machine,
not for aarch64 (none of sparkctl's dependencies uses one today); manylinux tags up to
2_39 (the Spark's glibc) are accepted. Exit 0 when every dependency resolves, 1 when one
does not (one line per package, with the fix), 2 on a usage or set-up error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_VERSION = "3.12"
ABI = "cp312"
# manylinux2014 == manylinux_2_17; a Spark's glibc 2.39 runs every tag up to 2_39
PLATFORMS = ["manylinux2014_aarch64"] + [f"manylinux_2_{minor}_aarch64" for minor in range(17, 40)]
MAX_SDISTS = 12  # source-only dependencies built here before giving up
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "sparkctl" / "aarch64-wheels"


def runtime_requirements() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def resolve(python: str, requirements: list[str], pure_dir: Path, report: Path,
            extra: list[str]) -> subprocess.CompletedProcess:
    cmd = [python, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--report", str(report),
           "--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp", "--abi", ABI,
           "--find-links", str(pure_dir), *extra]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    # pip before 23.3 takes platform options only with --target, even for a dry run: an
    # empty one (nothing is written) keeps the check working on an older venv's pip
    with tempfile.TemporaryDirectory(prefix="sparkctl-aarch64-") as target:
        return subprocess.run(cmd + ["--target", target] + requirements, capture_output=True, text=True)


def pip_error(stderr: str) -> str:
    """The line of pip's output that says what went wrong: its last ERROR line, else its last
    line that is not a closing note or hint (pip ends with "note: This error originates from
    a subprocess", which names nothing)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return errors[-1]
    said = [line for line in lines if not line.lower().startswith(("note:", "hint:"))]
    return said[-1] if said else "no wheel came out"


def build_sdist(python: str, requirement: str, pure_dir: Path, extra: list[str]) -> tuple[Path | None, str]:
    """Build `requirement` from its sdist here: (the wheel if it is pure Python, why not)."""
    with tempfile.TemporaryDirectory(prefix="sparkctl-sdist-") as tmp:
        # --no-binary for this package only: its build requirements (setuptools) come as wheels
        name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
        done = subprocess.run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-binary", name,
                               "--wheel-dir", tmp, *extra, requirement], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            return None, f"its sdist does not build here ({pip_error(done.stderr)})"
        wheel = wheels[0]
        tags = wheel.name[:-len(".whl")].split("-")[-3:]
        if tags[1:] != ["none", "any"]:
            return None, f"its sdist builds compiled code ({'-'.join(tags)}): a Spark needs a compiler for it"
        pure_dir.mkdir(parents=True, exist_ok=True)
        target = pure_dir / wheel.name
        shutil.move(str(wheel), target)
        return target, ""


def venv_versions(python: str) -> dict[str, str]:
    code = ("import json, importlib.metadata as m\n"
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return {_key(name): version for name, version in json.loads(done.stdout).items()}


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _newer(a: str, b: str) -> bool:
    """Whether version `a` is newer than `b`, by PEP 440 (packaging, which pip itself uses)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        from pip._vendor.packaging.version import InvalidVersion, Version
    try:
        return Version(a) > Version(b)
    except InvalidVersion:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("python", help="the virtualenv's interpreter (its pip resolves; its versions are compared)")
    ap.add_argument("--requirement", action="append", dest="requirements", metavar="REQ",
                    help="check this requirement instead of pyproject's dependencies (repeatable)")
    ap.add_argument("--find-links", action="append", default=[], metavar="DIR",
                    help="also look for distributions here (passed to pip)")
    args = ap.parse_args(argv)
    extra = [arg for d in args.find_links for arg in ("--find-links", d)]
    python = args.python
    if shutil.which(python) is None and not Path(python).is_file():
        print(f"check_aarch64_wheels: no interpreter at {python}", file=sys.stderr)
        return 2
    requirements = args.requirements or runtime_requirements()
    pure_dir = cache_dir() / "pure"
    built: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sparkctl-aarch64-") as tmp:
        report_path = Path(tmp) / "report.json"
        for _ in range(MAX_SDISTS + 1):
            done = resolve(python, requirements, pure_dir, report_path, extra)
            if done.returncode == 0:
                break
            missing = _NO_MATCH.findall(done.stderr)
            if not missing:
                tail = " ".join((done.stderr.strip().splitlines() or ["pip failed"])[-3:])
                print(f"check_aarch64_wheels: pip could not resolve the dependencies: {tail}", file=sys.stderr)
                return 2
            requirement = missing[-1]
            wheel, why = build_sdist(python, requirement, pure_dir, extra)
            if wheel is None:
                print(f"{requirement}: no wheel for Linux aarch64 / CPython {PYTHON_VERSION}, and {why}",
                      file=sys.stderr)
                return 1
            built.append(wheel.name)
        else:
            print(f"check_aarch64_wheels: more than {MAX_SDISTS} source-only dependencies", file=sys.stderr)
            return 1
        report = json.loads(report_path.read_text())
    here = venv_versions(python)
    failures, platform_wheels, pure_wheels, local = [], 0, 0, []
    for item in report.get("install", []):
        meta = item["metadata"]
        name, version = meta["name"], meta["version"]
        url = item["download_info"]["url"]
        filename = url.rsplit("/", 1)[-1]
        if url.startswith("file:") and Path(url[len("file://"):]).parent == pure_dir:
            local.append(f"{name} {version}")
        elif filename.endswith("-none-any.whl"):
            pure_wheels += 1
        else:
            platform_wheels += 1
        mine = here.get(_key(name))
        if mine is not None and _newer(mine, version):
            failures.append(f"{name}: this venv runs {mine}, but the newest release with a Linux aarch64 wheel "
                            f"for CPython {PYTHON_VERSION} is {version}; pip on a Spark takes {mine} and compiles it")
    for line in failures:
        print(line, file=sys.stderr)
    total = len(report.get("install", []))
    print(f"aarch64 / CPython {PYTHON_VERSION}: {total} runtime packages resolve to wheels "
          f"({platform_wheels} built for the platform, {pure_wheels} pure Python"
          + (f"; pure-Python sdists, built here into py3-none-any wheels: {', '.join(sorted(local))}" if local else "")
          + ")")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
