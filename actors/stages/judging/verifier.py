"""The verifier stage: real checks first, the model only for what no command can decide.

Every acceptance criterion with a ``check`` runs its command through the sandbox, and so
does each of the workspace's own verification commands (``verify_commands``, e.g. the
test suite; criteria ``V1``, ``V2``, … expecting exit 0). A check passes when the exit
code matches and (if given) the expected text is in the output. Checks are independent,
so they run in parallel, on up to :data:`PARALLEL` threads (the sandbox serves four calls
at a time); their ``check_ran`` events are committed together, in criterion order, so the
event log does not depend on which finished first.

The model is asked only about criteria without a check, shown the check results, the
change and, in a session with MCP servers, what its MCP calls returned (:func:`mcp_results`).
A failed check fails the verification; its evidence (command, exit code, the tail
of its output) goes back to the executor as feedback.

**No verification without the change.** After the checks (a check is a command too, and
may change the workspace) the verifier always takes the workspace's diff against the
session's baseline; its list of changed files goes with the result (``changes``: what
``files changed`` reports). A diff that cannot be computed (no baseline or an unreadable
one, ``.git`` moved away or replaced, git failing) fails the stage with ACODE-ORCH-012,
and the session pauses: what was not compared is never reported as verified.

**The files the task names, where it names them.** A file the task says to create or write
by name (:func:`actors.stages.prompting.terms.created_paths`: ``Create hello.py``) must exist at
exactly that path afterwards; one that does not is a failed criterion ``F1``, ``F2``, …
(no model is asked), whose evidence names a file of the same name the session wrote
elsewhere (``src/hello.py``), so the executor moves it. A file that is there adds nothing.

After the verdicts, :func:`actors.stages.judging.rework.choose` decides what finished work is
kept and what the executor runs again on a verify cycle (the result's ``rework``). The
model's prompt fits the verifier's token budget (:mod:`actors.stages.prompting.budget`): the diff
is trimmed first, then the largest check outputs, each with a note.

Checks are gated like the executor's commands (:mod:`actors.stages.calls.pipeline`'s autonomy
step: the command comes from the plan, which a model wrote): at the session's autonomy
level a check that would ask (``rm -f out.txt`` at level 2, any command at levels 0 and 1)
pauses the session ``awaiting_approval`` until ``acode approve``/``acode deny``; one that is
denied or skipped (``non_interactive_policy: skip``) is not run and its criterion fails,
saying why. The sandbox's gate checks the verifier's calls too.

A check's key has no attempt in it: a retried attempt reuses a finished check's result.
A check interrupted by a sandbox crash (outcome unknown) is run again under a new key:
checks are meant to be free of side effects.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import msgspec

from actors.stages.calls.judge import judge
from actors.stages.calls.pipeline import CallPipeline, NeedsApproval
from actors.stages.judging.rework import choose as rework_for
from actors.stages.prompting import prompts
from actors.stages.prompting.budget import Part, cut_diff, fit
from actors.stages.prompting.terms import created_paths
from actors.stages.request import instructions
from actors.stages.request.context import StageContext
from protocol.basics.ids import stable_id
from protocol.calls.mcp import PREFIX
from protocol.messages import GetEvents
from protocol.plans.plan import Check, Criterion
from protocol.plans.results import (
    CriterionVerdict,
    ModelToolCall,
    StageResult,
    VerifierAnswer,
    WorkspaceChanges,
)
from protocol.policy.checkpoints import CallSite
from protocol.sessions.events import CheckRan, ToolCalled

__all__ = ["PARALLEL", "checked_criteria", "judge", "missing_files", "run"]

PARALLEL = 4
MCP_SHOWN = 20  # the last MCP calls whose results the model is shown


def checked_criteria(ctx: StageContext) -> list[Criterion]:
    """The plan's criteria, then one per workspace verification command (``V1``, …)."""
    request = ctx.request
    criteria = request.plan.criteria() if request.plan else []
    used = {c.label for c in criteria}
    for index, command in enumerate(request.settings.verify_commands, start=1):
        label = f"V{index}" if f"V{index}" not in used else f"config-V{index}"
        criteria.append(Criterion(label=label, description=f"the workspace's verification command `{command}` passes",
                                  check=Check(command=command, expect_exit=0)))
    return criteria


