"""The reviewer stage: the model judges the whole change and approves or asks for a re-plan.

It sees the task, the plan, the verifier's verdicts and the content of the files the
executor changed (read through the sandbox, capped).
"""

from __future__ import annotations

from actors.stages import prompts
from actors.stages.context import StageContext
from protocol.results import ReviewerAnswer, StageResult

__all__ = ["run"]

_MAX_FILES = 10
_MAX_CHARS = 4_000


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    previous = request.previous
    files = previous.execution.files_changed if previous and previous.execution else []
    sections = [f"Task: {request.task}"]
    if request.plan is not None:
        sections.append(prompts.render_plan(request.plan))
    sections.append(prompts.render_verification(previous))
    for path in files[:_MAX_FILES]:
        result = ctx.tool(f"{request.session_id}:r{request.visit}:read:{path}", "read_file", {"path": path})
        body = result.output if result.ok else prompts.render_tool_result(result)
        sections.append(f"File {path}:\n{body[:_MAX_CHARS]}")
    review = ctx.ask(ReviewerAnswer, call_site="review", system=prompts.REVIEWER, user="\n\n".join(sections))
    summary = f"{review.decision}: {review.summary}" if review.summary else review.decision
    return ctx.result(ok=True, summary=summary[:300], review=review)
