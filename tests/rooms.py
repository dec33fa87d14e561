"""The check behind each package's room test (``tests/actors/*/test_rooms.py``,
``tests/protocol/test_rooms.py``): a package split into sub-packages (rooms) imports one
way, each room only itself and the rooms beneath it, and no room imports the package's own
top-level modules, save one placed among the rooms by name (protocol's ``errors``, which
the basics lie beneath and every other room imports).

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms is found too.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

__all__ = ["upward"]

TOP = "top"  # the package itself and its top-level modules, which no room may import


def _room(module: str, package: str, below: Mapping[str, set[str]]) -> str:
    """``actors.stages.calls.pipeline`` → ``calls`` (package ``actors.stages``); a top-level
    module named in ``below`` (``protocol.errors``) → itself; the package and its other
    top-level modules → :data:`TOP`."""
    if module == package:
        return TOP
    parts = module.removeprefix(package + ".").split(".")
    return parts[0] if len(parts) > 1 or parts[0] in below else TOP


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


def upward(root: Path, package: str, below: Mapping[str, set[str]]) -> list[str]:
    """``MODULE imports IMPORTED`` for each import of a room of ``package`` (its dotted
    name, ``actors.stages``), whose folder is ``root``, that is not of itself or of a room
    in ``below[room]``."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join((package, *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        room = _room(module, package, below)
        if room == TOP:
            continue
        for imported in sorted(_imports(path, package)):
            if _room(imported, package, below) not in below[room] | {room}:
                wrong.append(f"{module} imports {imported}")
    return wrong
