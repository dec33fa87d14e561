"""The planner stage: the task and what the workspace shows of it become a checked TaskPlan (seed 003).

1. The task must be at most 10,000 characters and not empty (ACODE-PLAN-001).
2. :func:`actors.stages.planning.gather.prepare` gathers the context within the planner's budget
   (its share of the model's context, :mod:`actors.stages.prompting.budget`, capped by
   ``planner_context_tokens``, less the system prompt): earlier answers, the reviewer's
   feedback and the plan being revised, the workspace tree, key files, matching files.
   When not even the system prompt and the task fit, the stage fails with ACODE-ORCH-005.
   Its first reads (the tree, the search; :func:`~actors.stages.planning.gather.first_calls`) go
   to the sandbox at once with the session's baseline (``StageContext.tools``).
3. The model answers a plan (call site ``plan``). :mod:`actors.stages.planning.plancheck` reads
   and checks it: schema, labels, dependencies and cycles, limits, paths, and every
   command against the session's sandbox policy. What is mechanical is repaired first,
   without asking anyone (:func:`protocol.plans.plan.repair`: duplicate labels, a dependency
   on a task label, ...; each repair is logged as ``plan_repaired`` and named in the
   stage's summary), and questions about acode's own plan rules never reach the user: the
   model is told the rules instead. A check with a ``<...>`` placeholder or one the sandbox
   would refuse is dropped, its criterion kept for the verifier's model
   (:func:`~actors.stages.planning.plancheck.drop_unusable_checks`). A plan that writes only tests
   when the task did not ask for that is made to change the module the tests import, or
   sent back once naming it (:mod:`actors.stages.planning.testtarget`; the test files are read with
   ``read_file``, recorded like every tool call). An answer with problems goes back to
   the model with all of them listed and the head of the answer (sized to fit the
   context, :mod:`actors.stages.prompting.corrections`), in the same conversation, at most
   :data:`MAX_CORRECTIONS` times (call sites ``plan/retry1``, ``plan/retry2``: each is
   recorded, so a re-dispatched planner replays the whole exchange); after that the
   stage fails with ACODE-PLAN-004 naming the problems, and the coordinator takes over.
4. :func:`protocol.plans.plan.finalize` gives ids and the version. On a re-plan (the request
   carries the current plan and the reviewer's feedback) the version is the previous
   one + 1, tasks completed before stay completed as they were, and the change summary
   says which tasks were added, removed, changed and kept.

A session with MCP servers (``SessionSettings.mcp_servers``) has their offered tools
listed for the model after the context (:meth:`~actors.stages.calls.mcptools.McpOffer.for_planner`:
names, argument names, descriptions fenced), so a plan can name the tool a step needs
instead of inventing a command for it.

A first plan for a task that names its file and its check, by simple rules, is derived
after step 2's first reads, without a model call (:mod:`actors.stages.planning.derive`; logged
``plan_derived``, said in the summary) and checked like a model's.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from typing import Any

import msgspec

from actors.llm.provider import ChatMessage
from actors.stages.calls.mcptools import McpOffer
from actors.stages.planning import gather, plancheck, testtarget
from actors.stages.planning.derive import asks_for_tests, derive, failing_test
from actors.stages.prompting import prompts
from actors.stages.prompting.budget import stage_budget, too_large
from actors.stages.prompting.corrections import correction
from actors.stages.request import instructions
from actors.stages.request.context import StageContext
from protocol.errors import PlanError
from protocol.plans.plan import PlanTask, Question, TaskPlan, carry_completed, finalize, repair
from protocol.plans.results import StageResult, ToolResult
from protocol.plans.task import check_task

__all__ = ["MAX_CORRECTIONS", "change_summary", "run"]

MAX_CORRECTIONS = 2
_ERRORS_CHARS = 3_000  # of the problems, in the stage's error
_LEAST_CONTEXT_TOKENS = 200  # of the workspace: the planner does not plan blind
_NUMBERED = re.compile(r"^ *\d+\t", re.MULTILINE)  # read_file's line numbers


def _content(task: PlanTask) -> PlanTask:
    """What a task asks for, without what acode adds (ids, status)."""
    replace = msgspec.structs.replace
    return replace(task, id="", status="pending", steps=[replace(s, id="") for s in task.steps])


def change_summary(previous: TaskPlan, plan: TaskPlan, stated: str = "") -> str:
    """Which tasks a re-plan added, removed, changed (same label, other content) and kept;
    then the model's own explanation, if it gave one."""
    before = {t.label: _content(t) for t in previous.tasks}
    after = {t.label: _content(t) for t in plan.tasks}

    def names(labels: list[str]) -> str:
        return ", ".join(labels) or "none"

    parts = [f"tasks added: {names([label for label in after if label not in before])}",
             f"removed: {names([label for label in before if label not in after])}",
             f"changed: {names([label for label in after if label in before and after[label] != before[label]])}",
             f"unchanged: {names([label for label in after if label in before and after[label] == before[label]])}"]
    text = "; ".join(parts)
    stated = " ".join(stated.split())[:2_000]
    return f"{text}; why: {stated}" if stated else text