def _run_check(ctx: StageContext, criterion: Criterion, pipeline: CallPipeline) -> tuple[CriterionVerdict, CheckRan]:
    request = ctx.request
    assert criterion.check is not None
    command = criterion.check.command
    key = f"{request.session_id}:v{request.visit}:check:{criterion.label[:64]}"
    call = ModelToolCall(id="", name="run_terminal", arguments={"command": command})
    site = CallSite(stage="verifier", task="verify", step=criterion.label, counted=True)  # a model wrote it
    try:
        pipeline.budget(key, call)
        verdict = pipeline.autonomy(key, call, task="verify", step=criterion.label)
        if not verdict.run:
            passed, evidence, exit_code = False, f"`{command}` was not run: {verdict.reason}", None
        else:
            result = ctx.tool_retrying(key, "run_terminal", {"command": command}, approval=verdict.approval,
                                       site=site)
            if result.outcome == "unknown":
                result = ctx.tool_retrying(f"{key}:rerun{request.attempt}", "run_terminal", {"command": command},
                                           approval=verdict.approval, site=site)
            pipeline.budget_update(call, result)
            passed, evidence = judge(criterion.check, result)
            exit_code = result.exit_code
    finally:
        ctx.release_thread()
    event = CheckRan(id=stable_id(request.session_id, "verifier", request.visit, criterion.label),
                     session_id=request.session_id, visit=request.visit, label=criterion.label,
                     command=command, passed=passed, exit_code=exit_code, evidence=evidence)
    return CriterionVerdict(label=criterion.label, passed=passed, evidence=evidence), event


def _run_checks(ctx: StageContext, criteria: list[Criterion]) -> list[CriterionVerdict]:
    """Run the checks; :class:`NeedsApproval` when one waits for a human's decision."""
    if not criteria:
        return []
    pipeline = CallPipeline(ctx)
    with ThreadPoolExecutor(min(PARALLEL, len(criteria)), thread_name_prefix="check") as pool:
        done = list(pool.map(lambda c: _run_check(ctx, c, pipeline), criteria))
    ctx.commit([event for _, event in done])
    return [verdict for verdict, _ in done]


def mcp_results(ctx: StageContext) -> str:
    """What the session's MCP calls returned, one line each (the call and the first line of
    its result, from its ``tool_called`` event), for criteria about what a tool said ("write
    what the notes say"): the verifier's model sees the change, not the executor's calls, and
    on the real 1.5B model it failed a right answer for want of them. "" without servers."""
    if not ctx.request.settings.mcp_servers:
        return ""
    events = ctx.persistence(GetEvents(session_id=ctx.request.session_id)).events
    ran = [e for e in events if isinstance(e, ToolCalled) and e.tool.startswith(PREFIX) and e.ok]
    return "\n".join(f"- {e.tool} {e.target}: {e.summary}" for e in ran[-MCP_SHOWN:])


def _ask_model(ctx: StageContext, criteria: list[Criterion], checked: list[CriterionVerdict],
               diff: str) -> list[CriterionVerdict]:
    """The model's verdicts on ``criteria``, from the check results and the diff, trimmed
    to the verifier's budget (the diff first, then the largest check outputs)."""
    request = ctx.request
    fence = ctx.fence
    fixed = [fence.preamble() + instructions.section(ctx), fence.wrap("task", request.task), "Criteria to judge:"]
    fixed += [f"- {c.label}: {c.description}" for c in criteria]
    parts = [Part("the system prompt", prompts.VERIFIER, fixed=True),
             Part("the criteria", "\n".join(fixed), fixed=True)]
    if checked:
        parts.append(Part("the check list", "Results of the checks that ran:", fixed=True))
        parts += [Part(f"the output of check {v.label}", f"- {v.label}: {'passed' if v.passed else 'FAILED'}\n"
                                                         f"{fence.wrap(f'evidence {v.label}', v.evidence)}",
                       rank=1, keep=400) for v in checked]
    called = mcp_results(ctx)
    if called:
        parts.append(Part("the MCP results", "What the session's MCP tool calls returned (the first line of each):\n"
                          + fence.wrap("MCP tool results", called), rank=1, keep=300))
    parts.append(Part("the diff", diff, rank=0, keep=800, cutter=cut_diff,
                      frame=lambda text: fence.wrap("change", text)))
    parts = fit(request.settings, "verifier", parts, extra_tokens=60)
    trimmed = [p.name for p in parts if p.cut]
    user = "\n".join(p.text for p in parts[1:])
    if trimmed:
        ctx.log.info("prompt_trimmed", stage="verifier", parts=trimmed, saved_chars=sum(p.cut for p in parts))
        user += (f"\nNote: to fit your context, parts of {', '.join(trimmed)} were left out (marked where they "
                 "were cut). Judge from what is shown.")
    verdict = ctx.ask(VerifierAnswer, call_site="judge", system=prompts.VERIFIER, user=user)
    by_label: dict[str, CriterionVerdict] = {}
    for v in verdict.criteria:  # the first verdict of a label counts
        by_label.setdefault(_label_of(v.label).upper(), v)
    found = {c.label: by_label.get(c.label.upper()) for c in criteria}
    return [msgspec.structs.replace(v, label=label) if v is not None
            else CriterionVerdict(label=label, passed=False, evidence="the verifier's model gave no verdict")
            for label, v in found.items()]


