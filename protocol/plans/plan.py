"""The TaskPlan contract (seed 003): goal → tasks → steps, as the planner's model writes it.

The model answers with labels (``T1``, ``S1``, ``A1``); :func:`finalize` validates the
draft, assigns UUIDv7 ids and a version, and keeps the labels. Step labels are unique
within their task and a step's ``depends_on`` names steps of the same task; a task's
``depends_on`` names other tasks. Both graphs must be acyclic. Resource paths must name
something inside the workspace, lexically (:func:`path_problem`; the sandbox checks the
real path again). :func:`problems` lists everything wrong at once, so a model can fix a
plan in one answer; commands are checked against the sandbox policy by the planner
(:mod:`actors.stages.planning.plancheck`), since the policy lives with the sandbox.

:func:`repair` fixes first what is mechanical and cannot change what the plan means, so
neither the model nor the user is asked about acode's own rules: criterion labels used
more than once are renumbered ``A1``..``An``; step labels used more than once in a task
are renumbered ``S1``..``Sn`` when no dependency names them; a step depending on a task
(``T1``) depends on that task (its own task: dropped, another: the step's task depends on
it); a task depending on a step label held by exactly one other task depends on that
task; self-dependencies go; a pending task without steps gets one step doing the task.
Each repair is one note saying what acode did. A dependency that names nothing (a typo)
stays a problem: guessing could change the order the user gets. One that names nothing and
is not even shaped like a label (``mcp__notes__lookup(acode)``: the real 1.5B model put the
tool call its step makes there, three answers running, whatever the correction said) is no
typo of one, so it orders nothing: it goes.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal, NamedTuple, get_args

import msgspec

from protocol.basics.ids import new_id
from protocol.errors import PlanError

__all__ = [
    "ACTIONS",
    "Check",
    "Criterion",
    "PlanProblem",
    "PlanStep",
    "PlanTask",
    "Question",
    "Resources",
    "TaskPlan",
    "carry_completed",
    "finalize",
    "ordered_steps",
    "path_problem",
    "problems",
    "repair",
    "same_content",
    "validate",
    "with_status",
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
ACTIONS: tuple[str, ...] = get_args(Action)
MAX_STEPS = 50
MAX_CONTEXT_FILES = 100


class _PlanStruct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class Check(_PlanStruct, frozen=True, kw_only=True):
    """A command whose result decides a criterion: exit code and, optionally, output."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=4_000)]
    expect_exit: Annotated[int, msgspec.Meta(ge=0, le=255)] = 0
    expect_output: Text | None = None


class Criterion(_PlanStruct, frozen=True, kw_only=True):
    label: Label
    description: Text
    check: Check | None = None


class Resources(_PlanStruct, frozen=True, kw_only=True):
    read: list[str] = []
    write: list[str] = []
    directories: list[str] = []
    commands: list[str] = []


class PlanStep(_PlanStruct, frozen=True, kw_only=True):
    label: Label
    title: Text
    description: Text = ""
    action: Action
    expected_output: Text = ""
    verification: Text = ""
    depends_on: list[Label] = []
    id: str = ""


class PlanTask(_PlanStruct, frozen=True, kw_only=True):
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


class Question(_PlanStruct, frozen=True, kw_only=True):
    label: Label
    question: Text
    options: list[str] = []
    free_text: bool = True
    default: str = ""  # the answer used when nobody answers in time (else the first option)


class TaskPlan(_PlanStruct, frozen=True, kw_only=True):
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


class PlanProblem(NamedTuple):
    """One thing wrong with a plan: its code (ACODE-PLAN-004, or -005 for a cycle) and what to fix."""

    code: str
    message: str


_WINDOWS_ABSOLUTE = re.compile(r"^[A-Za-z]:[\\/]")


def path_problem(path: str) -> str | None:
    """Why ``path`` may not appear in a plan, or None: it must name something inside the
    workspace, lexically (the sandbox checks the real path again when a tool uses it)."""
    if not path.strip():
        return "is empty"
    if "\0" in path:
        return "contains a NUL byte"
    if path.startswith(("/", "\\")) or _WINDOWS_ABSOLUTE.match(path):
        return "is absolute; name it relative to the workspace root"
    if path.startswith("~"):
        return "starts with '~', which nothing expands; name it relative to the workspace root"
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal == ".." or normal.startswith("../"):
        return "leads outside the workspace; name a path inside it"
    return None


