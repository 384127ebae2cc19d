"""scripts/check_aarch64_wheels.py (`make wheels-aarch64`) judges a source-only dependency
by what it builds into: pure Python passes (a Spark installs it without a compiler), C code
fails naming the package. Two small sdists made here, offered to pip's REAL resolver with
--find-links beside the configured index (which gives setuptools for the builds)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_aarch64_wheels.py"


def make_sdist(folder: Path, name: str, files: dict[str, str]) -> Path:
    """`name`-0.1.tar.gz built with setuptools, holding `files` beside its pyproject.toml."""
    root = folder / "src" / f"{name}-0.1"
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "0.1"\n')
    (root / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = folder / "dist" / f"{name}-0.1.tar.gz"
    out.parent.mkdir(exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    return out.parent


def check(requirement: str, links: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, str(SCRIPT), sys.executable, "--requirement", requirement,
                           "--find-links", str(links)], capture_output=True, text=True, env=env, timeout=600)


def test_a_pure_python_sdist_passes_as_installable_without_a_compiler(tmp_path):
    links = make_sdist(tmp_path, "sparkctl_probe_pure", {"sparkctl_probe_pure.py": "ANSWER = 42\n"})
    done = check("sparkctl_probe_pure", links, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pure-Python sdists, built here into py3-none-any wheels: sparkctl_probe_pure 0.1" in done.stdout
    assert list((tmp_path / "cache" / "sparkctl" / "aarch64-wheels" / "pure").glob("*-py3-none-any.whl"))


def test_an_sdist_with_c_code_fails_naming_the_package(tmp_path):
    if subprocess.run(["sh", "-c", "command -v cc"], capture_output=True).returncode != 0:
        pytest.fail("no C compiler here: the check's other answer (the sdist does not build) would be tested")
    links = make_sdist(tmp_path, "sparkctl_probe_c", {
        "setup.py": "from setuptools import Extension, setup\n"
                    "setup(ext_modules=[Extension('sparkctl_probe_c', ['probe.c'])])\n",
        "probe.c": "#include <Python.h>\n"
                   "static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"sparkctl_probe_c\", NULL, -1, NULL};\n"
                   "PyMODINIT_FUNC PyInit_sparkctl_probe_c(void) { return PyModule_Create(&m); }\n",
    })
    done = check("sparkctl_probe_c", links, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("sparkctl_probe_c: no wheel for Linux aarch64 / CPython 3.12")
    assert "builds compiled code" in line and "needs a compiler" in line
