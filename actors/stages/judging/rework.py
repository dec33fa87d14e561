"""What a verification keeps of the finished work, and what the executor runs again.

:func:`choose` is a pure function of the plan, the verdicts and the executor's report
(every step of the plan's pending tasks, run or kept). Steps that did not complete always
run again. Beyond them, by the first rule that applies to each failed criterion:

- ``criteria``: a criterion of the plan belongs to one task; that task's steps run again.
- ``files``: a failure no task owns (a workspace verification command, e.g. the test
  suite) re-runs the steps that changed a file its output names.
- ``all``: such a failure whose output names no changed file re-runs every step.

Tasks the plan marks ``completed`` (verified earlier, or carried over by a re-plan) are
left alone, unless one of their own criteria fails now: then they are reopened and run
again like any other. Then dependents: a step depending on one that runs again runs
again, and so does every step of a task depending on a task with a step that runs again.
The rest is kept; ``completed_tasks`` lists every completed task: those left alone, and
those whose every step is kept and whose own criteria passed. The rule reported is
the widest one used (``all`` > ``files`` > ``criteria``), and the reason says what
decided it.
"""

from __future__ import annotations

import re

from protocol.plans.plan import PlanTask, TaskPlan
from protocol.plans.results import CriterionVerdict, ExecutionReport, Rework, StepRecord

__all__ = ["choose", "names_file"]


def names_file(text: str, path: str, workspace: str = "") -> bool:
    """Whether ``text`` names ``path`` (relative to the workspace; written relative, with
    ``./``, or absolute under ``workspace``), as a whole name: ``b.txt`` is named neither
    by ``ab.txt`` nor by ``src/b.txt``."""
    if workspace:
        text = text.replace(workspace.rstrip("/") + "/", "")
    text = re.sub(r"(?<![\w.])\./", "", text)
    return re.search(r"(?<![\w./-])" + re.escape(path) + r"(?![\w/-])", text) is not None


def _labels(task: PlanTask) -> list[str]:
    return [f"{task.label}/{step.label}" for step in task.steps]


def _with_dependents(pending: list[PlanTask], rerun: set[str]) -> set[str]:
    """``rerun`` closed over dependents: steps after a re-run step of their task, and every
    step of a task after a task with a re-run step (transitively)."""
    result = set(rerun)
    changed = True
    while changed:
        changed = False
        touched = {label.split("/", 1)[0] for label in result}
        for task in pending:
            for step in task.steps:
                label = f"{task.label}/{step.label}"
                if label in result:
                    continue
                after_step = any(f"{task.label}/{dep}" in result for dep in step.depends_on)
                after_task = any(dep in touched for dep in task.depends_on)
                if after_step or after_task:
                    result.add(label)
                    changed = True
    return result


def choose(plan: TaskPlan, verdicts: list[CriterionVerdict], execution: ExecutionReport | None,
           workspace: str = "") -> Rework:
    failed_labels = {v.label for v in verdicts if not v.passed}
    reopened = [t.label for t in plan.tasks if t.status == "completed"
                and any(c.label in failed_labels for c in t.acceptance)]
    pending = [t for t in plan.tasks if t.status != "completed" or t.label in reopened]
    records: dict[str, StepRecord] = {f"{r.task}/{r.step}": r for r in (execution.steps if execution else [])}
    steps = [label for task in pending for label in _labels(task)]
    unfinished = {label for label in steps if label not in records or records[label].status != "completed"}
    owner = {c.label: t for t in pending for c in t.acceptance}
    failed = [v for v in verdicts if not v.passed]
    owned = [v for v in failed if v.label in owner]
    loose = [v for v in failed if v.label not in owner]
    rerun = set(unfinished)
    reasons: list[str] = []
    rule = "passed" if not failed else "criteria"
    if owned:
        tasks = list(dict.fromkeys(owner[v.label].label for v in owned))
        for task in pending:
            if task.label in tasks:
                rerun.update(_labels(task))
        reasons.append(f"{', '.join(v.label for v in owned)} failed: the steps of {', '.join(tasks)} run again")
    if loose:
        evidence = "\n".join(v.evidence for v in loose)
        named = [label for label in steps if label in records
                 and any(names_file(evidence, path, workspace) for path in records[label].files_changed)]
        which = ", ".join(v.label for v in loose)
        if named:
            rule = "files"
            rerun.update(named)
            reasons.append(f"{which} failed, owned by no task; its output names files changed by "
                           f"{', '.join(named)}: those run again")
        else:
            rule = "all"
            rerun.update(steps)
            reasons.append(f"{which} failed, owned by no task, and its output names no changed file: every step "
                           "runs again")
    base = set(rerun)
    rerun = _with_dependents(pending, rerun)
    dependents = [label for label in steps if label in rerun and label not in base]
    if dependents:
        reasons.append(f"their dependents too: {', '.join(dependents)}")
    not_done = sorted(label for label in unfinished if label.split("/", 1)[0] not in reopened)
    if not_done and failed:
        reasons.append(f"not completed before: {', '.join(not_done)}")
    failing_tasks = {owner[v.label].label for v in owned}
    ordered_rerun = [label for label in steps if label in rerun]
    kept = [label for label in steps if label not in rerun]
    done_before = [t.label for t in plan.tasks if t.status == "completed" and t.label not in reopened]
    considered = {t.label for t in pending}
    completed = [t.label for t in plan.tasks if t.label in done_before or (
        t.label in considered and t.label not in failing_tasks and all(label in kept for label in _labels(t)))]
    if reopened:
        reasons.append(f"completed before but failing now: {', '.join(reopened)}")
    if not failed:
        reasons.append(f"every criterion passed: {len(kept)} step(s) kept")
    return Rework(rule=rule, reason="; ".join(reasons), rerun=ordered_rerun, kept=kept,  # type: ignore[arg-type]
                  completed_tasks=completed)
