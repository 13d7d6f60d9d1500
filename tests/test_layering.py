# The packages stay layered (docs/architecture.md): no package imports one
# above it, none imports another of its own level, and no two modules
# import each other, directly or round a circle, inside a package or
# across. Read from the source with ast, so a lazy import inside a
# function counts too.
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ipufs"

#: Each package and the ipufs packages (or top-level modules) it may
#: import. Anything not named here is above every package: cli, doctor,
#: __main__ compose the rest.
ALLOWED: dict[str, set[str]] = {
    "abi": set(),
    "native": {"_native"},  # the typed wrapper and its cffi extension
    "fuse": {"native"},
    "model": {"abi", "_native"},  # _native: the executor's hot loop (computation only, no system calls)
    "client": {"abi", "native"},
    "driver": {"abi", "native", "fuse", "model"},
    "container": {"abi", "native", "fuse"},
    "daemon": {"abi", "native", "fuse", "model", "driver", "container"},
    "tools": {"abi", "native", "client", "container"},
    "deviceplugin": {"abi", "client", "tools", "container"},
    "monitoring": {"abi", "native", "client", "tools", "deviceplugin"},
    # `ipufs run`: a command's own IPUs, /dev, /sys and PID namespace.
    "run": {"abi", "native", "fuse", "client", "tools", "monitoring"},
}
#: Modules at the top of the package that every layer may import.
SHARED = {"__init__", "compat", "self_command", "problems"}  # ipufs.__version__; where the compatibility pieces are; how ipufs starts itself; one-line failures


def _unit(module: str) -> str:
    """The layer of an ipufs module: its package, or a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` (ipufs.a.b) is a module or package of ipufs."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").exists() or dotted == "ipufs._native"


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of import statements under `if TYPE_CHECKING:`: names for
    annotations, which the interpreter never imports."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return found


def _imports(path: Path, *, type_only: bool = True) -> set[str]:
    """The ipufs modules ``path`` imports: ``from ipufs.a import b`` names
    ipufs.a.b when b is a module, else ipufs.a. ``type_only``: count the
    imports under `if TYPE_CHECKING:` too."""
    tree = ast.parse(path.read_text(), str(path))
    skip = set() if type_only else _type_only(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "ipufs"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ipufs":
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if _is_module(child) else node.module)
    return found


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def _layered() -> list[tuple[str, Path]]:
    """The modules of the packages in ALLOWED (the composing top, cli,
    doctor, run and __main__, may import anything)."""
    return [(m, p) for m, p in _modules() if _unit(m) in ALLOWED]


@pytest.mark.parametrize("module,path", _layered(), ids=[m for m, _ in _layered()])
def test_no_module_imports_a_layer_above_its_own(module: str, path: Path) -> None:
    unit = _unit(module)
    wrong = sorted(
        imported for imported in _imports(path)
        if _unit(imported) != unit and _unit(imported) not in ALLOWED[unit] | SHARED
    )
    assert not wrong, f"{module} ({unit}) imports {wrong}; {unit} may import {sorted(ALLOWED[unit])}"


def _import_graph() -> dict[str, set[str]]:
    """Module -> the ipufs modules it imports, lazy imports and imports for
    annotations alone (`if TYPE_CHECKING:`) included (a package stands for
    its __init__): two modules that name each other's types are tied as
    much as two that call each other; a small protocol breaks the tie."""
    modules = dict(_modules())

    def node(name: str) -> str | None:
        return name if name in modules else (f"{name}.__init__" if f"{name}.__init__" in modules else None)

    return {m: {n for n in map(node, _imports(p)) if n and n != m} for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Inside a package too: two modules that need each other are one
    concept split in two, or a third is missing."""
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_a_circle_inside_a_package() -> None:
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "b": {"a.x"}}
    assert _cycles(graph) == [["a.x", "a.y", "a.z"]]


def test_the_allowed_table_has_no_cycle() -> None:
    seen: dict[str, int] = {}

    def depth(unit: str, path: tuple[str, ...] = ()) -> int:
        assert unit not in path, f"cycle: {' -> '.join(path + (unit,))}"
        if unit not in seen:
            seen[unit] = 1 + max((depth(u, path + (unit,)) for u in ALLOWED.get(unit, ())), default=0)
        return seen[unit]

    for unit in ALLOWED:
        depth(unit)


def test_every_package_is_in_the_table() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(ALLOWED), f"add {sorted(packages - set(ALLOWED))} to ALLOWED"


def test_imports_for_annotations_alone_are_no_runtime_edge(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nimport ipufs.abi\n"
                      "if TYPE_CHECKING:\n    from ipufs.model.ipu import Ipu\n")
    assert _imports(module) == {"ipufs.abi", "ipufs.model.ipu"}
    assert _imports(module, type_only=False) == {"ipufs.abi"}
