"""The task's input contract (protocol.plans.task), the one the CLI, the coordinator and the planner apply."""

from __future__ import annotations

import pytest

from protocol.errors import PlanError
from protocol.plans.task import TASK_MAX_CHARS, check_task


def test_a_task_of_exactly_the_limit_is_accepted_as_it_is() -> None:
    task = "x" * TASK_MAX_CHARS
    assert TASK_MAX_CHARS == 10_000
    assert check_task(task) is task


def test_a_task_one_character_over_the_limit_is_refused_saying_what_to_do() -> None:
    with pytest.raises(PlanError) as raised:
        check_task("x" * (TASK_MAX_CHARS + 1))
    assert raised.value.code == "ACODE-PLAN-001"
    assert "the task is 10,001 characters; the limit is 10,000" in raised.value.message
    assert "write the details to a file in the workspace" in raised.value.message


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
def test_an_empty_or_blank_task_is_refused(task: str) -> None:
    with pytest.raises(PlanError) as raised:
        check_task(task)
    assert (raised.value.code, raised.value.message) == (
        "ACODE-PLAN-001", "the task is empty; say what you want changed")


def test_a_task_with_bytes_that_are_not_utf8_is_refused_naming_the_byte() -> None:
    task = b"fix caf\xe9 please".decode("utf-8", "surrogateescape")  # how a Latin-1 command line arrives
    with pytest.raises(PlanError) as raised:
        check_task(task)
    assert (raised.value.code, raised.value.message) == (
        "ACODE-PLAN-001", "the task is not UTF-8 text: it holds an undecodable byte (\\xe9) at character 7; pass the "
                          "task as UTF-8 text")
