"""The per-tool-call pipeline, in seed 002's order: budget → autonomy → anomaly →
checkpoint → execute → budget update.

Every tool call the executor's model makes goes through :meth:`CallPipeline.run`, and every
check command the verifier runs through its autonomy step (a check's command comes from the
plan, which a model wrote: it is gated like the executor's commands); each
step is a named method. The budget steps are :mod:`actors.stages.request.spending`'s. The anomaly
step stays a no-op in its slot on purpose: what an anomaly is (the same error again, an edit
undone, turns without progress, a growing token bill) shows in what whole turns did, known
only after their calls ran, so :mod:`actors.stages.execution.turnwatch` looks after each turn in the
step's loop, and the ladder answers between turns (a note, a fresh window, a pause); no call
is refused for one.

The autonomy step (:meth:`CallPipeline.autonomy`) asks :func:`protocol.calls.autonomy.gate` with
the session's stored level and approvals (never changed after the session started), and
the call's class (:func:`protocol.calls.autonomy.risk_of_call`; an MCP tool's from its listed
definition and the session's stored server configuration, :mod:`actors.stages.calls.mcptools`):

- ``auto``: the call runs.
- ``deny`` (an ``approvals:`` class set to ``deny``, or ``non_interactive_policy: skip``):
  the call does not run; the model is told why as the call's result, and the decision is
  recorded (an ``approval_decided`` event).
- ``prompt``: the session's decisions (the stage request carries them) are searched for
  this call (same key and hash) or an ``--always`` rule it matches. An approval runs the
  call with the decision's id, which the sandbox checks against the durable record; a
  denial goes back to the model as ``the user denied this: <reason>``. No decision yet:
  :class:`NeedsApproval` ends the stage, the coordinator pauses the session
  ``awaiting_approval`` (or, under ``non_interactive_policy: fail``, with ACODE-EXEC-005,
  exit 33). When the decision is made the stage is dispatched again; it replays its
  recorded model answers and journaled calls, reaches this call again, and finds it.
"""

from __future__ import annotations

import time
from typing import Literal, NamedTuple, assert_never

import msgspec

from actors.sandbox.confinement.policy import refused_by_policy
from actors.sandbox.mcpcalls import CALL_MARGIN_S
from actors.stages.calls import preview
from actors.stages.calls.mcptools import McpOffer, is_mcp
from actors.stages.calls.stagehooks import StageHooks
from actors.stages.request.context import StageContext
from protocol.basics.ids import stable_id
from protocol.calls.autonomy import (
    ApprovalDecision,
    ApprovalRequest,
    call_hash,
    decision_of,
    gate,
    risk_of_call,
    rule_of,
    target_of,
)
from protocol.calls.tools import Risk
from protocol.errors import ExecutionError
from protocol.plans.results import ModelToolCall, ToolResult
from protocol.policy.checkpoints import CallSite
from protocol.sessions.events import ApprovalDecided, HookRan

__all__ = ["CallPipeline", "NeedsApproval", "Passed", "Verdict"]


class NeedsApproval(ExecutionError):
    """The call waits for a human's decision; ``request`` is what the pause shows."""

    default_code = "ACODE-EXEC-009"

    def __init__(self, message: str, request: ApprovalRequest, *, code: str = "ACODE-EXEC-009"):
        super().__init__(message, code=code)
        self.request = request


class Passed(NamedTuple):
    """A call through the pipeline: its result, or the text the model gets instead (``denied``)."""

    result: ToolResult | None = None
    denied: str = ""


class Verdict(NamedTuple):
    """The autonomy step's answer: run (with the decision id the sandbox checks), or not,
    with the text the model gets (``denied``) and the bare reason (``reason``)."""

    run: bool
    approval: str = ""
    denied: str = ""
    reason: str = ""


