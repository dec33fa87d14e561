"""The sandbox's approval gate: no bug in a stage can run a call that needs approval.

The executor's autonomy step decides what needs a human (:mod:`actors.stages.calls.pipeline`);
this gate checks it again where calls run, against the durable record, before the journal
sees the call:

1. The gate applies to every caller except acode's own stages that run no model-chosen
   call (the planner's reads and baseline, the reviewer's diff), known by the envelope's
   sender, which the broker client sets for the whole process. A call from the executor,
   the verifier (its check commands come from the plan, which a model wrote), or anything
   else (a test client, a stray script), is gated.
2. The call's class (:func:`protocol.calls.autonomy.gate`) under THE SESSION'S stored settings:
   the level, ``approvals:`` and the approval mode, read from persistence once per session
   and cached (seed 002 S9: they never change after the session starts). A session that
   persistence does not know gets the defaults (autonomy 2: destructive calls need an
   approval).
3. ``auto``: passes, at no cost beyond that one cached read. ``deny``: refused
   (ACODE-SBX-020). ``prompt``: the RunTool must carry ``approval``, the id of an
   :class:`~protocol.calls.autonomy.ApprovalDecision` in the session's snapshot, read fresh from
   persistence, that approves this call: same key (or its transient retries) and hash, or
   an ``--always`` rule it matches. Otherwise refused (ACODE-SBX-019).

An MCP tool's call (``mcp__S__T``) is never exempt, and its class is the gate's own:
:class:`~actors.sandbox.mcpcalls.McpCalls` computes it from the session's stored server
configuration and the definition the ``mcp`` actor lists (cached per session and
definition hash), destructive when it cannot (fail closed); nothing the stage sends
enters it, so a buggy stage cannot lower it.

Why persistence and not a signature: the coordinator writes a decision into the snapshot
in the same commit as its ``approval_decided`` event, before the retried attempt is
dispatched, so the record the gate reads is the audited one; a signed token would need a
key shared by the coordinator and the sandbox and would prove no more. The read costs one
round trip, and only prompt-class calls pay it.

A refusal is the call's result (the model and the log see it); it is not journaled, so the
same key runs once a matching approval exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from actors.sandbox.confinement.policy import refused_by_policy
from actors.sandbox.mcpcalls import McpCalls
from protocol.calls.autonomy import ApprovalMode, Approvals, call_hash, gate, matches, risk_of_call, rule_of
from protocol.calls.mcp import PREFIX as MCP_PREFIX
from protocol.calls.tools import INTERNAL_TOOLS, SANDBOX_TOOLS, Risk
from protocol.errors import AcodeError, NotFoundError, SandboxError
from protocol.messages import GetSession, Message, RunTool
from protocol.plans.results import ToolResult
from protocol.sessions.session import SessionSettings, SessionSnapshot

__all__ = ["EXEMPT", "ApprovalGate", "refused"]

# stage actors whose calls no model chooses (the verifier's checks come from the plan: gated)
EXEMPT = frozenset({"planner", "reviewer"})
_CACHE = 4_096


def refused(request: RunTool, refusal: SandboxError) -> ToolResult:
    """The gate's refusal as the call's result (not journaled)."""
    return ToolResult(key=request.key, tool=request.tool, ok=False, error=refusal.info(),
                      risk=risk_of_call(request.tool, request.arguments))


def _actor_of(sender: str) -> str:
    """``executor`` of ``executor-2``: instances of a stage run with several are numbered."""
    name, sep, number = sender.rpartition("-")
    return name if sep and number.isdigit() else sender


class ApprovalGate:
    def __init__(self, send: Callable[[Message], Any], mcp: McpCalls | None = None):
        self._send = send
        self._mcp = mcp
        self._lock = threading.Lock()
        self._settings: dict[str, tuple[int, Approvals, ApprovalMode]] = {}

    def check(self, request: RunTool, sender: str) -> SandboxError | None:
        """None when the call may run; else the refusal that becomes its result."""
        is_mcp = request.tool.startswith(MCP_PREFIX)
        if not is_mcp and (self.exempt(sender) or request.tool not in SANDBOX_TOOLS | INTERNAL_TOOLS):
            return None  # an unknown tool is refused by the dispatcher, with the list of tools
        risk = self._mcp_risk(request) if is_mcp else risk_of_call(request.tool, request.arguments)
        level, approvals, mode = self._policy(request.session_id)
        verdict, why = gate(level, approvals, risk, mode)
        what = f"{request.tool} ({risk})"
        if verdict == "auto" or refused_by_policy(request.tool, request.arguments, request.policy):
            return None  # the dispatcher refuses the command with the policy's own code: nothing runs
        if verdict == "deny":
            return SandboxError(f"{what} refused: the session's {why}; the call was not run",
                                code="ACODE-SBX-020")
        if request.approval:
            snapshot = self._snapshot(request.session_id)
            digest = call_hash(request.tool, request.arguments, request.mcp_hash if is_mcp else "")
            rule = rule_of(request.tool, request.arguments, risk)
            for decision in snapshot.approvals if snapshot is not None else []:
                if decision.id == request.approval:
                    if decision.decision == "approve" and matches(decision, request.key, digest, rule):
                        return None
                    break
        given = f"approval {request.approval!r} does not approve this call" if request.approval \
            else "it carries no approval"
        return SandboxError(f"{what} refused: {why}, and {given}; the session must approve it first "
                            f"(`acode approve {request.session_id}`)", code="ACODE-SBX-019")

    def _mcp_risk(self, request: RunTool) -> Risk:
        """An MCP call's class, computed here (see the module); destructive without the service."""
        risk = self._mcp.risk(request) if self._mcp is not None else "destructive"
        return risk_of_call(request.tool, request.arguments, {request.tool: risk})

    def exempt(self, sender: str) -> bool:
        """Whether calls from ``sender`` pass without the session's policy (see the module)."""
        return _actor_of(sender) in EXEMPT

    def learn(self, session_id: str) -> None:
        """Read and cache the session's policy now (from a thread of the caller's), so that
        the first gated call of the session does not wait for it: the executor's first read
        comes after the planner's calls, which pass without it. A failure is left for
        :meth:`check` to meet again."""
        try:
            self._policy(session_id)
        except AcodeError:
            pass

    def knows(self, session_id: str) -> bool:
        """Whether the session's policy is cached: :meth:`check` then asks persistence nothing."""
        with self._lock:
            return session_id in self._settings

    def _policy(self, session_id: str) -> tuple[int, Approvals, ApprovalMode]:
        with self._lock:
            cached = self._settings.get(session_id)
        if cached is not None:
            return cached
        snapshot = self._snapshot(session_id)
        settings = snapshot.settings if snapshot is not None else SessionSettings()
        policy = (settings.autonomy, settings.approvals, settings.approval_mode)
        if snapshot is not None:  # settings that never change; an unknown session may be created later
            with self._lock:
                if len(self._settings) >= _CACHE:
                    self._settings.clear()
                self._settings[session_id] = policy
        return policy

    def _snapshot(self, session_id: str) -> SessionSnapshot | None:
        try:
            reply = self._send(GetSession(session_id=session_id))
        except NotFoundError:
            return None
        session: SessionSnapshot = reply.session
        return session
