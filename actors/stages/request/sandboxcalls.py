"""A stage's tool calls: each one to the sandbox, journaled, retried, and the workspace's diff.

One :class:`SandboxCalls` per ``RunStage`` request, made by the
:class:`~actors.stages.request.context.StageContext`. A call is idempotent by its key: the
sandbox's journal answers a key it has seen with the result it recorded, so a replayed
stage reads the bytes the stage read. :meth:`SandboxCalls.tool` may be called from
several threads at once (the verifier runs independent checks in parallel): each thread
gets its own broker client, and the count of calls is kept under a lock.

Every call first passes the user's safe point (:meth:`~actors.stages.request.control.WorkControl.safe_point`).
A call with side effects waits until what the stage held back is durable
(:meth:`~actors.stages.request.writes.StageWrites.flush`): a side effect may follow a model answer
still held, and a replay must find the answer it followed. A read
(:data:`protocol.calls.tools.RERUN_SAFE_TOOLS`) under a key not journaled runs ``held``: the
sandbox writes nothing and answers the call's event, which the stage holds for its next
write (:meth:`~actors.stages.request.writes.StageWrites.hold_reads`); a key journaled, or held and
not yet written, goes through the sandbox's journal carrying what is held
(:meth:`~actors.stages.request.writes.StageWrites.carried`). :meth:`SandboxCalls.tools` sends
several reads at once.

Transient tool failures (a result whose error is ``retryable``) are retried by
:meth:`SandboxCalls.tool_retrying` ``tool_retry_limit`` times, after ``tool_retry_backoff_s``
doubling each time (by default :data:`TOOL_RETRY_WAITS`: 1 s, 2 s, 4 s; seed 004
FR-064/065), each retry under its own key (``<key>:retry1`` …): the sandbox's journal
answers a repeated key with the result it recorded, and the suffixes are deterministic so
a resumed stage replays the same sequence.

A command that changed a protected path (the sandbox restored it and failed the call with
ACODE-SBX-021) raises :class:`ProtectedChanged` from :meth:`SandboxCalls.tool`: the stage
ends with that code and the coordinator pauses the session (``escalation``), whichever
stage ran the command; a replay that meets the journaled result pauses again.

An MCP call that may have acted and was interrupted (its server exited, or the ``mcp``
actor or the sandbox died mid-call: ACODE-MCP-002, -007, -011) is never run again, and the
model is not the one to decide what next: :class:`McpOutcomeUnknown` (ACODE-MCP-016) ends
the stage the same way and the session pauses for a human (issue 30). A read-class MCP
call (a trusted read-only tool) is only reported to the model: it changed nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from actors.stages.request.control import WorkControl
from actors.stages.request.writes import PERSISTENCE_TIMEOUT, StageWrites
from broker.threads import ThreadClients
from protocol import codec
from protocol.calls.mcp import parse_tool_name
from protocol.calls.tools import RERUN_SAFE_TOOLS
from protocol.errors import AcodeError, OrchestrationError, SandboxError, with_code
from protocol.messages import RunStage, RunTool, ToolDone
from protocol.plans.results import ToolResult, WorkspaceChanges
from protocol.policy.checkpoints import CallSite

__all__ = ["TOOL_RETRY_WAITS", "McpOutcomeUnknown", "ProtectedChanged", "SandboxCalls"]

TOOL_RETRY_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)


class ProtectedChanged(SandboxError):
    """A command changed a protected path (git's config or hooks, ``.agent``, acode's
    config; the sandbox restored it): the stage stops here and the session pauses."""

    default_code = "ACODE-SBX-021"


class McpOutcomeUnknown(SandboxError):
    """An MCP call that may have acted was interrupted: the stage stops here and the session
    pauses, so a human decides (the call is never run again)."""

    default_code = "ACODE-MCP-016"


_MCP_INTERRUPTED = frozenset({"ACODE-MCP-002", "ACODE-MCP-007", "ACODE-MCP-011"})


def _unless_stopped(result: ToolResult) -> ToolResult:
    if result.error is None:
        return result
    if result.error.code == ProtectedChanged.default_code:
        raise ProtectedChanged(result.error.message)
    if result.error.code in _MCP_INTERRUPTED and result.risk != "read" and parse_tool_name(result.tool):
        raise McpOutcomeUnknown(
            f"the MCP call {result.tool} was interrupted ({result.error.code}) and may or may not have taken "
            "effect; acode does not run it again: check what it did, then `acode resume` (the step starts "
            "afresh) or `acode cancel`")
    return result


def _answered(calls: Sequence[tuple[str, str, dict[str, Any]]],
              outcomes: Sequence[object]) -> Iterator[tuple[str, ToolDone]]:
    """Each read's key and reply, in the order given; an error reply raises where it stands."""
    for (key, _, _), outcome in zip(calls, outcomes, strict=True):
        if isinstance(outcome, AcodeError):
            raise outcome  # as :meth:`SandboxCalls.tool` raises it; the reads before it stay held
        assert isinstance(outcome, ToolDone), "an Error reply arrives as an AcodeError"
        yield key, outcome


