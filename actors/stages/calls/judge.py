"""Whether a check's command did what the plan says: the verifier's verdict on a criterion,
and the file step's after each answer (:mod:`actors.stages.execution.filestep`). Its own module so an
executor process does not load the verifier's code (tests/actors/test_lean.py)."""

from __future__ import annotations

from protocol.plans.plan import Check
from protocol.plans.results import ToolResult

__all__ = ["judge"]

_TAIL = 2_000


def judge(check: Check, result: ToolResult) -> tuple[bool, str]:
    """Whether ``result`` of running ``check`` meets it, and the evidence either way: the
    command, its exit code and, when it failed, the tail of its output."""
    output = result.output
    tail = output if len(output) <= _TAIL else "…" + output[-_TAIL:]
    shown = f"; output: {tail}" if tail.strip() else "; no output"
    if result.exit_code is None:
        message = result.error.message if result.error else "no exit code"
        return False, f"`{check.command}` did not run to completion: {message}{shown}"
    if result.exit_code != check.expect_exit:
        return False, f"`{check.command}` exited {result.exit_code} (expected {check.expect_exit}){shown}"
    if check.expect_output is not None and check.expect_output not in output:
        return False, f"`{check.command}` exited {result.exit_code} but its output lacks {check.expect_output!r}{shown}"
    return True, f"`{check.command}` exited {result.exit_code}" + (
        f" and printed {check.expect_output!r}" if check.expect_output else "")