def _correction(problems: list[str]) -> str:
    lines = ["That plan cannot be used. Its problems:"]
    lines += [f"- {problem}" for problem in problems]
    lines.append("Answer again with the whole corrected plan: one JSON object in the same shape, nothing else.")
    return "\n".join(lines)


def _rules_correction(asked: list[Question]) -> str:
    listed = "; ".join(repr(q.question) for q in asked)
    return (f"your questions ({listed}) are about acode's plan rules, which the user does not decide: "
            f"{plancheck.RULES}. Apply the rules yourself and answer with the whole plan, status ready")


def _plan(ctx: StageContext, system: str, user: str, files: set[str],
          read: Callable[[str], str | None]) -> tuple[TaskPlan, int, list[str]]:
    """A plan without problems, the number of corrections it took and what acode repaired
    in it (:func:`protocol.plans.plan.repair`, :func:`~actors.stages.planning.plancheck.read_plan`'s notes,
    :func:`~actors.stages.planning.plancheck.drop_unusable_checks`,
    :func:`~actors.stages.planning.testtarget.retarget`),
    or PlanError. Questions about acode's own rules go back to the model, never to the user.
    ``files``: the workspace's listing (empty when not known whole); ``read``: a file's text."""
    request = ctx.request
    messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
    problems: list[str] = []
    told_tests = False  # the model heard once that the tests are the check
    for attempt in range(MAX_CORRECTIONS + 1):
        call_site = "plan" if attempt == 0 else f"plan/retry{attempt}"
        answer = ctx.chat(TaskPlan, call_site=call_site, messages=messages)
        notes: list[str] = []
        draft, problems = plancheck.read_plan(answer.content, notes)
        if draft is not None:
            draft, repaired = repair(carry_completed(draft, request.plan))
            draft, asked = plancheck.rules_questions(draft)
            notes += repaired
            if asked:
                ctx.log.info("plan_rules_question", call_site=call_site, questions=[q.question for q in asked])
            if asked and draft.status == "needs_clarification" and not draft.questions:
                problems = [_rules_correction(asked)]  # the model hears the rules; the user is not asked
            else:
                if asked:
                    notes.append(f"acode left out {len(asked)} question(s) about its own plan rules")
                draft, dropped = plancheck.drop_unusable_checks(draft, request.settings.sandbox, request.task)
                notes += dropped
                draft, exits = plancheck.exit_codes_said(draft, request.task)
                notes += exits
                if request.settings.profile.step_style == "file":  # a step is answered as its task's one file
                    draft, writes = testtarget.writes_named(draft, request.task, files)
                    notes += writes
                problems = [p.message for p in plancheck.plan_problems(draft, request.settings.sandbox,
                                                                       request.settings.max_task_complexity)]
                tests = testtarget.written_tests(draft) if not problems else []
                coded = testtarget.code_step(draft, request.task, files) if tests and asks_for_tests(
                    request.task) else None
                if coded is not None:
                    draft, note = coded
                    notes.append(note)
                    problems = [p.message for p in plancheck.plan_problems(
                        draft, request.settings.sandbox, request.settings.max_task_complexity)]
                elif tests and not told_tests and not asks_for_tests(request.task):
                    sources = {path: text for path in tests if (text := read(path)) is not None}
                    retargeted = testtarget.retarget(draft, request.task, sources, files)
                    if retargeted is None and attempt < MAX_CORRECTIONS:  # the last answer is used as it is
                        told_tests = True
                        problems = [testtarget.correction(tests, sources, files)]
                    elif retargeted is not None:
                        draft, note = retargeted
                        notes.append(note)
                        problems = [p.message for p in plancheck.plan_problems(
                            draft, request.settings.sandbox, request.settings.max_task_complexity)]
                if not problems:
                    if notes:
                        ctx.log.info("plan_repaired", call_site=call_site, notes=notes)
                    return draft, attempt, notes
        ctx.log.warning("plan_rejected", call_site=call_site, problems=problems,
                        retrying=attempt < MAX_CORRECTIONS)
        messages = correction(messages, answer, _correction(problems), settings=request.settings, stage="planner")
    listed = "; ".join(problems)
    if len(listed) > _ERRORS_CHARS:
        listed = listed[:_ERRORS_CHARS] + "…"
    raise PlanError(f"the model gave no usable plan in {MAX_CORRECTIONS + 1} answers; the last one still had "
                    f"{len(problems)} problem(s): {listed}; try a clearer or smaller task, or a stronger model",
                    code="ACODE-PLAN-004")