def _duplicates(labels: list[str]) -> list[str]:
    return sorted({x for x in labels if labels.count(x) > 1})


def problems(plan: TaskPlan) -> list[PlanProblem]:
    """Every structural problem of ``plan`` (empty when it is valid), in a stable order:
    shape, limits, labels, dependencies and paths task by task, then dependency cycles."""
    found: list[str] = []
    if plan.status == "needs_clarification":
        if not plan.questions:
            found.append("status is needs_clarification but there are no questions")
    elif not plan.tasks:
        found.append("a ready plan needs at least one task")
    task_labels = [t.label for t in plan.tasks]
    found += [f"task label {dup!r} is used more than once" for dup in _duplicates(task_labels)]
    if plan.step_count() > MAX_STEPS:
        found.append(f"the plan has {plan.step_count()} steps; at most {MAX_STEPS} are allowed")
    files = {p for t in plan.tasks for p in (*t.resources.read, *t.resources.write)}
    if len(files) > MAX_CONTEXT_FILES:
        found.append(f"the plan names {len(files)} files; at most {MAX_CONTEXT_FILES} are allowed")
    found += [f"criterion label {dup!r} is used more than once"
              for dup in _duplicates([c.label for c in plan.criteria()])]
    known = set(task_labels)
    for task in plan.tasks:
        found += [f"task {task.label} depends on unknown task {dep!r}" for dep in task.depends_on if dep not in known]
        step_labels = [s.label for s in task.steps]
        found += [f"step label {dup!r} is used more than once in task {task.label}"
                  for dup in _duplicates(step_labels)]
        for step in task.steps:
            found += [f"step {task.label}/{step.label} depends on unknown step {dep!r}"
                      for dep in step.depends_on if dep not in step_labels]
        for field in ("read", "write", "directories"):
            for path in getattr(task.resources, field):
                why = path_problem(path)
                if why:
                    found.append(f"task {task.label} resources.{field} path {path!r} {why}")
    result = [PlanProblem("ACODE-PLAN-004", text) for text in found]
    cycle = _find_cycle(task_labels, {t.label: t.depends_on for t in plan.tasks})
    if cycle:
        result.append(PlanProblem("ACODE-PLAN-005",
                                  f"tasks depend on each other in a cycle: {' -> '.join([*cycle, cycle[0]])}"))
    for task in plan.tasks:
        cycle = _find_cycle([s.label for s in task.steps], {s.label: s.depends_on for s in task.steps})
        if cycle:
            names = " -> ".join(f"{task.label}/{s}" for s in [*cycle, cycle[0]])
            result.append(PlanProblem("ACODE-PLAN-005", f"steps depend on each other in a cycle: {names}"))
    return result


def _renumber_criteria(plan: TaskPlan) -> tuple[TaskPlan, list[str]]:
    """Criteria of pending tasks numbered A1..An in plan order when any label is used twice
    (labels of completed tasks are kept and skipped: a re-plan carries them as they were)."""
    labels = [c.label for c in plan.criteria()]
    twice = _duplicates(labels)
    if not twice:
        return plan, []
    reserved = {c.label for t in plan.tasks if t.status == "completed" for c in t.acceptance}
    numbers = (f"A{n}" for n in range(1, 10_000) if f"A{n}" not in reserved)
    replace = msgspec.structs.replace
    tasks = [t if t.status == "completed" else
             replace(t, acceptance=[replace(c, label=next(numbers)) for c in t.acceptance]) for t in plan.tasks]
    note = (f"acode renumbered the criterion labels (the model used {', '.join(repr(d) for d in twice)} more than "
            "once)")
    return replace(plan, tasks=tasks), [note]


def _renumber_steps(task: PlanTask) -> tuple[PlanTask, list[str]]:
    """A task's steps numbered S1..Sn when a label is used twice and no dependency names a
    label used twice (which of the two it meant cannot be known); other dependencies follow."""
    labels = [s.label for s in task.steps]
    twice = _duplicates(labels)
    if not twice or any(dep in twice for s in task.steps for dep in s.depends_on):
        return task, []
    new = {old: f"S{i}" for i, old in enumerate(labels, start=1)}  # labels used once: one entry each
    replace = msgspec.structs.replace
    steps = [replace(s, label=f"S{i}", depends_on=[new.get(d, d) for d in s.depends_on])
             for i, s in enumerate(task.steps, start=1)]
    return replace(task, steps=steps), [f"acode renumbered the step labels of task {task.label} (the model used "
                                        f"{', '.join(repr(d) for d in twice)} more than once)"]


