"""Imports point down only, and nothing imports in a circle (docs/design.md §1).

Layers, top to bottom: ``controller`` (planner, runners, CLI; runs on the machine that builds
the network) → ``workers`` (host processes and their pure cores) → ``topo`` (topologies,
Mininet builders) → ``pyswitch`` (our P4 target).  A module may import its own package and
the layers below, never one above; so a host process never pulls in the controller.  Read
from the source with :mod:`ast` (function-local imports included), not by importing it.

Also checked: no cycle between the modules of ``controller`` (the CLI, the runners and the
registry used to hold one apart with function-local imports), and every module started as a
process -- ``[python, "-m", MODULE, ...]``, ``HostProcesses.launch(host, MODULE, ...)``,
``Node(host, MODULE, ...)`` -- exists and sits in a layer its starter may use.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"controller": 3, "workers": 2, "topo": 1, "pyswitch": 0}
CHECKED_ELSEWHERE = {"tests": 9, "bench": 9}  # above everything: may use any layer


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


ALL_MODULES = {m: p for pkg in LAYERS for m, p in _modules(pkg).items()}


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (None: not ours)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in ALL_MODULES:
            return cand
    return None


def imports_of(path: Path, module: str) -> set[str]:
    """Our modules that ``path`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if (m := _resolve(a.name)) is not None:
                    found.add(m)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for a in node.names:  # ``from pkg import module`` names a module
                m = _resolve(f"{base}.{a.name}") if base else _resolve(a.name)
                if m is not None:
                    found.add(m)
    found.discard(module)
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def test_imports_point_down_only():
    upward = []
    for module, path in ALL_MODULES.items():
        for imported in sorted(imports_of(path, module)):
            if LAYERS[_top(imported)] > LAYERS[_top(module)]:
                upward.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not upward, "upward imports (layers: controller > workers > topo > pyswitch):\n" + \
        "\n".join(upward)


def test_no_cycle_between_top_level_packages():
    g = nx.DiGraph()
    for module, path in ALL_MODULES.items():
        for imported in imports_of(path, module):
            if _top(imported) != _top(module):
                g.add_edge(_top(module), _top(imported))
    assert list(nx.simple_cycles(g)) == []


# Inside ``controller``, its packages are floors of their own (docs/design.md §1): the command
# line over the experiment over the control plane over the planner; the few top-level modules
# (errors, atomic files, option types) sit under all of them, ``__main__`` over all.
CONTROLLER_FLOORS = {"cli": 4, "experiment": 3, "dataplane": 2, "plan": 1}
CONTROLLER_TOP_MODULES = {"__main__": 5, "errors": 0, "files": 0, "options": 0}


def _controller_floor(module: str) -> int:
    part = module.split(".")[1] if module.count(".") else ""
    if part in CONTROLLER_FLOORS:
        return CONTROLLER_FLOORS[part]
    return CONTROLLER_TOP_MODULES.get(part, 5)  # ``controller`` itself: its __init__


def test_controller_top_level_holds_packages():
    """The folders show the layers: at the top only the packages and a few small modules."""
    top = ROOT / "controller"
    modules = {p.stem for p in top.glob("*.py")} - {"__init__"}
    assert modules <= set(CONTROLLER_TOP_MODULES), sorted(modules - set(CONTROLLER_TOP_MODULES))
    assert {p.name for p in top.iterdir() if (p / "__init__.py").is_file()} == \
        set(CONTROLLER_FLOORS)
    big = [p.name for p in top.glob("*.py") if len(p.read_text().splitlines()) > 100]
    assert not big, f"top-level modules should stay small: {big}"


def test_controller_packages_point_down_only():
    upward = []
    for module, path in ALL_MODULES.items():
        if _top(module) != "controller":
            continue
        for imported in sorted(imports_of(path, module)):
            if (_top(imported) == "controller"
                    and _controller_floor(imported) > _controller_floor(module)):
                upward.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not upward, ("upward imports (cli > experiment > dataplane > plan > "
                        "errors/files/options):\n" + "\n".join(upward))


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_no_cycle_between_modules(package):
    """Within each package, no module imports one that (transitively) imports it back; a
    package's ``__init__`` importing its own modules does not count."""
    g = nx.DiGraph()
    for module, path in ALL_MODULES.items():
        if _top(module) != package:
            continue
        g.add_node(module)
        for imported in imports_of(path, module):
            if _top(imported) == package and imported not in _parents(module):
                g.add_edge(module, imported)
    cycles = [c for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert cycles == [], f"import cycles in {package}: {cycles}"


# ------------------------------------------------------------------ launched modules


EXEMPT = "layers: not launched"  # a comment for fake command lines in tests


def launched_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every module the file starts as a process (a line ending in the
    comment ``# layers: not launched`` is a fake command line, e.g. a test's stand-in)."""
    text = path.read_text()
    exempt = {i for i, line in enumerate(text.splitlines(), 1) if EXEMPT in line}
    tree = ast.parse(text, str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List):  # [python, "-m", MODULE, ...]
            elts = node.elts
            for i, e in enumerate(elts[:-1]):
                nxt = elts[i + 1]
                if (isinstance(e, ast.Constant) and e.value == "-m"
                        and isinstance(nxt, ast.Constant) and isinstance(nxt.value, str)):
                    out.append((nxt.lineno, nxt.value))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("launch", "Node") and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append((arg.lineno, arg.value))
    return [(line, m) for line, m in out if line not in exempt]


def _runnable(module: str) -> bool:
    """Is ``python -m module`` a file: one of ours, or of an installed package (looked up
    without importing it)?"""
    top, *rest = module.split(".")
    if top in LAYERS:
        root = ROOT / top
    else:
        spec = importlib.util.find_spec(top)
        if spec is None:
            return False
        if not rest:
            return True
        root = Path(next(iter(spec.submodule_search_locations or []), "/nonexistent"))
    base = root.joinpath(*rest)
    return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()


def _files() -> list[tuple[str, Path]]:
    out = [(_top(m), p) for m, p in ALL_MODULES.items()]
    for pkg in CHECKED_ELSEWHERE:
        out += [(pkg, p) for p in sorted((ROOT / pkg).rglob("*.py"))]
    return out


def test_launched_modules_exist_in_an_allowed_layer():
    problems, seen = [], 0
    for pkg, path in _files():
        for line, module in launched_modules(path):
            if module == "workers.any":  # test_host_processes' stand-in: never started
                continue
            seen += 1
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if _top(module) not in LAYERS:
                # another package's tool (e.g. torch.distributed.run): it must exist where that
                # package is installed (where it is not, the test using it skips)
                if importlib.util.find_spec(_top(module)) and not _runnable(module):
                    problems.append(f"{where}: no such runnable module")
                continue
            if not _runnable(module):
                problems.append(f"{where}: no such runnable module")
            elif LAYERS[_top(module)] > {**LAYERS, **CHECKED_ELSEWHERE}[pkg]:
                problems.append(f"{where}: started from the layer below it")
            elif pkg in LAYERS and pkg != "controller" and _top(module) == "controller":
                problems.append(f"{where}: a host process must not be the controller")
    assert seen >= 8, f"found only {seen} launched modules: is the scan still right?"
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The scanners see function-local imports, relative imports and -m strings."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from controller.experiment.runner import Run\n"
                   "    from . import wire\n"
                   "cmd = ['python', '-m', 'workers.ina.ps_node']\n"
                   "nodes.launch(h, 'workers.ina.worker_node', 'x')\n")
    assert imports_of(src, "workers.ina.fake") == {"controller.experiment.runner", "workers.ina.wire"}
    assert [m for _, m in launched_modules(src)] == ["workers.ina.ps_node",
                                                     "workers.ina.worker_node"]
