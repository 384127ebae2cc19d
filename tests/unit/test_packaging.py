"""pyproject.toml lists packages by hand, so what a wheel carries and what `pip install` prints
follow from that list. Every folder of the source tree is a listed package (a folder that is
not makes setuptools print a page of "Package would be ignored" on every install, and its files
may be left out), every data file is covered by a package-data glob, and the licence is an SPDX
string (a TOML table prints setuptools' deprecation warning)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PROJECT["tool"]["setuptools"]


def package_dirs() -> dict[str, Path]:
    """Each listed package -> its folder, through package-dir's mappings."""
    mapping = SETUPTOOLS.get("package-dir", {})
    out = {}
    for pkg in SETUPTOOLS["packages"]:
        parts = pkg.split(".")
        for cut in range(len(parts), 0, -1):  # the longest mapped prefix decides
            prefix = ".".join(parts[:cut])
            if prefix in mapping:
                out[pkg] = REPO / mapping[prefix] / Path(*parts[cut:])
                break
        else:
            out[pkg] = REPO / Path(*parts)
    return out


def source_files() -> list[Path]:
    roots = set(package_dirs().values())
    files = []
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
                files.append(f)
    return sorted(set(files))


def test_every_folder_of_the_package_is_listed():
    dirs = package_dirs()
    listed = set(dirs.values())
    assert all(d.is_dir() for d in listed), [p for p, d in dirs.items() if not d.is_dir()]
    unlisted = sorted({str(f.parent.relative_to(REPO)) for f in source_files() if f.parent not in listed})
    assert not unlisted, f"folders holding files but absent from [tool.setuptools] packages: {unlisted}"


def test_every_data_file_is_covered_by_package_data():
    dirs = package_dirs()
    globs = SETUPTOOLS.get("package-data", {})
    missing = []
    for f in source_files():
        if f.suffix == ".py":
            continue
        # a glob of the package holding the file, or of a package above it ("tui/*.tcss" in sparkctl)
        covered = any(fnmatch(f.relative_to(d).as_posix(), g)
                      for pkg, d in dirs.items() if d == f.parent or d in f.parents
                      for g in globs.get(pkg, ()))
        if not covered:
            missing.append(str(f.relative_to(REPO)))
    assert not missing, f"files no package-data glob ships: {missing}"


def test_the_licence_is_an_spdx_string_with_a_setuptools_that_reads_it():
    assert PROJECT["project"]["license"] == "Apache-2.0"
    requires = PROJECT["build-system"]["requires"]
    assert any(r.replace(" ", "") in ("setuptools>=77", "setuptools>=77.0") or r.startswith("setuptools>=8")
               for r in requires), requires
    for pattern in PROJECT["project"].get("license-files", []):
        assert list(REPO.glob(pattern)), f"license-files pattern {pattern!r} matches nothing"
