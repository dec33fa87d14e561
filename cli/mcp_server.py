"""acode as an MCP server: the tools ``acode mcp serve`` offers another agent over stdio.

Another agent (Claude Code, Codex, a script on the SDK) delegates a whole plan → execute →
verify → review job: it submits a task, reads the session's state and its events from a
sequence number on (waiting a bounded time for new ones), steers, pauses or cancels it.
Every tool is a call of :class:`acode.Client` on the running actor set of one acode home,
each with a client of its own (the SDK runs a plain tool on a worker thread, and a ZeroMQ
socket belongs to one thread).

Approvals stay a human's: a session submitted here waits for a decision on a call its
autonomy level does not allow (``acode approve``/``deny`` on a terminal), unless the caller
asks for the user's ``approvals.non_interactive_policy``. Only when the user's own config
says ``mcp.serve.allow_approvals: true`` does the server offer ``approve`` and ``deny``.

An :class:`~protocol.errors.AcodeError` reaches the caller as a tool error whose text ends
with its code (``… (ACODE-NET-003)`` when acode is not running: ``acode up`` first).

This module imports the ``mcp`` SDK (``pip install acode[mcp]``); only
:mod:`cli.commands.mcp_serve` imports it, when the command runs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from acode.client import Client
from acode.events import AnyEvent, GenericEvent
from acode.stream import CATCH_UP_EVERY, events_after, final
from protocol import codec
from protocol.errors import AcodeError
from protocol.schema import versioned
from protocol.sessions.session import PauseInfo, SessionSnapshot

__all__ = ["BY", "MAX_WAIT_S", "AcodeTools", "build_server"]

BY = "acode mcp serve"  # who decided, in the approval_decided event of an approve/deny over MCP
MAX_WAIT_S = 60.0  # session_events waits at most this long (a caller's request stays well inside its timeout)
_MAX_EVENTS = 500
_EVENT_BYTES = 256_000  # a page of events stops here (one event always fits, however large)
_WAITABLE = ("running", "paused")  # a paused session goes on when a human decides

SessionArg = Annotated[str, Field(description="session id (or a unique prefix of one)", min_length=1,
                                  max_length=64)]


class AcodeTools:
    """The tools, as plain methods on one acode home (``home``: None for ``$ACODE_HOME`` or
    ``~/.acode``). Each returns JSON-ready data; errors are :class:`AcodeError`."""

    def __init__(self, home: Path | None, *, allow_approvals: bool = False):
        self.home = home
        self.allow_approvals = allow_approvals

    def _client(self) -> Client:
        return Client(self.home, reconnect_s=0.0)

    def submit_task(
        self,
        task: Annotated[str, Field(description="what to do, in plain words", min_length=1)],
        workspace: Annotated[str, Field(description="the project directory to work in: an absolute path (a "
                                        "relative one is taken from the directory the server runs in)",
                                        min_length=1)],
        autonomy: Annotated[int | None, Field(description="0 ask before anything but reads, 1 edits run, 2 "
                                              "allowlisted commands run too, 3 everything the sandbox allows "
                                              "(default: the user's config, else 2)", ge=0, le=3)] = None,
        approvals: Annotated[Literal["wait", "policy"], Field(
            description="a call the autonomy level does not allow: 'wait' pauses the session for a human's "
                        "decision (`acode approve`/`acode deny`); 'policy' lets the user's "
                        "approvals.non_interactive_policy decide (fail unless configured)")] = "wait",
        model: Annotated[str | None, Field(description="the model of the configured provider (default: the "
                                           "user's config)", max_length=256)] = None,
        cycle_limit: Annotated[int | None, Field(description="verify and review cycles per kind", ge=0,
                                                 le=10)] = None,
        budget_tokens: Annotated[int | None, Field(description="token limit of the session (0: none)", ge=0,
                                                   le=10**12)] = None,
        budget_minutes: Annotated[float | None, Field(description="wall-clock limit in minutes (0: none)", ge=0,
                                                      le=10**7)] = None,
    ) -> dict[str, Any]:
        """Start an acode session: it plans the task, executes the plan step by step in the
        workspace (sandboxed, checkpointed), verifies it and reviews it. Returns at once with
        the session id; follow it with session_events (wait_s) or session_status."""
        with self._client() as client:
            session = client.submit(task, workspace, approvals=approvals, autonomy=autonomy, model=model,
                                    cycle_limit=cycle_limit, budget_tokens=budget_tokens,
                                    budget_minutes=budget_minutes)
            return self._status(client, client.session(session.id))

    def session_status(self, session: SessionArg) -> dict[str, Any]:
        """A session's state now: status, stage, cycles, exit code, what it spent against its
        budget, and what it waits for when paused (a call to approve, questions to answer)."""
        with self._client() as client:
            return self._status(client, client.session(session))

    def session_events(
        self,
        session: SessionArg,
        after_seq: Annotated[int, Field(description="the last seq already read (0: from the start)", ge=0,
                                        le=10**9)] = 0,
        limit: Annotated[int, Field(description="at most this many events", ge=1, le=_MAX_EVENTS)] = 100,
        wait_s: Annotated[float, Field(description="when there is none yet, wait up to this many seconds "
                                       "for new events", ge=0, le=MAX_WAIT_S)] = 0.0,
    ) -> dict[str, Any]:
        """The session's events after seq `after_seq`, in order, each a typed JSON object
        (`type`, `seq`, …: acode's event schema). Pass `last_seq` back as `after_seq` to
        read on; `finished` says the session ended (session_finished) or paused
        (session_paused) at the last event given."""
        with self._client() as client:
            session_id = client.session_id(session)
            page = events_after(client.connection, session_id, after_seq, limit=limit)
            if not page and wait_s > 0:
                page = _wait_for_events(client, session_id, after_seq, limit, wait_s)
            current = client.session(session_id)
        events: list[dict[str, Any]] = []
        size = 0
        for event in page:
            data = _event_json(event)
            size += len(msgspec.json.encode(data))
            if events and size > _EVENT_BYTES:
                break
            events.append(data)
        last = events[-1]["seq"] if events else after_seq
        return {"session": session_id, "events": events, "last_seq": last, "more": len(events) < len(page)
                or len(page) == limit, "finished": bool(events) and final(page[len(events) - 1]),
                "status": current.status}

    def steer(self, session: SessionArg,
              text: Annotated[str, Field(description="guidance, e.g. 'keep the public API unchanged'",
                                         min_length=1)]) -> dict[str, Any]:
        """Guide a running or paused session: the stage at work reads the text from its next
        model turn on, and every later stage too."""
        with self._client() as client:
            return self._status(client, client.steer(session, text))

    def pause(self, session: SessionArg) -> dict[str, Any]:
        """Pause a running session at its next safe point (before its next tool call or
        model turn). A human continues it with `acode resume`; a second pause changes nothing."""
        with self._client() as client:
            return self._status(client, client.pause(session))

    def cancel(self, session: SessionArg) -> dict[str, Any]:
        """End a running or paused session for good (status cancelled, exit code 23). What
        it changed stays in the workspace; `acode undo` puts it back."""
        with self._client() as client:
            return self._status(client, client.cancel(session))

    def approve(self, session: SessionArg) -> dict[str, Any]:
        """Approve the call (or the plan under review) a paused session waits for; it goes on."""
        return self._decide(session, "approve")

    def deny(self, session: SessionArg,
             reason: Annotated[str, Field(description="why; the model is told", min_length=1,
                                          max_length=4_000)] = "denied by the delegating agent") -> dict[str, Any]:
        """Deny the call a paused session waits for: its model is told "the user denied this: REASON"."""
        return self._decide(session, "deny", reason)

    def _decide(self, session: str, decision: Literal["approve", "deny"], reason: str = "") -> dict[str, Any]:
        """The decision, recorded as the delegating agent's (``by``: the audit record says who)."""
        with self._client() as client:
            current = client.session(session)
            client.send(client.decision(current, decision, reason=reason, by=BY))
            return self._status(client, client.session(current.id))

    def _status(self, client: Client, current: SessionSnapshot) -> dict[str, Any]:
        spent = client.spent(current.id)
        out: dict[str, Any] = {
            "session": current.id, "task": current.task, "workspace": current.workspace, "status": current.status,
            "stage": current.stage, "cycles": dict(current.cycles), "attempt": current.attempt,
            "plan_version": current.plan_version, "exit_code": current.exit_code,
            "spent": msgspec.to_builtins(spent), "budget": msgspec.to_builtins(current.settings.budget),
            "error": msgspec.to_builtins(current.error) if current.error else None,
            "pause": None, "approval": None, "questions": []}
        if current.status == "paused" and current.pause is not None:
            out["pause"] = msgspec.to_builtins(current.pause)
            out["next"] = self._next(current.id, current.pause)
        if current.approval is not None and current.status == "paused":
            out["approval"] = msgspec.to_builtins(current.approval)
        if current.pause is not None and current.pause.kind == "needs_input" and current.status == "paused":
            plan = client.waiting_questions(current.id)
            out["questions"] = [msgspec.to_builtins(q) for q in plan.questions]
        return out

    def _next(self, session_id: str, pause: PauseInfo) -> str:
        """What continues a paused session, and whose it is to do."""
        short = session_id[:8]
        if pause.kind == "awaiting_approval":
            by_tool = " or this server's approve/deny tools" if self.allow_approvals else ""
            return (f"a human decides: `acode approve {short}` or `acode deny {short}` on a terminal{by_tool}; "
                    "`acode show` shows what it waits for")
        if pause.kind == "plan_review":
            by_tool = " or this server's approve tool" if self.allow_approvals else ""
            return (f"a human reviews the plan: `acode approve {short}` or `acode replan {short} \"what to "
                    f"change\"` on a terminal{by_tool}; `acode plan show {short}` shows it")
        command = pause.command or f"acode resume {short}"
        return f"a human continues it: {command}" + (f" (first: {pause.fix})" if pause.fix else "")


def _event_json(event: AnyEvent) -> dict[str, Any]:
    """One event as ``acode … --json`` prints it: every field, ``schema_version`` first; an
    event of a newer acode as it was sent."""
    data = event.data if isinstance(event, GenericEvent) else msgspec.json.decode(codec.to_json(event))
    return versioned(dict(data))  # type: ignore[no-any-return]


def _wait_for_events(client: Client, session_id: str, after_seq: int, limit: int, wait_s: float) -> list[AnyEvent]:
    """Events after ``after_seq``, waiting up to ``wait_s`` seconds for the first: woken by the
    event stream, read from persistence (a catch-up each second covers what the stream misses),
    given up early when the session has ended."""
    from broker import wire

    deadline = time.monotonic() + wait_s
    sub = client.connection.subscribe(session_id)
    try:
        while True:
            page = events_after(client.connection, session_id, after_seq, limit=limit)
            left = deadline - time.monotonic()
            if page or left <= 0 or client.session(session_id).status not in _WAITABLE:
                return page
            if sub.poll(int(min(left, CATCH_UP_EVERY) * 1000)):
                while wire.recv(sub) is not None:
                    pass  # what arrived is read from persistence, in order
    finally:
        sub.close(linger=0)


def _answering(method: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``method`` with an :class:`AcodeError` raised as the SDK's tool error: the caller reads
    its message and its ``ACODE-…`` code."""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(*args, **kwargs)
        except AcodeError as exc:
            raise ToolError(str(exc)) from exc
        except msgspec.ValidationError as exc:  # as the command line says it (cli.app.main)
            raise ToolError(f"invalid input: {exc} (ACODE-CLI-003)") from exc
    return call


def _hints(title: str, *, read_only: bool = False, destructive: bool = False,
           idempotent: bool = False) -> ToolAnnotations:
    """Every tool acts on the local acode only (closed world)."""
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def build_server(tools: AcodeTools) -> MCPServer[Any]:
    """The MCP server with acode's tools, each with its annotations; ``approve``/``deny`` only
    when ``tools.allow_approvals``."""
    server: MCPServer[Any] = MCPServer(
        name="acode", log_level="WARNING",
        instructions="acode runs a coding task through plan -> execute -> verify -> review in a sandboxed "
                     "workspace. submit_task starts a session; follow it with session_events (pass last_seq "
                     "back as after_seq, wait_s to wait for more) until finished; session_status says where it "
                     "stands. Approvals and answers to its questions are a human's (acode approve/answer).")
    # what a session does to its workspace goes through acode's autonomy level and approvals,
    # and every change is checkpointed (`acode undo`): submitting is not destructive itself
    entries: list[tuple[Callable[..., dict[str, Any]], ToolAnnotations]] = [
        (tools.submit_task, _hints("Submit a coding task to acode")),
        (tools.session_status, _hints("An acode session's state", read_only=True, idempotent=True)),
        (tools.session_events, _hints("An acode session's events", read_only=True, idempotent=True)),
        (tools.steer, _hints("Steer an acode session")),
        (tools.pause, _hints("Pause an acode session", idempotent=True)),
        (tools.cancel, _hints("Cancel an acode session", destructive=True, idempotent=True)),
    ]
    if tools.allow_approvals:
        entries += [(tools.approve, _hints("Approve what an acode session waits for", destructive=True)),
                    (tools.deny, _hints("Deny the call an acode session waits for"))]
    for method, hints in entries:
        server.add_tool(_answering(method), name=method.__name__, annotations=hints)
    return server
