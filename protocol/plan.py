"""The TaskPlan contract (seed 003): goal → tasks → steps, as the planner's model writes it.

The model answers with labels (``T1``, ``S1``, ``A1``); :func:`finalize` validates the
draft, assigns UUIDv7 ids and a version, and keeps the labels. Step labels are unique
within their task and a step's ``depends_on`` names steps of the same task; a task's
``depends_on`` names other tasks. Both graphs must be acyclic.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.errors import PlanError
from protocol.ids import new_id

__all__ = [
    "ACTIONS",
    "Check",
    "Criterion",
    "PlanStep",
    "PlanTask",
    "Question",
    "Resources",
    "TaskPlan",
    "finalize",
    "ordered_steps",
    "validate",
]

Label = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Text = Annotated[str, msgspec.Meta(max_length=20_000)]
Complexity = Literal[1, 2, 3, 5, 8, 13, 21, 34]
Action = Literal[
    "read_file",
    "write_file",
    "modify_file",
    "create_directory",
    "run_command",
    "analyze_code",
    "generate_code",
]
ACTIONS: tuple[str, ...] = Action.__args__  # type: ignore[attr-defined]
MAX_STEPS = 50
MAX_CONTEXT_FILES = 100


class _PlanStruct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class Check(_PlanStruct, kw_only=True):
    """A command whose result decides a criterion: exit code and, optionally, output."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=4_000)]
    expect_exit: Annotated[int, msgspec.Meta(ge=0, le=255)] = 0
    expect_output: Text | None = None


class Criterion(_PlanStruct, kw_only=True):
    label: Label
    description: Text
    check: Check | None = None


class Resources(_PlanStruct, kw_only=True):
    read: list[str] = []
    write: list[str] = []
    directories: list[str] = []
    commands: list[str] = []


class PlanStep(_PlanStruct, kw_only=True):
    label: Label
    title: Text
    description: Text = ""
    action: Action
    expected_output: Text = ""
    verification: Text = ""
    depends_on: list[Label] = []
    id: str = ""


class PlanTask(_PlanStruct, kw_only=True):
    label: Label
    title: Text
    description: Text = ""
    complexity: Complexity = 1
    depends_on: list[Label] = []
    resources: Resources = Resources()
    acceptance: list[Criterion] = []
    steps: list[PlanStep] = []
    id: str = ""
    status: Literal["pending", "completed"] = "pending"


class Question(_PlanStruct, kw_only=True):
    label: Label
    question: Text
    options: list[str] = []
    free_text: bool = True
    default: str = ""  # the answer used when nobody answers in time (else the first option)


class TaskPlan(_PlanStruct, kw_only=True):
    goal: Text
    status: Literal["ready", "needs_clarification"] = "ready"
    tasks: list[PlanTask] = []
    questions: list[Question] = []
    id: str = ""
    version: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 0
    change_summary: Text = ""

    def criteria(self) -> list[Criterion]:
        return [c for task in self.tasks for c in task.acceptance]

    def step_count(self) -> int:
        return sum(len(task.steps) for task in self.tasks)