def _listing(tree: ToolResult | None) -> set[str] | None:
    """The workspace's files from the tree's listing, or None when it failed or was cut."""
    if tree is None or not tree.ok or "[… truncated" in tree.output:
        return None
    return {line for line in tree.output.splitlines() if line and not line.startswith("[")
            and not line.endswith(("/", "@"))}


def _derived(ctx: StageContext, task: str, files: set[str] | None,
             read: Callable[[str], str | None]) -> StageResult | None:
    """The plan :func:`actors.stages.planning.derive.derive` makes of a first plan's task from the
    workspace's listing (``files``, complete), or for a failing test to fix the one
    :func:`~actors.stages.planning.testtarget.retarget` makes (``read``: the test file's text),
    checked like a model's; None: the model plans."""
    request = ctx.request
    if request.plan is not None or request.feedback is not None or request.clarifications:
        return None
    if files is None:
        return None
    draft = derive(task, files)
    if draft is None and (failing := failing_test(task, files)) is not None:
        test, tests_only = failing
        source = read(test)
        retargeted = testtarget.retarget(tests_only, task, {test: source}, files) if source is not None else None
        draft = retargeted[0] if retargeted is not None else None
    if draft is None:
        return None
    problems = plancheck.plan_problems(draft, request.settings.sandbox, request.settings.max_task_complexity)
    if problems:
        ctx.log.info("plan_not_derived", problems=[p.message for p in problems])
        return None
    plan = finalize(draft, version=1)
    ctx.log.info("plan_derived", plan_id=plan.id, version=plan.version, task_count=1, step_count=1,
                 write=plan.tasks[0].resources.write, checks=[c.check.command for c in plan.criteria() if c.check])
    return ctx.result(ok=True, summary=f"plan v{plan.version}: 1 task(s), 1 step(s) (derived from the task "
                                       "without a model call)", plan=plan)


def _mcp_tools(ctx: StageContext) -> str:
    """The session's MCP tools for the planner's message ("" without servers, or when none
    is offered now: the executor lists them again before each turn)."""
    if not ctx.request.settings.mcp_servers:
        return ""
    offer = McpOffer(ctx)
    offer.refresh()
    return offer.for_planner(ctx.request.task)


