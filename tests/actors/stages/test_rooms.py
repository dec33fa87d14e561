"""The stage actor's rooms import one way: actor → planning, execution, judging → calls →
request → prompting.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms fails here too. A room may
import itself and any room below it; the three stages' rooms (planning, execution, judging)
import none of each other, so a stage process loads only its own stage's code; nothing in a
room imports the actor's own modules (actor, progress, the package itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

import actors.stages

STAGES = Path(actors.stages.__file__).parent
_SHARED = {"calls", "request", "prompting"}
# each room, and the rooms beneath it that it may import
BELOW = {
    "prompting": set[str](),
    "request": {"prompting"},
    "calls": {"request", "prompting"},
    "planning": _SHARED,
    "execution": _SHARED,
    "judging": _SHARED,
}


def _room(module: str) -> str:
    """``actors.stages.calls.pipeline`` → ``calls``; the package and its top-level modules → ``actor``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in BELOW) else "actor"


def _imports(path: Path) -> set[str]:
    """The actors.stages modules and packages ``path`` imports from (``from actors.stages.calls
    import preview`` is an import from the calls room; ``from actors.stages import x``, from the actor's)."""
    found = set[str]()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "actors.stages" or name.startswith("actors.stages.")}


def _upward(root: Path) -> list[str]:
    wrong = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts).removesuffix(".__init__")
        room = _room(module)
        if room == "actor":
            continue
        for imported in sorted(_imports(path)):
            if _room(imported) not in BELOW[room] | {room}:
                wrong.append(f"{module} imports {imported}")
    return wrong


def test_each_room_of_the_stages_imports_only_itself_and_the_rooms_beneath_it() -> None:
    assert sorted(p.name for p in STAGES.iterdir() if (p / "__init__.py").exists()) == sorted(BELOW)
    assert _upward(STAGES) == []


def test_an_import_up_the_rooms_or_across_the_stages_is_found(tmp_path: Path) -> None:
    """The check itself: prompting importing the request's context, the executor's room
    importing the verifier's, and a room importing the actor."""
    root = tmp_path / "actors" / "stages"
    for room in BELOW:
        (root / room).mkdir(parents=True)
        (root / room / "__init__.py").write_text('"""A room."""\n')
    (root / "prompting" / "prompts.py").write_text("def f():\n    from actors.stages.request import context\n")
    (root / "execution" / "filestep.py").write_text("from actors.stages.judging.verifier import run\n")
    (root / "calls" / "pipeline.py").write_text("from actors.stages.progress import ProgressBoard\n")
    (root / "judging" / "verifier.py").write_text("from actors.stages.calls import pipeline\n")  # downward: fine
    assert _upward(root) == ["actors.stages.calls.pipeline imports actors.stages.progress",
                             "actors.stages.execution.filestep imports actors.stages.judging.verifier",
                             "actors.stages.prompting.prompts imports actors.stages.request"]
