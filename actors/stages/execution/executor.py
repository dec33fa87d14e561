"""The executor stage: runs the plan's steps in dependency order (seed 004).

Each step is tried by :class:`actors.stages.execution.filestep.FileStyleStep`: a
:class:`actors.stages.execution.step.Step` (its tries and its ladder) whose tries are the tool loop
with the model (:class:`actors.stages.execution.toolloop.ToolLoopStep`) or, under the ``file`` step
style, the step answered as one whole file. This module decides which steps run, records
how each ended and answers the stage.

Finished work stays finished (seed 000): the steps of tasks the plan marks ``completed``
are not run, and the steps named in ``kept_steps`` (the last verification kept them,
see :mod:`actors.stages.judging.rework`) are reported with their earlier record instead of
running again. When the reviewer sent the session back with ``request_changes``, one
extra step (task ``review<cycle>``, step ``S1``) makes the changes it listed.

A step whose model went off the rails past a note and a fresh window
(:mod:`actors.stages.execution.turnwatch`) is recorded failed with ACODE-EXEC-011 and ends the stage
there (:class:`~protocol.errors.AnomalyPause`); the session pauses ``anomaly``. A replay
that finds that record ends the same way; a human's resume revisits the stage and the step's
next round is told how the last one ended.

Resumption: a step's record is written (with its ``step_finished`` event) only when the
step ends, and the executor skips steps already recorded for this visit. Inside an
unfinished step, a retried attempt makes the same model requests (answered from the
record) and the same tool calls (same idempotency keys, answered from the sandbox's
journal), so nothing with a side effect runs twice. Keys and call sites never contain
the attempt; retry suffixes are counted per call, not per attempt. A step's later tries
have their own call sites (``T1/S1/try2/turn1``) and keys (``...:k2:t1:c0``), so a replay
goes through the same tries in the same order.
"""

from __future__ import annotations

import time

from actors.stages.calls.pipeline import NeedsApproval
from actors.stages.calls.stagehooks import StageHooks
from actors.stages.execution.filestep import FileStyleStep
from actors.stages.execution.step import Project, context_budget, record_step
from actors.stages.execution.stepview import MAX_CONTEXT_FILES
from actors.stages.execution.toolloop import tools_left_out
from actors.stages.execution.turnwatch import pause_error
from actors.stages.request.context import McpOutcomeUnknown, ProtectedChanged, StageContext
from protocol.basics.ids import stable_id
from protocol.calls.autonomy import ApprovalRequest
from protocol.errors import AnomalyPause, BudgetExhausted, ErrorInfo, HookStopped, ModelError
from protocol.plans.plan import PlanStep, PlanTask, Resources, TaskPlan, ordered_steps
from protocol.plans.results import ExecutionReport, StageResult, StepRecord
from protocol.sessions.events import StepStarted
from protocol.sessions.session import Feedback

__all__ = ["context_budget", "review_task", "run", "tools_left_out"]


def _interrupted(ctx: StageContext, records: list[StepRecord], task: PlanTask, step: PlanStep,
                 exc: ModelError | NeedsApproval | ProtectedChanged | McpOutcomeUnknown | BudgetExhausted | HookStopped
                 | AnomalyPause,
                 approval: ApprovalRequest | None = None) -> StageResult:
    """The stage's answer when the model failed in the middle of ``step`` (the model's own
    error, its fix line included), or a call of it waits for approval (``approval``): the
    step is named in the report and not recorded, so it runs again (replayed up to that
    point) when the session goes on."""
    request = ctx.request
    stopped = StepRecord(session_id=request.session_id, visit=request.visit, task=task.label, step=step.label,
                         status="failed", summary=f"interrupted: {exc.message}", code=exc.code, at=time.time())
    return ctx.result(ok=False, summary=f"step {task.label}/{step.label} interrupted: {exc.message}"[:2_000],
                      error=exc.info(), execution=ExecutionReport(steps=[*records, stopped]), approval=approval)


