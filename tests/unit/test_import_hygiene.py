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


# ---- the measurement modules reach each other through public names only --------------------

MEASUREMENT_PACKAGES = ("sparkctl/services/bench", "sparkctl/services/evals")
_NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}  # public despite the underscore


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in _NAMEDTUPLE_API


def _own_private_names(tree) -> set[str]:
    """The private names a module defines: its functions and classes, what it assigns on
    `self`/`cls`, and its module-level (or local) variables."""
    import ast

    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    return {n for n in own if _is_private(n)}


def _private_reaches(path, tree, own: set[str], others: set[str]) -> list[str]:
    """Where a module reaches a private name it does not define: `obj._name` (read, or written
    on anything but self/cls), `super()._name`, `from sparkctl... import _name`, and a string
    naming another module's private attribute (setattr/getattr by name)."""
    import ast

    out = []
    for node in ast.walk(tree):
        where = f"{path.parent.name}/{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            on_super = (isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                        and node.value.func.id == "super")
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if on_super or node.attr not in own or (isinstance(node.ctx, ast.Store) and not on_self):
                out.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sparkctl"):
            out += [f"{where} import {a.name}" for a in node.names if _is_private(a.name)]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier()
              and node.value in others and node.value not in own):
            out.append(f"{where} {node.value!r}")
    return out


def test_the_measurement_modules_use_each_others_public_names_only():
    """Bench, sweep and eval share one MeasurementSession (services/bench/session.py) and reach
    it, and each other, through public methods and attributes: a runner that drives another's
    private members (`base._sampler`, `guard._digests`, a setattr loop over `_shows`, `_ctx`...)
    makes that module's internals an API no interface shows."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [p for pkg in MEASUREMENT_PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    assert len(files) > 10, files
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in files}
    own = {p: _own_private_names(t) for p, t in trees.items()}
    offenders = []
    for p, tree in trees.items():
        others = set().union(*(names for q, names in own.items() if q != p)) - own[p]
        offenders += _private_reaches(p, tree, own[p], others)
    assert offenders == []


# ---- the layout names itself ----------------------------------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _layer_of(path) -> str:
    """The layer a module of sparkctl/ belongs to: its first folder (core, probes, engines,
    tracking, services, tui, cli, web), or "sparkctl" for the shared modules at the top
    (config.py, paths.py, statefile.py)."""
    parts = path.relative_to(ROOT / "sparkctl").parts
    return parts[0] if len(parts) > 1 else "sparkctl"


def _dotted(path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _pure_core_of(path) -> set[str]:
    """The modules a core module's docstring declares it the pure core of ("pure core of
    sparkctl.services.bench.sweep")."""
    import ast
    import re

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return {m.rstrip(".") for m in re.findall(r"pure core of (sparkctl\.[\w.]+)", doc, flags=re.I)}