_LABEL = re.compile(r"[\s*`\"'\[(-]*([A-Za-z]+\d+)\b")


def _label_of(text: str) -> str:
    """The criterion label a verdict names, as small models write it: ``A2``, but also ``A2:
    the criterion's description`` or ``**A2**`` (the prompt lists criteria as ``- A2: ...``)."""
    found = _LABEL.match(text)
    return found.group(1) if found else text


_ABSENT = ("ACODE-SBX-003", "ACODE-SBX-004")  # does not exist; a directory, or not one on the way


def missing_files(ctx: StageContext, changes: WorkspaceChanges | None, used: set[str]) -> list[CriterionVerdict]:
    """A failed verdict (``F1``, …; labels not in ``used``) for each file the task says to
    create or write that is not at the path the task names, with a hint naming a file of
    the same name the session changed elsewhere."""
    request = ctx.request
    changed = {c.path: c.status for c in changes.files} if changes else {}
    labels = (f"F{n}" for n in range(1, 10_000) if f"F{n}" not in used)
    found: list[CriterionVerdict] = []
    for path in created_paths(request.task):
        status = changed.get(path)
        if status in ("added", "modified", "renamed", "type changed"):
            continue
        if status is None:  # unchanged since the baseline: there if it was there before
            key = f"{request.session_id}:v{request.visit}:exists:{stable_id(path)}"
            result = ctx.tool_retrying(key, "read_file", {"path": path, "limit": 1})
            if result.ok or result.error is None or result.error.code not in _ABSENT:
                continue
        name = path.rsplit("/", 1)[-1]
        elsewhere = sorted(p for p, s in changed.items() if s != "deleted" and p != path
                           and p.rsplit("/", 1)[-1] == name)
        where = "at the workspace root" if "/" not in path else "at that path"
        evidence = f"the task names {path}, but no file {path} exists {where}"
        if elsewhere:
            evidence += (f"; this session wrote {', '.join(elsewhere)} instead: the file belongs at {path} (move it "
                         "there, or write it there and delete the other)")
        found.append(CriterionVerdict(label=next(labels), passed=False, evidence=evidence))
    return found


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    criteria = checked_criteria(ctx)
    try:
        checked = _run_checks(ctx, [c for c in criteria if c.check is not None])
    except NeedsApproval as exc:  # the session waits for a human; the checks run again after (journaled)
        return ctx.result(ok=False, summary=exc.message[:300], error=exc.info(), approval=exc.request)
    diff, changes = ctx.diff("v")  # after the checks, which may change the workspace too; ACODE-ORCH-012 if it cannot
    unchecked = [c for c in criteria if c.check is None]
    judged = _ask_model(ctx, unchecked, checked, diff) if unchecked else []
    verdicts = checked + judged
    verdicts += missing_files(ctx, changes, {c.label for c in criteria})
    failed = [v for v in verdicts if not v.passed]
    if failed:
        summary = "; ".join(f"{v.label} failed: {v.evidence.split('; output:')[0].split('; no output')[0]}"
                            for v in failed)
    else:
        summary = f"all {len(verdicts)} criteria passed" if verdicts else "no acceptance criteria to check"
    answer = VerifierAnswer(passed=not failed, summary=summary[:2000], criteria=verdicts)
    execution = request.previous.execution if request.previous else None
    rework = rework_for(request.plan, verdicts, execution, request.workspace) if request.plan is not None else None
    return ctx.result(ok=True, summary=summary[:300], verification=answer, execution=execution, rework=rework,
                      changes=changes)