def _blocker(plan: TaskPlan, task: PlanTask, step: PlanStep, status: dict[tuple[str, str], str]) -> str | None:
    """Why ``step`` cannot run: a step it depends on (in its task, or in a task its task
    depends on) did not complete. Steps come in dependency order, so theirs are known."""
    for dep in step.depends_on:
        state = status.get((task.label, dep), "completed")
        if state != "completed":
            return _which(f"{task.label}/{dep}", state)
    by_label = {t.label: t for t in plan.tasks}
    for dep_task in task.depends_on:
        other = by_label.get(dep_task)
        if other is None or other.status == "completed":
            continue
        for dep_step in other.steps:
            state = status.get((other.label, dep_step.label), "completed")
            if state != "completed":
                return _which(f"{other.label}/{dep_step.label}", state)
    return None


def _which(where: str, state: str) -> str:
    return f"{where}, which {'failed' if state == 'failed' else 'was not run either'}"


def review_task(feedback: Feedback, files: list[str], plan: TaskPlan | None = None) -> PlanTask:
    """The extra step of an executor visit the reviewer sent back with ``request_changes``:
    make the changes it listed (shown as the step's feedback), in the files changed so far.
    When that is one file, the step writes it (a step the ``file`` step style can answer as
    that file), and the plan's checked criteria are the task's (they run after each answer
    under that style)."""
    step = PlanStep(label="S1", title="Make the changes the reviewer asked for", action="modify_file",
                    description="Make each change listed in the reviewer's feedback below, and nothing else.",
                    expected_output="the reviewer's issues resolved")
    checked = [c for c in plan.criteria() if c.check is not None] if plan is not None else []
    return PlanTask(label=f"review{feedback.cycle or 1}", title="Changes asked for by the reviewer",
                    description=feedback.summary, acceptance=checked if len(files) == 1 else [],
                    resources=Resources(read=files[:MAX_CONTEXT_FILES], write=files if len(files) == 1 else []),
                    steps=[step])


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    plan = request.plan
    if plan is None:
        return ctx.result(ok=False, summary="no plan", error=ErrorInfo(
            code="ACODE-EXEC-001", message="the executor was dispatched without a plan"))
    recorded = ctx.replay_index().steps  # every visit's, in the order written: one request
    finished = {(s.task, s.step): s for s in recorded if s.visit == request.visit}
    earlier = sorted((r for r in recorded if r.visit < request.visit), key=lambda r: r.visit)
    wrote_before = {(r.task, r.step) for r in earlier if r.files_changed}
    latest = {(r.task, r.step): r for r in earlier}  # each step's last outcome before this visit
    kept_labels = set(request.kept_steps)
    records: list[StepRecord] = []
    kept: list[str] = []
    for task in plan.tasks:  # completed tasks: reported as kept, with their last records
        if task.status == "completed":
            for step in task.steps:
                kept.append(f"{task.label}/{step.label}")
                if (task.label, step.label) in latest:
                    records.append(latest[(task.label, step.label)])
    status: dict[tuple[str, str], str] = {}
    work = ordered_steps(plan)
    feedback = request.feedback
    if feedback is not None and feedback.source == "reviewer":
        so_far = list(dict.fromkeys(f for r in earlier for f in r.files_changed))
        extra = review_task(feedback, so_far, plan)
        work = [*work, (extra, extra.steps[0])]
    shared = Project()
    hooks = StageHooks(ctx)  # the user's step_start and step_end hooks (actors.stages.calls.stagehooks)
    for task, step in work:
        key = (task.label, step.label)
        record = finished.get(key)
        before = latest.get(key)
        if record is not None and record.code == "ACODE-EXEC-011":  # it paused the session: a replay pauses again
            return _interrupted(ctx, records, task, step, pause_error(f"{task.label}/{step.label}", record.summary,
                                                                      request.session_id))
        if record is not None and record.code == McpOutcomeUnknown.default_code:  # the same: a human decides
            return _interrupted(ctx, records, task, step, McpOutcomeUnknown(record.summary))
        if record is not None and record.status != "blocked":  # the visit's error streak as it was after it
            shared.streak.turns[:] = record.streak
        if record is None and f"{task.label}/{step.label}" in kept_labels and before is not None \
                and before.status == "completed":
            kept.append(f"{task.label}/{step.label}")
            record = before
        elif record is None:
            blocker = _blocker(plan, task, step, status)
            if blocker is not None:
                record = record_step(ctx, task, step, "blocked", f"it depends on {blocker}", 0, 0, [])
            else:
                ctx.commit([StepStarted(id=stable_id(request.session_id, "executor", request.visit, task.label,
                                                     step.label, "started"),
                                        session_id=request.session_id, at=time.time(), visit=request.visit,
                                        task=task.label, step=step.label, title=step.title)])
                earlier_failure = before if before is not None and before.status == "failed" else None
                occurrence = f"e{request.visit}:{task.label}/{step.label}"
                try:
                    hooks.stop(hooks.fire("step_start", occurrence, hooks.facts(visit=request.visit,
                                                                                step=f"{task.label}/{step.label}")))
                    record = FileStyleStep(ctx, task, step, key in wrote_before, earlier_failure, shared).run()
                    hooks.stop(hooks.fire("step_end", occurrence, hooks.facts(
                        visit=request.visit, step=f"{task.label}/{step.label}", status=record.status,
                        summary=record.summary[:4_000])))
                except HookStopped as exc:  # a hook of the user's: pause, abort or restart the stage
                    return _interrupted(ctx, records, task, step, exc)
                except ModelError as exc:  # the model server, not the step: say which step it stopped
                    return _interrupted(ctx, records, task, step, exc)
                except NeedsApproval as exc:  # the session waits for a human; the step runs again after
                    return _interrupted(ctx, records, task, step, exc, approval=exc.request)
                except ProtectedChanged as exc:  # a command changed .git's config or hooks: the session pauses
                    return _interrupted(ctx, records, task, step, exc)
                except McpOutcomeUnknown as exc:  # an MCP call that may have acted was cut off: a human decides
                    return _interrupted(ctx, records, task, step, exc)
                except BudgetExhausted as exc:  # the session's budget: it pauses; the step runs again after
                    return _interrupted(ctx, records, task, step, exc)
                except AnomalyPause as exc:  # the model went off the rails (recorded): the session pauses
                    return _interrupted(ctx, records, task, step, exc)
        records.append(record)
        status[key] = record.status
    files = list(dict.fromkeys(f for r in [*earlier, *records] for f in r.files_changed))
    report = ExecutionReport(steps=records, files_changed=files, kept=kept)
    failed = [r for r in records if r.status == "failed"]
    if failed:
        blocked = [f"{r.task}/{r.step}" for r in records if r.status == "blocked"]
        message = "; ".join(f"step {r.task}/{r.step} failed: {r.summary}" for r in failed)
        message += f"; task{'s' if len({r.task for r in failed}) > 1 else ''} aborted: " \
                   f"{', '.join(dict.fromkeys(r.task for r in failed))}"
        if blocked:
            message += f"; blocked by it: {', '.join(blocked)}"
        return ctx.result(ok=False, summary=message[:2_000], execution=report,
                          error=ErrorInfo(code=failed[0].code or "ACODE-EXEC-001", message=message[:4_000]))
    ran = sum(1 for r in records if r.visit == request.visit and r.status == "completed")
    summary = f"{ran} step(s) done, {len(files)} file(s) changed so far"
    if kept:
        summary = f"{ran} step(s) done, {len(kept)} kept from earlier, {len(files)} file(s) changed so far"
    return ctx.result(ok=True, summary=summary, execution=report)
