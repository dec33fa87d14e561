"""The verifier stage: real checks first, the model only for what no command can decide.

Every acceptance criterion with a ``check`` runs its command through the sandbox; it
passes when the exit code matches and (if given) the expected text is in the output. The
model is asked only about criteria without a check, shown the check results. A failed
check fails the verification; its evidence (command, exit code, output tail) goes back to
the executor as feedback.

A check's key has no attempt in it: a retried attempt reuses a finished check's result.
A check interrupted by a sandbox crash (outcome unknown) is run again under a new key:
checks are meant to be free of side effects.
"""

from __future__ import annotations

from actors.stages import prompts
from actors.stages.context import StageContext
from protocol.events import CheckRan
from protocol.ids import stable_id
from protocol.plan import Check, Criterion
from protocol.results import CriterionVerdict, StageResult, ToolResult, VerifierAnswer

__all__ = ["judge", "run"]

_TAIL = 600


def judge(check: Check, result: ToolResult) -> tuple[bool, str]:
    """Whether ``result`` of running ``check`` meets it, and the evidence either way."""
    output = result.output
    tail = output[-_TAIL:] if len(output) > _TAIL else output
    if result.exit_code is None:
        message = result.error.message if result.error else "no exit code"
        return False, f"`{check.command}` did not run to completion: {message}"
    if result.exit_code != check.expect_exit:
        return False, f"`{check.command}` exited {result.exit_code} (expected {check.expect_exit}); output: {tail}"
    if check.expect_output is not None and check.expect_output not in output:
        return False, f"`{check.command}` output lacks {check.expect_output!r}; output: {tail}"
    return True, f"`{check.command}` exited {result.exit_code}" + (
        f" and printed {check.expect_output!r}" if check.expect_output else "")


def _run_check(ctx: StageContext, criterion: Criterion) -> CriterionVerdict:
    request = ctx.request
    assert criterion.check is not None
    key = f"{request.session_id}:v{request.visit}:check:{criterion.label}"
    result = ctx.tool(key, "run_terminal", {"command": criterion.check.command})
    if result.outcome == "unknown":
        result = ctx.tool(f"{key}:rerun{request.attempt}", "run_terminal", {"command": criterion.check.command})
    passed, evidence = judge(criterion.check, result)
    ctx.commit([CheckRan(id=stable_id(request.session_id, "verifier", request.visit, criterion.label),
                         session_id=request.session_id, visit=request.visit, label=criterion.label,
                         command=criterion.check.command, passed=passed, exit_code=result.exit_code,
                         evidence=evidence)])
    return CriterionVerdict(label=criterion.label, passed=passed, evidence=evidence)


def _ask_model(ctx: StageContext, criteria: list[Criterion], checked: list[CriterionVerdict]) -> list[CriterionVerdict]:
    request = ctx.request
    files = request.previous.execution.files_changed if request.previous and request.previous.execution else []
    lines = [f"Task: {request.task}", "Criteria to judge:"]
    lines += [f"- {c.label}: {c.description}" for c in criteria]
    if checked:
        lines.append("Check results:")
        lines += [f"- {v.label}: {'passed' if v.passed else 'FAILED'}: {v.evidence}" for v in checked]
    lines.append(f"Files changed: {', '.join(files) or 'none'}")
    verdict = ctx.ask(VerifierAnswer, call_site="judge", system=prompts.VERIFIER, user="\n".join(lines))
    by_label = {v.label: v for v in verdict.criteria}
    return [by_label.get(c.label) or CriterionVerdict(label=c.label, passed=False,
                                                      evidence="the verifier's model gave no verdict")
            for c in criteria]


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    criteria = request.plan.criteria() if request.plan else []
    checked = [_run_check(ctx, c) for c in criteria if c.check is not None]
    unchecked = [c for c in criteria if c.check is None]
    judged = _ask_model(ctx, unchecked, checked) if unchecked else []
    verdicts = checked + judged
    failed = [v for v in verdicts if not v.passed]
    if failed:
        summary = "; ".join(f"{v.label} failed: {v.evidence.split('; output:')[0]}" for v in failed)
    else:
        summary = f"all {len(verdicts)} criteria passed" if verdicts else "no acceptance criteria to check"
    answer = VerifierAnswer(passed=not failed, summary=summary[:2000], criteria=verdicts)
    execution = request.previous.execution if request.previous else None
    return ctx.result(ok=True, summary=summary[:300], verification=answer, execution=execution)
