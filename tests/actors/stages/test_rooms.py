"""The stage actor's rooms import one way: actor → planning, execution, judging → calls →
request → prompting.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms fails here too. A room may
import itself and any room below it; the three stages' rooms (planning, execution, judging)
import none of each other, so a stage process loads only its own stage's code; nothing in a
room imports the actor's own modules (actor, progress, the package itself).
"""

from __future__ import annotations

from pathlib import Path

import actors.stages
from tests.rooms import upward

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


def test_each_room_of_the_stages_imports_only_itself_and_the_rooms_beneath_it() -> None:
    assert sorted(p.name for p in STAGES.iterdir() if (p / "__init__.py").exists()) == sorted(BELOW)
    assert upward(STAGES, "actors.stages", BELOW) == []


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
    assert upward(root, "actors.stages", BELOW) == ["actors.stages.calls.pipeline imports actors.stages.progress",
                             "actors.stages.execution.filestep imports actors.stages.judging.verifier",
                             "actors.stages.prompting.prompts imports actors.stages.request"]
