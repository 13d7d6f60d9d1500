# The packages stay layered (docs/architecture.md): no package imports one
# above it, none imports another of its own level, and so no cycles. Read
# from the source with ast, so a lazy import inside a function counts too.
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
    "model": {"abi"},
    "client": {"abi", "native"},
    "driver": {"abi", "native", "fuse", "model"},
    "container": {"abi", "native", "fuse"},
    "daemon": {"abi", "native", "fuse", "model", "driver", "container"},
    "tools": {"abi", "native", "client", "container"},
    "deviceplugin": {"abi", "client", "tools", "container"},
}
#: Modules at the top of the package that every layer may import.
SHARED = {"__init__", "compat", "self_command"}  # ipufs.__version__; where the compatibility pieces are; how ipufs starts itself


def _unit(module: str) -> str:
    """The layer of an ipufs module: its package, or a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists() or name == "_native"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "ipufs"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ipufs":
            if node.module == "ipufs":  # a submodule, or a name of ipufs/__init__.py
                found |= {f"ipufs.{a.name}" if _is_module(a.name) else "ipufs" for a in node.names}
            else:
                found.add(node.module)
    return found


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_no_module_imports_a_layer_above_its_own(module: str, path: Path) -> None:
    unit = _unit(module)
    if unit not in ALLOWED:
        return  # the composing top: cli, doctor, __main__
    wrong = sorted(
        imported for imported in _imports(path)
        if _unit(imported) != unit and _unit(imported) not in ALLOWED[unit] | SHARED
    )
    assert not wrong, f"{module} ({unit}) imports {wrong}; {unit} may import {sorted(ALLOWED[unit])}"


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