def test_no_module_name_repeats_across_layers_unless_one_is_the_others_declared_pure_core():
    """Two modules of one name in different layers (a `residency.py` in core, services and
    tracking; `lanes.py` for a bench's lane report, a screen and a command) make every
    mention ambiguous. A name may repeat only where one is the other's pure core (the
    arithmetic under core/, the I/O around it elsewhere), which the core module's docstring
    says ("Pure core of sparkctl.services.models.fit"). Within one layer (services/bench and
    services/evals each have a runner.py) the package says which."""
    from collections import defaultdict

    by_name = defaultdict(list)
    for path in sorted((ROOT / "sparkctl").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.stem].append(path)
    offenders = []
    for name, paths in sorted(by_name.items()):
        layers = defaultdict(list)
        for p in paths:
            layers[_layer_of(p)].append(p)
        if len(layers) < 2:
            continue
        cores = layers.get("core", [])
        declared = {d for c in cores for d in _pure_core_of(c)}
        for p in paths:
            if _layer_of(p) != "core" and _dotted(p) not in declared:
                others = ", ".join(str(q.relative_to(ROOT)) for q in paths if q != p)
                offenders.append(f"{p.relative_to(ROOT)} (also {others})")
        # a pair is core + one other module: a core module beside two others of its name
        # (or two cores) is a repeat however the docstrings read
        if len(cores) != 1 or len(paths) != 2:
            offenders.append(f"{name}.py: {len(paths)} modules in {sorted(layers)}")
    assert offenders == [], "\n".join(offenders)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the sparkctl modules it imports, from every import statement in it: at the
    top, inside a function (a deferred import is still a dependency) and under TYPE_CHECKING
    (a type a module names is one it depends on). `from pkg import name` points at pkg.name
    when that is a module, else at pkg (a name the package re-exports). A package is not
    counted as a dependency of its own submodules: Python imports it first in any case."""
    import ast

    modules = {}
    for path in (ROOT / "sparkctl").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        edges.add(f"{base}.{a.name}")
                    elif base in modules:
                        edges.add(base)
        graph[name] = edges - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one
    closed path through it, for the message."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    paths = []
    for component in found:  # a shortest way from the first module back to itself
        start, members = component[0], set(component)
        came = {start: None}
        queue, end = [start], None
        while queue and end is None:
            v = queue.pop(0)
            for w in sorted(graph[v] & members):
                if w == start:
                    end = v
                    break
                if w not in came:
                    came[w] = v
                    queue.append(w)
        path = [start]
        while end is not None:
            path.insert(1, end)
            end = came[end]
        paths.append(path[:1] + path[2:] + [start] if len(path) > 1 else path)
    return paths


def test_no_import_circles_among_sparkctl_modules():
    """No module reaches itself through what it imports (services/models/common.py <->
    fit.py through a type; the Runs screen <-> its charts and promotion dialog through
    deferred imports; cli/bench <-> cli/sweep). A circle means neither module can be read,
    tested or moved without the other, and a deferred import that hides one only moves the
    failure to run time."""
    circles = _circles(_import_graph())
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle():
    """The finder itself: a made-up graph with one circle through three modules and one
    module outside it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _circles(graph) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


# what every layer reads: the config, where files live, sparkctl's own state file
SHARED_TOP = {"__init__", "__main__", "config", "paths", "statefile"}


def test_only_the_shared_modules_stand_outside_the_layers():
    """A module at the top of the package belongs to no layer (registry.py was an engine's
    HTTP client, textreport.py the CLI's printing): only what every layer reads sits there."""
    top = {p.stem for p in (ROOT / "sparkctl").glob("*.py")}
    assert top - SHARED_TOP == set()


def test_the_tui_and_the_cli_import_nothing_from_each_other_but_the_start():
    """The two front ends share services, not each other's modules: a table both show is
    rendered in services (services/runs/report_text.py), not imported from the CLI. The one
    crossing is the CLI's entry point starting the TUI (`sparkctl` with no command)."""
    graph = _import_graph()
    crossings = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                       if (m.startswith("sparkctl.tui.") and d.startswith("sparkctl.cli"))
                       or (m.startswith("sparkctl.cli") and d.startswith("sparkctl.tui")))
    assert crossings == ["sparkctl.cli -> sparkctl.tui.app"]


def test_the_benchmarks_and_the_testkit_import_nothing_from_tests():
    """A published figure is measured against the fakes and scenarios in testkit/, which
    tests use too; if benchmarks/ imported tests/ (a fixture module, a test module's
    constants), editing a test would move a figure unseen. Import statements, and the code
    a benchmark hands to a child Python as a string, both count."""
    import ast
    import re

    said = re.compile(r"(?:^|[\s;])(?:from\s+tests(?:\.\w+)*\s+import|import\s+tests(?:\.\w+)*)\b")
    offenders = []
    benchmarks = sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(benchmarks) > 10, benchmarks
    files = benchmarks + sorted((ROOT / "testkit").rglob("*.py"))
    for path in files:
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{where}:{node.lineno} {n}" for n in names if n == "tests" or n.startswith("tests.")]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and said.search(node.value):
                offenders.append(f"{where}:{node.lineno} (in a string) {said.search(node.value).group().strip()}")
    assert offenders == []