def _step_task(dep: str, tasks: list[PlanTask]) -> tuple[str, str] | None:
    """``T1/S2`` (or ``T1.S2``) as (task, step) when it names a step of a task of the plan."""
    for sep in ("/", "."):
        task, _, step = dep.partition(sep)
        if step and any(t.label == task and any(s.label == step for s in t.steps) for t in tasks):
            return task, step
    return None


# what a label a model mistyped still looks like ("S01", "step2", "t-3"): such a dependency is
# kept as a problem for the model; anything else that names nothing is dropped by repair()
_LABEL_LIKE = re.compile(r"[A-Za-z]{1,12}[-_ ]?\d{1,4}")

def _repair_dependencies(plan: TaskPlan) -> tuple[TaskPlan, list[str]]:
    tasks = list(plan.tasks)
    task_labels = {t.label for t in tasks}
    notes: list[str] = []
    replace = msgspec.structs.replace
    for index, task in enumerate(tasks):
        if task.status == "completed":
            continue
        step_labels = {s.label for s in task.steps}
        extra: list[str] = []  # tasks this task must now depend on
        steps = []
        for step in task.steps:
            kept: list[str] = []
            for dep in step.depends_on:
                named = _step_task(dep, tasks)
                if dep == step.label:
                    notes.append(f"acode dropped the dependency of step {task.label}/{step.label} on itself")
                elif dep in step_labels:
                    kept.append(dep)
                elif named is not None and named[0] == task.label:
                    kept.append(named[1])
                    notes.append(f"acode read step {task.label}/{step.label}'s dependency {dep!r} as step {named[1]}")
                elif dep == task.label:
                    notes.append(f"acode dropped step {task.label}/{step.label}'s dependency on its own task {dep}")
                elif dep in task_labels or named is not None:
                    other = dep if dep in task_labels else named[0]  # type: ignore[index]
                    extra.append(other)
                    notes.append(f"acode made task {task.label} depend on task {other} (step {step.label} "
                                 f"depended on {dep!r})")
                elif not _LABEL_LIKE.fullmatch(dep):
                    notes.append(f"acode dropped step {task.label}/{step.label}'s dependency {dep[:80]!r}, which "
                                 "names no step or task and is not a label")
                else:
                    kept.append(dep)  # unknown: stays a problem
            steps.append(replace(step, depends_on=list(dict.fromkeys(kept))))
        depends: list[str] = []
        for dep in [*task.depends_on, *extra]:
            holders = [t.label for t in tasks if any(s.label == dep for s in t.steps)]
            named = _step_task(dep, tasks)
            if dep == task.label:
                notes.append(f"acode dropped the dependency of task {task.label} on itself")
            elif dep in task_labels:
                depends.append(dep)
            elif named is not None or len(holders) == 1:
                other = named[0] if named is not None else holders[0]
                if other != task.label:
                    depends.append(other)
                notes.append(f"acode read task {task.label}'s dependency {dep!r} as task {other}"
                             + (" (its own: dropped)" if other == task.label else ""))
            elif not holders and not _LABEL_LIKE.fullmatch(dep):
                notes.append(f"acode dropped task {task.label}'s dependency {dep[:80]!r}, which names no task or "
                             "step and is not a label")
            else:
                depends.append(dep)  # unknown, or a step label of several tasks: stays a problem
        tasks[index] = replace(task, depends_on=list(dict.fromkeys(depends)), steps=steps)
    repaired = replace(plan, tasks=tasks)
    if notes and _find_cycle([t.label for t in tasks], {t.label: t.depends_on for t in tasks}) and not _find_cycle(
            [t.label for t in plan.tasks], {t.label: t.depends_on for t in plan.tasks}):
        return plan, []  # the repair would make a cycle: the model's plan, with its problems, goes back
    return repaired, notes