def run(ctx: StageContext) -> StageResult:
    request = ctx.request
    started = time.monotonic()
    task = check_task(request.task)
    previous = request.plan
    # The workspace as it is before anything changes: the reviewer's diff is taken against
    # it. Every visit asks; the sandbox keeps the first (a re-plan must not move it). The
    # context's first reads go with it: none depends on another, so the three take about
    # one round trip, and gather.prepare is answered from them (the same keys).
    key_prefix = f"{request.session_id}:p{request.visit}"
    first = [(f"{request.session_id}:baseline", "baseline_workspace", {}), *gather.first_calls(task, key_prefix)]
    ready = dict(zip([key for key, _, _ in first], ctx.tools(first), strict=True))
    baseline = ready.pop(first[0][0])

    def tool(key: str, name: str, arguments: dict[str, Any]) -> ToolResult:
        done = ready.pop(key, None)
        return done if done is not None else ctx.tool(key, name, arguments)

    if not baseline.ok:
        ctx.log.warning("baseline_failed", error=baseline.error.message if baseline.error else baseline.output)
    files = _listing(ready.get(first[1][0]))

    def read(path: str) -> str | None:
        key = f"{key_prefix}:tests:{hashlib.sha256(path.encode()).hexdigest()[:16]}"
        result = ctx.tool(key, "read_file", {"path": path})
        return _NUMBERED.sub("", result.output) if result.ok else None

    derived = _derived(ctx, task, files, read)
    if derived is not None:
        return derived
    system = f"{prompts.PLANNER}\n\n{ctx.fence.preamble()}{instructions.section(ctx)}"
    settings = request.settings
    whole = min(settings.planner_context_tokens, stage_budget(settings, "planner"))
    ctx.budget_tokens = whole  # reported with the stage's token figures
    tools = _mcp_tools(ctx)
    budget = whole - gather.estimate_tokens(system) - gather.estimate_tokens(tools)
    needed = gather.estimate_tokens(system) + gather.estimate_tokens(task) + _LEAST_CONTEXT_TOKENS
    if needed > whole:
        raise too_large(settings, "planner", needed, "the system prompt, the task and a little of the workspace",
                        cap=(settings.planner_context_tokens, "planner.context_tokens"))
    prepared = gather.prepare(tool, task=task, fence=ctx.fence, key_prefix=key_prefix,
                              budget_tokens=budget, clarifications=request.clarifications,
                              feedback=request.feedback, previous=previous, log=ctx.log,
                              includes=settings.context_includes, excludes=settings.context_excludes)
    ctx.log.info("context_prepared", tokens=prepared.tokens, budget_tokens=budget,
                 sections=[f"{s.kind}:{s.name}" for s in prepared.sections], omitted=len(prepared.omitted),
                 tool_calls=prepared.tool_calls, duration_ms=round((time.monotonic() - started) * 1000, 1))
    user = f"{prepared.text}\n\n{tools}" if tools else prepared.text
    draft, corrections, notes = _plan(ctx, system, user, files or set(), read)
    plan = finalize(draft, version=(previous.version + 1) if previous else 1, previous=previous)
    if previous is not None:
        plan = msgspec.structs.replace(plan, change_summary=change_summary(previous, plan, draft.change_summary))
    fields = dict(plan_id=plan.id, version=plan.version, status=plan.status, task_count=len(plan.tasks),
                  step_count=plan.step_count(), complexity=sum(t.complexity for t in plan.tasks),
                  context_tokens=prepared.tokens, corrections=corrections, repairs=notes,
                  duration_ms=round((time.monotonic() - started) * 1000, 1))
    if previous is None:
        ctx.log.info("plan_created", **fields)
    else:
        reason = request.feedback.summary if request.feedback else "re-plan"
        ctx.log.info("plan_replanned", reason=reason, change=plan.change_summary, **fields)
    if plan.status == "needs_clarification":
        summary = f"plan v{plan.version} needs clarification: {len(plan.questions)} question(s)"
    else:
        summary = f"plan v{plan.version}: {len(plan.tasks)} task(s), {plan.step_count()} step(s)"
    if corrections:
        summary += f" (after {corrections} correction{'s' if corrections > 1 else ''})"
    if notes:
        summary += "; " + prompts.truncate("; ".join(notes), 600)
    return ctx.result(ok=True, summary=summary, plan=plan)
