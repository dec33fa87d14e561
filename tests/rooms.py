"""The check behind each package's room test (``tests/actors/*/test_rooms.py``): a package
split into sub-packages (rooms) imports one way, each room only itself and the rooms
beneath it, and no room imports the package's own top-level modules.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms is found too.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

__all__ = ["upward"]

TOP = "top"  # the package itself and its top-level modules, which no room may import


def _room(module: str, below: Mapping[str, set[str]]) -> str:
    """``actors.stages.calls.pipeline`` → ``calls``; the package and its top-level modules → :data:`TOP`."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in below) else TOP


def _imports(path: Path, package: str) -> set[str]:
    """The modules and packages of ``package`` that ``path`` imports from (``from
    actors.stages.calls import preview`` is an import from the calls room; ``from
    actors.stages import x``, from the top)."""
    found = set[str]()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == package or name.startswith(package + ".")}


def upward(root: Path, below: Mapping[str, set[str]]) -> list[str]:
    """``MODULE imports IMPORTED`` for each import of a room of the package at ``root``
    (``.../actors/stages``) that is not of itself or of a room in ``below[room]``."""
    package = f"{root.parent.name}.{root.name}"
    wrong = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts).removesuffix(".__init__")
        room = _room(module, below)
        if room == TOP:
            continue
        for imported in sorted(_imports(path, package)):
            if _room(imported, below) not in below[room] | {room}:
                wrong.append(f"{module} imports {imported}")
    return wrong