def repair(plan: TaskPlan) -> tuple[TaskPlan, list[str]]:
    """``plan`` with its mechanical problems fixed, and a note for each fix (empty: nothing
    to fix). Only fixes that cannot change what the plan asks for (see the module's docstring);
    tasks marked completed are left as they are. Deterministic: the same draft, the same result."""
    if _duplicates([t.label for t in plan.tasks]):
        return plan, []  # which task a dependency means cannot be known: the model answers again
    notes: list[str] = []
    replace = msgspec.structs.replace
    tasks = []
    for task in plan.tasks:
        if task.status != "completed":
            task, done = _renumber_steps(task)
            notes += done
            if not task.steps:
                action: Action = ("modify_file" if task.resources.write else
                                  "run_command" if task.resources.commands else "analyze_code")
                task = replace(task, steps=[PlanStep(label="S1", title=task.title, description=task.description,
                                                     action=action)])
                notes.append(f"acode gave task {task.label}, which had no steps, one step doing the task")
        tasks.append(task)
    plan = replace(plan, tasks=tasks)
    plan, done = _repair_dependencies(plan)
    notes += done
    plan, done = _renumber_criteria(plan)
    notes += done
    if plan.status == "needs_clarification" and not plan.questions and plan.tasks:
        plan = replace(plan, status="ready")
        notes.append("acode read the plan as ready (status needs_clarification, but no questions and tasks given)")
    return plan, notes


def validate(plan: TaskPlan) -> None:
    """Raise :class:`PlanError` naming every problem of ``plan``: ACODE-PLAN-005 when the
    only problems are dependency cycles (each named by its members), else ACODE-PLAN-004."""
    found = problems(plan)
    if not found:
        return
    if all(p.code == "ACODE-PLAN-005" for p in found):
        raise PlanError("; ".join(p.message for p in found), code="ACODE-PLAN-005")
    raise PlanError("invalid plan: " + "; ".join(p.message for p in found) + "; fix the plan and answer again",
                    code="ACODE-PLAN-004")


def same_content(a: PlanTask, b: PlanTask) -> bool:
    """Whether two tasks ask for the same thing: equal but for what acode adds (ids, status)."""
    def bare(task: PlanTask) -> PlanTask:
        return msgspec.structs.replace(task, id="", status="pending",
                                       steps=[msgspec.structs.replace(s, id="") for s in task.steps])
    return bare(a) == bare(b)


def carry_completed(draft: TaskPlan, previous: TaskPlan | None) -> TaskPlan:
    """``draft`` with every task completed in ``previous`` that the draft did not change
    kept as it was (same label, id, content, status ``completed``): a re-plan does not
    redo finished work. A completed task the draft left out goes back in, before the
    draft's tasks; one the draft changed is the draft's, to run again (the reviewer's
    feedback may be about it)."""
    done = [t for t in previous.tasks if t.status == "completed"] if previous else []
    if not done:
        return draft
    by_label = {t.label: t for t in done}
    tasks = [by_label[t.label] if t.label in by_label and same_content(t, by_label[t.label]) else t
             for t in draft.tasks]
    present = {t.label for t in draft.tasks}
    missing = [t for t in done if t.label not in present]
    return msgspec.structs.replace(draft, tasks=[*missing, *tasks])


def with_status(plan: TaskPlan, completed: list[str]) -> TaskPlan:
    """``plan`` with exactly the tasks named in ``completed`` marked ``completed`` and the
    others ``pending``: the session's verified work (a stored plan version keeps the status
    it was recorded with)."""
    wanted = set(completed)
    if all((t.status == "completed") == (t.label in wanted) for t in plan.tasks):
        return plan
    return msgspec.structs.replace(plan, tasks=[
        msgspec.structs.replace(t, status="completed" if t.label in wanted else "pending") for t in plan.tasks])


def finalize(draft: TaskPlan, *, version: int, previous: TaskPlan | None = None) -> TaskPlan:
    """Validate ``draft`` and give it ids and a version.

    Tasks that were completed in ``previous`` (same label) and that the draft did not
    change are kept as they were, with their ids, and stay completed
    (:func:`carry_completed`), so a re-plan never repeats finished work. Every other task
    and step gets a new id and starts ``pending``.
    """
    draft = carry_completed(draft, previous)
    validate(draft)
    done = {t.label: t for t in previous.tasks if t.status == "completed"} if previous else {}
    tasks = []
    for task in draft.tasks:
        if done.get(task.label) is task:  # carried over as it was
            tasks.append(task)
            continue
        # Ids and status are acode's to give: a model's "completed" or id is not taken.
        steps = [msgspec.structs.replace(s, id=new_id()) for s in task.steps]
        tasks.append(msgspec.structs.replace(task, id=new_id(), status="pending", steps=steps))
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
