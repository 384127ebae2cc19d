"""Imports point one way: core and services never pull in textual or mlflow, and the
CLI's --version path imports nothing heavy (its 0.3 s budget depends on it)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("textual", "mlflow", "ollama", "pynvml", "httpx", "psutil")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _top(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


def test_core_imports_no_ui_no_mlflow_no_io_libraries():
    mods = _top(_modules_after("import sparkctl.core.budget, sparkctl.core.placement, sparkctl.core.fmt\n"
                               "import pkgutil, importlib, sparkctl.core as c\n"
                               "[importlib.import_module('sparkctl.core.' + m.name) for m in pkgutil.iter_modules(c.__path__)]"))
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_services_import_neither_textual_nor_mlflow():
    # every module of every subpackage (services/bench, services/runs, ...), not just the top
    mods = _top(_modules_after("import pkgutil, importlib, sparkctl.services as s\n"
                               "[importlib.import_module(m.name) for m in "
                               "pkgutil.walk_packages(s.__path__, 'sparkctl.services.')]"))
    assert "textual" not in mods
    assert "mlflow" not in mods


def test_cli_module_is_light():
    mods = _top(_modules_after("import sparkctl.cli"))
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_the_tui_reaches_tracking_only_through_services():
    """DESIGN.md: tui -> services -> tracking. No TUI module imports sparkctl.tracking (at
    the top or inside a function): what keeps MLflow out of the dashboard's process is in
    services (services/tracking.py, services/runs/drift.py)."""
    import ast
    from pathlib import Path

    import sparkctl.tui

    offenders = []
    for path in sorted(Path(sparkctl.tui.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names
                          if n == "sparkctl.tracking" or n.startswith("sparkctl.tracking.")]
    assert offenders == []


def test_the_dashboards_start_leaves_the_statistics_of_compare_and_gates_unloaded():
    """What `sparkctl` imports and runs before its first frame (the config loaded with its
    defaults, the modules of the app and its dashboard) needs no run statistics: compare, the quality
    gate and their maths load when a screen or command uses them, not at every start."""
    mods = _modules_after("from pathlib import Path\n"
                          "import sparkctl.cli\n"
                          "from sparkctl.config import load_config\n"
                          "from sparkctl.services.prefetch import StatusPrefetch\n"
                          "from sparkctl.tui.app import make_app\n"
                          "load_config(None, env={}, cwd=Path('/nonexistent'), state=None)\n")
    assert not mods & {"sparkctl.core.compare", "sparkctl.core.noninferiority", "sparkctl.core.stats"}, mods