class CallPipeline:
    """The steps one executor tool call passes, for one stage request."""

    def __init__(self, ctx: StageContext, mcp: McpOffer | None = None):
        self.ctx = ctx
        self.mcp = mcp  # the session's MCP tools (actors.stages.calls.mcptools): their classes, hashes, timeouts
        self.hooks = StageHooks(ctx)
        settings = ctx.request.settings
        self.level = settings.autonomy
        self.approvals = settings.approvals
        self.mode = settings.approval_mode
        self.decisions: list[ApprovalDecision] = list(ctx.request.approvals)

    def run(self, key: str, call: ModelToolCall, *, task: str, step: str) -> Passed:
        self.budget(key, call)
        verdict = self.autonomy(key, call, task=task, step=step)
        if not verdict.run:
            return Passed(denied=verdict.denied)
        self.anomaly(call)
        site = self.checkpoint(call, task=task, step=step)
        result = self.execute(key, call, verdict.approval, site)
        self.budget_update(call, result)
        return Passed(result=self.post_tool(key, call, result, task=task, step=step))

    # -- the steps ---------------------------------------------------------------------------

    def budget(self, key: str, call: ModelToolCall) -> None:
        """Budget check (seed 002 step 1): a call that would cross one of the session's limits
        is not made; the stage ends and the session pauses ``budget_exhausted``
        (:class:`~actors.stages.request.spending.Spending`, ACODE-ORCH-013). A call the journal
        holds ran before: it is answered from there and costs nothing."""
        if key not in self.ctx.replay_index().tool_keys:
            self.ctx.spending.check_call(where=f"{call.name} {target_of(call.name, call.arguments)}".strip())

    def autonomy(self, key: str, call: ModelToolCall, *, task: str, step: str) -> Verdict:
        """The autonomy level's decision, which the user's ``pre_tool`` hooks may tighten
        (:meth:`pre_tool`: deny it, or ask a human first), never loosen."""
        risk = risk_of_call(call.name, call.arguments, self.mcp.risks if self.mcp is not None else None)
        verdict, why = gate(self.level, self.approvals, risk)
        hooked = self.pre_tool(key, call, risk, task=task, step=step)
        if hooked is not None and hooked.decision == "deny":
            reason = f"hook {hooked.hook}: {hooked.reason or 'denied'}"
            return Verdict(run=False, denied=_denied(reason, "ACODE-EXEC-012", by="your pre_tool hook"),
                           reason=f"{reason} (ACODE-EXEC-012)")
        if hooked is not None and hooked.decision == "ask" and verdict == "auto":
            verdict, why = "prompt", f"hook {hooked.hook} asks: {hooked.reason or 'a human should decide'}"
        if verdict == "auto" or refused_by_policy(call.name, call.arguments, self.ctx.request.settings.sandbox):
            return Verdict(run=True)  # a command the sandbox's policy refuses runs nowhere: no one is asked
        digest = call_hash(call.name, call.arguments,
                           self.mcp.hash_of(call.name) if self.mcp is not None and is_mcp(call.name) else "")
        rule = rule_of(call.name, call.arguments, risk)
        if verdict == "deny":
            reason = f"the session's {why}"
            self._record(key, call, digest, risk, rule, "deny", reason)
            return Verdict(run=False, denied=_denied(reason, "ACODE-EXEC-010"), reason=f"{reason} (ACODE-EXEC-010)")
        decision = decision_of(self.decisions, key, digest, rule)
        if decision is not None:
            if decision.decision == "approve":
                return Verdict(run=True, approval=decision.id)
            why_not = decision.reason or "no reason given"
            return Verdict(run=False, denied=_denied(why_not, "ACODE-EXEC-005"),
                           reason=f"the user denied it: {why_not} (ACODE-EXEC-005)")
        match self.mode:
            case "auto":  # no human to ask, and the session said: approve (the sandbox's gate says the same)
                self._record(key, call, digest, risk, rule, "approve", f"{why}; non_interactive_policy: auto")
                return Verdict(run=True)
            case "skip":
                self._record(key, call, digest, risk, rule, "deny", "skipped: non-interactive")
                return Verdict(run=False, denied=_denied("skipped: non-interactive", "ACODE-EXEC-005"),
                               reason="skipped: non-interactive (ACODE-EXEC-005)")
            case "wait" | "fail":
                raise self._ask(key, call, digest, risk, rule, why, task=task, step=step)
            case _:
                assert_never(self.mode)

    def pre_tool(self, key: str, call: ModelToolCall, risk: Risk, *, task: str, step: str) -> HookRan | None:
        """The user's ``pre_tool`` hooks (actors.stages.calls.stagehooks): the one that decided
        something (deny, ask), if any; a pause, abort or restart ends the stage."""
        if not self.hooks.has("pre_tool"):
            return None
        answers = self.hooks.fire("pre_tool", key, self.hooks.tool_facts(call.name, call.arguments, risk, task=task,
                                                                         step=step))
        self.hooks.stop(answers)
        return next((event for event, _ in answers if event.decision in ("deny", "ask")), None)

    def post_tool(self, key: str, call: ModelToolCall, result: ToolResult, *, task: str, step: str) -> ToolResult:
        """The user's ``post_tool`` hooks: a ``modify_context`` answer is added to what the
        model sees of the result (inside the result's own fence, as untrusted text); a
        pause, abort or restart ends the stage (the call ran and is journaled: a replay
        answers it from there)."""
        if not self.hooks.has("post_tool"):
            return result
        facts = self.hooks.tool_facts(call.name, call.arguments, result.risk, task=task, step=step, ok=result.ok,
                                      output=result.output[:8_000])
        answers = self.hooks.fire("post_tool", key, facts)
        self.hooks.stop(answers)
        notes = [event.context for event, _ in answers if event.decision == "modify_context" and event.context]
        if not notes:
            return result
        added = "\n".join(f"[note from your post_tool hook] {text}" for text in notes)
        return msgspec.structs.replace(result, output=f"{result.output}\n{added}")

    def anomaly(self, call: ModelToolCall) -> None:
        """Anomaly check (seed 002 step 3): a no-op per call; anomalies are found per turn
        (:mod:`actors.stages.execution.turnwatch`), once the turn's calls have run."""

    def checkpoint(self, call: ModelToolCall, *, task: str, step: str) -> CallSite:
        """Checkpoint (seed 002 step 4): the call is labelled with its stage, task and step;
        the sandbox takes the checkpoint itself, just before the call runs, for every call
        that can change the workspace (it classifies the call: a stage cannot skip it; see
        actors/sandbox/checkpointing.py), and journals it with the call's result."""
        return CallSite(stage=self.ctx.request.stage, task=task, step=step, counted=True)

    def execute(self, key: str, call: ModelToolCall, approval: str, site: CallSite | None = None) -> ToolResult:
        if self.mcp is not None and is_mcp(call.name):  # the definition it was offered with, the server's timeout
            timeout = self.mcp.timeout_of(call.name)
            return self.ctx.tool_retrying(key, call.name, call.arguments, approval=approval, site=site,
                                          timeout_s=timeout + CALL_MARGIN_S if timeout else None,
                                          mcp_hash=self.mcp.hash_of(call.name))
        return self.ctx.tool_retrying(key, call.name, call.arguments, approval=approval, site=site)

    def budget_update(self, call: ModelToolCall, result: ToolResult) -> None:
        """Budget update (seed 002 step 6): the call counts (unless the journal answered it),
        and at 80% of a limit a ``budget_warning`` is written."""
        self.ctx.spending.called(result)

    # -- helpers -----------------------------------------------------------------------------

    def _ask(self, key: str, call: ModelToolCall, digest: str, risk: Risk, rule: str, why: str, *,
             task: str, step: str) -> NeedsApproval:
        request = self.ctx.request
        argv = preview.command_of(call.arguments) if call.name == "run_terminal" else []
        ask = ApprovalRequest(key=key, call_hash=digest, tool=call.name, arguments=call.arguments, risk=risk,
                              rule=rule, why=why, task=task, step=step, target=target_of(call.name, call.arguments),
                              diff=preview.diff_of(self.ctx, key, call.name, call.arguments), argv=argv,
                              cwd=request.workspace if call.name == "run_terminal" else "")
        what = f"{call.name} {ask.target!r}" if ask.target else call.name
        if self.mode == "fail":
            return NeedsApproval(f"step {task}/{step}: {what} ({risk}) needs approval ({why}) and no one is there to "
                                 "give it (non_interactive_policy: fail); approve it with `acode approve "
                                 f"{request.session_id}` or deny it with `acode deny {request.session_id}`", ask,
                                 code="ACODE-EXEC-005")
        return NeedsApproval(f"step {task}/{step}: {what} ({risk}) needs approval: {why}", ask)

    def _record(self, key: str, call: ModelToolCall, digest: str, risk: Risk, rule: str,
                decision: Literal["approve", "deny"], reason: str) -> None:
        """The audit record of a decision the session's policy made (stable id: a replay adds none)."""
        request = self.ctx.request
        self.ctx.commit([ApprovalDecided(
            id=stable_id(request.session_id, "approval", key), session_id=request.session_id, at=time.time(),
            key=key, call_hash=digest, tool=call.name, target=target_of(call.name, call.arguments), risk=risk,
            rule=rule, decision=decision, reason=reason, by="approvals policy")])


def _denied(reason: str, code: str, *, by: str = "the user") -> str:
    return (f"{by} denied this: {reason} ({code}); the call was not run. Do the step another way, or call "
            "step_failed if it cannot be done without it")
