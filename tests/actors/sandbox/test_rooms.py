"""The sandbox's rooms import one way: core → tools → workspace → confinement.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms fails here too. A room may
import itself and any room below it; nothing in a room imports the core (actor, gate,
journal, dispatch, the package itself).
"""

from __future__ import annotations

from pathlib import Path

import actors.sandbox
from tests.rooms import upward

SANDBOX = Path(actors.sandbox.__file__).parent
# each room, and the rooms beneath it that it may import
BELOW = {
    "confinement": set[str](),
    "workspace": {"confinement"},
    "tools": {"workspace", "confinement"},
}


def test_each_room_of_the_sandbox_imports_only_itself_and_the_rooms_beneath_it() -> None:
    assert sorted(p.name for p in SANDBOX.iterdir() if (p / "__init__.py").exists()) == sorted(BELOW)
    assert upward(SANDBOX, "actors.sandbox", BELOW) == []


def test_an_import_up_the_rooms_is_found(tmp_path: Path) -> None:
    """The check itself: a confinement module importing a tool, and a tool importing the core."""
    root = tmp_path / "actors" / "sandbox"
    for room in BELOW:
        (root / room).mkdir(parents=True)
        (root / room / "__init__.py").write_text('"""A room."""\n')
    (root / "confinement" / "confine.py").write_text("def f():\n    from actors.sandbox.tools import files\n")
    (root / "tools" / "files.py").write_text("from actors.sandbox.dispatch import ToolCall\n")
    (root / "workspace" / "ignore.py").write_text("from actors.sandbox.confinement.confine import Workspace\n")
    assert upward(root, "actors.sandbox", BELOW) == ["actors.sandbox.confinement.confine imports actors.sandbox.tools",
                             "actors.sandbox.tools.files imports actors.sandbox.dispatch"]
