"""Layers that hold: no module of georag imports one from a layer above its own.

The order (docs/architecture.md), bottom to top::

    batch, config, _io, resources      (bottom: importable from anywhere; import only each other)
    geometry                           (imports nothing of georag)
    perf -> models -> data -> retrieval -> rerank -> retrievers -> eval -> train/ -> experiments
                                        -> api, integrations, serve, cli     (and scripts/)

``train/`` is a package beside georag: it imports georag below ``experiments``; of georag
only ``experiments`` imports it.

Every ``import`` statement counts, including the lazy ones inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BOTTOM = {"batch", "config", "_io", "resources"}
LAYERS = [
    "geometry",
    "perf",
    "models",
    "data",
    "retrieval",
    "rerank",
    "retrievers",
    "eval",
    "experiments",
    "api",
    "integrations",
    "serve",
    "cli",
    "__main__",
]
TOP = LAYERS.index("api")  # api, integrations, serve, cli and __main__ share the top layer


def _layer(module: str, package: str) -> int | None:
    """-1 for the bottom modules, the index in LAYERS otherwise; None outside ``package``."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    if len(parts) == 1:
        return len(LAYERS)  # the package itself: its __init__ only re-exports lazily
    head = parts[1]
    if head in BOTTOM:
        return -1
    if head not in LAYERS:
        raise AssertionError(f"{module}: not placed in a layer (add it to LAYERS or BOTTOM)")
    return min(LAYERS.index(head), TOP)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                base = module.split(".")[: -node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def upward_imports(src: Path, package: str) -> list[str]:
    """Every import in ``src/package`` of a module from a higher layer, as ``file:line``."""
    bad = []
    for path in sorted((src / package).rglob("*.py")):
        rel = path.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        own = _layer(module, package)
        for lineno, target in _imports(path, module):
            theirs = _layer(target, package)
            if theirs is None or own is None or theirs == len(LAYERS):
                continue
            geometry_leak = own == LAYERS.index("geometry") and theirs != own
            bottom_leak = own == -1 and theirs != -1
            if theirs > own or geometry_leak or bottom_leak:
                bad.append(f"{path.relative_to(src)}:{lineno} imports {target}")
    return bad


def _module_names(src: Path, package: str) -> dict[str, Path]:
    names = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_cycles(src: Path, package: str) -> list[list[str]]:
    """Every cycle of module imports inside ``src/package`` (lazy ones too), each as the list
    of modules around it, starting from its smallest name. ``from pkg import mod`` counts as
    an import of ``pkg.mod`` when that is a module; a package's ``__init__`` is the module
    ``pkg`` itself (a submodule importing names from it closes a circle)."""
    names = _module_names(src, package)
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        targets = graph.setdefault(module, set())
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    package_parts = module.split(".")
                    if path.name != "__init__.py":
                        package_parts = package_parts[:-1]
                    base = package_parts[: len(package_parts) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                subs = {f"{origin}.{a.name}" for a in node.names} & names.keys()
                targets |= subs or ({origin} & names.keys())
        targets.discard(module)
    cycles, state = set(), {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                ring = stack[stack.index(target) :]
                start = ring.index(min(ring))
                cycles.add(tuple(ring[start:] + ring[:start]))
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return sorted(list(c) for c in cycles)


def test_no_import_cycle_in_georag():
    assert import_cycles(ROOT, "georag") == []


def test_the_cycle_check_catches_a_circle(tmp_path):
    """A package whose module imports a name back from its parent's ``__init__`` (the shape
    of a circle between a package and its parts), and a plain two-module circle."""
    pkg = tmp_path / "fakepkg"
    (pkg / "ring").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ring" / "__init__.py").write_text("from fakepkg.ring.part import f\n")
    (pkg / "ring" / "part.py").write_text("def f():\n    from fakepkg.ring import g\n")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("import fakepkg.a\n")
    (pkg / "c.py").write_text("from fakepkg.ring import part\n")
    assert import_cycles(tmp_path, "fakepkg") == [
        ["fakepkg.a", "fakepkg.b"],
        ["fakepkg.ring", "fakepkg.ring.part"],
    ]


def test_georag_layers_hold():
    assert upward_imports(ROOT, "georag") == []


def test_train_sits_between_eval_and_experiments():
    """train/ may import georag up to eval; of georag only experiments imports train."""
    offenders = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted((ROOT / "georag").rglob("*.py"))
        if p.relative_to(ROOT / "georag").parts[0] != "experiments"
        for line, name in _imports(p, "georag")
        if name.split(".")[0] == "train"
    ]
    ceiling = LAYERS.index("experiments")
    offenders += [
        f"{p.relative_to(ROOT)}:{line} imports {name}"
        for p in sorted((ROOT / "train").rglob("*.py"))
        for line, name in _imports(p, "train")
        if (layer := _layer(name, "georag")) is not None and layer >= ceiling
    ]
    assert offenders == []


def test_the_check_catches_a_wrong_import(tmp_path):
    """A fixture package with one upward import (retrieval -> rerank), one from geometry to
    models, one lazy one inside a function and one relative one: all four are reported."""
    pkg = tmp_path / "fakepkg"
    for sub in ("geometry", "models", "retrieval", "rerank"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "batch.py").write_text("X = 1\n")
    (pkg / "geometry" / "ops.py").write_text("from fakepkg.models import net\n")
    (pkg / "models" / "net.py").write_text(
        "from fakepkg.geometry import ops\nimport fakepkg.batch\n"
    )
    (pkg / "retrieval" / "index.py").write_text(
        "import torch\nfrom fakepkg.rerank.base import X\n\n"
        "def f():\n    from fakepkg.rerank import base\n    return base\n"
    )
    (pkg / "retrieval" / "rel.py").write_text("from ..rerank.base import X\n")
    (pkg / "rerank" / "base.py").write_text("from fakepkg.retrieval import index\nX = 1\n")
    bad = upward_imports(tmp_path, "fakepkg")
    assert bad == [
        "fakepkg/geometry/ops.py:1 imports fakepkg.models",
        "fakepkg/retrieval/index.py:2 imports fakepkg.rerank.base",
        "fakepkg/retrieval/index.py:5 imports fakepkg.rerank",
        "fakepkg/retrieval/rel.py:1 imports fakepkg.rerank.base",
    ]
    (pkg / "odd").mkdir()
    (pkg / "odd" / "x.py").write_text("import fakepkg.batch\n")
    with pytest.raises(AssertionError, match="not placed in a layer"):
        upward_imports(tmp_path, "fakepkg")
