"""The reviewer stage: the model judges the whole change and decides one of three things.

It sees the task (with the files it says to create, by name: the verifier's ``F``
criteria fail when one is not at the path named), the plan (with each task's status), the verifier's verdicts, the
session's earlier cycles (verifier failures, review issues, re-plan summaries: the
``history`` the coordinator sends) and the exact diff of the workspace since the session
began (``diff_workspace``: the sandbox compares against the baseline the planner
recorded; its list of changed files goes with the result, ``changes``). A diff that
cannot be computed fails the stage with ACODE-ORCH-012 before the model is asked: the
session pauses, and nothing is approved unseen. Its decision:

- ``approve``: the session completes.
- ``request_changes``: the approach is right, details are not; its issues go to the
  executor, which applies them in one extra step, then the change is verified and
  reviewed again (a review cycle).
- ``replan``: the approach is wrong; its issues go to the planner (a review cycle).

A ``replan`` must cite the plan's acceptance criteria, and a ``request_changes`` must list
at least one issue (citing a criterion is optional, but a cited label must exist): an
answer that does not goes back to the model once with the problem.

The prompt fits the reviewer's token budget (:mod:`actors.stages.prompting.budget`): the diff is
trimmed first, then the history, the verification and the plan, each with a note saying
what was left out; the system prompt and the task are shown whole.
"""

from __future__ import annotations

from actors.stages.prompting import prompts
from actors.stages.prompting.budget import Part, cut_diff, fit
from actors.stages.prompting.terms import created_paths
from actors.stages.request import instructions
from actors.stages.request.context import StageContext
from protocol.errors import ModelError
from protocol.messages import RunStage
from protocol.plans.results import ReviewerAnswer, StageResult
from protocol.sessions.session import OllamaProvider, OpenAIProvider

__all__ = ["approved_by_checks", "citation_problem", "run"]

_RETRIES = 1


def citation_problem(review: ReviewerAnswer, labels: set[str]) -> str:
    """Why a ``replan`` or ``request_changes`` answer does not list or cite properly ("" when it does)."""
    if review.decision == "approve":
        return ""
    if not review.issues:
        if review.decision == "request_changes":
            return "request_changes must list the changes to make, one issue each"
        return "a replan must list issues, each citing the acceptance criterion it concerns"
    cited = [i.criterion for i in review.issues if i.criterion or review.decision == "replan"]
    unknown = sorted({c for c in cited if c not in labels})
    if unknown:
        known = ", ".join(sorted(labels)) or "none"
        return (f"issues cite {', '.join(repr(u) for u in unknown)}, which are not criteria of the plan; "
                f"cite one of: {known}")
    return ""


def _parts(ctx: StageContext, system: str, diff: str) -> list[Part]:
    request = ctx.request
    fence = ctx.fence
    task = f"Task:\n{fence.wrap('task', request.task)}"
    named = created_paths(request.task)
    if named:  # the verifier found each there (else the session would not be in review)
        task += f"\nThe task names these files, each to be at exactly that path: {', '.join(named)}"
    parts = [Part("the system prompt", system, fixed=True), Part("the task", task, fixed=True)]
    if request.plan is not None:
        parts.append(Part("the plan", fence.wrap("plan", prompts.render_plan(request.plan)), rank=3, keep=1_500))
    parts.append(Part("the verification", prompts.render_verification(request.previous), rank=2, keep=800))
    history = prompts.render_history(request.history)
    if history:
        parts.append(Part("the earlier cycles", history, rank=1, keep=600))
    parts.append(Part("the diff", diff, rank=0, keep=1_000, cutter=cut_diff,
                      frame=lambda text: f"Changes since the session began:\n{fence.wrap('diff', text)}"))
    return parts


def approved_by_checks(request: RunStage) -> str:
    """Why the change is approved without asking the reviewer's model, or '' (ask it): the
    profile's review style is ``checks`` (the small profile's: Qwen2.5-Coder-1.5B, asked to
    review, rejected a HumanEval solution whose test passed and sent it back to be broken),
    the reviewer's model is the one the profile is for, and every criterion of the plan
    passed the verifier, at least one by running its command."""
    settings = request.settings
    provider = settings.provider
    if settings.profile.review != "checks" or not isinstance(provider, OllamaProvider | OpenAIProvider):
        return ""
    if provider.model_for("reviewer") != provider.model_for("executor"):
        return ""
    verification = request.previous.verification if request.previous is not None else None
    labels = [c.label for c in request.plan.criteria()] if request.plan is not None else []
    if verification is None or not verification.passed or not labels:
        return ""
    passed = {v.label for v in verification.criteria if v.passed}
    ran = [c for c in request.plan.criteria() if c.check is not None and c.label in passed] if request.plan else []
    if any(label not in passed for label in labels) or not ran:
        return ""
    commands = ", ".join(f"`{c.check.command}`" for c in ran if c.check is not None)
    return (f"approved by the checks: every criterion passed ({', '.join(labels)}; {commands} ran), and the "
            f"model profile {settings.profile.name or 'in use'!r} reviews by checks, not by the model")


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    system = f"{prompts.REVIEWER}\n{ctx.fence.preamble()}{instructions.section(ctx)}"
    diff, changes = ctx.diff("r")  # ACODE-ORCH-012 when it cannot be computed: never a review without it
    checked = approved_by_checks(request)
    if checked:
        ctx.log.info("review_by_checks", profile=request.settings.profile.name)
        return ctx.result(ok=True, summary=checked[:300], review=ReviewerAnswer(decision="approve", summary=checked),
                          changes=changes)
    parts = fit(request.settings, "reviewer", _parts(ctx, system, diff), extra_tokens=60)  # the note below
    trimmed = [p.name for p in parts if p.cut]
    if trimmed:
        ctx.log.info("prompt_trimmed", stage="reviewer", parts=trimmed, saved_chars=sum(p.cut for p in parts))
    user = "\n\n".join(p.text for p in parts[1:])
    if trimmed:
        user += (f"\n\nNote: to fit your context, parts of {', '.join(trimmed)} were left out (marked where "
                 "they were cut). Judge from what is shown; do not ask for a re-plan only because of it.")
    labels = {c.label for c in request.plan.criteria()} if request.plan else set()
    review = ctx.ask(ReviewerAnswer, call_site="review", system=system, user=user)
    for retry in range(1, _RETRIES + 2):
        problem = citation_problem(review, labels)
        if not problem:
            break
        if retry > _RETRIES:
            raise ModelError(f"the reviewer answered {review.decision} without a usable list of issues: {problem}",
                             code="ACODE-LLM-003")
        ctx.log.info("review_corrected", problem=problem)
        review = ctx.ask(ReviewerAnswer, call_site=f"review/retry{retry}", system=system,
                         user=f"{user}\n\nYour previous answer was refused: {problem}. Answer again.")
    summary = f"{review.decision}: {review.summary}" if review.summary else review.decision
    return ctx.result(ok=True, summary=summary[:300], review=review, changes=changes)
