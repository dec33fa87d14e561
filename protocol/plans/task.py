"""The task's input contract: what a task may be, checked where it enters.

The CLI checks a task before it starts anything, the coordinator when a client submits
one, and the planner before it reads one; all three take the limit and the check from
here, so the contract has one definition (and the CLI needs nothing from the stages).
"""

from __future__ import annotations

from protocol.basics.text import find_bad_text
from protocol.errors import PlanError

__all__ = ["TASK_MAX_CHARS", "check_task"]

TASK_MAX_CHARS = 10_000


def check_task(task: str) -> str:
    """``task`` itself when acceptable; refuses an empty one, one over :data:`TASK_MAX_CHARS`
    characters and one that is not UTF-8 text (PlanError ACODE-PLAN-001, saying what to do
    instead)."""
    if len(task) > TASK_MAX_CHARS:
        raise PlanError(f"the task is {len(task):,} characters; the limit is {TASK_MAX_CHARS:,}. Shorten it, or "
                        "write the details to a file in the workspace and name that file in the task",
                        code="ACODE-PLAN-001")
    if not task.strip():
        raise PlanError("the task is empty; say what you want changed", code="ACODE-PLAN-001")
    bad = find_bad_text(task)
    if bad is not None:  # a command line's bytes that are not UTF-8 arrive as lone surrogates
        raise PlanError(f"the task is not UTF-8 text: it holds an undecodable byte (\\x{ord(bad.char) & 0xff:02x}) "
                        f"at character {bad.offset}; pass the task as UTF-8 text", code="ACODE-PLAN-001")
    return task