def _find_cycle(nodes: list[str], edges: dict[str, list[str]]) -> list[str] | None:
    """Return the members of one dependency cycle, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    for root in nodes:
        if state.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, index = stack.pop()
            if index == 0:
                state[node] = 1
                path.append(node)
            deps = edges.get(node, [])
            if index < len(deps):
                stack.append((node, index + 1))
                dep = deps[index]
                if state.get(dep) == 1:
                    return path[path.index(dep) :]
                if not state.get(dep):
                    stack.append((dep, 0))
            else:
                state[node] = 2
                path.pop()
    return None


def _topological(labels: list[str], edges: dict[str, list[str]]) -> list[str]:
    """Kahn's algorithm, stable in the model's order (assumes no cycle)."""
    done: set[str] = set()
    order: list[str] = []
    while len(order) < len(labels):
        progressed = False
        for label in labels:
            if label not in done and all(d in done for d in edges.get(label, [])):
                done.add(label)
                order.append(label)
                progressed = True
        if not progressed:  # pragma: no cover - validate() rejects cycles first
            raise PlanError("dependency cycle", code="ACODE-PLAN-005")
    return order


def validate(plan: TaskPlan) -> None:
    """Raise :class:`PlanError` naming every structural problem of ``plan``."""
    problems: list[str] = []
    if plan.status == "needs_clarification":
        if not plan.questions:
            problems.append("status is needs_clarification but there are no questions")
    elif not plan.tasks:
        problems.append("a ready plan needs at least one task")
    task_labels = [t.label for t in plan.tasks]
    for dup in sorted({x for x in task_labels if task_labels.count(x) > 1}):
        problems.append(f"task label {dup!r} is used more than once")
    if plan.step_count() > MAX_STEPS:
        problems.append(f"the plan has {plan.step_count()} steps; at most {MAX_STEPS} are allowed")
    files = {p for t in plan.tasks for p in (*t.resources.read, *t.resources.write)}
    if len(files) > MAX_CONTEXT_FILES:
        problems.append(f"the plan names {len(files)} files; at most {MAX_CONTEXT_FILES} are allowed")
    criterion_labels = [c.label for c in plan.criteria()]
    for dup in sorted({x for x in criterion_labels if criterion_labels.count(x) > 1}):
        problems.append(f"criterion label {dup!r} is used more than once")
    known = set(task_labels)
    for task in plan.tasks:
        for dep in task.depends_on:
            if dep not in known:
                problems.append(f"task {task.label} depends on unknown task {dep!r}")
        step_labels = [s.label for s in task.steps]
        for dup in sorted({x for x in step_labels if step_labels.count(x) > 1}):
            problems.append(f"step label {dup!r} is used more than once in task {task.label}")
        for step in task.steps:
            for dep in step.depends_on:
                if dep not in step_labels:
                    problems.append(f"step {task.label}/{step.label} depends on unknown step {dep!r}")
    if problems:
        raise PlanError("invalid plan: " + "; ".join(problems) + "; fix the plan and answer again",
                        code="ACODE-PLAN-004")
    cycle = _find_cycle(task_labels, {t.label: t.depends_on for t in plan.tasks})
    if cycle:
        raise PlanError(f"tasks depend on each other in a cycle: {' -> '.join([*cycle, cycle[0]])}",
                        code="ACODE-PLAN-005")
    for task in plan.tasks:
        steps = [s.label for s in task.steps]
        cycle = _find_cycle(steps, {s.label: s.depends_on for s in task.steps})
        if cycle:
            names = " -> ".join(f"{task.label}/{s}" for s in [*cycle, cycle[0]])
            raise PlanError(f"steps depend on each other in a cycle: {names}", code="ACODE-PLAN-005")


def finalize(draft: TaskPlan, *, version: int, previous: TaskPlan | None = None) -> TaskPlan:
    """Validate ``draft`` and give it ids and a version.

    Tasks that were completed in ``previous`` (same label) keep their id and stay
    completed, so a re-plan never repeats finished work.
    """
    validate(draft)
    done = {t.label: t for t in previous.tasks if t.status == "completed"} if previous else {}
    tasks = []
    for task in draft.tasks:
        kept = done.get(task.label)
        steps = [msgspec.structs.replace(s, id=s.id or new_id()) for s in task.steps]
        tasks.append(
            msgspec.structs.replace(
                task,
                id=kept.id if kept else (task.id or new_id()),
                status="completed" if kept else task.status,
                steps=steps,
            )
        )
    return msgspec.structs.replace(draft, id=new_id(), version=version, tasks=tasks)


def ordered_steps(plan: TaskPlan) -> list[tuple[PlanTask, PlanStep]]:
    """Every step of every pending task, in dependency order (tasks first, then steps)."""
    by_label = {t.label: t for t in plan.tasks}
    order = _topological([t.label for t in plan.tasks], {t.label: t.depends_on for t in plan.tasks})
    result: list[tuple[PlanTask, PlanStep]] = []
    for label in order:
        task = by_label[label]
        if task.status == "completed":
            continue
        steps = {s.label: s for s in task.steps}
        for step_label in _topological(list(steps), {s.label: s.depends_on for s in task.steps}):
            result.append((task, steps[step_label]))
    return result
