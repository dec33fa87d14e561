"""Checking a plan the model wrote before anything acts on it (seed 003 FR-044..051, FR-081/082).

Two halves. :func:`read_plan` turns the model's text into a :class:`~protocol.plan.TaskPlan`
(JSON found in prose or a code fence, as :func:`~actors.stages.answers.parse_answer` does);
when the whole does not decode, each task and question is decoded on its own, so the
model hears about every broken one (a complexity of 4 in T1, an unknown action in T3),
not only the first.

:func:`plan_problems` lists everything else that would make the plan fail later:
the structural rules of :func:`protocol.plan.problems` (labels, dependencies, cycles
named by their members, limits, lexical paths), write targets the sandbox protects
(``.git``, ``.agent``), and every command (a task's ``resources.commands`` and each
acceptance ``check.command``) the session's sandbox policy would refuse, with the
policy's own reason. The verifier runs check commands through that same policy, so a
plan that passes here does not fail there for its commands' form.
"""

from __future__ import annotations

import posixpath
from typing import Any

import msgspec

from actors.sandbox import policy, protected
from actors.sandbox.policy import command_policy_of
from actors.stages.answers import parse_answer
from protocol.errors import ModelError, SandboxError
from protocol.plan import PlanProblem, PlanTask, Question, TaskPlan, path_problem, problems
from protocol.sandbox import SandboxPolicy

__all__ = ["plan_problems", "read_plan"]


def _at(error: msgspec.ValidationError, prefix: str) -> str:
    """The error with its location made absolute (``$.title`` in task 2 is ``$.tasks[2].title``)."""
    text = str(error)
    return text.replace("`$", f"`{prefix}", 1) if " - at `$" in text else f"{text} - at `{prefix}`"


def read_plan(text: str) -> tuple[TaskPlan | None, list[str]]:
    """The plan in ``text``, or None and every decoding problem found."""
    try:
        raw: Any = parse_answer(text, dict, stage="planner")
    except ModelError as exc:
        return None, [f"the answer is not one JSON object ({exc.__cause__ or exc.message}); answer with the plan "
                      "as one JSON object and nothing else"]
    try:
        return msgspec.convert(raw, TaskPlan), []
    except msgspec.ValidationError as error:
        whole = str(error)
    found: list[str] = []
    for key, type_ in (("tasks", PlanTask), ("questions", Question)):
        items = raw.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            try:
                msgspec.convert(item, type_)
            except msgspec.ValidationError as error:
                found.append(_at(error, f"$.{key}[{index}]"))
    return None, found or [whole]  # no task or question is wrong: the problem is at the top level


def _command_problem(command: str, rules: policy.CommandPolicy) -> str | None:
    try:
        policy.check(command, rules)
    except SandboxError as exc:
        return exc.message
    return None


def plan_problems(plan: TaskPlan, sandbox: SandboxPolicy, max_complexity: int = 34) -> list[PlanProblem]:
    """Every problem of ``plan`` under the session's sandbox policy and complexity cap
    (``planner.max_complexity``); empty when it is good."""
    found = problems(plan)
    rules = command_policy_of(sandbox)
    for task in plan.tasks:
        if task.complexity > max_complexity and task.status != "completed":
            found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} has complexity {task.complexity}; at most "
                                                       f"{max_complexity} is allowed: split it into smaller tasks"))
        for field in ("write", "directories"):
            for path in getattr(task.resources, field):
                if path_problem(path):
                    continue  # protocol.plan.problems named it
                try:
                    protected.check(posixpath.normpath(path), path)
                except SandboxError as exc:
                    found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} resources.{field}: {exc.message}"))
        for index, command in enumerate(task.resources.commands):
            why = _command_problem(command, rules)
            if why:
                found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} resources.commands[{index}] "
                                                           f"would be refused by the sandbox: {why}"))
        for criterion in task.acceptance:
            if criterion.check is None:
                continue
            why = _command_problem(criterion.check.command, rules)
            if why:
                found.append(PlanProblem("ACODE-PLAN-004", f"task {task.label} criterion {criterion.label} check "
                                                           f"command would be refused by the sandbox: {why}"))
    return found
