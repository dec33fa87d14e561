"""The sandbox's rooms import one way: core → tools → workspace → confinement.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms fails here too. A room may
import itself and any room below it; nothing in a room imports the core (actor, gate,
journal, dispatch, the package itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

import actors.sandbox

SANDBOX = Path(actors.sandbox.__file__).parent
# each room, and the rooms beneath it that it may import
BELOW = {
    "confinement": set[str](),
    "workspace": {"confinement"},
    "tools": {"workspace", "confinement"},
}


def _room(module: str) -> str:
    """``actors.sandbox.tools.files`` → ``tools``; the package and its top-level modules → ``core``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in BELOW) else "core"


def _imports(path: Path) -> set[str]:
    """The actors.sandbox modules and packages ``path`` imports from (``from actors.sandbox.tools
    import files`` is an import from the tools room; ``from actors.sandbox import x``, from the core)."""
    found = set[str]()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "actors.sandbox" or name.startswith("actors.sandbox.")}


def _upward(root: Path) -> list[str]:
    wrong = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts).removesuffix(".__init__")
        room = _room(module)
        if room == "core":
            continue
        for imported in sorted(_imports(path)):
            if _room(imported) not in BELOW[room] | {room}:
                wrong.append(f"{module} imports {imported}")
    return wrong


def test_each_room_of_the_sandbox_imports_only_itself_and_the_rooms_beneath_it() -> None:
    assert sorted(p.name for p in SANDBOX.iterdir() if (p / "__init__.py").exists()) == sorted(BELOW)
    assert _upward(SANDBOX) == []


def test_an_import_up_the_rooms_is_found(tmp_path: Path) -> None:
    """The check itself: a confinement module importing a tool, and a tool importing the core."""
    root = tmp_path / "actors" / "sandbox"
    for room in BELOW:
        (root / room).mkdir(parents=True)
        (root / room / "__init__.py").write_text('"""A room."""\n')
    (root / "confinement" / "confine.py").write_text("def f():\n    from actors.sandbox.tools import files\n")
    (root / "tools" / "files.py").write_text("from actors.sandbox.dispatch import ToolCall\n")
    (root / "workspace" / "ignore.py").write_text("from actors.sandbox.confinement.confine import Workspace\n")
    assert _upward(root) == ["actors.sandbox.confinement.confine imports actors.sandbox.tools",
                             "actors.sandbox.tools.files imports actors.sandbox.dispatch"]
