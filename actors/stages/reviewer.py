"""The reviewer stage: the model judges the whole change and approves or asks for a re-plan.

It sees the task, the plan, the verifier's verdicts and the exact diff of the workspace
since the session began (``diff_workspace``: the sandbox compares against the baseline the
planner recorded, through a private git ref or a content manifest). A ``replan`` must
cite the plan's acceptance criteria: an answer that cites none, or cites labels the plan
does not have, goes back to the model once with the problem; its issues become the
planner's input.
"""

from __future__ import annotations

from actors.stages import prompts
from actors.stages.context import StageContext
from protocol.errors import ModelError
from protocol.results import ReviewerAnswer, StageResult

__all__ = ["citation_problem", "run"]

_RETRIES = 1


def citation_problem(review: ReviewerAnswer, labels: set[str]) -> str:
    """Why a ``replan`` answer does not cite the plan's criteria properly ("" when it does)."""
    if review.decision != "replan":
        return ""
    if not review.issues:
        return "a replan must list issues, each citing the acceptance criterion it concerns"
    unknown = sorted({i.criterion for i in review.issues if i.criterion not in labels})
    if unknown:
        known = ", ".join(sorted(labels)) or "none"
        return (f"issues cite {', '.join(repr(u) for u in unknown)}, which are not criteria of the plan; "
                f"cite one of: {known}")
    return ""


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    fence = ctx.fence
    sections = [f"Task:\n{fence.wrap('task', request.task)}"]
    if request.plan is not None:
        sections.append(fence.wrap("plan", prompts.render_plan(request.plan)))
    sections.append(prompts.render_verification(request.previous))
    sections.append(f"Changes since the session began:\n{fence.wrap('diff', ctx.diff('r'))}")
    labels = {c.label for c in request.plan.criteria()} if request.plan else set()
    system = f"{prompts.REVIEWER}\n{fence.preamble()}"
    user = "\n\n".join(sections)
    review = ctx.ask(ReviewerAnswer, call_site="review", system=system, user=user)
    for retry in range(1, _RETRIES + 2):
        problem = citation_problem(review, labels)
        if not problem:
            break
        if retry > _RETRIES:
            raise ModelError(f"the reviewer asked for a re-plan without citing the plan's criteria: {problem}",
                             code="ACODE-LLM-003")
        ctx.log.info("review_corrected", problem=problem)
        review = ctx.ask(ReviewerAnswer, call_site=f"review/retry{retry}", system=system,
                         user=f"{user}\n\nYour previous answer was refused: {problem}. Answer again.")
    summary = f"{review.decision}: {review.summary}" if review.summary else review.decision
    return ctx.result(ok=True, summary=summary[:300], review=review)
