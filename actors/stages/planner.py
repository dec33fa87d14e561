"""The planner stage: the model turns the task into a TaskPlan (seed 003).

First visit: version 1. After a reviewer's ``replan``, the request carries the latest plan
and the reviewer's feedback; the new plan gets version + 1, tasks completed before stay
completed, and the change is summarised (tasks added, removed, kept).
"""

from __future__ import annotations

import msgspec

from actors.stages import prompts
from actors.stages.context import StageContext
from protocol.plan import TaskPlan, finalize
from protocol.results import StageResult

__all__ = ["run"]

def _change_summary(previous: TaskPlan | None, plan: TaskPlan) -> str:
    if previous is None:
        return ""
    before = {t.label for t in previous.tasks}
    after = {t.label for t in plan.tasks}
    parts = [f"added {', '.join(sorted(after - before)) or 'nothing'}",
             f"removed {', '.join(sorted(before - after)) or 'nothing'}",
             f"kept {', '.join(sorted(before & after)) or 'nothing'}"]
    return "; ".join(parts)


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    previous = request.plan
    user = [f"Task: {request.task}"]
    if previous is not None:
        user.append("Current plan:\n" + prompts.render_plan(previous))
    feedback = prompts.render_feedback(request.feedback)
    if feedback:
        user.append(feedback)
    draft = ctx.ask(TaskPlan, call_site="plan", system=prompts.PLANNER, user="\n\n".join(user))
    plan = finalize(draft, version=(previous.version + 1) if previous else 1, previous=previous)
    if not plan.change_summary and previous is not None:
        plan = msgspec.structs.replace(plan, change_summary=_change_summary(previous, plan))
    if plan.status == "needs_clarification":
        summary = f"plan v{plan.version} needs clarification: {len(plan.questions)} question(s)"
    else:
        summary = f"plan v{plan.version}: {len(plan.tasks)} task(s), {plan.step_count()} step(s)"
    return ctx.result(ok=True, summary=summary, plan=plan)