class SandboxCalls:
    """The tool calls of one stage request."""

    def __init__(self, request: RunStage, writes: StageWrites, *, clients: ThreadClients, control: WorkControl,
                 cancel: threading.Event, log: Any):
        self.request = request
        self.writes = writes
        self.clients = clients
        self.control = control
        self.cancel = cancel
        self.log = log
        self.tool_calls = 0
        settings = request.settings
        self.retry_waits = tuple(settings.tool_retry_backoff_s * 2**n  # tests shorten them
                                 for n in range(settings.tool_retry_limit))
        self._lock = threading.Lock()

    def tool(self, key: str, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None,
             approval: str = "", site: CallSite | None = None, mcp_hash: str = "") -> ToolResult:
        """Run one tool call in the sandbox (idempotent by ``key``); ``approval``: the id of
        the decision that approves a prompt-class call (the sandbox checks it); ``site``:
        where it comes from, for the checkpoint before it (else this stage); ``mcp_hash``: an MCP
        tool's definition, as offered (``RunTool.mcp_hash``)."""
        self.control.safe_point(f"tool call {tool}", first=self.writes.flush)
        settings = self.request.settings
        timeout_s = timeout_s or settings.command_timeout
        with self._lock:
            self.tool_calls += 1
        call = RunTool(key=key, session_id=self.request.session_id, workspace=self.request.workspace, tool=tool,
                       arguments=arguments, timeout_s=timeout_s, output_limit_bytes=settings.output_limit_bytes,
                       policy=settings.sandbox, approval=approval,
                       site=site or CallSite(stage=self.request.stage), mcp_hash=mcp_hash)
        if tool not in RERUN_SAFE_TOOLS:
            self.writes.flush()  # a side effect may follow what was held: durable first
            return _unless_stopped(self._run_tool(call))
        if not self.writes.journaled([key]):  # the stage journals the result itself, with its next write
            done = self._run_tool_reply(msgspec.structs.replace(call, held=True))
            return self.writes.hold_reads([(key, done)])[0]
        # journaled (a replay reads the first result), with what was held first
        return self.writes.carried(lambda held: self._run_tool(msgspec.structs.replace(call, commit=held)))

    def tools(self, calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[ToolResult]:
        """Run several reads at once (``(key, tool, arguments)`` each, none depending on
        another): the sandbox works on them side by side, so they cost about one round
        trip instead of one each. They are journaled as :meth:`tool` would, in the order
        given. A call that is not a read, or that a replay finds journaled, makes them run
        one after another through :meth:`tool` instead (the same results, one at a time)."""
        if any(tool not in RERUN_SAFE_TOOLS for _, tool, _ in calls) or len(calls) < 2:
            return [self.tool(key, tool, arguments) for key, tool, arguments in calls]
        if self.writes.journaled(key for key, _, _ in calls):
            return [self.tool(key, tool, arguments) for key, tool, arguments in calls]
        self.control.safe_point(f"tool calls {', '.join(tool for _, tool, _ in calls)}", first=self.writes.flush)
        with self._lock:
            self.tool_calls += len(calls)
        settings = self.request.settings
        sent = [RunTool(key=key, session_id=self.request.session_id, workspace=self.request.workspace, tool=tool,
                        arguments=arguments, timeout_s=settings.command_timeout,
                        output_limit_bytes=settings.output_limit_bytes, policy=settings.sandbox, held=True)
                for key, tool, arguments in calls]
        outcomes = self.clients.call_all("sandbox", sent, timeout=settings.command_timeout + PERSISTENCE_TIMEOUT,
                                         decoder=codec.SANDBOX_REPLY, session_id=self.request.session_id)
        return self.writes.hold_reads(_answered(calls, outcomes))  # in the order given, whatever order they came in

    def tool_retrying(self, key: str, tool: str, arguments: dict[str, Any], *,
                      timeout_s: float | None = None, approval: str = "", site: CallSite | None = None,
                      mcp_hash: str = "") -> ToolResult:
        """:meth:`tool`, retrying a transient failure after each of :attr:`retry_waits`.

        Returns the first result that is not a transient failure, or the last one. A
        cancelled stage stops waiting and returns what it has.
        """
        result = self.tool(key, tool, arguments, timeout_s=timeout_s, approval=approval, site=site, mcp_hash=mcp_hash)
        for attempt, wait in enumerate(self.retry_waits, start=1):
            if result.error is None or not result.error.retryable:
                break
            self.log.warning("tool_retry_scheduled", key=key, tool=tool, retry=attempt, wait_s=wait,
                             code=result.error.code)
            if self.cancel.wait(wait):
                break
            result = self.tool(f"{key}:retry{attempt}", tool, arguments, timeout_s=timeout_s, approval=approval,
                               site=site, mcp_hash=mcp_hash)
        return result

    def diff(self, purpose: str) -> tuple[str, WorkspaceChanges | None]:
        """The workspace's diff since the session began (the sandbox's ``diff_workspace``
        against the planner's baseline) and its list of changed files (None in a result
        journaled before the list was kept). ``purpose`` keeps the verifier's and the
        reviewer's keys apart; the visit makes each visit's diff fresh.

        A diff that cannot be computed (no baseline, an unreadable one, ``.git`` gone or
        replaced, git failing) raises ACODE-ORCH-012: nothing can then be verified or
        reviewed, so the session pauses (its fix is the message's last part)."""
        request = self.request
        result = self.tool(f"{request.session_id}:{purpose}{request.visit}:diff", "diff_workspace", {})
        if result.ok:
            return result.output, result.changes
        why = with_code(result.error.message, result.error.code) if result.error else result.output
        short = request.session_id[:8]
        raise OrchestrationError(
            f"the workspace's changes since the session's baseline cannot be computed: {why}; so the work can be "
            f"neither verified nor reviewed, and the session cannot complete; put back what is missing (a moved or "
            f"replaced .git, the baseline in acode's home), then `acode resume {short}` compares again, or "
            f"`acode cancel {short}` ends the session", code="ACODE-ORCH-012")

    def _run_tool(self, call: RunTool) -> ToolResult:
        return self._run_tool_reply(call).result

    def _run_tool_reply(self, call: RunTool) -> ToolDone:
        reply = self.clients.call("sandbox", call, timeout=call.timeout_s + PERSISTENCE_TIMEOUT,
                                  decoder=codec.SANDBOX_REPLY, session_id=self.request.session_id)
        assert isinstance(reply, ToolDone), "Client.call raises the Error a sandbox answers"
        return reply
