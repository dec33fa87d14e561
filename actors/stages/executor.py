"""The executor stage: runs the plan's steps in dependency order (seed 004).

Each step is an agentic loop: the model sees the step and answers with tool calls; each
call runs in the sandbox and its result goes back to the model; the loop ends with
``step_complete`` or ``step_failed``, or fails after ``max_turns_per_step`` turns.

Resumption: a step's record is written (with its ``step_finished`` event) only when the
step ends, and the executor skips steps already recorded for this visit. Inside an
unfinished step, a retried attempt makes the same model requests (answered from the
record) and the same tool calls (same idempotency keys, answered from the sandbox's
journal), so nothing with a side effect runs twice. Keys never contain the attempt.
"""

from __future__ import annotations

import time

from actors.llm.provider import ChatMessage, ModelRequest
from actors.stages import prompts
from actors.stages.context import StageContext
from protocol.errors import ErrorInfo
from protocol.events import StepFinished, StepStarted
from protocol.ids import stable_id
from protocol.messages import GetSteps, StepList
from protocol.plan import PlanStep, PlanTask, ordered_steps
from protocol.results import ExecutionReport, StageResult, StepRecord
from protocol.tools import CONTROL_TOOLS, TOOL_ARGS, StepComplete, StepFailed, decode_args, tool_definitions

__all__ = ["run"]

_TOOLS = tool_definitions()
_WRITES = frozenset({"write_file", "modify_file", "create_directory"})


def _run_step(ctx: StageContext, task: PlanTask, step: PlanStep) -> StepRecord:
    request = ctx.request
    assert request.plan is not None
    messages = [ChatMessage(role="system", content=prompts.EXECUTOR),
                ChatMessage(role="user", content=prompts.render_step(request.plan, task, step, request.feedback))]
    files: list[str] = []
    calls = 0
    limit = request.settings.max_turns_per_step
    for turn in range(1, limit + 1):
        answer = ctx.model.complete(ModelRequest(stage="executor", call_site=f"{task.label}/{step.label}/turn{turn}",
                                                 nonce=ctx.fence.nonce,
                                                 messages=messages, tools=_TOOLS))
        messages.append(ChatMessage(role="assistant", content=answer.content, tool_calls=answer.tool_calls))
        if not answer.tool_calls:
            messages.append(ChatMessage(role="user", content="Use a tool, or call step_complete or step_failed."))
            continue
        for index, call in enumerate(answer.tool_calls):
            if call.name in CONTROL_TOOLS:
                try:
                    control = decode_args(call.name, call.arguments)
                except Exception as exc:  # noqa: BLE001 - the model's mistake goes back to the model
                    messages.append(ChatMessage(role="tool", tool_call_id=call.id, name=call.name,
                                                content=f"error ACODE-EXEC-007: invalid arguments: {exc}"))
                    continue
                status = "completed" if isinstance(control, StepComplete) else "failed"
                summary = control.summary if isinstance(control, StepComplete) else control.reason  # type: ignore[union-attr]
                assert isinstance(control, StepComplete | StepFailed)
                return _record(ctx, task, step, status, summary, turn, calls, files)
            if call.name not in TOOL_ARGS:
                messages.append(ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content=(
                    f"error ACODE-SBX-001: tool {call.name!r} is not available; available: {', '.join(TOOL_ARGS)}")))
                continue
            key = f"{request.session_id}:e{request.visit}:{task.label}/{step.label}:t{turn}:c{index}"
            result = ctx.tool(key, call.name, call.arguments)
            calls += 1
            if result.ok and call.name in _WRITES and result.path and result.path not in files:
                files.append(result.path)
            messages.append(ChatMessage(role="tool", tool_call_id=call.id, name=call.name,
                                        content=prompts.render_tool_result(result)))
    return _record(ctx, task, step, "failed", f"no step_complete after {limit} turns (ACODE-EXEC-003)",
                   limit, calls, files)


def _record(ctx: StageContext, task: PlanTask, step: PlanStep, status: str, summary: str, turns: int,
            calls: int, files: list[str]) -> StepRecord:
    request = ctx.request
    record = StepRecord(session_id=request.session_id, visit=request.visit, task=task.label, step=step.label,
                        status=status, summary=summary, turns=turns, tool_calls=calls,  # type: ignore[arg-type]
                        files_changed=files, at=time.time())
    ctx.commit([StepFinished(id=stable_id(request.session_id, "executor", request.visit, task.label, step.label,
                                          "finished"),
                             session_id=request.session_id, visit=request.visit, task=task.label, step=step.label,
                             status=status, summary=summary)],  # type: ignore[arg-type]
               step=record)
    return record


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    if request.plan is None:
        return ctx.result(ok=False, summary="no plan", error=ErrorInfo(
            code="ACODE-EXEC-001", message="the executor was dispatched without a plan"))
    done: StepList = ctx.persistence(GetSteps(session_id=request.session_id, visit=request.visit))
    finished = {(s.task, s.step): s for s in done.steps}
    records: list[StepRecord] = []
    for task, step in ordered_steps(request.plan):
        record = finished.get((task.label, step.label))
        if record is None:
            ctx.commit([StepStarted(id=stable_id(request.session_id, "executor", request.visit, task.label,
                                                 step.label, "started"),
                                    session_id=request.session_id, visit=request.visit, task=task.label,
                                    step=step.label, title=step.title)])
            record = _run_step(ctx, task, step)
        records.append(record)
        if record.status == "failed":
            break
    earlier = [r for v in range(1, request.visit)
               for r in ctx.persistence(GetSteps(session_id=request.session_id, visit=v)).steps]
    files = list(dict.fromkeys(f for r in [*earlier, *records] for f in r.files_changed))
    report = ExecutionReport(steps=records, files_changed=files)
    failed = [r for r in records if r.status == "failed"]
    if failed:
        step = failed[0]
        return ctx.result(ok=False, summary=f"step {step.task}/{step.step} failed: {step.summary}", execution=report,
                          error=ErrorInfo(code="ACODE-EXEC-001",
                                          message=f"step {step.task}/{step.step} failed: {step.summary}"))
    return ctx.result(ok=True, summary=f"{len(records)} step(s) done, {len(files)} file(s) changed so far",
                      execution=report)
